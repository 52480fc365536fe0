package handlers

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/web/browsertest"
)

// paintedPixels counts, per chart, the canvas pixels ECharts painted
// (non-transparent; every 4th pixel sampled).
const paintedPixels = `(function () {
	var out = {};
	document.querySelectorAll("[data-chart]").forEach(function (el) {
		var c = el.querySelector("canvas");
		if (!c || !c.width || !c.height) { out[el.dataset.chart] = 0; return; }
		var d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
		var n = 0;
		for (var i = 3; i < d.length; i += 16) { if (d[i] !== 0) n++; }
		out[el.dataset.chart] = n;
	});
	return out;
})()`

// waitForCharts waits until ECharts finished drawing every chart of the
// page, then checks each canvas has something painted on it.
func waitForCharts(t *testing.T, br *browsertest.Browser, min int) {
	t.Helper()
	require.Eventually(t, func() bool {
		total := browsertest.Eval[int](br, `document.querySelectorAll("[data-chart]").length`)
		drawn := browsertest.Eval[int](br, `document.querySelectorAll("[data-chart][data-chart-drawn]").length`)
		return total >= min && drawn == total
	}, 60*time.Second, 100*time.Millisecond, "every chart is drawn (problems: %v)", br.Problems())
	painted := browsertest.Eval[map[string]int](br, paintedPixels)
	require.GreaterOrEqual(t, len(painted), min)
	for id, n := range painted {
		require.Greater(t, n, 500, "chart %s has a painted canvas", id)
	}
}

// An engineer opens a finished run: every chart is drawn by ECharts under
// the strict CSP, from this origin only; then compares it with its
// baseline and a third run.
func TestBrowserRunAndComparePagesDrawTheirCharts(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	base := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, label: "local NVMe", recorded: "local-1"})
	cand := cb.labRun(t, labRunOpts{profileVersion: cb.slowVersion, gates: true, baseline: &base, label: "NVMe-oF", recorded: "fabric-1"})
	third := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, label: "local NVMe, again", recorded: "local-2"})

	br := browsertest.New(t)
	signInBrowser(br, cb.ts.URL, "view@customer.example")
	br.Do(chromedp.Navigate(cb.ts.URL+cb.url(fmt.Sprintf("/runs/%d", cand))), chromedp.WaitVisible(chromedp.ID("verdict")))
	waitForCharts(t, br, 9)
	require.NotEmpty(t, br.Text("#overall-verdict"))
	// The percentile bars are the tall ones.
	require.Equal(t, 480, browsertest.Eval[int](br, `document.querySelector('[data-chart="chart-pct0-0"]').clientHeight`))
	time.Sleep(300 * time.Millisecond) // late console events
	br.Screenshot("charts-run-page")
	require.Empty(t, br.Problems())

	// The Compare button opens the run against its baseline; a third run
	// is added with the form.
	br.ClickAndWait(`a[href*="/compare?run="]`)
	br.Do(chromedp.WaitVisible(chromedp.ID("compare-table")))
	waitForCharts(t, br, 2)
	br.Do(chromedp.Navigate(cb.ts.URL+cb.url(fmt.Sprintf("/compare?run=%d&run=%d&run=%d", cand, base, third))), chromedp.WaitVisible(chromedp.ID("compare-table")))
	waitForCharts(t, br, 2)
	require.Equal(t, 4, browsertest.Eval[int](br, `document.querySelectorAll("#compare-table thead th").length`))
	time.Sleep(300 * time.Millisecond)
	br.Screenshot("charts-compare-page")

	br.Do(chromedp.Navigate(cb.ts.URL+cb.url(fmt.Sprintf("/trend?profile=%d", cb.profileID))), chromedp.WaitVisible(chromedp.ID("trend-form")))
	waitForCharts(t, br, 1)
	time.Sleep(300 * time.Millisecond)
	br.Screenshot("charts-trend-page")
	require.Empty(t, br.Problems())
	require.Empty(t, br.ForeignRequests(cb.ts.URL))
}
