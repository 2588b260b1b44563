package bench

import (
	"context"
	"slices"
)

// A Workload is one value of --workload: what it does on a target, with the runs its settings
// ask for (one per --clients value, rate, consistency, ...).
type Workload interface {
	// Name is the workload's --workload value; its rows' workload column starts with it.
	Name() string
	// Run runs the workload on t with env's configuration and returns the rows of its runs,
	// those done before an error included. It prints progress to env.Stderr (not with
	// --json), and blocks until its runs end or ctx is done. A workload that does not apply to
	// t says so on env.Stderr and returns no row and no error.
	Run(ctx context.Context, env *Env, t Target) ([]Result, error)
}

// Names of the workloads that other code of the package refers to.
const (
	workloadPut            = "put"
	workloadPutBatch       = "put-batch"
	workloadGetLatest      = "get-latest"
	workloadPutIf          = "put-if"
	workloadTransaction    = "transaction"
	workloadBank           = "bank"
	workloadTriggerLatency = "trigger-latency"
	workloadLogRead        = "log-read"
	workloadIndexLag       = "index-lag"
	workloadIndexQuery     = "index-query"
	workloadIndexBackfill  = "index-backfill"
	workloadReaper         = "reaper"
	workloadReplicationLag = "replication-lag"
	workloadTrips          = "trips"
	workloadScaleCells     = "scale-cells"
)

// registry is every workload, in the order --help and the errors list them.
var registry = []Workload{
	loadWorkload{workloadPut},
	loadWorkload{workloadPutBatch},
	loadWorkload{workloadGetLatest},
	loadWorkload{workloadPutIf},
	loadWorkload{workloadTransaction},
	loadWorkload{workloadBank},
	triggerWorkload{workloadTriggerLatency},
	triggerWorkload{workloadLogRead},
	indexWorkload{workloadIndexLag},
	indexWorkload{workloadIndexQuery},
	indexWorkload{workloadIndexBackfill},
	asyncWorkload{workloadReaper},
	asyncWorkload{workloadReplicationLag},
	tripsWorkload{},
	scaleCellsWorkload{},
	splitWorkload{},
}

// Compile-time checks that every kind of workload is one.
var (
	_ Workload = loadWorkload{}
	_ Workload = triggerWorkload{}
	_ Workload = indexWorkload{}
	_ Workload = asyncWorkload{}
	_ Workload = tripsWorkload{}
	_ Workload = scaleCellsWorkload{}
	_ Workload = splitWorkload{}
)

// Lookup returns the workload named name, or false.
func Lookup(name string) (Workload, bool) {
	i := slices.IndexFunc(registry, func(w Workload) bool { return w.Name() == name })
	if i < 0 {
		return nil, false
	}
	return registry[i], true
}

// Workloads returns the names of every workload, in their documented order.
func Workloads() []string {
	names := make([]string, len(registry))
	for i, w := range registry {
		names[i] = w.Name()
	}
	return names
}

// isLoadWorkload reports whether the rows of workload name come from runLoad: put, put-batch,
// get-latest, put-if, transaction, bank.
func isLoadWorkload(name string) bool {
	w, ok := Lookup(name)
	_, load := w.(loadWorkload)
	return ok && load
}

// isBaselineWorkload reports whether workload name has baselines: put and put-batch.
func isBaselineWorkload(name string) bool {
	return name == workloadPut || name == workloadPutBatch
}

// needsMaintainers reports whether workload name needs the index maintainers beside the
// in-process nodes: the index workloads, and trips (its flights index).
func needsMaintainers(name string) bool {
	w, _ := Lookup(name)
	switch w.(type) {
	case indexWorkload, tripsWorkload:
		return true
	}
	return false
}
