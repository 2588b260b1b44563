package watchdog

import (
	"fmt"
	"os"
	"runtime/pprof"
	"testing"
	"time"
)

// Start arms the watchdog of test t: if t has not ended (its cleanups run) within d, every
// goroutine's stack is written to standard error and the test binary panics with t's name and
// d. It never blocks; d should be several times the test's usual time on a loaded machine.
func Start(t testing.TB, d time.Duration) {
	name := t.Name()
	arm(t, d, func() {
		fmt.Fprintf(os.Stderr, "watchdog: %s still running after %v; the stacks of every goroutine:\n", name, d)
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		panic(fmt.Sprintf("watchdog: %s still running after %v", name, d))
	})
}

// arm calls fire, on a goroutine of its own, if t has not ended within d.
func arm(t testing.TB, d time.Duration, fire func()) {
	timer := time.AfterFunc(d, fire)
	t.Cleanup(func() { timer.Stop() })
}
