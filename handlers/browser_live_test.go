package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
	"github.com/accordlab/accord/web/browsertest"
)

// liveRun is a queued run of an inference profile judged by MLPerf's
// Llama-2-70B server gates (a stop-loss line at p99 TTFT 4000 ms), with
// the lease a worker would hold while it follows the probe.
type liveRun struct {
	pb    *programBundle
	run   int64
	host  int64
	lease store.Lease
	seq   int64
	t0    time.Time // the probe's clock: the first window begins here
}

func (pb *programBundle) liveRun(t *testing.T) *liveRun {
	t.Helper()
	ctx := context.Background()
	_, nv, errs, err := prepareSpec(profileOps, kvTemplate(t))
	require.NoError(t, err)
	require.Empty(t, errs)
	_, pv, err := pb.store.CreateSpec(ctx, store.KindProfile, pb.programID, nv)
	require.NoError(t, err)
	gt, _ := acceptance.LookupGateSetTemplate("mlperf-llama2-70b-server")
	_, gnv, errs, err := prepareSpec(gateSetOps, gt.Spec)
	require.NoError(t, err)
	require.Empty(t, errs)
	_, gv, err := pb.store.CreateSpec(ctx, store.KindGateSet, pb.programID, gnv)
	require.NoError(t, err)
	lr := &liveRun{pb: pb, t0: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	lr.host, err = pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "gpu-node-07", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	lr.run, err = pb.store.CreateRun(ctx, store.NewRun{ProgramID: pb.programID, ProfileVersionID: pv.ID, HostID: lr.host, GateSetVersionID: &gv.ID})
	require.NoError(t, err)
	return lr
}

// window stores the probe's next interim window as the worker does
// (AppendFollowed, which wakes the pages): its end at t0 + 2 s × n on the
// probe's clock, whatever the time now.
func (lr *liveRun) window(t *testing.T, level string, p50, p99, requests, tokens float64) {
	t.Helper()
	lr.seq++
	in := wire.Interim{Step: "chat", Level: level, Repetition: 1, WindowSec: 2, Metrics: map[string]wire.InterimStats{
		acceptance.MetricTTFT:                  {N: 40, P50: p50, P95: p99 * 0.9, P99: p99, Mean: p50, Max: p99},
		acceptance.MetricRequestThroughput:     {N: 40, Rate: &requests},
		acceptance.MetricOutputTokenThroughput: {N: 40, Rate: &tokens},
	}}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	seq := lr.seq
	ev := store.RunEvent{Seq: &seq, At: lr.t0.Add(time.Duration(2*lr.seq) * time.Second), Type: wire.EventInterim, Level: "info", Data: data}
	require.NoError(t, lr.pb.store.AppendFollowed(context.Background(), lr.run, lr.lease, store.FollowUpdate{Events: []store.RunEvent{ev}, Offset: lr.seq * 100}))
}

// liveSeries reads a live chart's series off the page: name → points.
func liveSeries(br *browsertest.Browser, chart string) map[string][][2]float64 {
	raw := browsertest.Eval[string](br, fmt.Sprintf(`(function () {
		var el = document.querySelector('[data-live-chart="%s"]');
		var c = el && typeof echarts !== "undefined" && echarts.getInstanceByDom(el);
		if (!c) return "{}";
		var out = {};
		c.getOption().series.forEach(function (s) { out[s.name] = s.data; });
		return JSON.stringify(out);
	})()`, chart))
	out := map[string][][2]float64{}
	_ = json.Unmarshal([]byte(raw), &out)
	return out
}

// A running run's page follows it without a reload: the state badge (it
// said "queued" until a reload), the live TTFT and throughput charts of
// each interim window as it is stored, per sweep level, with the gate
// set's stop-loss line, the table of windows; then the verdict (one
// reload, to show it) and the signed report's buttons once signed.
func TestBrowserRunPageFollowsTheRunLive(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	lr := pb.liveRun(t)
	ctx := context.Background()
	br := browsertest.New(t)
	signInBrowser(br, pb.ts.URL, "view@customer.example")
	br.Do(chromedp.Navigate(pb.ts.URL+pb.url(fmt.Sprintf("/runs/%d", lr.run))), chromedp.WaitVisible(chromedp.ID("run-state")))
	require.Equal(t, "queued", br.Text("#run-state"))
	require.False(t, browsertest.Eval[bool](br, `!document.getElementById("live-numbers").hidden`), "no window yet: the live numbers are hidden")
	// A mark that a reload would wipe.
	browsertest.Eval[int](br, `window.accordMark = 1`)
	unreloaded := `window.accordMark === 1 ? "" : "the page reloaded"`

	// A worker takes the run: the badge follows.
	require.NoError(t, pb.store.SetRunState(ctx, lr.run, store.RunPreparing, "uploading the probe"))
	var err error
	lr.lease, _, err = pb.store.AcquireLease(ctx, lr.host, lr.run, "test-worker", time.Minute)
	require.NoError(t, err)
	require.NoError(t, pb.store.SetRunState(ctx, lr.run, store.RunRunning, "measuring"))
	br.WaitUntil(`document.getElementById("run-state").textContent.trim() === "running" ? "" : document.getElementById("run-state").textContent`, 20*time.Second, "the badge to say running")
	br.WaitUntil(unreloaded, time.Second, "no reload")

	// The windows come, one at a time: each is drawn when it is stored.
	lr.window(t, "c=1", 120, 210, 9.5, 152)
	br.WaitUntil(`!document.getElementById("live-numbers").hidden ? "" : "hidden"`, 20*time.Second, "the live numbers to show")
	br.WaitUntil(`document.querySelector('[data-live-chart="ttft"]').dataset.liveWindows === "1" ? "" : "not drawn"`, 20*time.Second, "the first window drawn")
	lr.window(t, "c=1", 130, 240, 9.4, 150)
	lr.window(t, "c=8", 380, 1900, 38, 610)
	br.WaitUntil(`document.querySelector('[data-live-chart="ttft"]').dataset.liveWindows === "3" ? "" : "not yet"`, 20*time.Second, "three windows drawn")
	br.WaitUntil(unreloaded, time.Second, "no reload")

	// The charts hold the windows' own numbers, placed by the probe's clock
	// (ends at 2, 4 and 6 s after the first window began at 0).
	ttft := liveSeries(br, "ttft")
	require.Equal(t, [][2]float64{{2, 210}, {4, 240}}, ttft["p99 · c=1"])
	require.Equal(t, [][2]float64{{2, 120}, {4, 130}}, ttft["p50 · c=1"])
	require.Equal(t, [][2]float64{{6, 1900}}, ttft["p99 · c=8"])
	require.Equal(t, [][2]float64{{2, 4000}, {4, 4000}, {6, 4000}}, ttft["stop-loss ttft-p99 (p99 Time to first token ≤)"], "the gate set's stop-loss line")
	throughput := liveSeries(br, "throughput")
	require.Equal(t, [][2]float64{{6, 38}}, throughput["requests/s · c=8"])
	require.Equal(t, [][2]float64{{2, 152}, {4, 150}}, throughput["tokens/s · c=1"])
	require.Equal(t, 3, browsertest.Eval[int](br, `document.querySelectorAll("#live-windows tbody tr").length`))
	require.Equal(t, "1900", browsertest.Eval[string](br, `document.querySelector("#live-windows tbody tr td:nth-child(6)").textContent`), "newest first")
	time.Sleep(300 * time.Millisecond) // late console events
	br.Screenshot("run-page-live")

	// The run is judged: one reload shows the verdict; the report is not
	// signed yet, so no button.
	require.NoError(t, pb.store.SetRunState(ctx, lr.run, store.RunEvaluating, "judging"))
	require.NoError(t, pb.store.SetRunVerdict(ctx, lr.run, "PASS"))
	require.NoError(t, pb.store.SetRunState(ctx, lr.run, store.RunDone, "verdict: PASS"))
	br.WaitUntil(`window.accordMark === undefined && document.readyState === "complete" && document.getElementById("run-state") ? "" : "not reloaded"`, 20*time.Second, "the reload that shows the verdict")
	require.Equal(t, "done", br.Text("#run-state"))
	require.Zero(t, browsertest.Eval[int](br, `document.querySelectorAll("#download-report").length`))

	browsertest.Eval[int](br, `window.accordMark = 2`)

	// Signed: the buttons appear without another reload.
	for path, body := range map[string]string{"events.jsonl": `{"seq":1}` + "\n", "facts.json": `{"schema_version":1}`} {
		addRunFile(t, pb.store, lr.run, path, body)
	}
	_, err = report.Signer{Store: pb.store, Keyring: pb.keyring, Render: web.RenderReport}.Sign(ctx, lr.run)
	require.NoError(t, err)
	br.WaitUntil(`document.getElementById("download-report") ? "" : "no button"`, 20*time.Second, "the signed report's button")
	require.Equal(t, 2, browsertest.Eval[int](br, `window.accordMark`), "no reload for the report")
	require.Equal(t, pb.url(fmt.Sprintf("/runs/%d/report.tar.gz", lr.run)), browsertest.Eval[string](br, `document.getElementById("download-report").getAttribute("href")`))
	time.Sleep(300 * time.Millisecond)
	br.Screenshot("run-page-signed")

	// The ended run's page keeps its interim windows, as they were.
	br.Do(chromedp.Navigate(pb.ts.URL+pb.url(fmt.Sprintf("/runs/%d", lr.run))), chromedp.WaitVisible(chromedp.ID("live-numbers")))
	require.Equal(t, "Interim windows", br.Text("#live-numbers h3"))
	br.WaitUntil(`(function () { var el = document.querySelector('[data-live-chart="ttft"]'); return el && echarts.getInstanceByDom(el) ? "" : "not drawn"; })()`, 20*time.Second, "the windows drawn")
	require.Equal(t, ttft, liveSeries(br, "ttft"), "the same windows as live")
	require.Equal(t, 3, browsertest.Eval[int](br, `document.querySelectorAll("#live-windows tbody tr").length`))
	require.Empty(t, br.Problems())
	require.Empty(t, br.ForeignRequests(pb.ts.URL))
}
