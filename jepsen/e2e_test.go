package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// requireFaults skips the test when network faults cannot be injected here (no iptables, not
// root), except under CI=true, where it fails: CI must run it.
func requireFaults(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("iptables")
	switch {
	case err == nil && os.Geteuid() == 0:
		return
	case os.Getenv("CI") == "true":
		t.Fatalf("CI=true: the jepsen tests need iptables and root (iptables: %v, euid %d)", err, os.Geteuid())
	default:
		t.Skipf("needs iptables and root (iptables: %v, euid %d)", err, os.Geteuid())
	}
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// schemalessBinary builds cmd/schemaless once per test run.
func schemalessBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jepsen-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "schemaless")
		out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", binary, "../cmd/schemaless").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// testLogger logs through t.Log, so output shows only when the test fails.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// The checker must catch a real non-linearizable history: stale reads from a node cut off
// from the majority, while the majority goes on writing.
func TestStaleReadsCaught(t *testing.T) {
	requireFaults(t)
	cfg := DefaultConfig()
	cfg.Binary = schemalessBinary(t)
	cfg.OutDir = t.TempDir()
	cfg.FirstIP, cfg.HTTPPort, cfg.RaftPort, cfg.Chain = "127.0.0.12", 27070, 27170, "SLJEPSENTEST"
	cfg.Workloads = []string{"cells"}
	cfg.Consistency = "stale"
	cfg.FailOver = false
	cfg.Duration, cfg.Quiet = 30*time.Second, 5*time.Second
	cfg.Nemesis = NemesisConfig{Kinds: []string{PartitionOne, PartitionLeader}, Interval: 2 * time.Second, FaultDuration: 5 * time.Second}
	cfg.Seed = uint64(time.Now().UnixNano())
	t.Logf("seed %d", cfg.Seed)
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	cfg.Out = testWriter{t}
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Faults[PartitionOne]+sum.Faults[PartitionLeader] == 0 {
		t.Fatalf("no partition was injected: faults %v", sum.Faults)
	}
	if sum.Linearizable != "no" || sum.Valid {
		t.Fatalf("stale reads under partitions: got linearizable %q, valid %v; want %q and invalid", sum.Linearizable, sum.Valid, "no")
	}
}

// A cut really drops traffic between two loopback addresses, in the direction cut only, and
// Heal restores it.
func TestNetCutDropsTraffic(t *testing.T) {
	requireFaults(t)
	ctx := context.Background()
	n := NewNet("SLJEPSENNET")
	if err := n.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer n.Teardown(ctx)
	ln, err := net.Listen("tcp", "127.0.0.23:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dial := func(from string) error {
		d := net.Dialer{Timeout: 300 * time.Millisecond, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial("127.0.0.22"); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	if err := n.Cut(ctx, Grudge{"127.0.0.23": {"127.0.0.22"}}); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if err := dial("127.0.0.22"); err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("from the cut-off address: got %v, want a timeout", err)
	}
	if err := dial("127.0.0.24"); err != nil {
		t.Fatalf("from another address: got %v, want a connection", err)
	}
	if err := n.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dial("127.0.0.22"); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}
