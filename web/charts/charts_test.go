package charts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance/stats"
	"github.com/accordlab/accord/web/palette"
)

// option is the part of an ECharts option the tests read.
type option struct {
	Animation *bool          `json:"animation"`
	UseUTC    bool           `json:"useUTC"`
	Title     map[string]any `json:"title"`
	Tooltip   map[string]any `json:"tooltip"`
	Legend    map[string]any `json:"legend"`
	XAxis     []axis         `json:"xAxis"`
	YAxis     []axis         `json:"yAxis"`
	DataZoom  []struct {
		Type       string `json:"type"`
		XAxisIndex *int   `json:"xAxisIndex"`
		YAxisIndex *int   `json:"yAxisIndex"`
	} `json:"dataZoom"`
	Series  []seriesJSON `json:"series"`
	Graphic []struct {
		Type  string `json:"type"`
		Top   string `json:"top"`
		Style struct {
			Text string `json:"text"`
		} `json:"style"`
	} `json:"graphic"`
}

type axis struct {
	Type     string   `json:"type"`
	Name     string   `json:"name"`
	Min      any      `json:"min"`
	Max      any      `json:"max"`
	Data     []string `json:"data"`
	Position string   `json:"position"`
	Offset   *int     `json:"offset"`
	Label    struct {
		Show      *bool `json:"show"`
		Formatter any   `json:"formatter"`
	} `json:"axisLabel"`
}

type seriesJSON struct {
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Color      string            `json:"color"`
	Step       any               `json:"step"`
	XAxisIndex int               `json:"xAxisIndex"`
	YAxisIndex int               `json:"yAxisIndex"`
	Data       []json.RawMessage `json:"data"`
	MarkLine   *struct {
		Data []struct {
			Name  string   `json:"name"`
			XAxis *float64 `json:"xAxis"`
			YAxis *float64 `json:"yAxis"`
			Label struct {
				Formatter string `json:"formatter"`
			} `json:"label"`
		} `json:"data"`
	} `json:"markLine"`
}

// item is a data item written as an object.
type item struct {
	Name    string          `json:"name"`
	Value   json.RawMessage `json:"value"`
	Tooltip struct {
		Formatter string `json:"formatter"`
	} `json:"tooltip"`
	Label struct {
		Formatter string `json:"formatter"`
	} `json:"label"`
}

var jsFunction = regexp.MustCompile(`(?i)function|=>|__f__`)

// decode checks what every option must be (valid JSON, no JavaScript,
// animation off, no title, tooltips on, a legend) and decodes it.
func decode(t *testing.T, raw json.RawMessage) option {
	t.Helper()
	require.True(t, json.Valid(raw), "valid JSON")
	require.False(t, jsFunction.Match(raw), "no JavaScript function in the option: %s", jsFunction.Find(raw))
	var o option
	require.NoError(t, json.Unmarshal(raw, &o))
	require.NotNil(t, o.Animation)
	require.False(t, *o.Animation, "animation off")
	require.Empty(t, o.Title["text"], "no title")
	require.Equal(t, true, o.Tooltip["show"], "tooltips on")
	// HTML tooltips write style attributes, which the CSP refuses.
	require.Equal(t, "richText", o.Tooltip["renderMode"])
	require.NotContains(t, string(raw), `\u003cbr`, "rich-text tooltips break lines with \\n")
	require.NotNil(t, o.Legend, "a legend")
	return o
}

func (o option) series(t *testing.T, name string) seriesJSON {
	t.Helper()
	for _, s := range o.Series {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no series %q in %v", name, o.names())
	return seriesJSON{}
}

func (o option) names() []string {
	var out []string
	for _, s := range o.Series {
		out = append(out, s.Name)
	}
	return out
}

func pairsOf(t *testing.T, s seriesJSON) []Point {
	t.Helper()
	out := make([]Point, len(s.Data))
	for i, d := range s.Data {
		var p [2]float64
		require.NoError(t, json.Unmarshal(d, &p), "series %s point %d: %s", s.Name, i, d)
		out[i] = Point{X: p[0], Y: p[1]}
	}
	return out
}

func itemsOf(t *testing.T, s seriesJSON) []item {
	t.Helper()
	out := make([]item, len(s.Data))
	for i, d := range s.Data {
		require.NoError(t, json.Unmarshal(d, &out[i]), "series %s item %d: %s", s.Name, i, d)
	}
	return out
}

// markLines returns the marked lines of a series as value → label.
func markLines(t *testing.T, s seriesJSON, vertical bool) map[float64]string {
	t.Helper()
	require.NotNil(t, s.MarkLine, "series %s has marked lines", s.Name)
	out := map[float64]string{}
	for _, d := range s.MarkLine.Data {
		if vertical {
			require.NotNil(t, d.XAxis, "vertical line %q", d.Name)
			out[*d.XAxis] = d.Label.Formatter
		} else {
			require.NotNil(t, d.YAxis, "horizontal line %q", d.Name)
			out[*d.YAxis] = d.Label.Formatter
		}
	}
	return out
}

func TestLatencyCDFSmallIsTheExactECDF(t *testing.T) {
	t.Parallel()
	raw, table, err := LatencyCDF(CDFInput{
		Unit: "ms",
		Series: []CDFSeries{
			{Name: "TTFT candidate", Role: RoleCandidate, Values: []float64{10, 2, 2, 3, 1}}, // unsorted on purpose
			{Name: "TTFT baseline", Role: RoleBaseline, Buckets: []Bucket{{4, 1}, {2, 2}, {8, 1}, {2, 0}}},
		},
		Limits: []Limit{{Value: 20, Label: "p99 limit 20 ms"}},
		Guides: []float64{50, 99},
	})
	require.NoError(t, err)
	o := decode(t, raw)
	require.Equal(t, "log", o.XAxis[0].Type)
	require.Equal(t, 1.0, o.XAxis[0].Min, "powers of ten around data and limits")
	require.Equal(t, 100.0, o.XAxis[0].Max)
	require.Equal(t, 100.0, o.YAxis[0].Max)

	cand := o.series(t, "TTFT candidate")
	require.Equal(t, ColorCandidate, cand.Color)
	require.Equal(t, "end", cand.Step, "exact ECDF drawn as steps")
	require.Equal(t, []Point{{X: 1, Y: 0}, {X: 1, Y: 20}, {X: 2, Y: 60}, {X: 3, Y: 80}, {X: 10, Y: 100}}, pairsOf(t, cand))

	base := o.series(t, "TTFT baseline")
	require.Equal(t, ColorBaseline, base.Color)
	require.Equal(t, []Point{{X: 2, Y: 50}, {X: 4, Y: 75}, {X: 8, Y: 100}}, pairsOf(t, base))

	require.Equal(t, map[float64]string{20: "p99 limit 20 ms"}, markLines(t, o.series(t, "Gate limits"), true))
	require.Equal(t, map[float64]string{50: "p50", 99: "p99"}, markLines(t, o.series(t, "Percentiles"), false))

	require.Equal(t, []string{"Series", "n", "min ms", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"}, table.Head)
	require.Equal(t, [][]string{
		{"TTFT candidate", "5", "1", "2", "10", "10", "10", "10"},
		{"TTFT baseline", "4", "2", "2", "8", "8", "8", "8"},
	}, table.Rows)

	// Zoom: inside on latency, a slider on the percentile axis.
	require.Len(t, o.DataZoom, 2)
	require.NotNil(t, o.DataZoom[0].XAxisIndex)
	require.NotNil(t, o.DataZoom[1].YAxisIndex)
}

// With 100,000 samples, the 1,000 above p99 fit the budget: every one of
// them is a point of its own, at its exact rank.
func TestLatencyCDFKeepsEverySampleAboveP99(t *testing.T) {
	t.Parallel()
	const n = 100_000
	v := lognormal(1, n, 400, 0.6, true)
	raw, _, err := LatencyCDF(CDFInput{Unit: "ms", Series: []CDFSeries{{Name: "TTFT", Values: v}}})
	require.NoError(t, err)
	pts := pairsOf(t, decode(t, raw).series(t, "TTFT"))
	require.LessOrEqual(t, len(pts), DefaultCDFPoints)
	require.Greater(t, len(pts), DefaultCDFPoints-10, "the budget is used")
	require.True(t, slices.IsSortedFunc(pts, func(a, b Point) int { return int(math.Copysign(1, a.X-b.X)) }), "x ascending")

	// The tail is the curve's end, sample by sample.
	start := int(stats.Rank(0.99, n)) - 1
	tail := pts[len(pts)-(n-start):]
	for k, p := range tail {
		j := start + k
		require.Equal(t, round(v[j], 6), p.X, "sample %d above p99 is a point", j)
		require.InDelta(t, 100*float64(j+1)/n, p.Y, 1e-7)
	}
	require.Less(t, pts[len(pts)-(n-start)-1].X, v[start], "and no other point is among them")
	require.Equal(t, Point{X: round(v[n-1], 6), Y: 100}, pts[len(pts)-1])
	require.Equal(t, Point{X: round(v[0], 6), Y: 0}, pts[0])
}

// With a million samples the 10,000 above p99 exceed the budget: the
// most extreme 750 stay exact, the rest of the tail is thinned.
func TestLatencyCDFMillionIsBoundedWithExactExtremeTail(t *testing.T) {
	t.Parallel()
	const n = 1_000_000
	v := lognormal(2, n, 400, 0.6, true)
	raw, table, err := LatencyCDF(CDFInput{Unit: "ms", MaxPoints: 2000, Series: []CDFSeries{{Name: "E2E", LineType: "dashed", Values: v}}})
	require.NoError(t, err)
	s := decode(t, raw).series(t, "E2E")
	require.Nil(t, s.Step, "thinned curve is not drawn as steps")
	pts := pairsOf(t, s)
	require.LessOrEqual(t, len(pts), 2000)
	require.Greater(t, len(pts), 1900)
	last := pts[len(pts)-750:]
	for k, p := range last {
		j := n - 750 + k
		require.Equal(t, round(v[j], 6), p.X, "extreme sample %d", j)
		require.InDelta(t, 100*float64(j+1)/n, p.Y, 1e-7)
	}
	// Points thin out geometrically from p99 up: some lie between p99 and
	// p99.9, none is lost above the exact share.
	var between int
	for _, p := range pts {
		if p.Y > 99 && p.Y < 99.9 {
			between++
		}
	}
	require.Greater(t, between, 100)
	// The table is computed from every sample.
	require.Equal(t, num(v[stats.Rank(0.999, n)-1]), table.Rows[0][6])
	require.Equal(t, num(v[n-1]), table.Rows[0][7])
}

func TestLatencyCDFManyDuplicatesStaysExact(t *testing.T) {
	t.Parallel()
	// 50,000 integer latencies with 300 distinct values: all fit.
	v := make([]float64, 50_000)
	for i := range v {
		v[i] = float64(1 + (i*7919)%300)
	}
	raw, _, err := LatencyCDF(CDFInput{Series: []CDFSeries{{Name: "ITL", Values: v}}})
	require.NoError(t, err)
	s := decode(t, raw).series(t, "ITL")
	require.Equal(t, "end", s.Step)
	require.Len(t, pairsOf(t, s), 301)
}

func TestLatencyCDFNonPositiveFallsBackToLinear(t *testing.T) {
	t.Parallel()
	raw, _, err := LatencyCDF(CDFInput{Unit: "ms", Series: []CDFSeries{{Name: "send delay", Values: []float64{0, 0, 1, 5}}}, Limits: []Limit{{Value: 50}}})
	require.NoError(t, err)
	o := decode(t, raw)
	require.Equal(t, "value", o.XAxis[0].Type)
	require.Equal(t, 60.0, o.XAxis[0].Max, "the limit beyond the data is in view")
	require.Equal(t, map[float64]string{50: "limit 50 ms"}, markLines(t, o.series(t, "Gate limits"), true))
}

func TestLatencyCDFRejectsBadInput(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]CDFInput{
		"no series": {},
		"NaN":       {Series: []CDFSeries{{Name: "a", Values: []float64{1, math.NaN()}}}},
		"both":      {Series: []CDFSeries{{Name: "a", Values: []float64{1}, Buckets: []Bucket{{1, 1}}}}},
		"negative":  {Series: []CDFSeries{{Name: "a", Buckets: []Bucket{{1, -1}}}}},
		"inf limit": {Series: []CDFSeries{{Name: "a", Values: []float64{1}}}, Limits: []Limit{{Value: math.Inf(1)}}},
	} {
		_, _, err := LatencyCDF(in)
		require.Error(t, err, name)
	}
}

func TestCompareCDFs(t *testing.T) {
	t.Parallel()
	var runs []CDFSeries
	for i := range 7 {
		runs = append(runs, CDFSeries{Name: "run " + string(rune('1'+i)), Values: lognormal(uint64(i), 3000, 300+50*float64(i), 0.5, false)})
	}
	_, _, err := CompareCDFs(CDFInput{Series: runs[:1]})
	require.Error(t, err)
	_, _, err = CompareCDFs(CDFInput{Series: runs})
	require.Error(t, err)

	raw, table, err := CompareCDFs(CDFInput{Unit: "ms", Series: runs[:4], Limits: []Limit{{Value: 2000, Label: "p99 limit 2000 ms"}}})
	require.NoError(t, err)
	o := decode(t, raw)
	require.Equal(t, "log", o.XAxis[0].Type)
	require.Equal(t, []string{"run 1", "run 2", "run 3", "run 4", "Gate limits"}, o.names())
	colors := map[string]bool{}
	for _, s := range o.Series[:4] {
		colors[s.Color] = true
		require.LessOrEqual(t, len(s.Data), DefaultCDFPoints)
	}
	require.Len(t, colors, 4, "each run its own colour")
	require.Len(t, table.Rows, 4)
}

func TestPercentileBars(t *testing.T) {
	t.Parallel()
	raw, table, err := PercentileBars(PercentileInput{
		Unit: "ms", CandidateName: "NVMe-oF", BaselineName: "local NVMe", Confidence: 0.95,
		Rows: []PercentileRow{
			{Label: "p50", Candidate: 410, Baseline: 400, RelDiff: 0.025, Lower: -0.01, Upper: 0.06},
			{Label: "p99", Candidate: 1500, Baseline: 1200, RelDiff: 0.25, Lower: 0.18, Upper: 0.33},
			{Label: "p99.9", Candidate: 2600, Baseline: 1800, RelDiff: 0.4444, Lower: math.NaN(), Upper: math.NaN()},
		},
	})
	require.NoError(t, err)
	o := decode(t, raw)
	require.Equal(t, []string{"NVMe-oF", "local NVMe", "95 % interval", "Difference"}, o.names())
	require.Len(t, o.XAxis, 2)
	require.Equal(t, []string{"p50", "p99", "p99.9"}, o.XAxis[1].Data)

	ci := itemsOf(t, o.series(t, "95 % interval"))
	require.Len(t, ci, 3)
	require.JSONEq(t, `[18,25,25,25,33]`, string(ci[1].Value), "an error bar from lower to upper, in %")
	require.Equal(t, "p99: +25.0 % (95 % interval: +18.0 % to +33.0 %)", ci[1].Tooltip.Formatter)
	require.JSONEq(t, `["-","-","-","-","-"]`, string(ci[2].Value), "no interval, no bar")

	d := o.series(t, "Difference")
	require.Equal(t, 1, d.XAxisIndex)
	require.Equal(t, 1, d.YAxisIndex)
	diff := itemsOf(t, d)
	require.Equal(t, "+44.4 %", diff[2].Label.Formatter)
	require.Equal(t, map[float64]string{0: ""}, markLines(t, d, false))

	require.Equal(t, []string{"p99", "1500", "1200", "+25.0 %", "+18.0 % to +33.0 %"}, table.Rows[1])
	require.Equal(t, "–", table.Rows[2][4])

	// The difference panel is labelled with the percentiles too, and every
	// bar with its value, as the table writes it.
	require.Equal(t, []string{"p50", "p99", "p99.9"}, o.XAxis[0].Data)
	require.NotNil(t, o.XAxis[1].Label.Show)
	require.True(t, *o.XAxis[1].Label.Show, "the difference panel names its categories")
	for name, want := range map[string][]string{"NVMe-oF": {"410", "1500", "2600"}, "local NVMe": {"400", "1200", "1800"}} {
		var got []string
		for _, it := range itemsOf(t, o.series(t, name)) {
			got = append(got, it.Label.Formatter)
		}
		require.Equal(t, want, got, "the value on each bar of %s", name)
	}
	require.Empty(t, o.Graphic, "the baseline has figures: nothing to say")

	_, _, err = PercentileBars(PercentileInput{Rows: []PercentileRow{{Label: "p50", Candidate: math.Inf(1)}}})
	require.Error(t, err)
}

func TestLatencyOverRunMillionRequests(t *testing.T) {
	t.Parallel()
	const n = 1_000_000
	cand := requestsOverRun(5, n, 1800, 777_777, 15_000)
	base := requestsOverRun(6, n/2, 1800, -1, 0)
	raw, table, err := LatencyOverRun(OverRunInput{
		Unit: "ms",
		Series: []OverRunSeries{
			{Name: "candidate", Role: RoleCandidate, Points: cand},
			{Name: "baseline", Role: RoleBaseline, Points: base},
		},
		Limits: []Limit{{Value: 20_000, Label: "p99 limit 20000 ms"}},
	})
	require.NoError(t, err)
	o := decode(t, raw)
	require.Equal(t, []string{"candidate", "candidate p99 per 20 s", "baseline", "baseline p99 per 20 s", "Gate limits"}, o.names())
	sc := o.series(t, "candidate")
	require.Equal(t, "scatter", sc.Type)
	pts := pairsOf(t, sc)
	require.LessOrEqual(t, len(pts), DefaultScatterPoints)
	require.Contains(t, pts, Point{X: round(cand[777_777].X, 7), Y: 15_000}, "the spike is on the chart")
	require.Equal(t, Point{X: 0, Y: round(cand[0].Y, 6)}, pts[0])

	line := pairsOf(t, o.series(t, "candidate p99 per 20 s"))
	require.Len(t, line, 90, "1800 s in 20 s windows")
	// Warm-up shows: the first windows' p99 is about three times the rest.
	require.Greater(t, line[0].Y, 2*line[45].Y)

	require.Equal(t, map[float64]string{20_000: "p99 limit 20000 ms"}, markLines(t, o.series(t, "Gate limits"), false))
	require.Equal(t, "log", o.YAxis[0].Type, "the spike is 100 times the body")
	require.Equal(t, 100_000.0, o.YAxis[0].Max, "the limit above the data is in view")
	require.Equal(t, 10.0, o.YAxis[0].Min)
	require.Equal(t, 0.0, o.XAxis[0].Min)
	require.Equal(t, 1800.0, o.XAxis[0].Max)
	require.Len(t, o.DataZoom, 2)

	require.Equal(t, []string{"Window start (s)", "candidate p99 ms", "baseline p99 ms"}, table.Head)
	require.Len(t, table.Rows, 90)
	require.Equal(t, "0", table.Rows[0][0])
	require.Equal(t, num(line[0].Y), table.Rows[0][1])
}

func TestLatencyOverRunLinear(t *testing.T) {
	t.Parallel()
	pts := requestsOverRun(8, 3000, 60, 100, 9000)
	raw, _, err := LatencyOverRun(OverRunInput{Unit: "ms", LinearY: true, Window: 10,
		Series: []OverRunSeries{{Name: "TTFT", Points: pts}}, Limits: []Limit{{Value: 10_000}}})
	require.NoError(t, err)
	o := decode(t, raw)
	require.Equal(t, "value", o.YAxis[0].Type)
	require.Equal(t, 12_000.0, o.YAxis[0].Max, "the limit above the data is in view")
	require.Len(t, pairsOf(t, o.series(t, "TTFT p99 per 10 s")), 6)
	require.Equal(t, 3000, len(pairsOf(t, o.series(t, "TTFT"))), "small series are not reduced")
}

func TestOverTimeAxesByUnit(t *testing.T) {
	t.Parallel()
	in := TimeSeriesInput{Series: []TimeSeries{
		{Name: "output tokens/s", Unit: "tok/s", Role: RoleCandidate, Points: telemetry(1, 200_000, 1800, 5000, 800)},
		{Name: "requests/s", Unit: "req/s", Points: telemetry(2, 1800, 1800, 20, 4)},
		{Name: "CPU", Unit: "%", Points: telemetry(3, 1800, 1800, 40, 10)},
		{Name: "GPU", Unit: "%", Points: telemetry(4, 1800, 1800, 80, 10)},
	}}
	raw, table, err := OverTime(in)
	require.NoError(t, err)
	o := decode(t, raw)
	require.Len(t, o.YAxis, 3)
	require.Equal(t, []string{"tok/s", "req/s", "%"}, []string{o.YAxis[0].Name, o.YAxis[1].Name, o.YAxis[2].Name})
	require.Equal(t, "right", o.YAxis[1].Position)
	require.NotNil(t, o.YAxis[2].Offset)
	require.Equal(t, 56, *o.YAxis[2].Offset)
	require.Equal(t, 2, o.series(t, "CPU").YAxisIndex)
	require.Equal(t, 2, o.series(t, "GPU").YAxisIndex)
	tok := pairsOf(t, o.series(t, "output tokens/s"))
	require.LessOrEqual(t, len(tok), DefaultLinePoints)
	require.Equal(t, round(in.Series[0].Points[len(in.Series[0].Points)-1].X, 7), tok[len(tok)-1].X)
	require.Equal(t, 1800, len(pairsOf(t, o.series(t, "CPU"))), "short series are not reduced")
	require.Len(t, o.DataZoom, 2)
	require.Equal(t, []string{"CPU", "%", "1800"}, table.Rows[2][:3])

	five := append(slices.Clone(in.Series), TimeSeries{Name: "disk", Unit: "B/s"}, TimeSeries{Name: "x", Unit: "IOPS"})
	_, _, err = OverTime(TimeSeriesInput{Series: five})
	require.ErrorContains(t, err, "at most 4")
}

func TestKnee(t *testing.T) {
	t.Parallel()
	raw, table, err := Knee(KneeInput{
		ThroughputName: "Output tokens/s", ThroughputUnit: "tok/s",
		LatencyName: "p99 TTFT", LatencyUnit: "ms",
		Series: []KneeSeries{
			{Name: "candidate", Role: RoleCandidate, Points: sweep(1.2)},
			{Name: "baseline", Role: RoleBaseline, Points: sweep(1)},
		},
		SLO: 2000, SLOLabel: "p99 TTFT SLO 2000 ms",
	})
	require.NoError(t, err)
	o := decode(t, raw)
	items := itemsOf(t, o.series(t, "candidate"))
	require.Len(t, items, 7)
	require.Equal(t, "c=16", items[4].Name)
	require.Contains(t, items[4].Tooltip.Formatter, "candidate · c=16")
	require.Equal(t, map[float64]string{2000: "p99 TTFT SLO 2000 ms"}, markLines(t, o.series(t, "Gate limits"), false))
	require.Equal(t, "Output tokens/s (tok/s)", o.XAxis[0].Name)
	require.Equal(t, []string{"Series", "Level", "Output tokens/s (tok/s)", "p99 TTFT (ms)", "Within SLO"}, table.Head)
	require.Equal(t, "yes", table.Rows[4][4])   // c=16: 620 ms
	require.Equal(t, "no", table.Rows[6][4])    // c=64: 12,640 ms
	require.Equal(t, "c=64", table.Rows[13][1]) // baseline's last level

	raw, _, err = Knee(KneeInput{Series: []KneeSeries{{Name: "open loop", Points: []KneePoint{{Label: "8 req/s", Throughput: 8, Latency: 300}}}}, SLO: 5000, LogY: true})
	require.NoError(t, err)
	o = decode(t, raw)
	require.Equal(t, "log", o.YAxis[0].Type)
	require.Equal(t, 100.0, o.YAxis[0].Min)
	require.Equal(t, 10_000.0, o.YAxis[0].Max, "the SLO is in view on the log axis")
	require.Equal(t, "8 req/s", itemsOf(t, o.Series[0])[0].Name)
}

func TestFioCharts(t *testing.T) {
	t.Parallel()
	in := FioInput{Jobs: []FioJob{
		{Job: "kv-lookup", Direction: "read", Bandwidth: 1.5 * mib * 1024, IOPS: 393_216,
			Percentiles: []FioPercentile{{"p50", 82}, {"p99", 310}, {"p99.9", 5100}}},
		{Job: "checkpoint", Direction: "write", Bandwidth: 800 * mib, IOPS: 800,
			Percentiles: []FioPercentile{{"p50", 1200}, {"p99", 4000}}},
		{Job: "checkpoint", Direction: "read", Bandwidth: 2 * mib * 1024, IOPS: 2048,
			Percentiles: []FioPercentile{{"p50", 900}, {"p99", 2500}, {"p99.9", 3000}}},
	}}
	raw, table, err := FioLatency(in)
	require.NoError(t, err)
	o := decode(t, raw)
	require.Equal(t, []string{"kv-lookup · read", "checkpoint · write", "checkpoint · read"}, o.XAxis[0].Data)
	require.Equal(t, []string{"p50", "p99", "p99.9"}, o.names())
	require.Equal(t, "log", o.YAxis[0].Type, "5100/82 > 50")
	require.Equal(t, "Completion latency (us)", o.YAxis[0].Name)
	p999 := itemsOf(t, o.series(t, "p99.9"))
	require.JSONEq(t, `"-"`, string(p999[1].Value), "the write job has no p99.9")
	require.Equal(t, []string{"checkpoint · write", "1200", "4000", "–"}, table.Rows[1])

	raw, table, err = FioBandwidth(in)
	require.NoError(t, err)
	o = decode(t, raw)
	require.Equal(t, []string{"kv-lookup", "checkpoint"}, o.XAxis[0].Data)
	require.Equal(t, []string{"read", "write"}, o.names())
	read := itemsOf(t, o.series(t, "read"))
	require.JSONEq(t, `1536`, string(read[0].Value), "MiB/s")
	require.JSONEq(t, `2048`, string(read[1].Value))
	write := itemsOf(t, o.series(t, "write"))
	require.JSONEq(t, `"-"`, string(write[0].Value))
	require.Equal(t, []string{"kv-lookup", "read", "1536", "1610612736", "393216"}, table.Rows[0])

	_, _, err = FioBandwidth(FioInput{Jobs: []FioJob{in.Jobs[0], in.Jobs[0]}})
	require.ErrorContains(t, err, "twice")
	// Linear when the range is narrow.
	raw, _, err = FioLatency(FioInput{Jobs: in.Jobs[1:2]})
	require.NoError(t, err)
	require.Equal(t, "value", decode(t, raw).YAxis[0].Type)
}

func TestTrend(t *testing.T) {
	t.Parallel()
	a := trendSeries("gpu-a <lab>", 6, 900)
	a.Points[2].Note = "FAIL"
	b := trendSeries("gpu-b", 4, 700)
	raw, table, err := Trend(TrendInput{
		Metric: "p99 TTFT", Unit: "ms",
		Series: []TrendSeries{a, b},
		Limits: []Limit{{Value: 2000, Label: "p99 limit 2000 ms"}},
	})
	require.NoError(t, err)
	o := decode(t, raw)
	require.Equal(t, "time", o.XAxis[0].Type)
	require.True(t, o.UseUTC, "axis labels in UTC like the tooltips")
	require.Equal(t, "{MM}-{dd}", o.XAxis[0].Label.Formatter.(map[string]any)["day"], "labels by tick level")
	require.Equal(t, []string{"gpu-a <lab>", "gpu-b", "Gate limits"}, o.names())
	items := itemsOf(t, o.series(t, "gpu-a <lab>"))
	require.Len(t, items, 6)
	var xy [2]float64
	require.NoError(t, json.Unmarshal(items[2].Value, &xy))
	require.Equal(t, float64(a.Points[2].Time.UnixMilli()), xy[0])
	require.Equal(t, "run C", items[2].Name)
	require.Equal(t, "gpu-a <lab> · run C\n2025-03-03 13:00 UTC\n"+num(a.Points[2].Value)+" ms · FAIL",
		items[2].Tooltip.Formatter, "a fixed rich-text tooltip per run")
	require.Equal(t, map[float64]string{2000: "p99 limit 2000 ms"}, markLines(t, o.series(t, "Gate limits"), false))
	require.Equal(t, 2500.0, o.YAxis[0].Max)
	require.Len(t, o.DataZoom, 2)
	require.Len(t, table.Rows, 10)
	require.Equal(t, []string{"gpu-b", "run A", "2025-03-01 09:00 UTC", num(700)}, table.Rows[6][:4])

	// Points are ordered by time whatever the input order.
	slices.Reverse(b.Points)
	raw, _, err = Trend(TrendInput{Series: []TrendSeries{b}, Location: time.FixedZone("CET", 3600)})
	require.NoError(t, err)
	o = decode(t, raw)
	require.False(t, o.UseUTC, "ECharts can only label in UTC or the browser's zone")
	items = itemsOf(t, o.Series[0])
	require.Equal(t, "run A", items[0].Name)
	require.True(t, strings.Contains(items[0].Tooltip.Formatter, "10:00 CET"))
}

// Label text typed by users cannot open an ECharts template.
func TestLabelsAreNotTemplates(t *testing.T) {
	t.Parallel()
	raw, _, err := LatencyCDF(CDFInput{Series: []CDFSeries{{Name: "a", Values: []float64{1, 2}}}, Limits: []Limit{{Value: 2, Label: "limit {a|x} {c}"}}})
	require.NoError(t, err)
	require.Equal(t, map[float64]string{2: "limit (a|x) (c)"}, markLines(t, decode(t, raw).series(t, "Gate limits"), true))
}

func TestLatencyCDFManyBucketsIsBounded(t *testing.T) {
	t.Parallel()
	var bs []Bucket
	var total int64
	for i := range 10_000 {
		bs = append(bs, Bucket{Value: 0.1 * math.Pow(1.001, float64(i)), Count: int64(1 + (i*31)%7)})
		total += bs[i].Count
	}
	raw, table, err := LatencyCDF(CDFInput{Unit: "us", MaxPoints: 500, Series: []CDFSeries{{Name: "read", Buckets: bs}}})
	require.NoError(t, err)
	s := decode(t, raw).series(t, "read")
	require.Nil(t, s.Step)
	pts := pairsOf(t, s)
	require.LessOrEqual(t, len(pts), 500)
	require.Equal(t, Point{X: round(bs[len(bs)-1].Value, 6), Y: 100}, pts[len(pts)-1])
	require.Equal(t, round(bs[0].Value, 6), pts[0].X)
	require.Equal(t, fmt.Sprint(total), table.Rows[0][1], "n is the sum of the counts")
}

// FuzzLatencyCDF: any finite samples and budget give a bounded curve,
// ascending in both axes, ending at 100 % at the maximum.
func FuzzLatencyCDF(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 250, 250, 250}, uint16(16))
	f.Add([]byte{0, 0, 0, 0}, uint16(20))
	f.Add(bytes.Repeat([]byte{9, 200, 3}, 400), uint16(17))
	f.Fuzz(func(t *testing.T, raw []byte, budget uint16) {
		if len(raw) == 0 {
			return
		}
		v := make([]float64, len(raw))
		for i, b := range raw {
			v[i] = float64(int(b)-20) * 1.5
		}
		in := CDFInput{MaxPoints: int(budget), Series: []CDFSeries{{Name: "s", Values: v}}}
		opt, _, err := LatencyCDF(in)
		require.NoError(t, err)
		var o option
		require.NoError(t, json.Unmarshal(opt, &o))
		pts := pairsOf(t, o.Series[0])
		bound := max(int(budget), 16)
		if budget == 0 {
			bound = DefaultCDFPoints
		}
		require.LessOrEqual(t, len(pts), bound)
		for i := 1; i < len(pts); i++ {
			require.GreaterOrEqual(t, pts[i].X, pts[i-1].X)
			require.GreaterOrEqual(t, pts[i].Y, pts[i-1].Y)
		}
		require.Equal(t, 100.0, pts[len(pts)-1].Y)
		require.Equal(t, slices.Max(v), pts[len(pts)-1].X)
	})
}

// A role has one colour on every chart: the candidate the palette's blue,
// the baseline its grey; further runs (RoleOther) take the palette's other
// colours in their own order, never blue, grey or the limits' red.
func TestRolesColourAlikeOnEveryChart(t *testing.T) {
	t.Parallel()
	vals := func(seed uint64) []float64 { return lognormal(seed, 500, 300, 0.5, false) }
	raw, _, err := CompareCDFs(CDFInput{Unit: "ms", Series: []CDFSeries{
		{Name: "ref", Role: RoleBaseline, Values: vals(1)}, {Name: "cand", Role: RoleCandidate, Values: vals(2)},
		{Name: "third", Role: RoleOther, Values: vals(3)}, {Name: "fourth", Role: RoleOther, Values: vals(4)},
	}})
	require.NoError(t, err)
	o := decode(t, raw)
	require.Equal(t, palette.BaselineColour, o.series(t, "ref").Color)
	require.Equal(t, palette.CandidateColour, o.series(t, "cand").Color)
	require.Equal(t, palette.Others[0], o.series(t, "third").Color)
	require.Equal(t, palette.Others[1], o.series(t, "fourth").Color)
	for _, c := range palette.Others {
		require.NotContains(t, []string{palette.CandidateColour, palette.BaselineColour, palette.LimitColour}, c)
	}

	raw, _, err = LatencyOverRun(OverRunInput{Unit: "ms", Window: 10, Series: []OverRunSeries{
		{Name: "cand", Role: RoleCandidate, Points: requestsOverRun(1, 500, 60, -1, 0)},
		{Name: "base", Role: RoleBaseline, Points: requestsOverRun(2, 500, 60, -1, 0)},
	}})
	require.NoError(t, err)
	o = decode(t, raw)
	require.Equal(t, palette.CandidateColour, o.series(t, "cand").Color)
	require.Equal(t, palette.BaselineColour, o.series(t, "base").Color)

	raw, _, err = PercentileBars(PercentileInput{Unit: "ms", CandidateName: "cand", BaselineName: "base",
		Rows: []PercentileRow{{Label: "p50", Candidate: 2, Baseline: 1, RelDiff: 1, Lower: math.NaN(), Upper: math.NaN()}}})
	require.NoError(t, err)
	o = decode(t, raw)
	require.Equal(t, palette.CandidateColour, o.series(t, "cand").Color)
	require.Equal(t, palette.BaselineColour, o.series(t, "base").Color)
}

// Without baseline figures the bars stand alone and the empty difference
// panel says why, rather than staying blank.
func TestPercentileBarsWithoutBaselineFigures(t *testing.T) {
	t.Parallel()
	nan := math.NaN()
	raw, table, err := PercentileBars(PercentileInput{Unit: "ms", CandidateName: "run #2", BaselineName: "baseline run #1",
		NoBaselineWhy: "baseline run #1 did not run step chat at c=16 (its levels: c=1, c=4)",
		Rows: []PercentileRow{
			{Label: "p50", Candidate: 12.5, Baseline: nan, RelDiff: nan, Lower: nan, Upper: nan},
			{Label: "p99", Candidate: 40, Baseline: nan, RelDiff: nan, Lower: nan, Upper: nan},
		}})
	require.NoError(t, err)
	o := decode(t, raw)
	require.Len(t, o.Graphic, 1)
	require.Equal(t, "text", o.Graphic[0].Type)
	require.Equal(t, "No baseline figures for this step and metric: baseline run #1 did not run step chat at c=16 (its levels: c=1, c=4)", o.Graphic[0].Style.Text)
	require.Equal(t, "80%", o.Graphic[0].Top, "in the difference panel")
	require.Equal(t, `"-"`, string(itemsOf(t, o.series(t, "baseline run #1"))[0].Value), "no bar")
	require.Empty(t, itemsOf(t, o.series(t, "baseline run #1"))[0].Label.Formatter, "and no label")
	require.Equal(t, "12.5", itemsOf(t, o.series(t, "run #2"))[0].Label.Formatter)
	require.Equal(t, []string{"p50", "12.5", "–", "–", "–"}, table.Rows[0])

	raw, _, err = PercentileBars(PercentileInput{Rows: []PercentileRow{{Label: "p50", Candidate: 1, Baseline: nan, RelDiff: nan, Lower: nan, Upper: nan}}})
	require.NoError(t, err)
	require.Equal(t, "No baseline figures for this step and metric", decode(t, raw).Graphic[0].Style.Text, "no reason known: none made up")
}

// warmupRun is three repetitions of 20 s, each starting with 2 s of
// warm-up requests: the measured requests and the warm-up ones, one every
// 10 ms, with fixed latencies (warm-up slower).
func warmupRun() (measured, warmup []Point) {
	for rep := range 3 {
		start := float64(rep) * 20
		for t := start; t < start+20; t += 0.01 {
			if t < start+2 {
				warmup = append(warmup, Point{X: t, Y: 30})
			} else {
				measured = append(measured, Point{X: t, Y: 10})
			}
		}
	}
	return measured, warmup
}

// breaks returns the x of each break in a line series' data ([x, "-"])
// and checks that no two points join across more than maxStep.
func breaks(t *testing.T, s seriesJSON, maxStep float64) []float64 {
	t.Helper()
	var out []float64
	prev := math.NaN()
	for i, d := range s.Data {
		var p []any
		require.NoError(t, json.Unmarshal(d, &p), "item %d: %s", i, d)
		require.Len(t, p, 2)
		x := p[0].(float64)
		if p[1] == "-" {
			out = append(out, x)
			prev = math.NaN()
			continue
		}
		require.False(t, x-prev > maxStep, "%s joins %v to %v", s.Name, prev, x)
		prev = x
	}
	return out
}

// The rolling line of the warm-up requests is broken between the
// repetitions' warm-ups (it joined them across the measured stretch), and
// the measured line is broken across each warm-up; within a stretch they
// are unbroken.
func TestLatencyOverRunBreaksLinesAtGaps(t *testing.T) {
	t.Parallel()
	measured, warmup := warmupRun()
	raw, table, err := LatencyOverRun(OverRunInput{Unit: "ms", Window: 0.5, Series: []OverRunSeries{
		{Name: "TTFT", Role: RoleCandidate, Points: measured},
		{Name: "TTFT in warm-up (not measured)", Points: warmup},
	}})
	require.NoError(t, err)
	o := decode(t, raw)
	w := breaks(t, o.series(t, "TTFT in warm-up (not measured) p99 per 0.5 s"), 0.75)
	require.Len(t, w, 2, "a break between each two repetitions' warm-ups")
	require.InDelta(t, 11, w[0], 0.5, "midway between the first warm-up's last window and the second's first")
	require.InDelta(t, 31, w[1], 0.5)
	m := breaks(t, o.series(t, "TTFT p99 per 0.5 s"), 0.75)
	require.Len(t, m, 2, "the measured line breaks across the second and third warm-ups")
	require.InDelta(t, 21, m[0], 0.5)
	// The table keeps every window that had requests, and only those.
	require.Len(t, table.Rows, 120, "3 × 20 s in 0.5 s windows")
}
