package jepsen

import (
	"errors"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// plotHistory returns n operations invoked every interval, with outcomes cycling through eight
// ok, one info and one fail per ten operations, and latencies cycling from 0 to 36 ms.
func plotHistory(n int, interval time.Duration) []Op {
	ops := make([]Op, n)
	for i := range ops {
		outcome := OK
		switch i % 10 {
		case 3:
			outcome = Info
		case 7:
			outcome = Fail
		}
		inv := int64(i) * int64(interval)
		lat := int64(i%37) * int64(time.Millisecond) // i%37 == 0: zero latency
		ops[i] = Op{Index: i, Process: i % 5, Workload: "cells", F: "put", Invoke: inv, Complete: inv + lat, Outcome: outcome}
	}
	return ops
}

// readPNG decodes the PNG at path and checks that it is 1600x900 pixels.
func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if got := img.Bounds().Size(); got != (image.Point{X: 1600, Y: 900}) {
		t.Fatalf("image size: got %v, want 1600x900", got)
	}
	return img
}

// whiteFraction is the share of white pixels in the vertical strip of img at x, from fraction
// y0 to y1 of its height, over a few adjacent columns.
func whiteFraction(img image.Image, x, y0, y1 float64) float64 {
	b := img.Bounds()
	px := b.Min.X + int(x*float64(b.Dx()))
	white, total := 0, 0
	for dx := -2; dx <= 2; dx++ {
		for y := b.Min.Y + int(y0*float64(b.Dy())); y < b.Min.Y+int(y1*float64(b.Dy())); y++ {
			r, g, bl, _ := img.At(px+dx, y).RGBA()
			if r>>8 >= 250 && g>>8 >= 250 && bl>>8 >= 250 {
				white++
			}
			total++
		}
	}
	return float64(white) / float64(total)
}

// countColor counts the pixels of img that are exactly c, in the rows from fraction y0 to y1 of
// its height.
func countColor(img image.Image, c color.Color, y0, y1 float64) int {
	wr, wg, wb, _ := c.RGBA()
	n := 0
	b := img.Bounds()
	for y := b.Min.Y + int(y0*float64(b.Dy())); y < b.Min.Y+int(y1*float64(b.Dy())); y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r == wr && g == wg && bl == wb {
				n++
			}
		}
	}
	return n
}

// Strips of the bottom (throughput) panel, as fractions of the image: the x axis spans 0..60 s
// over roughly 7%..99% of the width, the panel's data area roughly 55%..88% of the height. The
// throughput lines sit at 8 and 1 ops/s, near its top and bottom, out of the strips' rows.
const (
	stripTop, stripBottom = 0.62, 0.82
	insideX               = 0.55 // about 32 s: inside the 20..45 s partition
	outsideX              = 0.16 // about 6 s: before any fault
)

func TestWritePlot(t *testing.T) {
	ops := plotHistory(600, 100*time.Millisecond)
	faults := []Fault{
		{Kind: "partition-one", Nodes: []string{"n1"}, Start: 20e9, End: 45e9},
		{Kind: "kill", Nodes: []string{"n2", "n3"}, Start: 50e9}, // until the end
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "plot.png")
	if err := WritePlot(path, ops, faults, 60e9); err != nil {
		t.Fatalf("WritePlot: %v", err)
	}
	img := readPNG(t, path)

	in := whiteFraction(img, insideX, stripTop, stripBottom)
	out := whiteFraction(img, outsideX, stripTop, stripBottom)
	if in > 0.1 {
		t.Errorf("white share of a strip inside the fault window: got %.2f, want <= 0.1 (shaded)", in)
	}
	if out < 0.9 {
		t.Errorf("white share of a strip outside any fault window: got %.2f, want >= 0.9 (unshaded)", out)
	}

	// The operations are drawn in the latency panel (the top 45% of the image) in their outcome's
	// colour: far more such pixels than its legend alone (the empty plot) holds.
	emptyPath := filepath.Join(dir, "empty.png")
	if err := WritePlot(emptyPath, nil, nil, 60e9); err != nil {
		t.Fatalf("WritePlot empty: %v", err)
	}
	empty := readPNG(t, emptyPath)
	for _, o := range plotOutcomes {
		got, legend := countColor(img, o.color, 0, 0.45), countColor(empty, o.color, 0, 0.45)
		if got < legend+200 {
			t.Errorf("%s-coloured pixels: got %d, want >= %d (legend %d + 200)", o.outcome, got, legend+200, legend)
		}
	}
}

func TestWritePlotEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.png")
	if err := WritePlot(path, nil, nil, 0); err != nil {
		t.Fatalf("WritePlot: %v", err)
	}
	img := readPNG(t, path)
	// No faults: nothing is shaded, in either panel.
	for _, x := range []float64{outsideX, insideX} {
		for _, rows := range [][2]float64{{0.15, 0.4}, {stripTop, stripBottom}} {
			if got := whiteFraction(img, x, rows[0], rows[1]); got < 0.9 {
				t.Errorf("white share of strip x=%.2f rows %.2f..%.2f: got %.2f, want >= 0.9", x, rows[0], rows[1], got)
			}
		}
	}
}

func TestWritePlotBadPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-dir", "plot.png")
	err := WritePlot(path, plotHistory(10, time.Second), nil, 10e9)
	if err == nil {
		t.Fatalf("WritePlot into a missing directory: got nil error, want one")
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error: got %v, want one wrapping fs.ErrNotExist", err)
	}
	if !strings.HasPrefix(err.Error(), "jepsen: ") {
		t.Errorf("error: got %q, want prefix %q", err, "jepsen: ")
	}
}

// BenchmarkWritePlot draws 20,000 operations over 200 s with two faults.
func BenchmarkWritePlot(b *testing.B) {
	ops := plotHistory(20000, 10*time.Millisecond)
	faults := []Fault{{Kind: "pause", Start: 50e9, End: 80e9}, {Kind: "kill", Start: 70e9, End: 120e9}}
	path := filepath.Join(b.TempDir(), "plot.png")
	for b.Loop() {
		if err := WritePlot(path, ops, faults, 200e9); err != nil {
			b.Fatal(err)
		}
	}
}
