package handlers

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/web/browsertest"
)

// The home page renders in a real browser with htmx and ECharts from our
// own origin, no console error, no CSP violation, and no request elsewhere.
func TestBrowserSmokeHomePage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := browsertest.New(t)
	br.Do(chromedp.Navigate(b.ts.URL+"/"), chromedp.WaitVisible(chromedp.CSS("header.topbar")))
	require.Equal(t, "Accord", br.Text("a.brand"))
	require.Eventually(t, func() bool {
		return browsertest.Eval[bool](br, `typeof htmx === "object" && typeof echarts === "object"`)
	}, 10*time.Second, 100*time.Millisecond, "htmx and ECharts load")
	time.Sleep(300 * time.Millisecond) // let late console events arrive
	require.Empty(t, br.Problems())
	require.Empty(t, br.ForeignRequests(b.ts.URL))
	var sawHTMX, sawECharts bool
	for _, r := range br.Requests() {
		sawHTMX = sawHTMX || strings.HasPrefix(r, b.ts.URL+"/static/vendor/htmx.min.")
		sawECharts = sawECharts || strings.HasPrefix(r, b.ts.URL+"/static/vendor/echarts.min.")
	}
	require.True(t, sawHTMX && sawECharts, "both libraries came from our origin: %v", br.Requests())
	br.Screenshot("home")
}
