package jepsen

import (
	"flag"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized jepsen tests (0: from the clock)")

// testSeed returns the seed of a randomized test, -seed or else the clock's, and logs it so
// that a failing run can be repeated.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return seed
}
