package launcher

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// ErrNotExited: a process did not exit within the wait after a signal.
var ErrNotExited = errors.New("launcher: process did not exit in time")

// Command describes a process to start.
type Command struct {
	// Name names the process in errors ("n1", "trigger worker w2").
	Name string
	// Binary is the executable; Args its arguments (without the program name).
	Binary string
	Args   []string
	// LogPath receives the process's stdout and stderr, appended (created with mode 0644 if
	// missing), so that a restarted process continues the log of the one before.
	LogPath string
	// DieWithParent makes the kernel send the process SIGKILL when the process that started it
	// dies, even by kill -9 (Linux parent-death signal).
	DieWithParent bool
}

// Process is a started child process, in its own process group. Its methods are safe for
// concurrent use.
type Process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit, once done is closed

	mu     sync.Mutex
	paused bool
}

// Start starts c. It returns once the process runs; a goroutine waits for its exit and closes
// its log file then.
func Start(c Command) (*Process, error) {
	logf, err := os.OpenFile(c.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("launcher: log of %s: %w", c.Name, err)
	}
	cmd := exec.Command(c.Binary, c.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a Ctrl-C in the terminal reaches only the launching process, which
	// stops the children itself (dev lets its trigger workers leave their groups first).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.DieWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("launcher: start %s: %w", c.Name, err)
	}
	p := &Process{name: c.Name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the process's exit as exec.Cmd.Wait reports it (nil: status 0; an *exec.ExitError
// otherwise). It blocks until the process has exited.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Running reports whether the process has not exited yet (a paused process runs).
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Paused reports whether the process is stopped by Pause.
func (p *Process) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused && p.Running()
}

// Pause stops the process with SIGSTOP. Pausing a paused or exited process does nothing.
func (p *Process) Pause() error { return p.setPaused(true) }

// Resume continues a paused process with SIGCONT. Resuming a process that is not paused does
// nothing.
func (p *Process) Resume() error { return p.setPaused(false) }

func (p *Process) setPaused(pause bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == pause || !p.Running() {
		return nil
	}
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("launcher: %s %s: %w", sig, p.name, err)
	}
	p.paused = pause
	return nil
}

// Signal sends sig to the process, then SIGCONT if it is paused (a stopped process would not
// act on a SIGTERM, and the kernel reaps a killed one only once it runs), and waits up to wait
// for it to exit. It returns nil once the process has exited (at once for one that had), or an
// error wrapping ErrNotExited.
func (p *Process) Signal(sig syscall.Signal, wait time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = p.cmd.Process.Signal(sig)
	p.mu.Lock()
	if p.paused {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.paused = false
	}
	p.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return fmt.Errorf("%w: %s within %s of %s", ErrNotExited, p.name, wait, sig)
	}
}

// Kill sends SIGKILL (kill -9) and waits up to wait for the process to exit (see Signal).
func (p *Process) Kill(wait time.Duration) error { return p.Signal(syscall.SIGKILL, wait) }

// Terminate stops the process cleanly: SIGTERM, then, if it has not exited after wait,
// SIGKILL (waiting up to wait again). It returns nil when SIGTERM stopped it, else an error
// wrapping ErrNotExited (the process was killed, or did not even die).
func (p *Process) Terminate(wait time.Duration) error {
	err := p.Signal(syscall.SIGTERM, wait)
	if err == nil {
		return nil
	}
	if kerr := p.Kill(wait); kerr != nil {
		return kerr
	}
	return fmt.Errorf("%w; killed", err)
}
