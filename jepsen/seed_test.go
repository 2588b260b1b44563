package jepsen

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	seedFlag = flag.Uint64("seed", 0, "seed of the randomized jepsen tests (0: from the clock)")
	keepFlag = flag.String("keep", "", "directory under which the jepsen tests keep their runs (nodes' data and logs, history); \"\": a temporary directory, removed after the test")
)

// runDir returns the directory of a jepsen test's run: a new directory under -keep, named
// after the test and the time, which outlives the test, or else a temporary one.
func runDir(t *testing.T) string {
	t.Helper()
	if *keepFlag == "" {
		return t.TempDir()
	}
	dir := filepath.Join(*keepFlag, strings.ReplaceAll(t.Name(), "/", "_")+"-"+time.Now().UTC().Format("20060102T150405.000"))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("run kept in %s", dir)
	return dir
}

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
