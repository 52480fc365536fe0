package charts

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// DefaultCDFPoints bounds the points of one CDF curve.
const DefaultCDFPoints = 2000

// Bucket is one histogram bin: Count samples at (or up to) Value.
type Bucket struct {
	Value float64
	Count int64
}

// CDFSeries is one latency distribution: raw samples (Values, ideally
// sorted ascending: an unsorted slice is sorted in a copy) or histogram
// bins (Buckets). Exactly one of the two is set.
type CDFSeries struct {
	Name     string
	Role     Role
	LineType string // "solid" (default), "dashed" or "dotted": e.g. E2E dashed beside TTFT solid
	Values   []float64
	Buckets  []Bucket
}

// CDFInput is a latency CDF: cumulative share of requests (in %) against
// latency on a log axis.
type CDFInput struct {
	Unit   string // of the values, e.g. "ms"
	Series []CDFSeries
	// Limits are latency limits, drawn as vertical lines.
	Limits []Limit
	// Guides are percentiles (0..100) marked by light horizontal lines,
	// e.g. 50, 99, 99.9.
	Guides []float64
	// MaxPoints bounds the points per curve (DefaultCDFPoints when 0,
	// at least 16).
	MaxPoints int
	// Linear asks for a linear latency axis. It is used anyway when a
	// value is zero or negative, which a log axis cannot show.
	Linear bool
}

// cdfQuantiles are the table's columns.
var cdfQuantiles = []struct {
	label string
	q     float64
}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"p99.9", 0.999}}

// LatencyCDF draws one curve per series with the latency axis
// logarithmic, and returns the table of each series' n, min, percentiles
// and max (nearest rank, as the gates compute them, from all samples).
//
// A curve has at most MaxPoints points, placed so that the tail is exact:
// every sample above the series' p99 is a point of its own as long as
// they fit in three quarters of the bound; beyond that the most extreme
// half of that share stays exact and the rest of the tail is spaced
// geometrically towards p99. The body below p99 is sampled evenly by rank.
func LatencyCDF(in CDFInput) (json.RawMessage, Table, error) {
	if len(in.Series) == 0 {
		return nil, Table{}, errors.New("charts: latency CDF: no series")
	}
	budget := in.MaxPoints
	if budget <= 0 {
		budget = DefaultCDFPoints
	}
	budget = max(budget, 16)

	curves := make([]chartdata.CDFPlot, len(in.Series))
	logX := !in.Linear
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range in.Series {
		cv, err := buildCurve(s, budget)
		if err != nil {
			return nil, Table{}, fmt.Errorf("charts: latency CDF: series %q: %w", s.Name, err)
		}
		curves[i] = cv
		if cv.N > 0 {
			lo, hi = min(lo, cv.Min), max(hi, cv.Max)
		}
	}
	for _, l := range in.Limits {
		if !finite(l.Value) {
			return nil, Table{}, fmt.Errorf("charts: latency CDF: limit %q is %v", l.Label, l.Value)
		}
		lo, hi = min(lo, l.Value), max(hi, l.Value)
	}
	if lo <= 0 {
		logX = false
	}

	xAxis := opts.XAxis{
		Type: "value", Name: axisName("Latency", in.Unit), NameLocation: "middle", NameGap: 28,
		SplitLine: &opts.SplitLine{Show: opts.Bool(true)},
	}
	if logX {
		// Marked lines are not part of an axis' extent: the extent is set
		// to the powers of ten around data and limits (what ECharts would
		// pick for the data alone).
		xAxis.Type = "log"
		if !math.IsInf(lo, 0) {
			xAxis.Min, xAxis.Max = logExtent(lo, hi)
		}
	} else if len(in.Limits) > 0 && !math.IsInf(hi, 0) {
		xAxis.Max = paddedMax(hi)
	}

	grid := defaultGrid()
	grid.Right = "64" // the percentile zoom slider
	c := newChart(opts.Tooltip{
		Show: opts.Bool(true), Trigger: "axis",
		AxisPointer: &opts.AxisPointer{Type: "cross"},
	}, grid)
	c.SetGlobalOptions(
		charts.WithXAxisOpts(xAxis),
		charts.WithYAxisOpts(opts.YAxis{
			Type: "value", Name: "Requests at or below (%)",
			Min: 0, Max: 100, AxisLabel: &opts.AxisLabel{Formatter: "{value} %"},
		}),
		// Zoom: wheel or drag on the latency axis, a slider on the
		// percentile axis to look into the tail (filterMode none keeps the
		// curves whole while zoomed).
		charts.WithDataZoomOpts(
			opts.DataZoom{Type: "inside", XAxisIndex: 0, FilterMode: "none"},
			opts.DataZoom{Type: "slider", YAxisIndex: 0, FilterMode: "none", Orient: "vertical"},
		),
	)

	var col colourer
	for i, s := range in.Series {
		cv := curves[i]
		ls := series(c, s.Name, "line")
		ls.Data = pairs(cv.Points, 6, 9)
		ls.Color = col.next(s.Role, i)
		ls.ShowSymbol = opts.Bool(false)
		ls.Symbol = "none"
		ls.LineStyle = &opts.LineStyle{Color: ls.Color, Width: 2, Type: s.LineType}
		if cv.Whole {
			ls.Step = "end" // an empirical CDF rises at each sample
		}
		c.MultiSeries = append(c.MultiSeries, ls)
	}
	if len(in.Limits) > 0 {
		c.MultiSeries = append(c.MultiSeries, limitSeries(c, in.Limits, true, in.Unit))
	}
	if len(in.Guides) > 0 {
		c.MultiSeries = append(c.MultiSeries, guideSeries(c, in.Guides))
	}

	option, err := render(c, extra{pointerPrecision: 2})
	if err != nil {
		return nil, Table{}, err
	}
	return option, cdfTable(in, curves), nil
}

// CompareCDFs overlays the CDFs of 2 to 6 runs (the compare page). Series
// without a role are coloured from Palette in order.
func CompareCDFs(in CDFInput) (json.RawMessage, Table, error) {
	if n := len(in.Series); n < 2 || n > 6 {
		return nil, Table{}, fmt.Errorf("charts: compare CDFs: %d runs, want 2 to 6", n)
	}
	return LatencyCDF(in)
}

// guideSeries marks percentiles with light horizontal lines.
func guideSeries(c *charts.RectChart, guides []float64) charts.SingleSeries {
	s := series(c, "Percentiles", "line")
	s.Data = []any{}
	s.Color = ColorGuide
	items := make([]any, 0, len(guides))
	for i, g := range guides {
		label := "p" + num(g)
		// Guides near each other (p99, p99.9) take turns at the left
		// and in the middle, so that their labels do not overlap.
		pos := "insideStartTop"
		if i%2 == 1 {
			pos = "insideMiddleTop"
		}
		items = append(items, markLineItem{
			Name: label, YAxis: g,
			Label:     &opts.Label{Show: opts.Bool(true), Formatter: label, Position: pos, Color: ColorGuide},
			LineStyle: &opts.LineStyle{Color: ColorGuide, Type: "dotted", Width: 1},
		})
	}
	s.MarkLines = &opts.MarkLines{Data: items, MarkLineStyle: opts.MarkLineStyle{Symbol: []string{"none", "none"}}}
	return s
}

// buildCurve reduces one series to its plot (chartdata does the
// ranking and thinning; this package only draws).
func buildCurve(s CDFSeries, budget int) (chartdata.CDFPlot, error) {
	switch {
	case s.Values != nil && s.Buckets != nil:
		return chartdata.CDFPlot{}, errors.New("both values and buckets given")
	case s.Buckets != nil:
		bins := make([]chartdata.Bin, len(s.Buckets))
		for i, b := range s.Buckets {
			bins[i] = chartdata.Bin(b)
		}
		return chartdata.PlotCDFBins(bins, cdfQuantileValues(), budget)
	default:
		return chartdata.PlotCDF(s.Values, cdfQuantileValues(), budget)
	}
}

// cdfQuantileValues are the quantiles of the table's columns.
func cdfQuantileValues() []float64 {
	qs := make([]float64, len(cdfQuantiles))
	for i, q := range cdfQuantiles {
		qs[i] = q.q
	}
	return qs
}

func cdfTable(in CDFInput, curves []chartdata.CDFPlot) Table {
	u := unitSuffix(in.Unit)
	t := Table{Head: []string{"Series", "n", "min" + u}}
	for _, q := range cdfQuantiles {
		t.Head = append(t.Head, q.label+u)
	}
	t.Head = append(t.Head, "max"+u)
	for i, s := range in.Series {
		cv := curves[i]
		row := []string{s.Name, fmt.Sprint(cv.N)}
		if cv.N == 0 {
			for range len(t.Head) - 2 {
				row = append(row, "–")
			}
		} else {
			row = append(row, num(cv.Min))
			for _, v := range cv.Quantiles {
				row = append(row, num(v))
			}
			row = append(row, num(cv.Max))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}
