package charts

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/accordlab/accord/acceptance/stats"
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

	curves := make([]cdfCurve, len(in.Series))
	logX := !in.Linear
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range in.Series {
		cv, err := buildCurve(s, budget)
		if err != nil {
			return nil, Table{}, fmt.Errorf("charts: latency CDF: series %q: %w", s.Name, err)
		}
		curves[i] = cv
		if cv.n > 0 {
			lo, hi = min(lo, cv.min), max(hi, cv.max)
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
		ls.Data = pairs(cv.points, 6, 9)
		ls.Color = col.next(s.Role, i)
		ls.ShowSymbol = opts.Bool(false)
		ls.Symbol = "none"
		ls.LineStyle = &opts.LineStyle{Color: ls.Color, Width: 2, Type: s.LineType}
		if cv.whole {
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

// cdfCurve is one series' plotted curve and its exact summary.
type cdfCurve struct {
	points   []Point // (latency, % at or below)
	whole    bool    // every distinct sample is a point: drawn as steps
	n        int64
	min, max float64
	quant    []float64 // cdfQuantiles, nearest rank
}

func buildCurve(s CDFSeries, budget int) (cdfCurve, error) {
	switch {
	case s.Values != nil && s.Buckets != nil:
		return cdfCurve{}, errors.New("both values and buckets given")
	case s.Buckets != nil:
		return bucketCurve(s.Buckets, budget)
	default:
		return valueCurve(s.Values, budget)
	}
}

// valueCurve: point j is (v[j], (j+1)/n) at the last of equal values, so
// each point is the top of the CDF's step there.
func valueCurve(values []float64, budget int) (cdfCurve, error) {
	for i, v := range values {
		if !finite(v) {
			return cdfCurve{}, fmt.Errorf("value %d is %v", i, v)
		}
	}
	if !slices.IsSorted(values) {
		values = slices.Clone(values)
		slices.Sort(values)
	}
	n := len(values)
	cv := cdfCurve{n: int64(n)}
	if n == 0 {
		return cv, nil
	}
	cv.min, cv.max = values[0], values[n-1]
	for _, q := range cdfQuantiles {
		cv.quant = append(cv.quant, values[stats.Rank(q.q, int64(n))-1])
	}
	// One point is the curve's start at (min, 0).
	cv.points = make([]Point, 0, min(n+1, budget))
	cv.points = append(cv.points, Point{X: values[0], Y: 0})
	if countDistinct(values, budget-1) >= 0 {
		// Every distinct value fits: the exact empirical CDF.
		cv.whole = true
		for i := 0; i < n; {
			i += sortSearchAbove(values[i:], values[i])
			cv.points = append(cv.points, Point{X: values[i-1], Y: 100 * float64(i) / float64(n)})
		}
		return cv, nil
	}
	last := -1
	for _, i := range pickRanks(n, int(stats.Rank(0.99, int64(n)))-1, budget-1) {
		// The last index holding the same value.
		j := i + sortSearchAbove(values[i:], values[i]) - 1
		if j == last {
			continue
		}
		last = j
		cv.points = append(cv.points, Point{X: values[j], Y: 100 * float64(j+1) / float64(n)})
	}
	return cv, nil
}

// sortSearchAbove is the number of leading values ≤ v (values ascending).
func sortSearchAbove(values []float64, v float64) int {
	i, _ := slices.BinarySearchFunc(values, v, func(e, t float64) int {
		if e <= t {
			return -1
		}
		return 1
	})
	return i
}

// countDistinct counts distinct sorted values, giving up (returning -1)
// past limit, so that a large series costs no full pass.
func countDistinct(values []float64, limit int) int {
	d := 0
	for i := 0; i < len(values); {
		d++
		if d > limit {
			return -1
		}
		i += sortSearchAbove(values[i:], values[i])
	}
	return d
}

// bucketCurve: point i is (value of bin i, share of samples in bins ≤ i).
func bucketCurve(in []Bucket, budget int) (cdfCurve, error) {
	bs := make([]Bucket, 0, len(in))
	for i, b := range in {
		if !finite(b.Value) || b.Count < 0 {
			return cdfCurve{}, fmt.Errorf("bucket %d is (%v, %d)", i, b.Value, b.Count)
		}
		if b.Count > 0 {
			bs = append(bs, b)
		}
	}
	slices.SortStableFunc(bs, func(a, b Bucket) int { return cmp.Compare(a.Value, b.Value) })
	// Merge equal values; cum[i] = samples in bins ≤ i.
	merged := bs[:0]
	for _, b := range bs {
		if k := len(merged); k > 0 && merged[k-1].Value == b.Value {
			merged[k-1].Count += b.Count
			continue
		}
		merged = append(merged, b)
	}
	bs = merged
	cum := make([]int64, len(bs))
	var total int64
	for i, b := range bs {
		if total > math.MaxInt64-b.Count {
			return cdfCurve{}, errors.New("bucket counts overflow")
		}
		total += b.Count
		cum[i] = total
	}
	cv := cdfCurve{n: total}
	if total == 0 {
		return cv, nil
	}
	cv.min, cv.max = bs[0].Value, bs[len(bs)-1].Value
	at := func(rank int64) int {
		i, _ := slices.BinarySearch(cum, rank)
		return i
	}
	for _, q := range cdfQuantiles {
		cv.quant = append(cv.quant, bs[at(stats.Rank(q.q, total))].Value)
	}
	// Bins are joined by straight lines (no steps): a bin's value may
	// stand for a range.
	idx := pickRanks(len(bs), at(stats.Rank(0.99, total)), budget)
	cv.points = make([]Point, len(idx))
	for k, i := range idx {
		cv.points[k] = Point{X: bs[i].Value, Y: 100 * float64(cum[i]) / float64(total)}
	}
	return cv, nil
}

// pickRanks chooses at most budget of the indices 0..m−1, ascending,
// always 0 and m−1. Indices from tailStart on (above p99) are all kept when
// they fit in three quarters of the budget; otherwise the last half of
// that share is kept and the rest spaced geometrically by distance from
// the end. The body gets the remaining budget, evenly spaced.
func pickRanks(m, tailStart, budget int) []int {
	if m <= budget {
		out := make([]int, m)
		for i := range out {
			out[i] = i
		}
		return out
	}
	tailStart = min(max(tailStart, 1), m-1)
	tail := m - tailStart
	tailBudget := min(tail, budget-budget/4)
	bodyBudget := budget - tailBudget

	out := make([]int, 0, budget)
	// Body: bodyBudget indices over [0, tailStart), ends included.
	if tailStart <= bodyBudget {
		for i := range tailStart {
			out = append(out, i)
		}
	} else if bodyBudget == 1 {
		out = append(out, 0)
	} else {
		for k := range bodyBudget {
			out = append(out, k*(tailStart-1)/(bodyBudget-1))
		}
	}
	// Tail.
	if tail <= tailBudget {
		for i := tailStart; i < m; i++ {
			out = append(out, i)
		}
		return out
	}
	exact := tailBudget / 2
	spaced := tailBudget - exact
	// Distances from the end d in [exact, tail−1], geometric, far to near.
	far, near := float64(tail-1), float64(exact)
	prev := -1
	for k := range spaced {
		f := 0.0
		if spaced > 1 {
			f = float64(k) / float64(spaced-1)
		}
		d := int(math.Round(far * math.Pow(near/far, f)))
		i := m - 1 - d
		if i <= prev {
			continue
		}
		out = append(out, i)
		prev = i
	}
	for i := max(m-exact, prev+1); i < m; i++ {
		out = append(out, i)
	}
	return out
}

func cdfTable(in CDFInput, curves []cdfCurve) Table {
	u := unitSuffix(in.Unit)
	t := Table{Head: []string{"Series", "n", "min" + u}}
	for _, q := range cdfQuantiles {
		t.Head = append(t.Head, q.label+u)
	}
	t.Head = append(t.Head, "max"+u)
	for i, s := range in.Series {
		cv := curves[i]
		row := []string{s.Name, fmt.Sprint(cv.n)}
		if cv.n == 0 {
			for range len(t.Head) - 2 {
				row = append(row, "–")
			}
		} else {
			row = append(row, num(cv.min))
			for _, v := range cv.quant {
				row = append(row, num(v))
			}
			row = append(row, num(cv.max))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}
