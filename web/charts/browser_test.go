package charts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/a-h/templ"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/web/browsertest"
)

// The page's policy (handlers/middleware.go): no inline script, no eval,
// no inline style.
const testCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

type pageChart struct {
	id     string
	option json.RawMessage
}

// chartPage writes a page as web.Chart does: a div per chart and its
// option in a JSON script element (templ.JSONScript).
func chartPage(t *testing.T, list []pageChart) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>charts</title><link rel="icon" href="data:,">` +
		`<link rel="stylesheet" href="/static/css/app.css">` +
		`<script src="/static/vendor/echarts.min.js" defer></script>` +
		`<script src="/static/js/charts.js" defer></script></head><body><main>`)
	for _, c := range list {
		fmt.Fprintf(&b, `<div class="panel chart-block"><h3>%s</h3><div class="chart" data-chart="%s"></div>`, html.EscapeString(c.id), html.EscapeString(c.id))
		require.NoError(t, templ.JSONScript(c.id, c.option).Render(context.Background(), &b))
		b.WriteString(`</div>`)
	}
	b.WriteString(`</main></body></html>`)
	return b.Bytes()
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// allCharts builds one of each chart from the test data, at full size
// (a million requests over the run).
func allCharts(t *testing.T) []pageChart {
	t.Helper()
	var out []pageChart
	add := func(id string) func(json.RawMessage, Table, error) {
		return func(raw json.RawMessage, _ Table, err error) {
			t.Helper()
			require.NoError(t, err, id)
			out = append(out, pageChart{id, raw})
		}
	}
	cand := lognormal(21, 200_000, 420, 0.5, true)
	base := lognormal(22, 200_000, 380, 0.45, true)
	add("chart-cdf")(LatencyCDF(CDFInput{
		Unit: "ms",
		Series: []CDFSeries{
			{Name: "TTFT candidate", Role: RoleCandidate, Values: cand},
			{Name: "TTFT baseline", Role: RoleBaseline, Values: base},
			{Name: "E2E candidate", Role: RoleCandidate, LineType: "dashed", Values: lognormal(23, 50_000, 4200, 0.4, false)},
			{Name: "E2E baseline", Role: RoleBaseline, LineType: "dashed", Buckets: []Bucket{{1000, 5}, {2000, 400}, {4000, 3000}, {8000, 600}, {16000, 12}}},
		},
		Limits: []Limit{{Value: 2000, Label: "p99 TTFT limit 2000 ms"}, {Value: 20000, Label: "p99 E2E limit 20000 ms"}},
		Guides: []float64{50, 99, 99.9},
	}))
	var runs []CDFSeries
	for i := range 4 {
		runs = append(runs, CDFSeries{Name: fmt.Sprintf("run %d", 40+i), Values: lognormal(uint64(30+i), 20_000, 350+40*float64(i), 0.5, false)})
	}
	add("chart-compare")(CompareCDFs(CDFInput{Unit: "ms", Series: runs, Limits: []Limit{{Value: 2000, Label: "p99 limit 2000 ms"}}}))
	add("chart-percentiles")(PercentileBars(PercentileInput{Unit: "ms", Confidence: 0.95, Rows: []PercentileRow{
		{Label: "p50", Candidate: 420, Baseline: 380, RelDiff: 0.105, Lower: 0.08, Upper: 0.13},
		{Label: "p90", Candidate: 800, Baseline: 700, RelDiff: 0.143, Lower: 0.1, Upper: 0.19},
		{Label: "p99", Candidate: 1350, Baseline: 1100, RelDiff: 0.227, Lower: 0.12, Upper: 0.35},
		{Label: "p99.9", Candidate: 1900, Baseline: 1400, RelDiff: 0.357, Lower: math.NaN(), Upper: math.NaN()},
	}}))
	add("chart-over-run")(LatencyOverRun(OverRunInput{Unit: "ms", Series: []OverRunSeries{
		{Name: "candidate", Role: RoleCandidate, Points: requestsOverRun(24, 1_000_000, 1800, 700_000, 9000)},
		{Name: "baseline", Role: RoleBaseline, Points: requestsOverRun(25, 300_000, 1800, -1, 0)},
	}, Limits: []Limit{{Value: 2000, Label: "p99 limit 2000 ms"}}}))
	measured, warmup := warmupRun()
	add("chart-over-run-warmup")(LatencyOverRun(OverRunInput{Unit: "ms", Window: 0.5, Series: []OverRunSeries{
		{Name: "TTFT", Role: RoleCandidate, Points: measured},
		{Name: "TTFT in warm-up (not measured)", Points: warmup},
	}}))
	nan := math.NaN()
	add("chart-percentiles-no-baseline")(PercentileBars(PercentileInput{Unit: "ms", CandidateName: "run #2", BaselineName: "baseline run #1",
		NoBaselineWhy: "baseline run #1 did not measure step chat at c=16", Rows: []PercentileRow{
			{Label: "p50", Candidate: 420, Baseline: nan, RelDiff: nan, Lower: nan, Upper: nan},
			{Label: "p99", Candidate: 1350, Baseline: nan, RelDiff: nan, Lower: nan, Upper: nan},
		}}))
	add("chart-telemetry")(OverTime(TimeSeriesInput{Series: []TimeSeries{
		{Name: "output tokens/s", Unit: "tok/s", Role: RoleCandidate, Points: telemetry(26, 100_000, 1800, 5000, 800)},
		{Name: "requests/s", Unit: "req/s", Points: telemetry(27, 1800, 1800, 20, 4)},
		{Name: "CPU", Unit: "%", Points: telemetry(28, 1800, 1800, 40, 10)},
		{Name: "NIC rx", Unit: "MB/s", Points: telemetry(29, 1800, 1800, 900, 200)},
	}}))
	// The run page's timeline: GPU utilisation, storage latency and TTFT
	// on one time axis, three units on three y axes.
	add("chart-timeline")(OverTime(TimeSeriesInput{Series: []TimeSeries{
		{Name: "GPU", Unit: "%", Points: telemetry(30, 1800, 1800, 60, 15)},
		{Name: "Namespace read latency", Unit: "µs", Points: telemetry(31, 1800, 1800, 90, 30)},
		{Name: "ttft rolling p99, step chat", Unit: "ms", Points: telemetry(32, 3000, 1800, 900, 200)},
	}}))
	add("chart-fabric")(OverTime(TimeSeriesInput{Series: []TimeSeries{
		{Name: "RDMA retransmits", Unit: "/s", Points: telemetry(33, 1800, 1800, 3, 2)},
		{Name: "CNPs sent", Unit: "/s", Points: telemetry(34, 1800, 1800, 40, 10)},
	}}))
	add("chart-knee")(Knee(KneeInput{ThroughputName: "Output tokens/s", ThroughputUnit: "tok/s", LatencyName: "p99 TTFT", LatencyUnit: "ms",
		Series: []KneeSeries{{Name: "candidate", Role: RoleCandidate, Points: sweep(1.2)}, {Name: "baseline", Role: RoleBaseline, Points: sweep(1)}},
		SLO:    2000, SLOLabel: "p99 TTFT SLO 2000 ms"}))
	fio := FioInput{Jobs: []FioJob{
		{Job: "kv-lookup", Direction: "read", Bandwidth: 1.5 * mib * 1024, IOPS: 393_216, Percentiles: []FioPercentile{{"p50", 82}, {"p99", 310}, {"p99.9", 5100}}},
		{Job: "checkpoint", Direction: "write", Bandwidth: 800 * mib, IOPS: 800, Percentiles: []FioPercentile{{"p50", 1200}, {"p99", 4000}}},
	}}
	add("chart-fio-latency")(FioLatency(fio))
	add("chart-fio-bandwidth")(FioBandwidth(fio))
	add("chart-trend")(Trend(TrendInput{Metric: "p99 TTFT", Unit: "ms",
		Series: []TrendSeries{trendSeries("gpu-a <lab>", 8, 1500), trendSeries("gpu-b", 6, 1200)},
		Limits: []Limit{{Value: 2000, Label: "p99 limit 2000 ms"}}}))
	return out
}

// Every chart is drawn by ECharts in Chromium, under the pages' CSP, with
// no console error, exception or policy violation.
func TestBrowserDrawsEveryChart(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	echartsJS := filepath.Join(root, "static", "vendor", "echarts.min.js")
	if _, err := os.Stat(echartsJS); err != nil {
		t.Fatalf("%s is missing: run `make assets` first (%v)", echartsJS, err)
	}
	list := allCharts(t)
	page := chartPage(t, list)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	})
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServer(http.Dir(filepath.Join(root, "static")))))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", testCSP)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	br := browsertest.New(t)
	br.Do(chromedp.Navigate(ts.URL + "/"))
	require.Eventually(t, func() bool {
		return browsertest.Eval[int](br, `document.querySelectorAll("[data-chart-drawn]").length`) == len(list)
	}, 60*time.Second, 100*time.Millisecond, "every chart finishes drawing (problems: %v)", br.Problems())
	time.Sleep(300 * time.Millisecond) // late console events
	require.Empty(t, br.Problems())
	require.Empty(t, br.ForeignRequests(ts.URL))

	// ECharts read the options as built: series count, axis types.
	type drawn struct {
		Series int    `json:"series"`
		XType  string `json:"xType"`
		Canvas bool   `json:"canvas"`
	}
	for _, c := range list {
		var want option
		require.NoError(t, json.Unmarshal(c.option, &want))
		got := browsertest.Eval[drawn](br, fmt.Sprintf(`(function () {
			var el = document.querySelector('[data-chart=%q]');
			var o = echarts.getInstanceByDom(el).getOption();
			return {series: o.series.length, xType: o.xAxis[0].type, canvas: !!el.querySelector("canvas")};
		})()`, c.id))
		require.Equal(t, len(want.Series), got.Series, c.id)
		require.Equal(t, want.XAxis[0].Type, got.XType, c.id)
		require.True(t, got.Canvas, c.id)
	}
	require.Equal(t, "log", browsertest.Eval[string](br,
		`echarts.getInstanceByDom(document.querySelector('[data-chart="`+list[0].id+`"]')).getOption().xAxis[0].type`))

	// Tooltips show (every chart's second point) without errors. They
	// are rich text drawn on the canvas: the trend's fixed tooltip text
	// is found among the canvas' text elements.
	for _, c := range list {
		browsertest.Eval[bool](br, fmt.Sprintf(`(function () {
			var chart = echarts.getInstanceByDom(document.querySelector('[data-chart=%q]'));
			chart.dispatchAction({type: "showTip", seriesIndex: 0, dataIndex: 1});
			return true;
		})()`, c.id))
	}
	require.Eventually(t, func() bool {
		return browsertest.Eval[bool](br, `(function () {
			var zr = echarts.getInstanceByDom(document.querySelector('[data-chart="chart-trend"]')).getZr();
			return zr.storage.getDisplayList(true).some(function (el) {
				return el.style && typeof el.style.text === "string" && el.style.text.indexOf("gpu-a <lab> · run B") >= 0;
			});
		})()`)
	}, 5*time.Second, 100*time.Millisecond, "trend tooltip")
	// ECharts reads a break ([x, "-"]) as an empty value, which it does
	// not join: the warm-up line has two, one between each two bursts.
	require.Equal(t, 2, browsertest.Eval[int](br, `(function () {
		var chart = echarts.getInstanceByDom(document.querySelector('[data-chart="chart-over-run-warmup"]'));
		var data = chart.getModel().getSeriesByName("TTFT in warm-up (not measured) p99 per 0.5 s")[0].getData();
		var y = data.mapDimension("y"), n = 0;
		for (var i = 0; i < data.count(); i++) { if (isNaN(data.get(y, i))) n++; }
		return n;
	})()`))
	// The percentile chart without baseline figures says so in its panel.
	require.True(t, browsertest.Eval[bool](br, `(function () {
		var zr = echarts.getInstanceByDom(document.querySelector('[data-chart="chart-percentiles-no-baseline"]')).getZr();
		return zr.storage.getDisplayList(true).some(function (el) {
			return el.style && typeof el.style.text === "string" && el.style.text.indexOf("No baseline figures for this step and metric") >= 0;
		});
	})()`), "the empty panel's text is drawn")
	time.Sleep(200 * time.Millisecond)
	br.Screenshot("charts-all")
	require.Empty(t, br.Problems())
}
