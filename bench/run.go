package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Env is what the workloads of one target see: the run's configuration and output, and the data
// they load once per target (get-latest's rows, log-read's log, the index workloads' flights).
// One goroutine at a time uses it.
type Env struct {
	// Config is the run's configuration, validated.
	Config Config
	// Stdout gets the results (table, notes, JSON lines), Stderr the progress lines and the
	// warnings; several goroutines may write to Stderr at once.
	Stdout, Stderr io.Writer

	run  *runState
	rows []uuid.UUID // get-latest's preloaded rows; nil until loaded
	log  logPreload  // log-read's preloaded log
	fx   indexFixture
}

// runState is what every target of a run shares.
type runState struct {
	// repl are the async targets' MariaDB servers, started on first use.
	repl replicatedServers
	// profiles counts the phase profiles written, to name them.
	profiles atomic.Int64
}

// newEnv returns the environment of a target of run rs.
func newEnv(cfg Config, stdout, stderr io.Writer, rs *runState) *Env {
	return &Env{Config: cfg, Stdout: stdout, Stderr: stderr, run: rs}
}

// Run validates cfg, then runs every workload of cfg.Workloads on every target of cfg.Targets,
// one target after the other, then the baselines (cfg.Baselines), and prints the results to
// stdout: a table and its notes, or with cfg.JSON one JSON line per run. Progress lines go to
// stderr. It blocks until every run is done or one fails (the results so far are printed only
// when every run succeeded), or ctx ends. The errors name the flag at fault.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.CPUProfile != "" {
		pf, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if !cfg.JSON {
		fmt.Fprintf(stdout, "# %s, %d CPUs, %s\n", time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), runtime.Version())
	}
	var results []Result
	rs := &runState{}
	defer rs.repl.close(stderr)
	for _, name := range cfg.Targets {
		env := newEnv(cfg, stdout, stderr, rs)
		t, err := startTarget(ctx, name, env)
		if err != nil {
			return err
		}
		rows, err := runTarget(ctx, env, t)
		_ = t.Close()
		results = append(results, rows...)
		if err != nil {
			return err
		}
	}
	rows, err := runBaselines(ctx, newEnv(cfg, stdout, stderr, rs))
	results = append(results, rows...)
	if err != nil {
		return err
	}
	setBaselineRatios(results)
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	printTable(stdout, results)
	return nil
}

// runTarget runs env's workloads, in order, on t and returns their rows, those done before an
// error included.
func runTarget(ctx context.Context, env *Env, t Target) ([]Result, error) {
	var out []Result
	for _, name := range env.Config.Workloads {
		w, ok := Lookup(name)
		if !ok {
			return out, fmt.Errorf("--workload %q: want %s", name, workloadList())
		}
		if isSecure(t) && !isLoadWorkload(name) {
			if !env.Config.JSON {
				fmt.Fprintf(env.Stderr, "%s: %s does not run on a secure target (its clients send no token)\n", t.Name(), name)
			}
			continue
		}
		rows, err := w.Run(ctx, env, t)
		out = append(out, rows...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}
