package charts

import (
	"github.com/accordlab/accord/acceptance/chartdata"

	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// DefaultScatterPoints bounds the scatter points of one series: the
// bound chart data are reduced to at ingest, so a stored scatter is drawn
// whole.
const DefaultScatterPoints = chartdata.ScatterPoints

// OverRunSeries is one latency per request against the time it was sent
// (X in seconds since the run's start, Y the latency).
type OverRunSeries struct {
	Name   string
	Role   Role
	Points []Point
	// Rolling, when not nil, is the rolling percentile line already
	// computed from every request (RollingQuantile), drawn instead of one
	// computed from Points: a caller that stores a reduced Points (a page
	// precomputed at ingest) keeps the line exact. OverRunInput.Window
	// must then be the window it was computed with.
	Rolling []Point
}

// OverRunInput is latency over the course of a run.
type OverRunInput struct {
	Unit   string // of the latencies, e.g. "ms"
	Series []OverRunSeries
	// Window is the width in seconds of the windows of the rolling
	// percentile line; 0 picks a round width giving about 120 windows
	// (and, where there are enough requests, at least 100 per window).
	Window float64
	// Quantile of the rolling line, 0.99 when 0.
	Quantile float64
	// MaxPoints bounds the scatter points per series
	// (DefaultScatterPoints when 0).
	MaxPoints int
	// Limits are latency limits, drawn as horizontal lines.
	Limits []Limit
	// LinearY keeps the latency axis linear. Otherwise it is logarithmic
	// when the slowest request is more than 50 times the fastest, so that
	// both the body and the spikes can be read.
	LinearY bool
}

// LatencyOverRun draws each request as a dot (reduced with MinMaxSampled,
// so that the slowest and fastest requests of every stretch stay: tail
// events and warm-up show) and the rolling percentile per window as a
// line, broken where a window has no request (the line does not join the
// warm-up bursts of successive repetitions). The table lists the rolling
// percentile of each window.
func LatencyOverRun(in OverRunInput) (json.RawMessage, Table, error) {
	if len(in.Series) == 0 {
		return nil, Table{}, errors.New("charts: latency over run: no series")
	}
	q := in.Quantile
	if q == 0 {
		q = 0.99
	}
	if !(q > 0 && q <= 1) {
		return nil, Table{}, fmt.Errorf("charts: latency over run: quantile %v", q)
	}
	maxPts := in.MaxPoints
	if maxPts <= 0 {
		maxPts = DefaultScatterPoints
	}
	sorted := make([][]Point, len(in.Series))
	var t0, t1 float64 = math.Inf(1), math.Inf(-1)
	total := 0
	yMin, yMax := math.Inf(1), math.Inf(-1)
	for i, s := range in.Series {
		if err := checkFinite("latency over run: series "+s.Name, s.Points); err != nil {
			return nil, Table{}, err
		}
		pts := chartdata.SortedByX(s.Points)
		sorted[i] = pts
		if len(pts) > 0 {
			t0, t1 = min(t0, pts[0].X), max(t1, pts[len(pts)-1].X)
		}
		total += len(pts)
		for _, p := range pts {
			yMin, yMax = min(yMin, p.Y), max(yMax, p.Y)
		}
	}
	window := in.Window
	for _, s := range in.Series {
		if s.Rolling == nil {
			continue
		}
		if window <= 0 {
			return nil, Table{}, fmt.Errorf("charts: latency over run: series %s has a precomputed rolling line but no window is given", s.Name)
		}
		if err := checkFinite("latency over run: rolling line of "+s.Name, s.Rolling); err != nil {
			return nil, Table{}, err
		}
	}
	if window <= 0 {
		window = chartdata.AutoWindow(t1-t0, total/len(in.Series))
	}
	if !finite(window) {
		return nil, Table{}, fmt.Errorf("charts: latency over run: window %v", window)
	}
	qLabel := "p" + num(q*100)

	yAxis := opts.YAxis{Type: "value", Name: axisName("Latency", in.Unit)}
	var limitMax float64
	for _, l := range in.Limits {
		if !finite(l.Value) {
			return nil, Table{}, fmt.Errorf("charts: latency over run: limit %q is %v", l.Label, l.Value)
		}
		limitMax = max(limitMax, l.Value)
	}
	switch {
	case !in.LinearY && yMin > 0 && yMax/yMin > logRatio:
		yAxis.Type = "log"
		yAxis.Min, yAxis.Max = logExtent(yMin, max(yMax, limitMax))
	case limitMax > yMax || math.IsInf(yMax, 0) && limitMax > 0:
		yAxis.Max = paddedMax(limitMax)
	}

	c := newChart(opts.Tooltip{Show: opts.Bool(true), Trigger: "item"}, sliderGrid())
	c.SetGlobalOptions(
		charts.WithXAxisOpts(runTimeAxis(t0, t1)),
		charts.WithYAxisOpts(yAxis),
		charts.WithDataZoomOpts(
			opts.DataZoom{Type: "inside", XAxisIndex: 0},
			opts.DataZoom{Type: "slider", XAxisIndex: 0},
		),
	)

	rolling := make([][]Point, len(in.Series))
	var col colourer
	for i, s := range in.Series {
		color := col.next(s.Role, i)
		sc := series(c, s.Name, "scatter")
		sc.Data = pairs(chartdata.MinMaxSampled(sorted[i], maxPts), 7, 6)
		sc.Color = color
		sc.SymbolSize = 3
		sc.ItemStyle = &opts.ItemStyle{Color: color, Opacity: opts.Float(0.45)}
		sc.SeriesTooltip = &opts.SeriesTooltip{Formatter: "{a}\n{c}"}
		sc.Large = opts.Bool(true)

		if s.Rolling != nil {
			rolling[i] = chartdata.SortedByX(s.Rolling)
		} else {
			rolling[i] = chartdata.WindowQuantile(sorted[i], t0, window, q)
		}
		ln := series(c, s.Name+" "+qLabel+" per "+num(window)+" s", "line")
		// Windows are window apart; an empty window between two (a gap
		// between repetitions, for warm-up requests the measured stretch
		// between their bursts) breaks the line.
		ln.Data = brokenAtGaps(rolling[i], 1.5*window, 7, 6)
		ln.Color = color
		ln.ShowSymbol = opts.Bool(false)
		ln.Symbol = "none"
		ln.LineStyle = &opts.LineStyle{Color: color, Width: 2}
		ln.SeriesTooltip = &opts.SeriesTooltip{Formatter: "{a}\n{c}"}
		c.MultiSeries = append(c.MultiSeries, sc, ln)
	}
	if len(in.Limits) > 0 {
		c.MultiSeries = append(c.MultiSeries, limitSeries(c, in.Limits, false, in.Unit))
	}
	option, err := render(c, extra{})
	if err != nil {
		return nil, Table{}, err
	}
	return option, rollingTable(in, rolling, window, qLabel), nil
}

func rollingTable(in OverRunInput, rolling [][]Point, window float64, qLabel string) Table {
	t := Table{Head: []string{"Window start (s)"}}
	for _, s := range in.Series {
		t.Head = append(t.Head, s.Name+" "+qLabel+unitSuffix(in.Unit))
	}
	// Rows by window start, over the union of the series' windows.
	byStart := map[float64][]string{}
	var starts []float64
	for i, r := range rolling {
		for _, p := range r {
			st := round(p.X-window/2, 9)
			row, ok := byStart[st]
			if !ok {
				row = make([]string, len(in.Series))
				for j := range row {
					row[j] = "–"
				}
				byStart[st] = row
				starts = append(starts, st)
			}
			row[i] = num(p.Y)
		}
	}
	slices.Sort(starts)
	for _, st := range starts {
		t.Rows = append(t.Rows, append([]string{num(st)}, byStart[st]...))
	}
	return t
}
