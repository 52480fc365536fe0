package web

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/acceptance/chartdata/chartdatatest"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/htmltest"
)

// sampleRun is a run's measurements: an inference sweep at two levels and
// a fio read step; scale makes the baseline slower.
func sampleRun(seed uint64, scale float64) []acceptance.Measurement {
	var ms []acceptance.Measurement
	for i, lv := range []string{"c=1", "c=8"} {
		load := float64(1 + 3*i)
		ms = append(ms,
			acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: "serve", Level: lv, Repetition: 1,
				Values: chartdatatest.Lognormal(seed+uint64(i), 400, 120*scale*load, 0.4, false)},
			acceptance.Measurement{Metric: acceptance.MetricE2EL, Step: "serve", Level: lv, Repetition: 1,
				Values: chartdatatest.Lognormal(seed+10+uint64(i), 400, 900*scale*load, 0.3, false)},
			acceptance.Measurement{Metric: acceptance.MetricOutputTokenThroughput, Step: "serve", Level: lv, Repetition: 1,
				Values: []float64{300 * load / scale}})
	}
	ms = append(ms, acceptance.Measurement{Metric: acceptance.MetricReadCLat, Step: "kv-read", Repetition: 1,
		Values: chartdatatest.Lognormal(seed+20, 2000, 80*scale, 0.5, false)})
	return ms
}

// sampleRuns are a candidate (run 42) and its slower baseline (run 41),
// with their chart data.
type sampleRuns struct {
	baselineID     int64
	candMs, baseMs []acceptance.Measurement
	cand, base     chartdata.Aggregates
}

func newSampleRuns() sampleRuns {
	r := sampleRuns{baselineID: 41, candMs: sampleRun(1, 1), baseMs: sampleRun(100, 1.3)}
	r.cand = chartdata.Compute(chartdata.Input{Measurements: r.candMs, BaselineRunID: &r.baselineID, Baseline: r.baseMs})
	r.base = chartdata.Compute(chartdata.Input{Measurements: r.baseMs})
	return r
}

func rowsOf(t *testing.T, ms []acceptance.Measurement) []store.MeasurementRow {
	t.Helper()
	var out []store.MeasurementRow
	for _, m := range ms {
		sum, err := store.Summarize(m)
		require.NoError(t, err)
		out = append(out, store.MeasurementRow{Metric: m.Metric, Step: m.Step, Level: m.Level, Repetition: m.Repetition, N: sum.N, Summary: sum})
	}
	return out
}

// The signed report draws its key charts as static SVG from the run's
// chart data, the baseline's beside the run's: TTFT and E2E distributions,
// percentile bars with the gate's limit, throughput against p99 TTFT
// across the sweep, the fio latency percentiles; each drawn value is the
// run's (or the baseline's) statistic. Every table has the baseline's
// figures beside the run's, and a print stylesheet is there. No script.
func TestReportChartsAndBaselineFigures(t *testing.T) {
	t.Parallel()
	sr := newSampleRuns()
	baselineID, candMs, baseMs, cand, base := sr.baselineID, sr.candMs, sr.baseMs, sr.cand, sr.base
	require.Empty(t, cand.Meta.Notes)
	p99, ok := cand.Stat(acceptance.MetricTTFT, "serve", "c=8", "p99")
	require.True(t, ok)
	limit := report.Limit{Metric: acceptance.MetricTTFT, Statistic: "p99", Comparator: acceptance.LessOrEqual, Value: 2000, Label: "p99 Time to first token ≤ 2000 ms"}
	v := p99
	eval := &acceptance.Evaluation{Verdict: acceptance.Pass, Criteria: []acceptance.CriterionResult{{Name: "ttft-p99", Metric: acceptance.MetricTTFT,
		Statistic: "p99", Mode: acceptance.Absolute, Comparator: acceptance.LessOrEqual, Threshold: 2000, Unit: "ms", Verdict: acceptance.Pass,
		Worst:  &acceptance.SeriesKey{Step: "serve", Level: "c=8"},
		Series: []acceptance.SeriesResult{{Step: "serve", Level: "c=8", Verdict: acceptance.Pass, Candidate: acceptance.SideSummary{Value: &v}}}}}}
	c := report.Contents{
		Run: store.Run{ID: 42, BaselineRunID: &baselineID}, Program: "P", Vendor: "V", Customer: "C", Evaluation: eval,
		Measurements: rowsOf(t, candMs), Charts: &cand, Limits: []report.Limit{limit},
		Baseline: &report.BaselineContents{RunID: baselineID, Measurements: rowsOf(t, baseMs), Charts: &base},
	}
	var out bytes.Buffer
	require.NoError(t, RenderReport(context.Background(), &out, c))
	page := out.String()
	require.NotContains(t, page, "<script")
	require.Contains(t, page, "@media print")
	require.Contains(t, page, "@page")
	doc := htmltest.Parse(t, page)

	figures := map[string]*html.Node{}
	for _, f := range htmltest.All(doc, func(n *html.Node) bool { return n.Data == "figure" }) {
		figures[htmltest.Attr(f, "id")] = f
		require.Len(t, htmltest.All(f, func(n *html.Node) bool { return n.Data == "svg" }), 1, htmltest.Attr(f, "id"))
	}
	for _, id := range []string{"fig-cdf-1", "fig-pct-1-0", "fig-pct-1-1", "fig-knee-1", "fig-fio"} {
		require.Contains(t, figures, id)
	}

	// Distributions: TTFT and E2E of the run and of the baseline, the gate's limit.
	var lines []string
	for _, l := range htmltest.All(figures["fig-cdf-1"], func(n *html.Node) bool { return htmltest.Attr(n, "class") == "series" }) {
		lines = append(lines, htmltest.Attr(l, "data-series"))
	}
	require.Equal(t, []string{"TTFT run #42", "TTFT baseline #41", "E2E run #42", "E2E baseline #41"}, lines)
	limits := htmltest.All(figures["fig-cdf-1"], func(n *html.Node) bool { return htmltest.Attr(n, "class") == "limit" })
	require.Len(t, limits, 1)
	require.Equal(t, "2000", htmltest.Attr(limits[0], "data-value"))

	// Percentile bars: each bar is the statistic of its run, at the sweep
	// level with the highest p99, and the limit is drawn.
	bars := htmltest.All(figures["fig-pct-1-0"], func(n *html.Node) bool { return htmltest.Attr(n, "class") == "bar" })
	require.Len(t, bars, 10, "five percentiles, run and baseline")
	for _, b := range bars {
		src := &cand
		if htmltest.Attr(b, "data-series") == "baseline #41" {
			src = &base
		} else {
			require.Equal(t, "run #42", htmltest.Attr(b, "data-series"))
		}
		want, ok := src.Stat(acceptance.MetricTTFT, "serve", "c=8", htmltest.Attr(b, "data-group"))
		require.True(t, ok)
		got, err := strconv.ParseFloat(htmltest.Attr(b, "data-value"), 64)
		require.NoError(t, err)
		require.Equal(t, want, got, "%s %s", htmltest.Attr(b, "data-series"), htmltest.Attr(b, "data-group"))
	}
	require.Len(t, htmltest.All(figures["fig-pct-1-0"], func(n *html.Node) bool { return htmltest.Attr(n, "class") == "limit" }), 1)

	// The sweep: one point per level for each run, at (throughput, p99 TTFT).
	points := htmltest.All(figures["fig-knee-1"], func(n *html.Node) bool { return htmltest.Attr(n, "class") == "point" })
	require.Len(t, points, 4)
	for _, p := range points {
		src := &cand
		if htmltest.Attr(p, "data-series") == "baseline #41" {
			src = &base
		}
		x, _ := strconv.ParseFloat(htmltest.Attr(p, "data-x"), 64)
		y, _ := strconv.ParseFloat(htmltest.Attr(p, "data-y"), 64)
		found := false
		for _, lv := range []string{"c=1", "c=8"} {
			tp, _ := src.Stat(acceptance.MetricOutputTokenThroughput, "serve", lv, "rate")
			lat, _ := src.Stat(acceptance.MetricTTFT, "serve", lv, "p99")
			found = found || (tp == x && lat == y)
		}
		require.True(t, found, "point (%v, %v) of %s is a level of its run", x, y, htmltest.Attr(p, "data-series"))
	}

	// fio: four percentiles of the read job, the run's and the baseline's.
	fioBars := htmltest.All(figures["fig-fio"], func(n *html.Node) bool { return htmltest.Attr(n, "class") == "bar" })
	require.Len(t, fioBars, 8)
	want, _ := cand.Stat(acceptance.MetricReadCLat, "kv-read", "", "p99.9")
	require.True(t, slicesContainsValue(fioBars, "kv-read read, run #42", "p99.9", want))

	// Tables: the baseline's figures beside the run's.
	crit := htmltest.All(doc, func(n *html.Node) bool { return htmltest.Attr(n, "id") == "report-criteria" })
	require.Len(t, crit, 1)
	cells := htmltest.All(crit[0], func(n *html.Node) bool { return n.Data == "td" && htmltest.Attr(n, "class") == "num" })
	require.Len(t, cells, 2)
	bp99, _ := base.Stat(acceptance.MetricTTFT, "serve", "c=8", "p99")
	require.Equal(t, Num(p99)+" ms", htmltest.Text(cells[0]))
	require.Equal(t, Num(bp99)+" ms", htmltest.Text(cells[1]))
	head := htmltest.All(crit[0], func(n *html.Node) bool { return n.Data == "th" })
	require.Equal(t, "Baseline #41", htmltest.Text(head[3]))
	// Every repetition pooled comes first: the figures the gates judge,
	// the run's then the baseline's, from the chart data's summaries.
	pooled := htmltest.All(doc, func(n *html.Node) bool { return htmltest.Attr(n, "id") == "percentiles-pooled" })
	require.Len(t, pooled, 1)
	require.Less(t, strings.Index(page, `id="percentiles-pooled"`), strings.Index(page, `id="report-measurements"`), "pooled before each repetition's")
	var ttftRows [][]string
	for _, tr := range htmltest.All(pooled[0], func(n *html.Node) bool { return n.Data == "tr" && n.Parent != nil && n.Parent.Data == "tbody" }) {
		var cells []string
		for _, td := range htmltest.All(tr, func(n *html.Node) bool { return n.Data == "td" }) {
			cells = append(cells, htmltest.Text(td))
		}
		if strings.HasPrefix(cells[1], "serve c=8") && len(ttftRows) < 2 && (len(ttftRows) == 1 || strings.HasPrefix(cells[0], "Time to first token")) {
			ttftRows = append(ttftRows, cells)
		}
	}
	require.Len(t, ttftRows, 2, "TTFT at c=8: the run's row, then the baseline's")
	require.Equal(t, []string{"this run", "baseline #41"}, []string{ttftRows[0][2], ttftRows[1][2]})
	require.Equal(t, Num(p99), ttftRows[0][8], "the run's pooled p99 (columns: reps, n, p50, p90, p95, p99)")
	require.Equal(t, Num(bp99), ttftRows[1][8], "the baseline's pooled p99")
	meas := htmltest.All(doc, func(n *html.Node) bool { return htmltest.Attr(n, "id") == "report-measurements" })
	require.Len(t, meas, 1)
	rows := htmltest.All(meas[0], func(n *html.Node) bool { return n.Data == "tr" && n.Parent != nil && n.Parent.Data == "tbody" })
	require.Len(t, rows, 2*len(candMs))
	for i := 0; i < len(rows); i += 2 {
		require.NotContains(t, htmltest.Attr(rows[i], "class"), "baseline")
		require.Equal(t, "baseline", htmltest.Attr(rows[i+1], "class"), "row %d: the baseline's right after the run's", i+1)
		run, bl := htmltest.All(rows[i], func(n *html.Node) bool { return n.Data == "td" }), htmltest.All(rows[i+1], func(n *html.Node) bool { return n.Data == "td" })
		require.Equal(t, htmltest.Text(run[0]), htmltest.Text(bl[0]), "the same metric")
		require.Equal(t, htmltest.Text(run[1]), htmltest.Text(bl[1]), "the same step")
		require.Equal(t, "baseline #41", htmltest.Text(bl[2]))
	}
}

func slicesContainsValue(bars []*html.Node, series, group string, want float64) bool {
	for _, b := range bars {
		v, _ := strconv.ParseFloat(htmltest.Attr(b, "data-value"), 64)
		if htmltest.Attr(b, "data-series") == series && htmltest.Attr(b, "data-group") == group && v == want {
			return true
		}
	}
	return false
}

// A relative criterion's limit is drawn where the baseline has the
// statistic, at the baseline's figure changed by the allowed share, and a
// caption speaks of red dashed lines only on a chart that has some.
func TestReportChartsDrawRelativeLimitsAndSayWhenThereAreNone(t *testing.T) {
	t.Parallel()
	sr := newSampleRuns()
	baselineID, candMs, baseMs, cand, base := sr.baselineID, sr.candMs, sr.baseMs, sr.cand, sr.base
	render := func(limits []report.Limit) map[string]*html.Node {
		var out bytes.Buffer
		require.NoError(t, RenderReport(context.Background(), &out, report.Contents{
			Run: store.Run{ID: 42, BaselineRunID: &baselineID}, Program: "P", Vendor: "V", Customer: "C",
			Measurements: rowsOf(t, candMs), Charts: &cand, Limits: limits,
			Baseline: &report.BaselineContents{RunID: baselineID, Measurements: rowsOf(t, baseMs), Charts: &base},
		}))
		figures := map[string]*html.Node{}
		for _, f := range htmltest.All(htmltest.Parse(t, out.String()), func(n *html.Node) bool { return n.Data == "figure" }) {
			figures[htmltest.Attr(f, "id")] = f
		}
		return figures
	}
	isLimit := func(n *html.Node) bool { return htmltest.Attr(n, "class") == "limit" }

	relative := report.Limit{Metric: acceptance.MetricTTFT, Statistic: "p99", Comparator: acceptance.LessOrEqual, Value: -20, Relative: true,
		Label: "p99 Time to first token ≤ -20 % against the baseline"}
	figures := render([]report.Limit{relative})
	bp99, ok := base.Stat(acceptance.MetricTTFT, "serve", "c=8", "p99")
	require.True(t, ok)
	lines := htmltest.All(figures["fig-pct-1-0"], isLimit)
	require.Len(t, lines, 1)
	got, err := strconv.ParseFloat(htmltest.Attr(lines[0], "data-value"), 64)
	require.NoError(t, err)
	require.InDelta(t, bp99*0.8, got, 1e-9, "the baseline's p99 less 20 %")
	require.Contains(t, htmltest.Text(figures["fig-pct-1-0"]), "Red dashed lines are the gate set's limits on TTFT")
	require.Len(t, htmltest.All(figures["fig-knee-1"], isLimit), 0, "a relative limit has no one value across a sweep")

	figures = render(nil)
	for _, id := range []string{"fig-cdf-1", "fig-pct-1-0", "fig-pct-1-1", "fig-fio"} {
		require.Empty(t, htmltest.All(figures[id], isLimit), id)
		require.NotContains(t, htmltest.Text(figures[id]), "Red dashed lines", "%s: no line, no word of one", id)
		require.Contains(t, htmltest.Text(figures[id]), "The gate set sets no upper limit on", id)
	}
}

// A baseline without the run's worst level: the report's distribution
// figure says it has no baseline figures there, rather than drawing the
// run alone without a word; its percentile bars say n/a.
func TestReportSaysWhenTheBaselineHasNoFigures(t *testing.T) {
	t.Parallel()
	sr := newSampleRuns()
	var baseMs []acceptance.Measurement
	for _, m := range sr.baseMs {
		if m.Level != "c=8" {
			baseMs = append(baseMs, m)
		}
	}
	base := chartdata.Compute(chartdata.Input{Measurements: baseMs})
	var out bytes.Buffer
	require.NoError(t, RenderReport(context.Background(), &out, report.Contents{
		Run: store.Run{ID: 42, BaselineRunID: &sr.baselineID}, Program: "P", Vendor: "V", Customer: "C",
		Measurements: rowsOf(t, sr.candMs), Charts: &sr.cand,
		Baseline: &report.BaselineContents{RunID: sr.baselineID, Measurements: rowsOf(t, baseMs), Charts: &base},
	}))
	doc := htmltest.Parse(t, out.String())
	cdf := htmltest.ByID(doc, "fig-cdf-1")
	require.NotNil(t, cdf)
	require.Contains(t, htmltest.Text(cdf), "step serve at c=8", "the run's worst level")
	require.Contains(t, htmltest.Text(cdf), "no baseline figures for step serve at c=8")
	require.Empty(t, htmltest.All(cdf, func(n *html.Node) bool { return htmltest.Attr(n, "data-series") == "TTFT baseline #41" }))
	missing := htmltest.All(htmltest.ByID(doc, "fig-pct-1-0"), func(n *html.Node) bool { return htmltest.Attr(n, "class") == "bar-missing" })
	require.NotEmpty(t, missing, "the baseline's bars say n/a")
}
