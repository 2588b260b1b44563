package jepsen

import (
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err, "decode %s", path)
	require.Equal(t, image.Point{X: 1600, Y: 900}, img.Bounds().Size(), "image size")
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
	t.Parallel()
	ops := plotHistory(600, 100*time.Millisecond)
	faults := []Fault{
		{Kind: "partition-one", Nodes: []string{"n1"}, Start: 20e9, End: 45e9},
		{Kind: "kill", Nodes: []string{"n2", "n3"}, Start: 50e9}, // until the end
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "plot.png")
	require.NoError(t, WritePlot(path, ops, faults, 60e9), "WritePlot")
	img := readPNG(t, path)

	assert.LessOrEqual(t, whiteFraction(img, insideX, stripTop, stripBottom), 0.1,
		"white share of a strip inside the fault window (shaded)")
	assert.GreaterOrEqual(t, whiteFraction(img, outsideX, stripTop, stripBottom), 0.9,
		"white share of a strip outside any fault window (unshaded)")

	// The operations are drawn in the latency panel (the top 45% of the image) in their outcome's
	// colour: far more such pixels than its legend alone (the empty plot) holds.
	emptyPath := filepath.Join(dir, "empty.png")
	require.NoError(t, WritePlot(emptyPath, nil, nil, 60e9), "WritePlot empty")
	empty := readPNG(t, emptyPath)
	for _, o := range plotOutcomes {
		got, legend := countColor(img, o.color, 0, 0.45), countColor(empty, o.color, 0, 0.45)
		assert.GreaterOrEqual(t, got, legend+200, "%s-coloured pixels: want the legend's %d + 200", o.outcome, legend)
	}
}

func TestWritePlotEmpty(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "empty.png")
	require.NoError(t, WritePlot(path, nil, nil, 0), "WritePlot")
	img := readPNG(t, path)
	// No faults: nothing is shaded, in either panel.
	for _, x := range []float64{outsideX, insideX} {
		for _, rows := range [][2]float64{{0.15, 0.4}, {stripTop, stripBottom}} {
			assert.GreaterOrEqual(t, whiteFraction(img, x, rows[0], rows[1]), 0.9,
				"white share of strip x=%.2f rows %.2f..%.2f", x, rows[0], rows[1])
		}
	}
}

func TestWritePlotBadPath(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "no-such-dir", "plot.png")
	err := WritePlot(path, plotHistory(10, time.Second), nil, 10e9)
	require.Error(t, err, "WritePlot into a missing directory")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Regexp(t, "^jepsen: ", err.Error(), "the package's prefix")
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
