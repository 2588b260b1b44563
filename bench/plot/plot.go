package plot

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/schemaless-db/schemaless/bench"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Geometry of a bench plot, as jepsen's: 960x540 points, which PNG renders at 120 dpi as
// 1600x900 pixels.
const (
	benchPlotWidthPt  = 960
	benchPlotHeightPt = 540
	benchPlotDPI      = 120
)

// plotAxis is one quantity a bench plot can draw on an axis.
type plotAxis struct {
	// name is the flag value, label the axis label (with its unit), unit the unit alone
	// (metrics drawn on one y axis must share it).
	name, label, unit string
	// value returns the row's value and whether it has one.
	value func(r plotRow) (float64, bool)
}

// plotXAxes are the values of --x.
var plotXAxes = []plotAxis{
	{"clients", "clients (requests in flight)", "clients", func(r plotRow) (float64, bool) {
		return float64(r.Clients), r.Clients > 0
	}},
	{"partitions", "partitions", "partitions", func(r plotRow) (float64, bool) {
		if r.extra.Partitions != nil {
			return *r.extra.Partitions, true
		}
		return nameTag(r.file, 'p')
	}},
	{"stored_cells", "cells stored", "cells", func(r plotRow) (float64, bool) {
		return float64(r.StoredCells), r.StoredCells > 0
	}},
	{"rate", "offered rate (requests/s)", "requests/s", func(r plotRow) (float64, bool) {
		if v, ok := r.extra.rate(); ok {
			return v, true
		}
		return nameTag(r.file, 'r')
	}},
}

// plotYAxes are the values of --y. A latency of 0 is a row without latency figures (a load,
// a run without a successful request): it has no value.
var plotYAxes = []plotAxis{
	{"cells_per_sec", "throughput (cells/s)", "cells/s", func(r plotRow) (float64, bool) { return r.CellsPerSec, true }},
	{"ops_per_sec", "throughput (requests/s)", "requests/s", func(r plotRow) (float64, bool) { return r.OpsPerSec, true }},
	{"p50", "p50 latency (ms)", "ms", latencyMs(func(r plotRow) int64 { return r.P50 })},
	{"p90", "p90 latency (ms)", "ms", latencyMs(func(r plotRow) int64 { return r.P90 })},
	{"p99", "p99 latency (ms)", "ms", latencyMs(func(r plotRow) int64 { return r.P99 })},
	{"max", "max latency (ms)", "ms", latencyMs(func(r plotRow) int64 { return r.Max })},
}

// latencyMs returns a plotAxis value of the latency us (microseconds) picks, in milliseconds.
func latencyMs(us func(plotRow) int64) func(plotRow) (float64, bool) {
	return func(r plotRow) (float64, bool) { v := us(r); return float64(v) / 1000, v > 0 }
}

// axisNames lists the names of axes for an error message: "a, b or c".
func axisNames(axes []plotAxis) string {
	var names []string
	for _, a := range axes {
		names = append(names, a.name)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// findAxis returns the axis of axes named name.
func findAxis(axes []plotAxis, name string) (plotAxis, bool) {
	i := slices.IndexFunc(axes, func(a plotAxis) bool { return a.name == name })
	if i < 0 {
		return plotAxis{}, false
	}
	return axes[i], true
}

// Config is one plot: the results it reads, its axes, its output file and the results it keeps.
// DefaultConfig gives the values of `schemaless bench plot` without flags. The errors of
// Validate and Run name the flag of the field at fault.
type Config struct {
	// In are the files of `schemaless bench --json` results read.
	In []string
	// X is the x axis (XAxes), Y the y axis' metrics (YAxes), all of one unit.
	X string
	Y []string
	// Out is the file written, created or truncated: FILE.svg (960x540 pt) or FILE.png
	// (1600x900 px), by extension in any case.
	Out string
	// Title is the plot's title; "" means "<y> vs <x>".
	Title string
	// LogX and LogY make an axis logarithmic (points <= 0 on it are left out).
	LogX, LogY bool
	// Targets and Workloads, when not empty, keep only the results of these targets and
	// workloads ("scale-cells get").
	Targets, Workloads []string
}

// DefaultConfig returns the configuration of `schemaless bench plot` without flags: x clients,
// y cells_per_sec, nothing to read or write yet.
func DefaultConfig() Config { return Config{X: "clients", Y: []string{"cells_per_sec"}} }

// XAxes lists the values of Config.X for a message: "a, b or c".
func XAxes() string { return axisNames(plotXAxes) }

// YAxes lists the values of Config.Y for a message: "a, b or c".
func YAxes() string { return axisNames(plotYAxes) }

// Validate reports every bad setting, each error naming its flag.
func (p Config) Validate() error {
	var errs []error
	if len(p.In) == 0 {
		errs = append(errs, errors.New("--in: want at least one file of bench --json results"))
	}
	if _, ok := findAxis(plotXAxes, p.X); !ok {
		errs = append(errs, fmt.Errorf("--x %q: want %s", p.X, axisNames(plotXAxes)))
	}
	if len(p.Y) == 0 {
		errs = append(errs, fmt.Errorf("--y: want one or more of %s", axisNames(plotYAxes)))
	}
	var first plotAxis
	for i, name := range p.Y {
		a, ok := findAxis(plotYAxes, name)
		if !ok {
			errs = append(errs, fmt.Errorf("--y %q: want %s", name, axisNames(plotYAxes)))
			continue
		}
		if i == 0 || first.name == "" {
			first = a
		} else if a.unit != first.unit {
			errs = append(errs, fmt.Errorf("--y %s,%s: %s and %s cannot share an axis: make two plots", first.name, a.name, first.unit, a.unit))
		}
	}
	switch ext := strings.ToLower(filepath.Ext(p.Out)); {
	case p.Out == "":
		errs = append(errs, errors.New("--out: want the file to write, FILE.svg or FILE.png"))
	case ext != ".svg" && ext != ".png":
		errs = append(errs, fmt.Errorf("--out %q: want a .svg or .png file", p.Out))
	}
	return errors.Join(errs...)
}

// Run reads the results of p.In and writes their plot to p.Out; the count of results skipped
// for want of an x or y value goes to stderr. It fails on a bad setting, a file it cannot read or
// write, or when no result has a point.
func Run(p Config, stderr io.Writer) error {
	if err := p.Validate(); err != nil {
		return err
	}
	var rows []plotRow
	for _, path := range p.In {
		rs, err := readPlotRows(path)
		if err != nil {
			return fmt.Errorf("--in: %w", err)
		}
		rows = append(rows, rs...)
	}
	lines, skipped, err := benchPlotLines(rows, p)
	if skipped > 0 {
		fmt.Fprintf(stderr, "bench plot: %d results without a value for --x %s or --y %s skipped\n", skipped, p.X, strings.Join(p.Y, ","))
	}
	if err != nil {
		return err
	}
	pl, err := drawBenchPlot(lines, p)
	if err != nil {
		return err
	}
	return writeBenchPlot(pl, p.Out)
}

// plotRow is one result read from a file: its bench.Result, the file it came from (for the
// file name's tags) and the fields bench.Result may not have.
type plotRow struct {
	bench.Result
	file  string
	extra plotExtra
}

// plotExtra are the fields of a result line that --x partitions and rate read, if present.
type plotExtra struct {
	Partitions *float64         `json:"partitions"`
	Rate       *float64         `json:"rate"`
	Triggers   *plotRateFigures `json:"triggers"`
	Index      *plotRateFigures `json:"index"`
	Lag        *plotRateFigures `json:"replication_lag"`
}

// plotRateFigures is the rate of a result's nested figures (triggers, index, replication_lag).
type plotRateFigures struct {
	Rate *float64 `json:"rate"`
}

// rate returns the result's rate: its own, else that of its nested figures; false if none is
// positive.
func (e plotExtra) rate() (float64, bool) {
	vs := []*float64{e.Rate}
	for _, n := range []*plotRateFigures{e.Triggers, e.Index, e.Lag} {
		if n != nil {
			vs = append(vs, n.Rate)
		}
	}
	for _, v := range vs {
		if v != nil && *v > 0 {
			return *v, true
		}
	}
	return 0, false
}

// readPlotRows returns the results of the file at path: the lines that are JSON objects with a
// target and a workload.
func readPlotRows(path string) ([]plotRow, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows []plotRow
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		r := plotRow{file: path}
		if json.Unmarshal(line, &r.Result) != nil || json.Unmarshal(line, &r.extra) != nil {
			continue
		}
		if r.Target == "" || r.Workload == "" {
			continue
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

// nameTagRE matches a tag: a lower-case letter and a number.
var nameTagRE = regexp.MustCompile(`^([a-z])(\d+(?:\.\d+)?)$`)

// nameTag returns the value of the tag <letter><N> of path's file name: a part of the name
// before its first dot, between dashes or underscores, as p16 in put-p16.jsonl. If there are
// several, the last one counts.
func nameTag(path string, letter byte) (float64, bool) {
	stem, _, _ := strings.Cut(filepath.Base(path), ".")
	v, ok := 0.0, false
	for _, part := range strings.FieldsFunc(stem, func(r rune) bool { return r == '-' || r == '_' }) {
		m := nameTagRE.FindStringSubmatch(part)
		if m == nil || m[1][0] != letter {
			continue
		}
		if f, err := strconv.ParseFloat(m[2], 64); err == nil {
			v, ok = f, true
		}
	}
	return v, ok
}

// plotLine is one line of a plot: a series' points, in x order.
type plotLine struct {
	name   string
	group  int // colour and glyph: one per target, workload, client, consistency and rate
	metric int // dash pattern: the index of its --y metric
	pts    plotter.XYs
}

// benchPlotLines returns the lines of rows for p (validated), in order of first appearance,
// and the number of rows (of the selected targets and workloads) left out for want of an x or
// y value. The y values of a series at one x are averaged. It returns an error if no point
// remains.
func benchPlotLines(rows []plotRow, p Config) ([]plotLine, int, error) {
	xa, _ := findAxis(plotXAxes, p.X)
	var ys []plotAxis
	for _, name := range p.Y {
		a, _ := findAxis(plotYAxes, name)
		ys = append(ys, a)
	}
	type sums struct {
		line   plotLine
		sum    map[float64]float64
		count  map[float64]int
		xOrder []float64
	}
	var series []*sums
	byName := map[string]*sums{}
	groups := map[string]int{}
	skipped := 0
	for _, r := range rows {
		if (len(p.Targets) > 0 && !slices.Contains(p.Targets, r.Target)) ||
			(len(p.Workloads) > 0 && !slices.Contains(p.Workloads, r.Workload)) {
			continue
		}
		x, ok := xa.value(r)
		if !ok || (p.LogX && x <= 0) {
			skipped++
			continue
		}
		group := r.Target + " " + r.Workload
		if r.Client != "" {
			group += " " + r.Client
		}
		if r.Consistency != "" {
			group += " " + r.Consistency
		}
		if rate, ok := r.extra.rate(); ok && xa.name != "rate" {
			group += fmt.Sprintf(" @%g/s", rate)
		}
		plotted := false
		for i, ya := range ys {
			y, ok := ya.value(r)
			if !ok || (p.LogY && y <= 0) {
				continue
			}
			plotted = true
			if _, ok := groups[group]; !ok {
				groups[group] = len(groups)
			}
			name := group
			if len(ys) > 1 {
				name += " " + ya.name
			}
			s := byName[name]
			if s == nil {
				s = &sums{line: plotLine{name: name, group: groups[group], metric: i}, sum: map[float64]float64{}, count: map[float64]int{}}
				byName[name] = s
				series = append(series, s)
			}
			if s.count[x] == 0 {
				s.xOrder = append(s.xOrder, x)
			}
			s.sum[x] += y
			s.count[x]++
		}
		if !plotted {
			skipped++
		}
	}
	if len(series) == 0 {
		return nil, skipped, fmt.Errorf("bench plot: no result of %s has a value for --x %s and --y %s",
			strings.Join(p.In, ", "), p.X, strings.Join(p.Y, ","))
	}
	lines := make([]plotLine, len(series))
	for i, s := range series {
		slices.Sort(s.xOrder)
		for _, x := range s.xOrder {
			s.line.pts = append(s.line.pts, plotter.XY{X: x, Y: s.sum[x] / float64(s.count[x])})
		}
		lines[i] = s.line
	}
	return lines, skipped, nil
}

// drawBenchPlot returns the plot of lines (not empty, each with points) for p: axes labelled
// with their units, logarithmic per --log-x and --log-y, a linear y axis from 0, and a legend
// at the top left with room made for it above the data.
func drawBenchPlot(lines []plotLine, p Config) (*gplot.Plot, error) {
	xa, _ := findAxis(plotXAxes, p.X)
	ya, _ := findAxis(plotYAxes, p.Y[0])
	pl := gplot.New()
	pl.X.Label.Text = xa.label
	pl.Y.Label.Text = ya.label
	if len(p.Y) > 1 {
		pl.Y.Label.Text = "latency (" + ya.unit + ")"
		if ya.unit != "ms" {
			pl.Y.Label.Text = "throughput (" + ya.unit + ")"
		}
	}
	pl.Title.Text = p.Title
	if pl.Title.Text == "" {
		pl.Title.Text = pl.Y.Label.Text + " vs " + xa.label
	}
	pl.Title.TextStyle.Font.Size = vg.Points(14)
	pl.Title.Padding = vg.Points(6)
	pl.Legend.Top, pl.Legend.Left = true, true
	pl.Legend.XOffs, pl.Legend.YOffs = vg.Points(8), -vg.Points(4)
	pl.Legend.Padding = vg.Points(4)
	pl.Add(plotter.NewGrid())

	xMin, xMax, yMin, yMax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	xs := map[float64]bool{}
	for _, l := range lines {
		for _, pt := range l.pts {
			xs[pt.X] = true
			xMin, xMax = math.Min(xMin, pt.X), math.Max(xMax, pt.X)
			yMin, yMax = math.Min(yMin, pt.Y), math.Max(yMax, pt.Y)
		}
		line, points, err := plotter.NewLinePoints(l.pts)
		if err != nil {
			return nil, fmt.Errorf("bench plot: series %s: %w", l.name, err)
		}
		c := plotutil.DarkColors[l.group%len(plotutil.DarkColors)]
		line.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1.5), Dashes: plotutil.Dashes(l.metric)}
		points.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(2.5), Shape: plotutil.Shape(l.group)}
		pl.Add(line, points)
		pl.Legend.Add(l.name, line, points)
	}

	// Logarithmic axes span the data with a margin; the top of the y axis leaves a line of
	// room per series for the legend.
	headroom := 1.12 + 0.07*float64(len(lines))
	if p.LogX {
		pl.X.Scale = gplot.LogScale{}
		pl.X.Min, pl.X.Max = xMin/1.25, xMax*1.25
		if len(xs) <= 12 {
			pl.X.Tick.Marker = valueTicks(xs)
		} else {
			pl.X.Tick.Marker = gplot.TickerFunc(logTicks)
		}
	} else {
		pl.X.Tick.Marker = gplot.TickerFunc(linearTicks)
	}
	if p.LogY {
		pl.Y.Scale = gplot.LogScale{}
		pl.Y.Min = yMin / 1.5
		pl.Y.Max = yMax * math.Pow(yMax/pl.Y.Min, headroom-1)
		pl.Y.Tick.Marker = gplot.TickerFunc(logTicks)
	} else {
		pl.Y.Min, pl.Y.Max = 0, math.Max(yMax*headroom, 1e-9)
		pl.Y.Tick.Marker = gplot.TickerFunc(linearTicks)
	}
	return pl, nil
}

// valueTicks returns major ticks at the values of xs, labelled with siLabel.
func valueTicks(xs map[float64]bool) gplot.ConstantTicks {
	var ts gplot.ConstantTicks
	for x := range xs {
		ts = append(ts, gplot.Tick{Value: x, Label: siLabel(x)})
	}
	slices.SortFunc(ts, func(a, b gplot.Tick) int { return cmp.Compare(a.Value, b.Value) })
	return ts
}

// linearTicks returns about 6 major ticks, labelled with siLabel, at multiples of 1, 2, 2.5 or
// 5 times a power of 10 between min and max, and a minor tick between each two.
func linearTicks(min, max float64) []gplot.Tick {
	if !(max > min) {
		return []gplot.Tick{{Value: min, Label: siLabel(min)}}
	}
	raw := (max - min) / 6
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * pow
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*pow >= raw {
			step = m * pow
			break
		}
	}
	var ts []gplot.Tick
	for i := math.Ceil(min / (step / 2)); i*step/2 <= max*(1+1e-9); i++ {
		v := i * step / 2
		t := gplot.Tick{Value: v}
		if math.Mod(i, 2) == 0 {
			t.Label = siLabel(v)
		}
		ts = append(ts, t)
	}
	return ts
}

// logTicks returns ticks at m times each power of 10 between min and max (both positive), m
// from 1 to 9: labelled (siLabel) at m = 1, and at 2 and 5 too when the axis spans 3 powers of
// 10 or fewer.
func logTicks(min, max float64) []gplot.Tick {
	lo, hi := math.Floor(math.Log10(min)), math.Ceil(math.Log10(max))
	dense := hi-lo <= 3
	var ts []gplot.Tick
	for d := lo; d <= hi; d++ {
		for m := 1.0; m <= 9; m++ {
			v := m * math.Pow(10, d)
			if v < min*(1-1e-9) || v > max*(1+1e-9) {
				continue
			}
			t := gplot.Tick{Value: v}
			if m == 1 || (dense && (m == 2 || m == 5)) {
				t.Label = siLabel(v)
			}
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 || !slices.ContainsFunc(ts, func(t gplot.Tick) bool { return t.Label != "" }) {
		ts = append(ts, gplot.Tick{Value: min, Label: siLabel(min)}, gplot.Tick{Value: max, Label: siLabel(max)})
	}
	return ts
}

// siLabel formats v with at most 3 significant digits and a k (10^3) or M (10^6) suffix: 250,
// 1.5k, 300k, 3M, 0.25.
func siLabel(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(round3(v/1e6), 'f', -1, 64) + "M"
	case a >= 1e3:
		return strconv.FormatFloat(round3(v/1e3), 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(round3(v), 'f', -1, 64)
}

// round3 rounds v to 3 significant digits.
func round3(v float64) float64 {
	if v == 0 {
		return 0
	}
	scale := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*scale) / scale
}

// benchPlotMargins returns c less a margin on each side, so that nothing touches the edges.
func benchPlotMargins(c draw.Canvas) draw.Canvas {
	return draw.Crop(c, vg.Points(10), -vg.Points(18), vg.Points(8), -vg.Points(10))
}

// writeBenchPlot draws pl into path, creating or truncating it, as SVG or PNG by path's
// extension (.svg or .png, any case): 960x540 points, a PNG at 120 dpi (1600x900 pixels).
func writeBenchPlot(pl *gplot.Plot, path string) error {
	var buf bytes.Buffer
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		c := vgsvg.New(benchPlotWidthPt, benchPlotHeightPt)
		dc := draw.New(c)
		dc.SetColor(color.White)
		dc.Fill(dc.Rectangle.Path())
		pl.Draw(benchPlotMargins(dc))
		if _, err := c.WriteTo(&buf); err != nil {
			return fmt.Errorf("bench plot: encode %s: %w", path, err)
		}
	case ".png":
		img := vgimg.NewWith(vgimg.UseWH(benchPlotWidthPt, benchPlotHeightPt), vgimg.UseDPI(benchPlotDPI))
		dc := draw.New(img)
		dc.SetColor(color.White)
		dc.Fill(dc.Rectangle.Path())
		pl.Draw(benchPlotMargins(dc))
		if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
			return fmt.Errorf("bench plot: encode %s: %w", path, err)
		}
	default:
		return fmt.Errorf("--out %q: want a .svg or .png file", path)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("bench plot: %w", err)
	}
	return nil
}
