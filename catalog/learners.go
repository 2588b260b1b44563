package catalog

import (
	"fmt"
	"slices"
)

// Learners: a raft partition's permanent non-voting replicas, as its learners were added and
// removed (OpAddLearner, OpRemoveLearner). The raft configuration is the live truth of who
// replicates a partition; the record tells a learner from a voter still being added, which
// the configuration shows alike (a nonvoter): a split gives its right half the parent's
// recorded learners (and the node carries those among the parent's nonvoters to the new
// group), a merge keeps the left partition's, and a learner that becomes one of the
// partition's replicas (OpSetReplicas, after a promotion) is no longer recorded as a learner.

// setLearner applies OpAddLearner and OpRemoveLearner of node cmd.Learner. Adding a recorded
// learner or removing one that is not recorded changes nothing but the generation.
func (c *Catalog) setLearner(d *Datastore, p *Partition, cmd Command) (Result, error) {
	if d.Mode != ModeRaft {
		return Result{}, fmt.Errorf("%w: %s %s partition %d: an async datastore's partitions have no learners", ErrBadCommand, cmd.Op, d.Name, p.ID)
	}
	if cmd.Learner == "" || len(cmd.Learner) > maxNodeIDLen {
		return Result{}, fmt.Errorf("%w: %s %s partition %d: learner %q: want a node id of 1 to %d bytes", ErrBadCommand, cmd.Op, d.Name, p.ID, cmd.Learner, maxNodeIDLen)
	}
	learners := slices.DeleteFunc(slices.Clone(p.Learners), func(l string) bool { return l == cmd.Learner })
	if cmd.Op == OpAddLearner {
		if len(learners) >= MaxReplicas {
			return Result{}, fmt.Errorf("%w: add learner %s to %s partition %d: %d learners already, at most %d", ErrBadCommand, cmd.Learner, d.Name, p.ID, len(learners), MaxReplicas)
		}
		learners = append(learners, cmd.Learner)
		slices.Sort(learners)
	}
	if len(learners) == 0 {
		learners = nil
	}
	c.Generation++
	p.Learners = learners
	return Result{Generation: c.Generation, Partitions: []Partition{p.clone()}}, nil
}

// checkLearners checks a partition's recorded learners: raft only, at most MaxReplicas
// distinct node ids in order.
func checkLearners(mode Mode, learners []string) error {
	if len(learners) == 0 {
		return nil
	}
	if mode != ModeRaft {
		return fmt.Errorf("%d learners: an async partition has none", len(learners))
	}
	if len(learners) > MaxReplicas {
		return fmt.Errorf("%d learners, at most %d", len(learners), MaxReplicas)
	}
	for i, l := range learners {
		if l == "" || len(l) > maxNodeIDLen {
			return fmt.Errorf("learner %q: want a node id of 1 to %d bytes", l, maxNodeIDLen)
		}
		if i > 0 && learners[i-1] >= l {
			return fmt.Errorf("learners %v not distinct and in order", learners)
		}
	}
	return nil
}
