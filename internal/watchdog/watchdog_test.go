package watchdog

import (
	"bytes"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stuckEnv makes TestStuck run: it is the stuck test that TestWatchdogEndsAStuckTest runs in a
// child process.
const stuckEnv = "WATCHDOG_TEST_STUCK"

// TestStuck blocks on a channel nobody sends to, under a watchdog of 200 ms. It runs only in
// the child process of TestWatchdogEndsAStuckTest.
func TestStuck(t *testing.T) {
	if os.Getenv(stuckEnv) == "" {
		t.Skip("run by TestWatchdogEndsAStuckTest")
	}
	Start(t, 200*time.Millisecond)
	blockForever(make(chan struct{}))
}

// blockForever waits on ch: the frame the stacks must name.
func blockForever(ch chan struct{}) { <-ch }

// A test stuck under a watchdog ends within the watchdog's time, failing, with the stack of the
// goroutine where it was stuck and its name in the message.
func TestWatchdogEndsAStuckTest(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestStuck$", "-test.count=1")
	cmd.Env = append(os.Environ(), stuckEnv+"=1")
	began := time.Now()
	done := make(chan struct{})
	var outb []byte
	var err error
	go func() {
		defer close(done)
		outb, err = cmd.CombinedOutput()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the stuck test still ran after 30 s: the watchdog did not end it")
	}
	require.Error(t, err, "the stuck test fails")
	s := string(outb)
	assert.Contains(t, s, "watchdog: TestStuck still running after 200ms", "the message names the test")
	assert.Contains(t, s, "watchdog.blockForever", "the stacks show where it was stuck")
	// The summary comes last, so that the tail of a long log shows where the test was stuck.
	tail := s[max(0, len(s)-2000):]
	assert.Regexp(t, `1 × \[chan receive[^\]]*\] internal/watchdog\.blockForever \(internal/watchdog/watchdog_test\.go:\d+\) < internal/watchdog\.TestStuck`, tail, "the summary at the end names the stuck frame")
	assert.Less(t, time.Since(began), 20*time.Second)
}

// A watchdog fires for a test that runs past its time and not for one that ends before it.
func TestWatchdogStopsWithTheTest(t *testing.T) {
	var quick, slow atomic.Bool
	t.Run("quick", func(t *testing.T) {
		arm(t, 100*time.Millisecond, func() { quick.Store(true) })
	})
	t.Run("slow", func(t *testing.T) {
		arm(t, 100*time.Millisecond, func() { slow.Store(true) })
		time.Sleep(300 * time.Millisecond)
	})
	time.Sleep(200 * time.Millisecond) // the quick test's watchdog would have fired by now
	assert.False(t, quick.Load(), "the watchdog of a test that ended fired")
	assert.True(t, slow.Load(), "the watchdog of a test that ran past its time did not fire")
}

// Summary groups goroutines stuck at the same frames into one line with their count, and
// leaves out the watchdog's own frames.
func TestSummary(t *testing.T) {
	ch := make(chan struct{})
	var started sync.WaitGroup
	for range 3 {
		started.Add(1)
		go func() { started.Done(); blockForever(ch) }()
	}
	started.Wait()
	defer close(ch)
	var dump bytes.Buffer
	require.Eventually(t, func() bool {
		dump.Reset()
		require.NoError(t, pprof.Lookup("goroutine").WriteTo(&dump, 2))
		return strings.Count(dump.String(), "watchdog.blockForever") == 3
	}, 5*time.Second, 10*time.Millisecond, "the three goroutines block")
	lines := Summary(dump.String())
	t.Logf("summary:\n%s", strings.Join(lines, "\n"))
	require.NotEmpty(t, lines)
	assert.Regexp(t, `^  3 × \[chan receive\] internal/watchdog\.blockForever \(internal/watchdog/watchdog_test\.go:\d+\) < internal/watchdog\.TestSummary\.func1 \(internal/watchdog/watchdog_test\.go:\d+\)$`, lines[0])
	assert.Regexp(t, `^  \d+ goroutines with no frame in this project$`, lines[len(lines)-1])
	assert.LessOrEqual(t, len(lines), summaryGroups+2)
}
