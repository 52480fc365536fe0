package charts

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/accordlab/accord/acceptance/stats"
	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// DefaultScatterPoints bounds the scatter points of one series.
const DefaultScatterPoints = 4000

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
// events and warm-up show) and the rolling percentile per window as a line. The
// table lists the rolling percentile of each window.
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
		pts := sortedByX(s.Points)
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
		window = autoWindow(t1-t0, total/len(in.Series))
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
	for i, s := range in.Series {
		color := colorFor(s.Role, i)
		sc := series(c, s.Name, "scatter")
		sc.Data = pairs(MinMaxSampled(sorted[i], maxPts), 7, 6)
		sc.Color = color
		sc.SymbolSize = 3
		sc.ItemStyle = &opts.ItemStyle{Color: color, Opacity: opts.Float(0.45)}
		sc.SeriesTooltip = &opts.SeriesTooltip{Formatter: "{a}\n{c}"}
		sc.Large = opts.Bool(true)

		if s.Rolling != nil {
			rolling[i] = sortedByX(s.Rolling)
		} else {
			rolling[i] = windowQuantile(sorted[i], t0, window, q)
		}
		ln := series(c, s.Name+" "+qLabel+" per "+num(window)+" s", "line")
		ln.Data = pairs(rolling[i], 7, 6)
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

// RollingQuantile computes the rolling line LatencyOverRun draws for one
// series from all of its points (any order; pts is not changed): the
// nearest-rank q-quantile (0.99 when 0) of each window of width window
// seconds (autoWindow's choice when 0) that has points, at the window's
// middle. It returns the window used, for OverRunInput.Window.
func RollingQuantile(pts []Point, window, q float64) (float64, []Point, error) {
	if q == 0 {
		q = 0.99
	}
	if !(q > 0 && q <= 1) {
		return 0, nil, fmt.Errorf("charts: rolling quantile: quantile %v", q)
	}
	if err := checkFinite("rolling quantile", pts); err != nil {
		return 0, nil, err
	}
	if len(pts) == 0 {
		return max(window, 1), nil, nil
	}
	sorted := sortedByX(pts)
	t0, t1 := sorted[0].X, sorted[len(sorted)-1].X
	if window <= 0 {
		window = autoWindow(t1-t0, len(sorted))
	}
	if !finite(window) {
		return 0, nil, fmt.Errorf("charts: rolling quantile: window %v", window)
	}
	return window, windowQuantile(sorted, t0, window, q), nil
}

// autoWindow picks a round window width: about 120 windows over the run,
// widened so that a window holds about 100 requests when the run has
// fewer than 12,000.
func autoWindow(span float64, perSeries int) float64 {
	if span <= 0 {
		return 1
	}
	w := span / 120
	if perSeries > 0 {
		w = max(w, span*100/float64(perSeries))
	}
	return ceil125(min(w, span))
}

// ceil125 rounds up to 1, 2 or 5 times a power of ten.
func ceil125(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5} {
		if v <= m*p*(1+1e-12) {
			return m * p
		}
	}
	return 10 * p
}

// windowQuantile is the nearest-rank q-quantile of each window
// [t0 + k·w, t0 + (k+1)·w) that has requests, placed at the window's
// middle. pts are ordered by X.
func windowQuantile(pts []Point, t0, w, q float64) []Point {
	var out []Point
	var buf []float64
	for i := 0; i < len(pts); {
		k := math.Floor((pts[i].X - t0) / w)
		end := t0 + (k+1)*w
		buf = buf[:0]
		for ; i < len(pts) && pts[i].X < end; i++ {
			buf = append(buf, pts[i].Y)
		}
		if len(buf) == 0 { // rounding at a window edge
			buf = append(buf, pts[i].Y)
			i++
		}
		r := int(stats.Rank(q, int64(len(buf)))) - 1
		out = append(out, Point{t0 + (k+0.5)*w, selectKth(buf, r)})
	}
	return out
}

// selectKth returns the k-th smallest of v (0-based), reordering v:
// quickselect, expected linear time (a window's p99 needs no full sort),
// falling back to sorting what is left if the partitions stay uneven.
func selectKth(v []float64, k int) float64 {
	lo, hi := 0, len(v)-1
	for budget := 2 * bits.Len(uint(len(v))); lo < hi; budget-- {
		if budget == 0 {
			slices.Sort(v[lo : hi+1])
			break
		}
		// Median of three as pivot, moved to hi.
		mid := lo + (hi-lo)/2
		if v[mid] < v[lo] {
			v[mid], v[lo] = v[lo], v[mid]
		}
		if v[hi] < v[lo] {
			v[hi], v[lo] = v[lo], v[hi]
		}
		if v[mid] < v[hi] {
			v[mid], v[hi] = v[hi], v[mid]
		}
		pivot := v[hi]
		// Lomuto partition: v[lo:p] < pivot ≤ v[p:hi].
		p := lo
		for i := lo; i < hi; i++ {
			if v[i] < pivot {
				v[i], v[p] = v[p], v[i]
				p++
			}
		}
		v[p], v[hi] = v[hi], v[p]
		switch {
		case k < p:
			hi = p - 1
		case k > p:
			lo = p + 1
		default:
			return v[k]
		}
	}
	return v[k]
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
