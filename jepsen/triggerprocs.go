package jepsen

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/internal/launcher"
)

// TriggerProcsConfig describes the trigger worker processes of the triggers workload.
type TriggerProcsConfig struct {
	// Binary is the schemaless executable; each worker runs `Binary jepsen trigger-worker`.
	Binary string
	// Dir receives one delivery file per process start (<name>.<start>.jsonl) and one log per
	// worker (<name>.log, appended across restarts).
	Dir string
	// Count is the number of workers (named w1, w2, ...).
	Count int
	// Endpoints are every node's HTTP base URL; worker i prefers endpoint i mod len.
	Endpoints []string
	// Datastore, Group, Column and Shards are the worker's (see TriggerWorkerConfig).
	Datastore, Group, Column string
	Shards                   int
	// SessionTimeout is the workers' group session; RequestTimeout one HTTP attempt.
	SessionTimeout, RequestTimeout time.Duration
	// CAFile and TokenFile, when set, are passed to every worker as --ca-cert and --token-file
	// (a secure cluster's CA for https endpoints, and the file of the token to send).
	CAFile, TokenFile string
	Logger            *slog.Logger
}

// TriggerProcs runs the trigger worker processes and implements Processes for the worker
// nemeses. A worker killed by Kill starts again as a new incarnation (a new delivery file),
// keeping its group member id or taking a new one (drawn); a worker that exits when nothing
// killed or stopped it is reported by Problems and started again by Heal. Its methods are safe
// for concurrent use.
type TriggerProcs struct {
	cfg TriggerProcsConfig

	mu       sync.Mutex
	procs    []*triggerProc
	problems []string
	stopped  bool
}

// triggerProc is one worker slot; its fields are guarded by TriggerProcs.mu.
type triggerProc struct {
	name     string
	slot     int
	member   string            // current group member id
	members  int               // member ids used so far
	starts   int               // processes started so far (the incarnation of the current one)
	proc     *launcher.Process // the current process; nil before the first start
	expected bool              // the current process's exit is expected (killed or stopped)
}

var _ Processes = (*TriggerProcs)(nil)

// StartTriggerProcs starts cfg.Count workers. On error the workers started are killed.
func StartTriggerProcs(cfg TriggerProcsConfig) (*TriggerProcs, error) {
	if cfg.Count < 1 || len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("jepsen: trigger workers: count %d, %d endpoints", cfg.Count, len(cfg.Endpoints))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	t := &TriggerProcs{cfg: cfg}
	for i := 0; i < cfg.Count; i++ {
		p := &triggerProc{name: fmt.Sprintf("w%d", i+1), slot: i, members: 1}
		p.member = p.name + "-1"
		t.mu.Lock()
		t.procs = append(t.procs, p)
		err := t.start(p)
		t.mu.Unlock()
		if err != nil {
			t.Stop()
			return nil, err
		}
	}
	return t, nil
}

// running reports whether p's current process is alive (paused counts). Caller holds mu.
func (p *triggerProc) running() bool { return p.proc != nil && p.proc.Running() }

// start starts a new incarnation of p. Caller holds mu.
func (t *TriggerProcs) start(p *triggerProc) error {
	if p.running() {
		return fmt.Errorf("jepsen: trigger worker %s is already running", p.name)
	}
	p.starts++
	out := filepath.Join(t.cfg.Dir, fmt.Sprintf("%s.%d.jsonl", p.name, p.starts))
	proc, err := launcher.Start(launcher.Command{Name: "trigger worker " + p.name, Binary: t.cfg.Binary, Args: t.args(p, out),
		LogPath: filepath.Join(t.cfg.Dir, p.name+".log")})
	if err != nil {
		return fmt.Errorf("jepsen: %w", err)
	}
	p.proc, p.expected = proc, false
	incarnation, member := p.starts, p.member
	go func() {
		err := proc.Err()
		t.mu.Lock()
		defer t.mu.Unlock()
		if p.proc == proc && !p.expected {
			t.problems = append(t.problems, fmt.Sprintf("trigger worker %s incarnation %d (member %s, pid %d) exited when nothing stopped it: %v (see %s.log)",
				p.name, incarnation, member, proc.Pid(), err, p.name))
		}
	}()
	t.cfg.Logger.Info("jepsen: trigger worker started", "worker", p.name, "member", p.member, "incarnation", p.starts, "pid", proc.Pid())
	return nil
}

// args are the arguments of p's next process, which appends its deliveries to out: the
// endpoints rotated so that worker i prefers endpoint i mod len, and the CA and token files of
// a secure cluster.
func (t *TriggerProcs) args(p *triggerProc, out string) []string {
	n := len(t.cfg.Endpoints)
	eps := append(append([]string(nil), t.cfg.Endpoints[p.slot%n:]...), t.cfg.Endpoints[:p.slot%n]...)
	args := []string{"jepsen", "trigger-worker", "--endpoints", strings.Join(eps, ","), "--datastore", t.cfg.Datastore,
		"--group", t.cfg.Group, "--worker", p.member, "--column", t.cfg.Column, "--shards", strconv.Itoa(t.cfg.Shards),
		"--out", out, "--session-timeout", t.cfg.SessionTimeout.String(), "--request-timeout", t.cfg.RequestTimeout.String(),
		"--log-format", "json"}
	if t.cfg.CAFile != "" {
		args = append(args, "--ca-cert", t.cfg.CAFile)
	}
	if t.cfg.TokenFile != "" {
		args = append(args, "--token-file", t.cfg.TokenFile)
	}
	return args
}

// pick draws a running, unpaused worker with rng. Caller holds mu.
func (t *TriggerProcs) pick(rng *rand.Rand) (*triggerProc, error) {
	var live []*triggerProc
	for _, p := range t.procs {
		if p.running() && !p.proc.Paused() {
			live = append(live, p)
		}
	}
	if t.stopped || len(live) == 0 {
		return nil, errors.New("jepsen: no running trigger worker")
	}
	return live[rng.IntN(len(live))], nil
}

// Kill implements Processes: kill -9 a random running worker; the restart keeps its member id
// or takes a new one, half the time each.
func (t *TriggerProcs) Kill(rng *rand.Rand) (string, string, func() error, error) {
	t.mu.Lock()
	p, err := t.pick(rng)
	if err != nil {
		t.mu.Unlock()
		return "", "", nil, err
	}
	keep := rng.IntN(2) == 0
	p.expected = true
	proc, incarnation, member := p.proc, p.starts, p.member
	t.mu.Unlock()
	if err := proc.Kill(10 * time.Second); err != nil {
		return "", "", nil, fmt.Errorf("jepsen: %w", err)
	}
	next := "the same member id"
	if !keep {
		next = "a new member id"
	}
	detail := fmt.Sprintf("%s incarnation %d (member %s, pid %d) killed; restarts with %s", p.name, incarnation, member, proc.Pid(), next)
	restart := func() error {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.stopped || p.running() {
			return nil // stopped meanwhile, or Heal started it
		}
		if !keep {
			p.members++
			p.member = fmt.Sprintf("%s-%d", p.name, p.members)
		}
		return t.start(p)
	}
	return p.name, detail, restart, nil
}

// Pause implements Processes: SIGSTOP a random running worker.
func (t *TriggerProcs) Pause(rng *rand.Rand) (string, string, func() error, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, err := t.pick(rng)
	if err != nil {
		return "", "", nil, err
	}
	proc := p.proc
	if err := proc.Pause(); err != nil {
		return "", "", nil, fmt.Errorf("jepsen: %w", err)
	}
	detail := fmt.Sprintf("%s incarnation %d (member %s, pid %d) paused", p.name, p.starts, p.member, proc.Pid())
	resume := func() error {
		t.mu.Lock()
		defer t.mu.Unlock()
		if p.proc != proc {
			return nil
		}
		if err := proc.Resume(); err != nil {
			return fmt.Errorf("jepsen: %w", err)
		}
		return nil
	}
	return p.name, detail, resume, nil
}

// Heal implements Processes: resume every paused worker, start every worker not running.
func (t *TriggerProcs) Heal() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return nil
	}
	var errs []error
	for _, p := range t.procs {
		if p.running() {
			if err := p.proc.Resume(); err != nil {
				errs = append(errs, err)
			}
		}
		if !p.running() {
			if err := t.start(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Timescale implements Processes: the workers' session timeout.
func (t *TriggerProcs) Timescale() time.Duration { return t.cfg.SessionTimeout }

// Stop stops every worker with SIGTERM (resuming it first if paused) and waits for it to leave
// the group and exit; a worker that has not exited after three session timeouts is killed. A
// worker that does not exit with status 0 is reported by Problems. Later calls do nothing.
func (t *TriggerProcs) Stop() {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	t.stopped = true
	type victim struct {
		name string
		proc *launcher.Process
	}
	var stop []victim
	for _, p := range t.procs {
		if p.running() {
			p.expected = true
			stop = append(stop, victim{p.name, p.proc})
		}
	}
	t.mu.Unlock()
	wait := 3*t.cfg.SessionTimeout + 5*time.Second
	var wg sync.WaitGroup
	for _, v := range stop {
		wg.Go(func() {
			problem := ""
			if err := v.proc.Terminate(wait); err != nil {
				problem = fmt.Sprintf("trigger worker %s did not exit within %s of SIGTERM", v.name, wait)
			} else if err := v.proc.Err(); err != nil {
				problem = fmt.Sprintf("trigger worker %s exited with %v after SIGTERM, want status 0 (see %s.log)", v.name, err, v.name)
			}
			if problem != "" {
				t.mu.Lock()
				t.problems = append(t.problems, problem)
				t.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// Problems lists the workers that exited when nothing stopped them, or did not stop cleanly.
func (t *TriggerProcs) Problems() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.problems...)
}

// Starts is the number of worker processes started so far.
func (t *TriggerProcs) Starts() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.procs {
		n += p.starts
	}
	return n
}
