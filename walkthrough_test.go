package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/accordlab/accord/internal/demo"
	"github.com/accordlab/accord/internal/freeport"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/store/storetest"
	"github.com/accordlab/accord/web/browsertest"
)

// walkthrough is a running Accord in dev mode with its demo lab, on a
// fresh database.
type walkthrough struct {
	base    string
	pool    *pgxpool.Pool
	dataDir string
	cfg     Config
	user    string // the demo lab's SSH user
}

func startWalkthrough(t *testing.T) *walkthrough {
	t.Helper()
	dbURL := storetest.NewDatabase(t)
	probeDir := t.TempDir()
	bin, err := os.ReadFile(sshtest.BuildAccord(t))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(probeDir, "accord-linux-amd64"), bin, 0o755))
	dataDir := t.TempDir()
	fast, slow := freeport.Port(t), freeport.Port(t)
	cfg, err := loadConfig(envMap(map[string]string{
		"ACCORD_LISTEN": "127.0.0.1:0", "DATABASE_URL": dbURL, "ACCORD_DATA_DIR": dataDir, "ACCORD_DEV": "true",
		"ACCORD_DEMO_SSH_PORT": strconv.Itoa(freeport.Port(t)), "ACCORD_DEMO_EMULATOR_PORTS": fmt.Sprintf("%d,%d", fast, slow),
		"ACCORD_PROBE_DIR": probeDir, "ACCORD_REMOTE_DIR": t.TempDir(), "ACCORD_SHUTDOWN_TIMEOUT": "10s",
		// Verdicts from fewer requests are verdicts still: the walkthrough
		// takes whichever comes (make run's demo is carried to PASS by
		// .ci/smoke-run.sh at its full length).
		"ACCORD_DEMO_STEP_DURATION": "3s", "ACCORD_DB_MAX_CONNS": "8",
	}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, quietLog(), true, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve stopped: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("serve did not start")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	})
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	u, err := user.Current()
	require.NoError(t, err)
	return &walkthrough{base: "http://" + addr, pool: pool, dataDir: dataDir, cfg: cfg, user: u.Username}
}

func (w *walkthrough) waitRun(t *testing.T, runID int64, what string, timeout time.Duration, done func(state, verdict string) bool) (string, string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var state, verdict, reason string
	for time.Now().Before(deadline) {
		require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT state, coalesce(verdict, ''), reason FROM runs WHERE id = $1`, runID).Scan(&state, &verdict, &reason))
		if done(state, verdict) {
			return state, verdict
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("run %d: %s did not happen within %s (state %s, reason %q)", runID, what, timeout, state, reason)
	return state, verdict
}

func (w *walkthrough) id(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	var id int64
	require.NoError(t, w.pool.QueryRow(context.Background(), query, args...).Scan(&id))
	return id
}

func signIn(br *browsertest.Browser, base, email string) {
	br.Do(chromedp.Navigate(base+"/signin"), chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), email), chromedp.SendKeys(chromedp.ID("password"), demo.Password))
	br.ClickAndWait("#signin-submit")
	br.Do(chromedp.WaitVisible(chromedp.CSS("form[action='/signout']")))
}

// TestEndToEndBrowserWalkthrough carries the whole journey on a fresh database, in
// a real browser: `make run`'s demo comes up with a finished baseline run
// and the candidate run that follows it; the overview says where the
// program stands (the rollout's first stage and what waits for whom); the
// vendor engineer registers the demo host (installing the key shown,
// scanning and pinning its host key, checking it) and meets the run form's
// warning before a run that could not be judged; the customer's approver
// finds the first stage waiting on Home and, with the vendor's, approves
// it through its confirmation; the engineer starts the second stage's
// qualifying run from the stage, watches it, sees the verdict and the
// charts, downloads the signed report and verifies it with `accord
// verify`; and both approvers approve that stage on it.
func TestEndToEndBrowserWalkthrough(t *testing.T) {
	t.Parallel()
	w := startWalkthrough(t)
	ctx := context.Background()
	baseline := w.id(t, `SELECT id FROM runs WHERE label = $1`, demo.BaselineLabel)
	_, verdict := w.waitRun(t, baseline, "the demo's baseline run to be judged", 4*time.Minute, func(s, v string) bool { return s == "done" && v != "" || s == "failed" })
	require.NotEmpty(t, verdict, "the first page has something to look at")
	// The demo's candidate follows the judged baseline.
	var candidate int64
	require.Eventually(t, func() bool {
		return w.pool.QueryRow(ctx, `SELECT id FROM runs WHERE label = $1`, demo.CandidateLabel).Scan(&candidate) == nil
	}, time.Minute, 250*time.Millisecond, "the demo submits its candidate run once the baseline is judged")
	state, candidateVerdict := w.waitRun(t, candidate, "the demo's candidate run to be judged", 4*time.Minute, func(s, v string) bool { return s == "done" && v != "" || s == "failed" })
	require.Equal(t, "done", state)
	var candidateBaseline int64
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT baseline_run_id FROM runs WHERE id = $1`, candidate).Scan(&candidateBaseline))
	require.Equal(t, baseline, candidateBaseline, "the candidate is compared with the baseline")
	require.Eventually(t, func() bool {
		return w.id(t, `SELECT count(*) FROM run_reports WHERE run_id = $1`, candidate) > 0
	}, 2*time.Minute, 500*time.Millisecond, "the candidate is signed")
	program := w.id(t, `SELECT id FROM programs LIMIT 1`)
	p := fmt.Sprintf("%s/programs/%d", w.base, program)
	labels := map[string]string{"PASS": "awaiting approval"} // a stage's label by its evidence's verdict
	stageLabel := func(verdict string) string {
		if l, ok := labels[verdict]; ok {
			return l
		}
		return "gates not met"
	}

	br := browsertest.New(t)
	signIn(br, w.base, "vendor.engineer@accord.demo")
	// The overview says where the program stands.
	br.Do(chromedp.Navigate(p), chromedp.WaitVisible(chromedp.ID("program-status")))
	require.Equal(t, "Stage 1 of 3, lab-acceptance", br.Text("#overview-stage"))
	require.Equal(t, stageLabel(candidateVerdict), br.Text("#overview-stage-state"))
	require.Contains(t, br.Text("#overview-evidence"), fmt.Sprintf("run #%d %s", candidate, candidateVerdict))
	verdicts := br.Text("#latest-verdicts")
	require.Contains(t, verdicts, fmt.Sprintf("#%d %s", candidate, demo.CandidateLabel))
	require.Contains(t, verdicts, fmt.Sprintf("#%d %s", baseline, demo.BaselineLabel))
	waiting := br.Text("#waits")
	require.Contains(t, waiting, fmt.Sprintf("Run #%d's report awaits the customer's co-signature.", candidate))
	require.Contains(t, waiting, "Stage 1, lab-acceptance, awaits the vendor approver")
	require.Contains(t, waiting, "Stage 1, lab-acceptance, awaits the customer approver")
	br.Screenshot("walkthrough-01-program")

	// Register the demo lab's sshd as a new host.
	br.Do(chromedp.Navigate(p+"/hosts/new"), chromedp.WaitVisible(chromedp.ID("host-form")))
	br.SetValues("name", "lab-2", "address", "127.0.0.1", "port", strconv.Itoa(w.cfg.DemoSSHPort), "username", w.user,
		"labels", "transport=emulated")
	br.ClickAndWait("#create-host")
	br.Do(chromedp.WaitVisible(chromedp.ID("host-public-key")))
	pub := strings.TrimSpace(br.Text("#host-public-key"))
	// The lab's administrator installs Accord's key on the host.
	authorized := filepath.Join(w.dataDir, "demo", "sshd", "authorized_keys")
	f, err := os.OpenFile(authorized, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(pub + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	br.ClickAndWait("#scan-host")
	br.Do(chromedp.WaitVisible(chromedp.ID("scan-result")))
	require.Regexp(t, `SHA256:`, br.Text(".scanned-fingerprint"))
	br.Screenshot("walkthrough-02-scan")
	br.ClickAndWait("#pin-host")
	br.Do(chromedp.WaitVisible(chromedp.ID("host-fingerprint")))
	br.ClickAndWait("#check-host")
	host := w.id(t, `SELECT id FROM hosts WHERE name = 'lab-2'`)
	hostURL := p + fmt.Sprintf("/hosts/%d", host)
	require.Eventually(t, func() bool {
		br.Do(chromedp.Navigate(hostURL), chromedp.WaitVisible(chromedp.ID("last-check")))
		return strings.Contains(br.Text("#last-check"), "round trip")
	}, 2*time.Minute, 2*time.Second, "the host check succeeds")
	br.Screenshot("walkthrough-03-host-checked")

	// Before anything starts, the run form says what could not be judged:
	// the uplift gate set compares with a baseline, and none is chosen.
	fast := w.id(t, `SELECT v.id FROM profile_versions v JOIN profiles p ON p.id = v.profile_id WHERE p.name = 'Demo TTFT · NVMe-oF path'`)
	uplift := w.id(t, `SELECT v.id FROM gate_set_versions v JOIN gate_sets g ON g.id = v.gate_set_id WHERE g.name = 'NVMe-oF uplift over local NVMe'`)
	br.Do(chromedp.Navigate(p+"/runs/new"), chromedp.WaitVisible(chromedp.ID("run-form")))
	br.SetValues("profile_version", strconv.FormatInt(fast, 10), "host", strconv.FormatInt(host, 10),
		"gate_set_version", strconv.FormatInt(uplift, 10), "baseline", "")
	// A person's choice fires "change", on which the form asks (htmx).
	browsertest.Eval[bool](br, `document.getElementById("baseline").dispatchEvent(new Event("change", {bubbles: true}))`)
	br.Do(chromedp.WaitVisible(chromedp.CSS("#prerun-warnings .prerun-no-baseline")))
	// Read until it says so: the form may ask again for an earlier change
	// (setting the profile, the host) and swap in the same answer meanwhile.
	const noBaseline = "compares with a baseline run, and none is chosen: it would be INCONCLUSIVE"
	require.Eventually(t, func() bool { return strings.Contains(br.Text("#prerun-warnings"), noBaseline) }, 30*time.Second, 250*time.Millisecond,
		"the run form warns: %s", noBaseline)
	br.Screenshot("walkthrough-04-prerun-warning")

	// The approvers approve the first stage on the demo's candidate: the
	// customer's finds it waiting on Home.
	approveStage(t, w, p, "lab-acceptance", stageLabel(candidateVerdict), "walkthrough-05-waiting-for-you", "walkthrough-06-confirm")

	// The second stage awaits a qualifying run: a run of its profile judged
	// by its gate set. The engineer starts it from the stage.
	br.Do(chromedp.Navigate(p+"/rollout"), chromedp.WaitVisible(chromedp.ID("stage-pilot-5pct")))
	require.Equal(t, "approved", br.Text("#stage-state-lab-acceptance"))
	require.Equal(t, "awaiting a qualifying run", br.Text("#stage-state-pilot-5pct"))
	require.Contains(t, br.Text("#qualifying-pilot-5pct"), "runs of it judged by MLPerf Inference Llama-2-70B server latency v1 — none yet.")
	fastProfile := w.id(t, `SELECT id FROM profiles WHERE name = 'Demo TTFT · NVMe-oF path'`)
	qualify := fmt.Sprintf("#qualify-pilot-5pct-%d", fastProfile)
	br.Screenshot("walkthrough-07-qualifying-run")
	br.ClickAndWait(qualify)
	br.Do(chromedp.WaitVisible(chromedp.ID("run-form")))
	mlperf := w.id(t, `SELECT s.gate_set_version_id FROM rollout_stages s WHERE s.name = 'pilot-5pct'`)
	require.Equal(t, strconv.FormatInt(fast, 10), browsertest.Eval[string](br, `document.getElementById("profile_version").value`))
	require.Equal(t, strconv.FormatInt(mlperf, 10), browsertest.Eval[string](br, `document.getElementById("gate_set_version").value`))
	br.SetValues("host", strconv.FormatInt(host, 10), "label", "qualifying: NVMe-oF path for the pilot")
	if browsertest.Eval[bool](br, `!!document.getElementById("confirm-warnings")`) {
		br.Do(chromedp.Click(chromedp.ID("confirm-warnings")))
	}
	br.ClickAndWait("#start-run")
	br.Do(chromedp.WaitVisible(chromedp.ID("run-title")))
	run := w.id(t, `SELECT max(id) FROM runs`)
	var runProfile, runGates int64
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT profile_version_id, gate_set_version_id FROM runs WHERE id = $1`, run).Scan(&runProfile, &runGates))
	require.Equal(t, []int64{fast, mlperf}, []int64{runProfile, runGates}, "the qualifying run is the stage's")
	// Watch it live: the progress label moves as the probe reports.
	require.Eventually(t, func() bool {
		label := browsertest.Eval[string](br, `document.getElementById("progress-label").textContent`)
		return strings.HasPrefix(label, "Step 1 of 1")
	}, 2*time.Minute, 500*time.Millisecond, "live progress from the probe")
	br.Screenshot("walkthrough-08-running")
	_, runVerdict := w.waitRun(t, run, "the qualifying run to be judged", 4*time.Minute, func(s, v string) bool { return s == "done" && v != "" || s == "failed" })
	// The live page reloads itself once the run is final (navigating here
	// as well would race that reload).
	// Wait for the reloaded document to be complete, and read the verdict
	// by evaluation: a DOM query by node id can still point into the page
	// being replaced ("No node with given id found").
	br.WaitUntil(`(document.readyState === "complete" && document.getElementById("overall-verdict")) ? "" : document.readyState + " " + location.pathname`,
		time.Minute, "the run page to show the verdict")
	require.Regexp(t, `^(PASS|FAIL|INCONCLUSIVE|INCOMPARABLE)$`, browsertest.Eval[string](br, `document.getElementById("overall-verdict").textContent.trim()`))
	waitChartsDrawn(t, br)
	br.Screenshot("walkthrough-09-verdict")

	// The signed report: download it as the browser would, verify it with
	// `accord verify` and the installation's published keys.
	require.Eventually(t, func() bool {
		return w.id(t, `SELECT count(*) FROM run_reports WHERE run_id = $1`, run) > 0
	}, 2*time.Minute, 500*time.Millisecond, "the run is signed")
	bundle := downloadWithBrowserCookies(t, br, fmt.Sprintf("%s/runs/%d/report.tar.gz", p, run))
	dir := t.TempDir()
	bundlePath := filepath.Join(dir, "report.tar.gz")
	require.NoError(t, os.WriteFile(bundlePath, bundle, 0o644))
	keys := downloadWithBrowserCookies(t, br, w.base+"/.well-known/accord/allowed_signers")
	keysPath := filepath.Join(dir, "allowed_signers")
	require.NoError(t, os.WriteFile(keysPath, keys, 0o644))
	var out, errOut strings.Builder
	require.Equal(t, 0, cmdVerify(ctx, []string{bundlePath, "--keys", keysPath}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "MANIFEST.sha256")

	// The run counts for the stage, which the approvers approve on it.
	br.Do(chromedp.Navigate(p+"/rollout"), chromedp.WaitVisible(chromedp.ID("stage-pilot-5pct")))
	require.Contains(t, br.Text("#qualifying-pilot-5pct"), fmt.Sprintf("run #%d %s", run, runVerdict))
	approveStage(t, w, p, "pilot-5pct", stageLabel(runVerdict), "", "")

	require.Empty(t, br.Problems())
	require.Empty(t, br.ForeignRequests(w.base))
}

// waitChartsDrawn waits until every chart of the page has drawn.
func waitChartsDrawn(t *testing.T, br *browsertest.Browser) {
	t.Helper()
	br.WaitUntil(`(function(){
		var charts = document.querySelectorAll("[data-chart]");
		var out = [];
		charts.forEach(function (el) {
			if (!el.dataset.chartDrawn || !el.querySelector("canvas")) {
				out.push(el.dataset.chart + " ready=" + !!el.dataset.chartReady + " width=" + el.clientWidth);
			}
		});
		if (charts.length === 0) out.push("no charts");
		if (out.length === 0) return "";
		return [document.readyState, location.pathname, typeof echarts].concat(out).join(" | ");
	})()`, 30*time.Second, "every chart to draw")
}

// downloadWithBrowserCookies fetches a URL with the browser's session.
func downloadWithBrowserCookies(t *testing.T, br *browsertest.Browser, url string) []byte {
	t.Helper()
	cookies, err := chromedp.Call(br.Ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for _, c := range cookies.Cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, url)
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return b
}

// approveStage has the customer's approver and then the vendor's, each in
// their own browser, approve a stage labelled label (its gates as they
// stand): the customer's finds it waiting on Home, the vendor's on the
// board; each confirms on the approval's page, with a comment (gates that
// do not pass take a waiver with a reason). Screenshots named: the
// customer's Home and confirmation.
func approveStage(t *testing.T, w *walkthrough, program, stage, label, homeShot, confirmShot string) {
	t.Helper()
	confirm := func(br *browsertest.Browser, shot string) {
		br.Do(chromedp.WaitVisible(chromedp.ID("confirm-form")))
		require.Contains(t, br.Text("#confirm-title"), stage)
		if shot != "" {
			br.Screenshot(shot)
		}
		if label == "awaiting approval" {
			br.Do(chromedp.SendKeys(chromedp.ID("decision-comment"), "walkthrough: the evidence runs were read"))
			br.ClickAndWait("#confirm-approve")
			return
		}
		br.Do(chromedp.SendKeys(chromedp.ID("decision-comment"), "walkthrough: emulated storage on a shared machine"))
		br.ClickAndWait("#confirm-waive")
	}
	customer := browsertest.New(t)
	signIn(customer, w.base, "customer.approver@accord.demo")
	customer.Do(chromedp.Navigate(w.base+"/"), chromedp.WaitVisible(chromedp.ID("awaiting")))
	require.Contains(t, customer.Text("#awaiting"), stage+", awaits the customer approver")
	if homeShot != "" {
		customer.Screenshot(homeShot)
	}
	customer.ClickAndWait("#awaiting li.wait-approval a")
	confirm(customer, confirmShot)
	customer.Do(chromedp.WaitVisible(chromedp.ID("awaiting-" + stage)))
	require.Equal(t, label, customer.Text("#stage-state-"+stage))
	require.Contains(t, customer.Text("#awaiting-"+stage), "vendor side")

	vendor := browsertest.New(t)
	signIn(vendor, w.base, "vendor.approver@accord.demo")
	vendor.Do(chromedp.Navigate(program+"/rollout"), chromedp.WaitVisible(chromedp.ID("stage-"+stage)))
	require.Equal(t, label, vendor.Text("#stage-state-"+stage))
	if label == "awaiting approval" {
		vendor.ClickAndWait("#approve-" + stage)
	} else {
		vendor.ClickAndWait("#waive-" + stage)
	}
	confirm(vendor, "")
	vendor.Do(chromedp.WaitVisible(chromedp.ID("approvals-" + stage)))
	require.Equal(t, "approved", vendor.Text("#stage-state-"+stage))
	if stage == "pilot-5pct" {
		vendor.Screenshot("walkthrough-10-approved")
	}

	vendor.Do(chromedp.Navigate(program+"/decisions"), chromedp.WaitVisible(chromedp.ID("chain-status")))
	require.Equal(t, "verified", vendor.Text("#chain-verdict"))
	for _, br := range []*browsertest.Browser{customer, vendor} {
		require.Empty(t, br.Problems())
		require.Empty(t, br.ForeignRequests(w.base))
	}
}
