package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchFlagsDocumented checks that `schemaless bench --help` documents every flag (each has
// a usage text), and that every flag the user docs pass to `schemaless bench` (README.md,
// BENCHMARKS.md, docs/*.md, scripts/*.sh) is one the command has, so no documented command line
// fails with "unknown flag".
func TestBenchFlagsDocumented(t *testing.T) {
	t.Parallel()
	cmd := newBenchCmd()
	known := map[string]bool{"help": true}
	for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.PersistentFlags()} {
		fs.VisitAll(func(f *pflag.Flag) {
			known[f.Name] = true
			assert.NotEmpty(t, strings.TrimSpace(f.Usage), "bench flag --%s: want a usage text in --help", f.Name)
		})
	}
	for _, sub := range cmd.Commands() {
		sub.Flags().VisitAll(func(f *pflag.Flag) { known[f.Name] = true })
	}
	require.True(t, known["workload"], "bench has no --workload flag: flags %v", known)

	files := []string{"../../README.md", "../../BENCHMARKS.md"}
	for _, pat := range []string{"../../docs/*.md", "../../scripts/*.sh"} {
		m, err := filepath.Glob(pat)
		require.NoError(t, err, "glob %s", pat)
		files = append(files, m...)
	}
	// A bench command line: "schemaless bench" (or "$BIN" bench in the scripts) up to the end of
	// the line, continued by trailing backslashes.
	line := regexp.MustCompile(`(?:schemaless|\$BIN"?) bench\b(?:[^\n]*\\\n)*[^\n]*`)
	flag := regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]*)`)
	checked := 0
	for _, name := range files {
		b, err := os.ReadFile(name)
		require.NoError(t, err, "read %s", name)
		for _, l := range line.FindAllString(string(b), -1) {
			for _, m := range flag.FindAllStringSubmatch(l, -1) {
				checked++
				assert.True(t, known[m[1]], "%s: `%s` passes --%s, which schemaless bench does not have", name, strings.TrimSpace(l), m[1])
			}
		}
	}
	require.GreaterOrEqual(t, checked, 20, "documented bench flags found: if fewer, is the pattern still right?")
	t.Logf("%d documented bench flags checked in %d files", checked, len(files))
}
