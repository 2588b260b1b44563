package catalog

import (
	"fmt"
	"slices"
)

// MaxVoters bounds the catalog group's voters (OpSetVoters).
const MaxVoters = 7

// setVoters applies OpSetVoters.
func (c *Catalog) setVoters(cmd Command) (Result, error) {
	if err := checkVoters(cmd.Voters); err != nil {
		return Result{}, fmt.Errorf("%w: set-voters: %w", ErrBadCommand, err)
	}
	if len(cmd.Voters) == 0 {
		return Result{}, fmt.Errorf("%w: set-voters: no voter", ErrBadCommand)
	}
	c.Voters = slices.Clone(cmd.Voters)
	c.Generation++
	return Result{Generation: c.Generation}, nil
}

// checkVoters checks a list of the catalog's voters: at most MaxVoters distinct, non-empty
// node ids (none: the topology's).
func checkVoters(vs []string) error {
	if len(vs) > MaxVoters {
		return fmt.Errorf("%d voters, at most %d", len(vs), MaxVoters)
	}
	for i, v := range vs {
		if v == "" || len(v) > 64 {
			return fmt.Errorf("voter %d: id %q: want 1 to 64 bytes", i, v)
		}
		if slices.Index(vs, v) != i {
			return fmt.Errorf("voter %q listed twice", v)
		}
	}
	return nil
}
