package jepsen

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot geometry: 960x540 points at 120 dpi is a 1600x900 pixel image.
const (
	plotWidthPt  = 960
	plotHeightPt = 540
	plotDPI      = 120
	// minLatencyMs is the latency drawn for an operation that took no measurable time, so that it
	// has a place on the log scale.
	minLatencyMs = 1e-3
)

// Colours of the plot: one per outcome, and the translucent shade of a fault window.
var (
	okColor    = color.NRGBA{R: 0, G: 150, B: 0, A: 255}
	failColor  = color.NRGBA{R: 210, G: 0, B: 0, A: 255}
	infoColor  = color.NRGBA{R: 235, G: 140, B: 0, A: 255}
	faultColor = color.NRGBA{R: 110, G: 110, B: 110, A: 64}
)

// plotOutcomes lists the outcomes in drawing and legend order, with their colours.
var plotOutcomes = []struct {
	outcome Outcome
	color   color.Color
}{{OK, okColor}, {Info, infoColor}, {Fail, failColor}}

// WritePlot draws the run's latency and throughput over time into a PNG file at path, creating
// or truncating it. The image is 1600x900 pixels and holds two panels that share the x axis,
// seconds since the run started:
//
//   - top: the latency of every operation in milliseconds (log scale) at its invoke time, one
//     colour per outcome (ok green, info orange, fail red);
//   - bottom: throughput in operations per second, counted in 1-second buckets by completion
//     time (the last bucket stretched or cut to end at the axis' end), one line per outcome in
//     the same colours.
//
// Each fault is a translucent grey band from its Start to its End across both panels (End 0:
// it lasted until end), labelled with its Kind at the top of the latency panel; overlapping
// faults are drawn over each other. The title counts the operations by outcome. An operation
// with an Outcome other than ok, fail or info is drawn and counted as info. A latency of zero
// (or less) is drawn as 1µs.
//
// end is the run's length in nanoseconds on the history's clock: the x axis spans 0 to end,
// or further if an operation or a fault ends later (at least 1 second). ops and faults are
// only read; either may be empty, which gives an empty but valid plot. WritePlot returns an
// error, prefixed "jepsen: ", if drawing or writing the file fails.
func WritePlot(path string, ops []Op, faults []Fault, end int64) error {
	maxNs := max(end, 0)
	for _, op := range ops {
		maxNs = max(maxNs, op.Invoke, op.Complete)
	}
	for _, f := range faults {
		maxNs = max(maxNs, f.Start, f.End)
	}
	xMax := math.Max(float64(maxNs)/1e9, 1)
	// Throughput buckets are the seconds [i, i+1), but the last one ends at xMax: it covers half a
	// second to one and a half, so that a short tail neither spikes nor sags.
	buckets := int(math.Round(xMax))

	// Split the operations by outcome: latency points and per-second completion counts.
	lat := make(map[Outcome]plotter.XYs, len(plotOutcomes))
	counts := make(map[Outcome][]int, len(plotOutcomes))
	for _, o := range plotOutcomes {
		counts[o.outcome] = make([]int, buckets)
	}
	yMin, yMax := math.Inf(1), math.Inf(-1)
	for _, op := range ops {
		o := op.Outcome
		if o != OK && o != Fail {
			o = Info
		}
		ms := math.Max(float64(op.Complete-op.Invoke)/1e6, minLatencyMs)
		yMin, yMax = math.Min(yMin, ms), math.Max(yMax, ms)
		lat[o] = append(lat[o], plotter.XY{X: float64(op.Invoke) / 1e9, Y: ms})
		b := min(max(int(op.Complete/1e9), 0), buckets-1)
		counts[o][b]++
	}
	if len(ops) == 0 {
		yMin, yMax = 1, 1000
	}

	top := newPanel(xMax)
	top.Title.Text = fmt.Sprintf("%d ops: %d ok, %d info, %d fail",
		len(ops), len(lat[OK]), len(lat[Info]), len(lat[Fail]))
	top.Y.Label.Text = "latency (ms)"
	top.Y.Scale = plot.LogScale{}
	top.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	top.Y.Min = math.Pow(10, math.Floor(math.Log10(yMin)))
	top.Y.Max = math.Pow(10, math.Ceil(math.Log10(yMax*3))) // headroom for the legend
	if top.Y.Max <= top.Y.Min {
		top.Y.Max = top.Y.Min * 10
	}

	bottom := newPanel(xMax)
	bottom.X.Label.Text = "seconds since start"
	bottom.Y.Label.Text = "ops/s"

	bands := faultBands{fill: faultColor, label: top.X.Tick.Label}
	bands.label.Font.Size = vg.Points(8)
	for _, f := range faults {
		stop := f.End
		if stop == 0 {
			stop = maxNs
		}
		bands.spans = append(bands.spans, faultSpan{
			start: float64(f.Start) / 1e9, end: float64(max(stop, f.Start)) / 1e9, kind: f.Kind,
		})
	}
	top.Add(bands)
	bottom.Add(faultBands{spans: bands.spans, fill: faultColor})

	rateMax := 1.0
	for _, o := range plotOutcomes {
		s, err := plotter.NewScatter(lat[o.outcome])
		if err != nil {
			return fmt.Errorf("jepsen: plot %s latencies: %w", o.outcome, err)
		}
		s.GlyphStyle = draw.GlyphStyle{Color: o.color, Radius: vg.Points(1.5), Shape: draw.CircleGlyph{}}
		top.Add(s)
		top.Legend.Add(string(o.outcome), s)

		rates := make(plotter.XYs, buckets)
		for i, n := range counts[o.outcome] {
			width := 1.0
			if i == buckets-1 {
				width = xMax - float64(i)
			}
			rates[i] = plotter.XY{X: float64(i) + width/2, Y: float64(n) / width}
			rateMax = math.Max(rateMax, rates[i].Y)
		}
		l, err := plotter.NewLine(rates)
		if err != nil {
			return fmt.Errorf("jepsen: plot %s throughput: %w", o.outcome, err)
		}
		l.LineStyle = draw.LineStyle{Color: o.color, Width: vg.Points(1.2)}
		bottom.Add(l)
		bottom.Legend.Add(string(o.outcome), l)
	}
	bottom.Y.Min, bottom.Y.Max = 0, rateMax*1.3 // headroom for the legend

	img := vgimg.NewWith(vgimg.UseWH(plotWidthPt, plotHeightPt), vgimg.UseDPI(plotDPI))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: 6, PadBottom: 6, PadLeft: 6, PadRight: 12, PadY: 10}
	cs := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
	top.Draw(cs[0][0])
	bottom.Draw(cs[1][0])

	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return fmt.Errorf("jepsen: encode plot: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("jepsen: write plot: %w", err)
	}
	return nil
}

// newPanel returns a plot whose x axis spans 0 to xMax seconds, with its legend at the top right.
func newPanel(xMax float64) *plot.Plot {
	p := plot.New()
	p.X.Min, p.X.Max = 0, xMax
	p.Legend.Top = true
	p.Legend.YOffs = -vg.Points(10)
	return p
}

// faultSpan is one fault window in seconds since the run started.
type faultSpan struct {
	start, end float64
	kind       string
}

// faultBands is a plot.Plotter that shades each span over the full height of the data area.
// If label has a font size, each span's kind is written at the top of its band.
type faultBands struct {
	spans []faultSpan
	fill  color.Color
	label draw.TextStyle
}

// Plot implements plot.Plotter.
func (b faultBands) Plot(c draw.Canvas, p *plot.Plot) {
	tr, _ := p.Transforms(&c)
	// Reach over the axis padding, up to the axis lines.
	y0, y1 := c.Min.Y-p.Y.Padding, c.Max.Y+p.Y.Padding
	// A label goes one line lower than the previous one while that band is still open, so the
	// labels of overlapping faults do not overwrite each other.
	var openEnds []float64 // end of the band labelled on each line
	for _, s := range b.spans {
		x0, x1 := tr(s.start), tr(s.end)
		if x1-x0 < 1 { // keep an instantaneous fault visible
			x1 = x0 + 1
		}
		c.FillPolygon(b.fill, []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
		if b.label.Font.Size > 0 && s.kind != "" {
			sty := b.label
			sty.XAlign, sty.YAlign = draw.XLeft, draw.YTop
			line := 0
			for line < len(openEnds) && openEnds[line] > s.start {
				line++
			}
			if line == len(openEnds) {
				openEnds = append(openEnds, 0)
			}
			openEnds[line] = s.end
			c.FillText(sty, vg.Point{X: x0 + 2, Y: y1 - 2 - vg.Length(line)*sty.Height(s.kind)}, s.kind)
		}
	}
}
