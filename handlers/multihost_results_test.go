package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/service/ingest"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
	"github.com/accordlab/accord/web/browsertest"
	"github.com/accordlab/accord/web/htmltest"
)

// hostsEvents reads a run's live stream until it ends, and returns every
// "hosts" event on it (each host's state as the page's panel shows it).
func hostsEvents(t *testing.T, c *http.Client, streamURL string) <-chan [][]web.RunHostView {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, streamURL, nil)
	require.NoError(t, err)
	res, err := c.Do(req)
	require.NoError(t, err)
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	out := make(chan [][]web.RunHostView, 1)
	go func() {
		defer res.Body.Close()
		var seen [][]web.RunHostView
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok && event == "hosts" {
				var hosts []web.RunHostView
				if json.Unmarshal([]byte(d), &hosts) == nil {
					seen = append(seen, hosts)
				}
			}
		}
		out <- seen
	}()
	return out
}

// A multi-host run requested over HTTP runs on three sshd hosts. Its live
// stream sends every host's state ("hosts", what the page's hosts panel
// shows) until each has ended; its page then shows the hosts combined by
// default and, chosen by a server-rendered link, one host's own charts,
// with a table of every host's pooled figures beside the combined ones;
// the API's measurements are the combined ones, and with ?hosts=1 each
// host's too.
func TestMultiHostRunResultsByHost(t *testing.T) {
	t.Parallel()
	lab := setupMultiHostLab(t)
	ctx := context.Background()
	runID := lab.request(t, lab.sharedArrayProfile(t, 300*time.Millisecond))
	runPath := lab.url(fmt.Sprintf("/runs/%d", runID))
	stream := hostsEvents(t, lab.viewer, lab.ts.URL+runPath+"/events?after=0")
	run := lab.waitRun(t, runID, 3*time.Minute, "done", func(r store.Run) bool { return store.RunFinal(r.State) })
	require.Equal(t, store.RunDone, run.State, run.Reason)

	// The live stream said where every host stood, in the run's order,
	// until each had ended.
	var seen [][]web.RunHostView
	select {
	case seen = <-stream:
	case <-time.After(time.Minute):
		t.Fatal("the live stream did not end with the run")
	}
	require.NotEmpty(t, seen)
	last := seen[len(seen)-1]
	require.Len(t, last, 3)
	for i, want := range []struct{ name, role string }{{"lab-1", "readers"}, {"lab-2", "readers"}, {"lab-3", "writer"}} {
		require.Equal(t, want.name, last[i].Name)
		require.Equal(t, want.role, last[i].Role)
		require.Equal(t, i, last[i].Ordinal)
		require.Equal(t, store.RunHostEnded, last[i].State)
		require.Equal(t, 1.0, last[i].Fraction)
	}
	require.NotEqual(t, last, seen[0], "the stream followed the hosts' states as they changed")

	// The page: the hosts panel, and the combined view by default.
	res, body := lab.get(t, lab.viewer, runPath)
	require.Equal(t, http.StatusOK, res.StatusCode)
	page := htmltest.Parse(t, body)
	for i := range 3 {
		row := htmltest.ByID(page, fmt.Sprintf("run-host-%d", i))
		require.NotNil(t, row)
		require.Contains(t, htmltest.Text(row), store.RunHostEnded)
	}
	nav := htmltest.ByID(page, "host-view")
	require.NotNil(t, nav)
	var links []string
	for _, a := range htmltest.All(nav, func(n *html.Node) bool { return n.Data == "a" }) {
		links = append(links, htmltest.Text(a)+" → "+htmltest.Attr(a, "href")+" "+htmltest.Attr(a, "aria-current"))
	}
	require.Equal(t, []string{
		"All hosts combined → " + runPath + "#run-host-results page",
		"lab-1 (readers) → " + runPath + "?host=0#run-host-results ",
		"lab-2 (readers) → " + runPath + "?host=1#run-host-results ",
		"lab-3 (writer) → " + runPath + "?host=2#run-host-results ",
	}, links)
	require.Contains(t, htmltest.Text(htmltest.ByID(page, "host-view-note")), "the hosts combined")
	require.Equal(t, []string{"read", "write"}, fioJobs(t, body), "the combined charts hold every host's jobs")

	// The figures: each series of the hosts combined, then of each host
	// that ran it, as the stored chart data pool them; the readers' IOPS
	// add up to the combined.
	docs, err := lab.store.RunCharts(ctx, runID)
	require.NoError(t, err)
	combined := decodeCharts(t, docs, "")
	perHost := []chartdata.Aggregates{decodeCharts(t, docs, ingest.KeyHostCharts(0)), decodeCharts(t, docs, ingest.KeyHostCharts(1)), decodeCharts(t, docs, ingest.KeyHostCharts(2))}
	readIOPS, ok := combined.Stat(acceptance.MetricReadIOPS, "read", "", "rate")
	require.True(t, ok)
	r0, _ := perHost[0].Stat(acceptance.MetricReadIOPS, "read", "", "rate")
	r1, _ := perHost[1].Stat(acceptance.MetricReadIOPS, "read", "", "rate")
	require.InDelta(t, r0+r1, readIOPS, 1e-9*readIOPS)
	figures := tableRows(t, body, "host-figures")
	series := figureRows(figures, "Read IOPS")
	require.Len(t, series, 3, "combined, lab-1, lab-2: %v", figures)
	require.Equal(t, []string{"all hosts combined", "lab-1 readers", "lab-2 readers"}, []string{series[0][1], series[1][1], series[2][1]})
	for i, v := range []float64{readIOPS, r0, r1} {
		require.Equal(t, web.Num(v), series[i][len(series[i])-1])
	}
	clat := figureRows(figures, "Write completion latency")
	require.Len(t, clat, 2, "combined and lab-3: %v", figures)
	w, _ := perHost[2].Stats(acceptance.MetricWriteCLat, "write", "")
	require.Equal(t, []string{"lab-3 writer", "1", fmt.Sprint(w.N), web.Num(w.P50), web.Num(w.P99), web.Num(w.Mean)}, clat[1][1:])

	// One host's own view: its charts, its figures beside the combined.
	res, body = lab.get(t, lab.viewer, runPath+"?host=2")
	require.Equal(t, http.StatusOK, res.StatusCode)
	page = htmltest.Parse(t, body)
	require.Contains(t, htmltest.Text(htmltest.ByID(page, "host-view-note")), "host lab-3's own results (role writer)")
	current := htmltest.All(htmltest.ByID(page, "host-view"), func(n *html.Node) bool { return htmltest.Attr(n, "aria-current") == "page" })
	require.Len(t, current, 1)
	require.Equal(t, "lab-3 (writer)", htmltest.Text(current[0]))
	require.Equal(t, []string{"write"}, fioJobs(t, body), "the writer's charts hold its job alone")
	for _, r := range tableRows(t, body, "host-figures")[1:] {
		require.NotContains(t, r[1], "lab-1")
		require.NotContains(t, r[1], "lab-2")
	}
	// In a browser (its checks: no console error, nothing the CSP refused),
	// the host's charts draw.
	br := browsertest.New(t)
	signInBrowser(br, lab.ts.URL, "view@customer.example")
	br.Do(chromedp.Navigate(lab.ts.URL+runPath+"?host=2#run-host-results"), chromedp.WaitVisible(chromedp.ID("host-figures")))
	br.WaitUntil(`document.querySelectorAll("[data-chart] canvas").length > 0 ? "" : "no chart drawn"`, 20*time.Second, "the host's charts to draw")
	br.Screenshot("run-page-host-view")
	for _, bad := range []string{"?host=3", "?host=-1", "?host=x"} {
		res, _ = lab.get(t, lab.viewer, runPath+bad)
		require.Equal(t, http.StatusNotFound, res.StatusCode, bad)
	}

	// The API: the hosts combined; with ?hosts=1 every host's own too.
	apiPath := fmt.Sprintf("/api/v1/programs/%d/runs/%d/measurements", lab.programID, runID)
	measurements := func(query string) []map[string]any {
		code, out := lab.api(t, http.MethodGet, apiPath+query, "", nil)
		require.Equal(t, http.StatusOK, code)
		var rows []map[string]any
		raw, _ := json.Marshal(out["measurements"])
		require.NoError(t, json.Unmarshal(raw, &rows))
		return rows
	}
	plain := measurements("")
	stored, err := lab.store.RunMeasurementSummaries(ctx, runID)
	require.NoError(t, err)
	require.Len(t, plain, len(stored))
	for _, m := range plain {
		require.NotContains(t, m, "host", "the combined rows name no host")
	}
	withHosts := measurements("?hosts=1")
	own, err := lab.store.RunHostMeasurementSummaries(ctx, runID)
	require.NoError(t, err)
	require.Len(t, withHosts, len(stored)+len(own))
	byHost := map[string]int{}
	for _, m := range withHosts {
		h, _ := m["host"].(string)
		byHost[h]++
		if h == "lab-3" && m["metric"] == acceptance.MetricWriteIOPS {
			v, ok := perHost[2].Stat(acceptance.MetricWriteIOPS, "write", "", "rate")
			require.True(t, ok)
			require.InDelta(t, v, m["summary"].(map[string]any)["mean"].(float64), 1e-9*v, "the host's own row is its figure")
		}
	}
	require.Equal(t, len(stored), byHost[""])
	for _, h := range []string{"lab-1", "lab-2", "lab-3"} {
		require.Positive(t, byHost[h], h)
	}
	require.Equal(t, len(measurements("?hosts=0")), len(stored), "only hosts=1 adds them")
}

// decodeCharts reads the chart documents under prefix ("" for the run's
// own) as a one-host run's.
func decodeCharts(t *testing.T, docs map[string]json.RawMessage, prefix string) chartdata.Aggregates {
	t.Helper()
	mine := map[string]json.RawMessage{}
	for k, v := range docs {
		if prefix == "" && strings.HasPrefix(k, "host/") {
			continue
		}
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			mine[rest] = v
		}
	}
	a, ok, err := chartdata.Decode(mine)
	require.NoError(t, err)
	require.True(t, ok, "chart data under %q", prefix)
	return a
}

// figureRows are the rows of one series of the host figures table (its
// first row names it).
func figureRows(rows [][]string, series string) [][]string {
	var out [][]string
	in := false
	for _, r := range rows[1:] {
		if r[0] != "" {
			in = strings.HasPrefix(r[0], series)
		}
		if in {
			out = append(out, r)
		}
	}
	return out
}

// fioJobs are the jobs of the page's fio bandwidth chart.
func fioJobs(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	for _, r := range blockTable(t, body, "chart-fio-bandwidth")[1:] {
		out = append(out, r[0])
	}
	return out
}

// A cancel through the page's cancel route stops a multi-host run on
// every host: the run ends cancelled, each host's stop confirmed, nothing
// of the run left anywhere, every host free again.
func TestMultiHostCancelThroughTheCancelRoute(t *testing.T) {
	t.Parallel()
	lab := setupMultiHostLab(t)
	ctx := context.Background()
	runID := lab.request(t, lab.sharedArrayProfile(t, time.Minute))
	lab.waitRun(t, runID, 2*time.Minute, "running", func(r store.Run) bool { return r.State == store.RunRunning })
	var dirs []string
	for _, h := range lab.hosts {
		dir := lab.hostDir(runID, h)
		dirs = append(dirs, dir)
		require.Eventually(t, func() bool { return len(sshtest.Processes(t, dir, " probe run ")) > 0 }, time.Minute, 50*time.Millisecond, "the probe runs in %s", dir)
	}
	res := lab.postForm(t, lab.engineer, lab.url(fmt.Sprintf("/runs/%d/cancel", runID)), url.Values{})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	run := lab.waitRun(t, runID, 2*time.Minute, "cancelled", func(r store.Run) bool { return store.RunFinal(r.State) })
	require.Equal(t, store.RunCancelled, run.State, run.Reason)
	require.Equal(t, 3, strings.Count(run.Reason, "no process of the run is left"), run.Reason)
	for _, dir := range dirs {
		require.Eventually(t, func() bool { return len(sshtest.Processes(t, dir)) == 0 }, 15*time.Second, 50*time.Millisecond,
			"nothing of the run is left in %s: %v", dir, sshtest.Processes(t, dir))
	}
	hosts, err := lab.store.RunHosts(ctx, runID)
	require.NoError(t, err)
	for _, h := range hosts {
		require.NotNil(t, h.ProbeEndedAt, "host %s's probe is known to have ended", h.HostName)
	}
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, lab.pool.QueryRow(ctx, `SELECT count(*) FROM host_leases`).Scan(&n))
		return n == 0
	}, 15*time.Second, 50*time.Millisecond, "every host is free")
	require.True(t, strings.HasPrefix(run.Reason, "cancelled by eng@vendor.example"), "the cancel says who asked: %s", run.Reason)
}
