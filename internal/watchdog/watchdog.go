package watchdog

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"runtime/pprof"
	"sort"
	"strings"
	"testing"
	"time"
)

// module is the import path prefix of this project's code: the summary names goroutines by
// their frames in it.
const module = "github.com/schemaless-db/schemaless/"

// summaryGroups is how many groups of goroutines the summary lists at most, the largest first.
const summaryGroups = 25

// Start arms the watchdog of test t: if t has not ended (its cleanups run) within d, every
// goroutine's stack is written to standard error, then a summary of them (Summary: at most 25
// lines, last, so that a log's tail shows it), and the test binary panics with t's name and d.
// It never blocks; d should be several times the test's usual time on a loaded machine.
func Start(t testing.TB, d time.Duration) {
	name := t.Name()
	arm(t, d, func() {
		var dump bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&dump, 2)
		fmt.Fprintf(os.Stderr, "watchdog: %s still running after %v; the stacks of every goroutine:\n", name, d)
		_, _ = os.Stderr.Write(dump.Bytes())
		fmt.Fprintf(os.Stderr, "watchdog: %s: the goroutines in this project's code, by where they wait:\n", name)
		for _, l := range Summary(dump.String()) {
			fmt.Fprintln(os.Stderr, l)
		}
		panic(fmt.Sprintf("watchdog: %s still running after %v", name, d))
	})
}

// arm calls fire, on a goroutine of its own, if t has not ended within d.
func arm(t testing.TB, d time.Duration, fire func()) {
	timer := time.AfterFunc(d, fire)
	t.Cleanup(func() { timer.Stop() })
}

// header matches the first line of a goroutine's stack in a debug-2 dump, "goroutine 7
// [select, 3 minutes]:", and captures its state ("select, 3 minutes").
var header = regexp.MustCompile(`^goroutine \d+ [^[]*\[([^\]]*)\]`)

// Summary groups the goroutines of dump (runtime/pprof's goroutine profile at debug level 2,
// or an unrecovered panic's output) by their state and their three innermost frames in this
// project's code (the watchdog's own excluded), and returns one line per group, the
// largest first, at most 25: "  12 × [select, 14 minutes] client.(*Client).PutCell
// (client/client.go:210) < client.TestX.func1 (client/x_test.go:40)". Goroutines with no
// frame in the project (the runtime's, the libraries' own) are counted on a last line.
func Summary(dump string) []string {
	counts := map[string]int{}
	others := 0
	for _, g := range strings.Split(dump, "\n\n") {
		lines := strings.Split(strings.TrimSpace(g), "\n")
		m := header.FindStringSubmatch(lines[0])
		if m == nil {
			continue
		}
		var frames []string
		for i := 1; i+1 < len(lines) && len(frames) < 3; i += 2 {
			fn := lines[i]
			if !strings.HasPrefix(fn, module) || strings.HasPrefix(fn, module+"internal/watchdog.Start") {
				continue
			}
			fn = strings.TrimPrefix(fn, module)
			if p := strings.LastIndex(fn, "("); p > 0 {
				fn = fn[:p] // the arguments
			}
			file := strings.TrimSpace(lines[i+1])
			if p := strings.Index(file, " +0x"); p > 0 {
				file = file[:p]
			}
			// The path from the package's directory on ("client/x_test.go:40"; an external
			// test package, client_test, is in its package's directory).
			dir := strings.TrimSuffix(strings.Split(fn, ".")[0], "_test")
			if p := strings.Index(file, "/"+dir+"/"); p >= 0 {
				file = file[p+1:]
			}
			frames = append(frames, fmt.Sprintf("%s (%s)", fn, file))
		}
		if len(frames) == 0 {
			others++
			continue
		}
		counts[fmt.Sprintf("[%s] %s", m[1], strings.Join(frames, " < "))]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var out []string
	for i, k := range keys {
		if i == summaryGroups {
			out = append(out, fmt.Sprintf("  ... %d more groups", len(keys)-summaryGroups))
			break
		}
		out = append(out, fmt.Sprintf("  %d × %s", counts[k], k))
	}
	return append(out, fmt.Sprintf("  %d goroutines with no frame in this project", others))
}
