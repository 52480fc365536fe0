package web

import (
	"bytes"
	"context"
	"strconv"
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

// reuseSweep is a run of a prefix-reuse sweep: at each share the server
// measured a hit ratio near it, and TTFT falls with it (scale makes the
// baseline slower).
func reuseSweep(seed uint64, scale float64) []acceptance.Measurement {
	var ms []acceptance.Measurement
	for i, share := range []float64{0, 0.5, 0.9} {
		lv := acceptance.ReuseLevel(share)
		ms = append(ms,
			acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: "reuse", Level: lv, Repetition: 1,
				Values: chartdatatest.Lognormal(seed+uint64(i), 300, 200*scale*(1-share*0.8), 0.3, false)},
			acceptance.Measurement{Metric: acceptance.MetricCacheHitRatio, Step: "reuse", Level: lv, Repetition: 1, Values: []float64{share * 0.95}})
	}
	return ms
}

// A reuse sweep's report figure draws TTFT p99 and p50 at each level's
// measured hit ratio, the run's and the baseline's, with the gate's p99
// limit; no knee is drawn for it.
func TestReportDrawsTTFTAgainstTheHitRatio(t *testing.T) {
	t.Parallel()
	baselineID := int64(7)
	candMs, baseMs := reuseSweep(1, 1), reuseSweep(50, 1.4)
	cand := chartdata.Compute(chartdata.Input{Measurements: candMs, BaselineRunID: &baselineID, Baseline: baseMs})
	base := chartdata.Compute(chartdata.Input{Measurements: baseMs})
	limit := report.Limit{Metric: acceptance.MetricTTFT, Statistic: "p99", Comparator: acceptance.LessOrEqual, Value: 400, Label: "p99 TTFT ≤ 400 ms"}
	var out bytes.Buffer
	require.NoError(t, RenderReport(context.Background(), &out, report.Contents{
		Run: store.Run{ID: 8, BaselineRunID: &baselineID}, Program: "P", Vendor: "V", Customer: "C",
		Measurements: rowsOf(t, candMs), Charts: &cand, Limits: []report.Limit{limit},
		Baseline: &report.BaselineContents{RunID: baselineID, Measurements: rowsOf(t, baseMs), Charts: &base},
	}))
	doc := htmltest.Parse(t, out.String())
	figures := map[string]*html.Node{}
	for _, f := range htmltest.All(doc, func(n *html.Node) bool { return n.Data == "figure" }) {
		figures[htmltest.Attr(f, "id")] = f
	}
	require.NotContains(t, figures, "fig-knee-0", "a reuse sweep is not a load sweep")
	fig := figures["fig-hitratio-0"]
	require.NotNil(t, fig)
	require.Contains(t, htmltest.Text(fig), "prefix cache hit ratio the inference server's own counters measured")
	points := htmltest.All(fig, func(n *html.Node) bool { return htmltest.Attr(n, "class") == "point" })
	require.Len(t, points, 12, "three levels, p99 and p50, run and baseline")
	for _, p := range points {
		src, stat := &cand, "p99"
		series := htmltest.Attr(p, "data-series")
		if series == "p99 TTFT baseline #7" || series == "p50 TTFT baseline #7" {
			src = &base
		}
		if series == "p50 TTFT run #8" || series == "p50 TTFT baseline #7" {
			stat = "p50"
		}
		x, _ := strconv.ParseFloat(htmltest.Attr(p, "data-x"), 64)
		y, _ := strconv.ParseFloat(htmltest.Attr(p, "data-y"), 64)
		found := false
		for _, share := range []float64{0, 0.5, 0.9} {
			lv := acceptance.ReuseLevel(share)
			ratio, _ := src.Stat(acceptance.MetricCacheHitRatio, "reuse", lv, "rate")
			ttft, _ := src.Stat(acceptance.MetricTTFT, "reuse", lv, stat)
			found = found || (ratio == x && ttft == y)
		}
		require.True(t, found, "point (%v, %v) of %s is a level's measured ratio and %s TTFT", x, y, series, stat)
	}
	limits := htmltest.All(fig, func(n *html.Node) bool { return htmltest.Attr(n, "class") == "limit" })
	require.Len(t, limits, 1)
	require.Equal(t, "400", htmltest.Attr(limits[0], "data-value"))
}
