package layers

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/schemaless-db/schemaless"

// table reads the layer table of docs/design.md: the fenced block after the "## Layers" heading,
// one layer per line from the top (cmd) down; a line lists its packages (paths relative to the
// module, separated by commas) and then, after two or more spaces, what the layer does. It
// returns each package's layer number, 0 for the bottom line.
func table(r io.Reader) (map[string]int, error) {
	sc := bufio.NewScanner(r)
	var lines []string
	state := 0 // 0 before the heading, 1 before the fence, 2 inside, 3 done
	for sc.Scan() && state < 3 {
		l := sc.Text()
		switch {
		case state == 0 && strings.TrimSpace(l) == "## Layers":
			state = 1
		case state == 1 && strings.HasPrefix(l, "```"):
			state = 2
		case state == 2 && strings.HasPrefix(l, "```"):
			state = 3
		case state == 2 && strings.TrimSpace(l) != "":
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if state != 3 || len(lines) == 0 {
		return nil, fmt.Errorf(`no fenced block after "## Layers"`)
	}
	layer := map[string]int{}
	for i, l := range lines {
		pkgs, _, _ := strings.Cut(l, "  ")
		for _, p := range strings.Split(pkgs, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if _, dup := layer[p]; dup {
				return nil, fmt.Errorf("package %s is on two lines", p)
			}
			layer[p] = len(lines) - 1 - i
		}
	}
	return layer, nil
}

// readmeLayout reads the package names of README.md's "## Layout" block: the first word of each
// line of its fenced block that does not start with a space (a line starting with a space goes on
// with the line above).
func readmeLayout(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	var names []string
	state := 0
	for sc.Scan() && state < 3 {
		l := sc.Text()
		switch {
		case state == 0 && strings.TrimSpace(l) == "## Layout":
			state = 1
		case state == 1 && strings.HasPrefix(l, "```"):
			state = 2
		case state == 2 && strings.HasPrefix(l, "```"):
			state = 3
		case state == 2 && l != "" && l[0] != ' ':
			names = append(names, strings.Fields(l)[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if state != 3 {
		return nil, fmt.Errorf(`no fenced block after "## Layout"`)
	}
	return names, nil
}

// pkg is what go list says of one package of the module.
type pkg struct {
	ImportPath string
	Imports    []string
}

// check returns every violation of the layer order in pkgs: a package missing from layer, a
// listed package that does not exist, an import of a package on the same or a higher line, and
// a package nested in the folder of another package (api/wire in api) on a lower line than it:
// folders read like the layers, so a leaf never hides under a higher package. Test imports are
// not checked (an external test package may use a test helper of a higher layer).
func check(layer map[string]int, pkgs []pkg) []string {
	var bad []string
	seen := map[string]bool{}
	for _, p := range pkgs {
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		seen[name] = true
		l, ok := layer[name]
		if !ok {
			bad = append(bad, fmt.Sprintf("package %s is not in the layer table", name))
			continue
		}
		for parent := path.Dir(name); parent != "."; parent = path.Dir(parent) {
			if pl, ok := layer[parent]; ok {
				if l < pl {
					bad = append(bad, fmt.Sprintf("%s (layer %d) is nested in the folder of %s (layer %d): a nested package sits on its parent's layer or above", name, l, parent, pl))
				}
				break
			}
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			if dl, ok := layer[dep]; ok && dl >= l {
				bad = append(bad, fmt.Sprintf("%s (layer %d) imports %s (layer %d): a package imports only lower layers", name, l, dep, dl))
			}
		}
	}
	for name := range layer {
		if !seen[name] {
			bad = append(bad, fmt.Sprintf("the layer table lists %s, which is not a package of the module", name))
		}
	}
	sort.Strings(bad)
	return bad
}

// TestLayers checks the module's real package graph (go list) against docs/design.md.
func TestLayers(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	f, err := os.Open(filepath.Join(root, "docs", "design.md"))
	require.NoError(t, err)
	defer f.Close()
	layer, err := table(f)
	require.NoError(t, err, "docs/design.md")

	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		require.NoError(t, dec.Decode(&p))
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs, "go list found no package")
	assert.Empty(t, check(layer, pkgs), "the package graph breaks the layer order of docs/design.md")

	// README's layout: every package once, and nothing else.
	rf, err := os.Open(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	defer rf.Close()
	listed, err := readmeLayout(rf)
	require.NoError(t, err, "README.md")
	var names []string
	for _, p := range pkgs {
		names = append(names, strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/"))
	}
	assert.ElementsMatch(t, names, listed, "README.md's layout lists each package of the module once")
}

// TestCheckCatches shows that check reports each kind of violation, on a made-up graph.
func TestCheckCatches(t *testing.T) {
	layer, err := table(strings.NewReader("intro\n## Layers\n\n```\ncmd/x  top\napi, client  middle\ncells  bottom\n```\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"cmd/x": 2, "api": 1, "client": 1, "cells": 0}, layer)

	ok := []pkg{
		{ImportPath: module + "/cmd/x", Imports: []string{module + "/api", module + "/cells", "fmt"}},
		{ImportPath: module + "/api", Imports: []string{module + "/cells"}},
		{ImportPath: module + "/client"},
		{ImportPath: module + "/cells"},
	}
	assert.Empty(t, check(layer, ok), "a graph that follows the table")

	up := append([]pkg{}, ok...)
	up[3] = pkg{ImportPath: module + "/cells", Imports: []string{module + "/api"}}
	assert.Equal(t, []string{"cells (layer 0) imports api (layer 1): a package imports only lower layers"}, check(layer, up))

	side := append([]pkg{}, ok...)
	side[1] = pkg{ImportPath: module + "/api", Imports: []string{module + "/client"}}
	assert.Equal(t, []string{"api (layer 1) imports client (layer 1): a package imports only lower layers"}, check(layer, side))

	extra := append(append([]pkg{}, ok[1:]...), pkg{ImportPath: module + "/new"})
	assert.Equal(t, []string{
		"package new is not in the layer table",
		"the layer table lists cmd/x, which is not a package of the module",
	}, check(layer, extra))

	nestedLayer, err := table(strings.NewReader("## Layers\n```\napi  top\napi/wire, bench  middle\nbench/plot  bottom\n```\n"))
	require.NoError(t, err)
	nested := []pkg{
		{ImportPath: module + "/api", Imports: []string{module + "/api/wire"}},
		{ImportPath: module + "/api/wire"},
		{ImportPath: module + "/bench"},
		{ImportPath: module + "/bench/plot"},
	}
	assert.Equal(t, []string{
		"api/wire (layer 1) is nested in the folder of api (layer 2): a nested package sits on its parent's layer or above",
		"bench/plot (layer 0) is nested in the folder of bench (layer 1): a nested package sits on its parent's layer or above",
	}, check(nestedLayer, nested))

	names, err := readmeLayout(strings.NewReader("## Layout\n\n```\ncells   pure types\n        continued\napi     handlers\n```\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"cells", "api"}, names, "README layout names, continuation lines skipped")

	_, err = table(strings.NewReader("## Layers\nno block\n"))
	assert.Error(t, err, "a design.md without the block")
	_, err = table(strings.NewReader("## Layers\n```\na  x\nb, a  y\n```\n"))
	assert.ErrorContains(t, err, "package a is on two lines")
}
