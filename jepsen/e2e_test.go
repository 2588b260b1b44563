package jepsen

import (
	"context"
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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The end-to-end tests (TestStaleReadsCaught, TestNetCutDropsTraffic, TestIndexUnderFaults,
// TestTriggersUnderFaults, TestKillAllLosesNothing, TestAsyncFailoverLosesWritesOnlyWithoutBuffers,
// TestSplitUnderTraffic, TestQuiescedPartitionsFailOver) start real nodes on
// fixed 127.0.0.x addresses and ports and change iptables: they never run in parallel.

// requireFaults skips the test when network faults cannot be injected here (no iptables, not
// root), except under CI=true, where it fails: CI must run it.
func requireFaults(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("iptables")
	switch {
	case err == nil && os.Geteuid() == 0:
		return
	case os.Getenv("CI") == "true":
		require.Failf(t, "CI=true: the jepsen tests need iptables and root", "iptables: %v, euid %d", err, os.Geteuid())
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
	require.NoError(t, buildErr, "build cmd/schemaless")
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
	cfg.OutDir = runDir(t)
	cfg.FirstIP, cfg.HTTPPort, cfg.RaftPort, cfg.Chain = "127.0.0.12", 27070, 27170, "SLJEPSENTEST"
	cfg.Workloads = []string{"cells"}
	cfg.Consistency = "stale"
	cfg.FailOver = false
	cfg.Duration, cfg.Quiet = 30*time.Second, 5*time.Second
	cfg.Nemesis = NemesisConfig{Kinds: []string{PartitionOne, PartitionLeader}, Interval: 2 * time.Second, FaultDuration: 5 * time.Second}
	cfg.Seed = testSeed(t)
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	cfg.Out = testWriter{t}
	sum, err := Run(context.Background(), cfg)
	require.NoError(t, err, "Run")
	require.NotZero(t, sum.Faults[PartitionOne]+sum.Faults[PartitionLeader], "no partition was injected: faults %v", sum.Faults)
	require.Equal(t, "no", sum.Linearizable, "stale reads under partitions: linearizable (run kept in %s)", sum.Dir)
	require.False(t, sum.Valid, "stale reads under partitions: valid (run kept in %s)", sum.Dir)
}

// A cut really drops traffic between two loopback addresses, in the direction cut only, and
// Heal restores it.
func TestNetCutDropsTraffic(t *testing.T) {
	requireFaults(t)
	ctx := context.Background()
	n := NewNet("SLJEPSENNET")
	require.NoError(t, n.Setup(ctx), "Setup")
	defer n.Teardown(ctx)
	ln, err := net.Listen("tcp", "127.0.0.23:0")
	require.NoError(t, err)
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
	require.NoError(t, dial("127.0.0.22"), "before the cut")
	require.NoError(t, n.Cut(ctx, Grudge{"127.0.0.23": {"127.0.0.22"}}), "Cut")
	err = dial("127.0.0.22")
	var ne net.Error
	require.ErrorAs(t, err, &ne, "from the cut-off address: want a timeout")
	require.True(t, ne.Timeout(), "from the cut-off address: got %v, want a timeout", err)
	require.NoError(t, dial("127.0.0.24"), "from another address: want a connection")
	require.NoError(t, n.Heal(ctx), "Heal")
	assert.NoError(t, dial("127.0.0.22"), "after Heal")
}
