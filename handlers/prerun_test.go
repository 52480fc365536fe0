package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/htmltest"
)

// pathsBundle is a program like the demo's: a TTFT profile on a local-NVMe
// path and one on an NVMe-oF path, the uplift (relative) and MLPerf
// (absolute) gate sets, a pinned host, and a passing baseline run on the
// local-NVMe path with its samples.
type pathsBundle struct {
	*programBundle
	local, fast         store.SpecVersion // profile versions
	uplift, mlperf      int64             // gate set versions
	host, baseline      int64
	localSpec, fastSpec acceptance.ProfileSpec
}

func ttftProfile(name, endpoint string, transport acceptance.Transport) acceptance.ProfileSpec {
	return acceptance.ProfileSpec{Name: name, Purpose: acceptance.PurposeInferenceServing, Storage: acceptance.Storage{Transport: transport}, Repetitions: 3,
		Steps: []acceptance.StepSpec{{Name: "ttft", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{
			Endpoint: endpoint, Model: "emulated", API: "chat",
			PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 512}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 32},
			Load: acceptance.Load{Mode: "concurrency", Concurrency: 8}, Duration: acceptance.Duration(15 * time.Second)}}}}
}

func setupPaths(t *testing.T) *pathsBundle {
	t.Helper()
	pb := setupProgram(t)
	ctx := context.Background()
	b := &pathsBundle{programBundle: pb}
	save := func(p acceptance.ProfileSpec) store.SpecVersion {
		_, nv, errs, err := prepareSpec(profileOps, p)
		require.NoError(t, err)
		require.Empty(t, errs)
		_, v, err := pb.store.CreateSpec(ctx, store.KindProfile, pb.programID, nv)
		require.NoError(t, err)
		return v
	}
	b.localSpec = ttftProfile("TTFT local NVMe", "http://127.0.0.1:8001/v1", acceptance.TransportLocalNVMe)
	b.fastSpec = ttftProfile("TTFT NVMe-oF", "http://127.0.0.1:8000/v1", acceptance.TransportEmulated)
	b.local, b.fast = save(b.localSpec), save(b.fastSpec)
	gate := func(id string) int64 {
		tmpl, _ := acceptance.LookupGateSetTemplate(id)
		_, nv, errs, err := prepareSpec(gateSetOps, tmpl.Spec)
		require.NoError(t, err)
		require.Empty(t, errs)
		_, v, err := pb.store.CreateSpec(ctx, store.KindGateSet, pb.programID, nv)
		require.NoError(t, err)
		return v.ID
	}
	b.uplift, b.mlperf = gate("nvmeof-uplift"), gate("mlperf-llama2-70b-server")
	var err error
	b.host, err = pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "lab-1", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	_, err = pb.pool.Exec(ctx, `UPDATE hosts SET host_key = 'ssh-ed25519 AAAA', host_key_sha256 = 'SHA256:x', host_key_pinned_at = now() WHERE id = $1`, b.host)
	require.NoError(t, err)
	b.baseline = b.finishedRun(t, b.local.ID, b.mlperf, nil, "PASS", 400)
	return b
}

// finishedRun stores a done run of a profile version judged with verdict,
// with n samples of each request metric at c=8 over 3 repetitions.
func (b *pathsBundle) finishedRun(t *testing.T, profileVersion, gateVersion int64, baseline *int64, verdict string, n int) int64 {
	t.Helper()
	ctx := context.Background()
	run, err := b.store.CreateRun(ctx, store.NewRun{ProgramID: b.programID, ProfileVersionID: profileVersion, GateSetVersionID: &gateVersion, HostID: b.host, BaselineRunID: baseline})
	require.NoError(t, err)
	var ms []acceptance.Measurement
	for rep := 1; rep <= 3; rep++ {
		values := make([]float64, n/3)
		for i := range values {
			values[i] = 300 + float64(i)
		}
		for _, m := range []string{acceptance.MetricTTFT, acceptance.MetricTPOT, acceptance.MetricErrorRate} {
			ms = append(ms, acceptance.Measurement{Metric: m, Step: "ttft", Level: "c=8", Repetition: rep, Values: values})
		}
		ms = append(ms, acceptance.Measurement{Metric: acceptance.MetricOutputTokenThroughput, Step: "ttft", Level: "c=8", Repetition: rep, Values: []float64{500}})
	}
	require.NoError(t, b.store.SaveMeasurements(ctx, run, ms))
	canon := []byte(fmt.Sprintf(`{"run":%d}`, run))
	_, err = b.store.SaveEvaluation(ctx, store.StoredEvaluation{RunID: run, GateSetVersionID: gateVersion, Overall: verdict, Result: canon, Canonical: canon, Digest: "sha256:x", EngineVersion: "test"})
	require.NoError(t, err)
	require.NoError(t, b.store.SetRunState(ctx, run, store.RunDone, "verdict: "+verdict))
	return run
}

// selected is the value chosen in a select of the page.
func selected(t *testing.T, doc *html.Node, id string) string {
	t.Helper()
	sel := htmltest.ByID(doc, id)
	require.NotNil(t, sel, id)
	for _, o := range htmltest.All(sel, func(n *html.Node) bool { return n.Data == "option" }) {
		for _, a := range o.Attr {
			if a.Key == "selected" {
				return htmltest.Attr(o, "value")
			}
		}
	}
	return ""
}

func id(v int64) string { return strconv.FormatInt(v, 10) }

// The run form opens on the program's most recent profile, the gate set it
// is judged by and the last passing run on its baseline path, and says why.
func TestRunFormProposesProfileGateSetAndBaseline(t *testing.T) {
	t.Parallel()
	b := setupPaths(t)
	ctx := context.Background()

	// Only the baseline has run, after both profiles were saved: its
	// profile is proposed, with the gate set it was judged by, and no
	// baseline (it is on local NVMe itself: it is the baseline path).
	doc := b.pageDoc(t, b.engineer, b.url("/runs/new"))
	require.Equal(t, id(b.local.ID), selected(t, doc, "profile_version"))
	require.Equal(t, id(b.mlperf), selected(t, doc, "gate_set_version"))
	require.Equal(t, "", selected(t, doc, "baseline"))
	require.Contains(t, htmltest.Text(htmltest.ByID(doc, "run-form")), fmt.Sprintf("Proposed: the profile of the latest run, #%d.", b.baseline))

	// "Run this profile" on the NVMe-oF profile's page: the form proposes
	// the last passing run of the local-NVMe profile with the same steps.
	doc = b.pageDoc(t, b.engineer, b.url(fmt.Sprintf("/profiles/%d", b.fast.SpecID)))
	link := htmltest.Attr(htmltest.ByID(doc, "run-profile"), "href")
	require.Equal(t, b.url(fmt.Sprintf("/runs/new?profile_version=%d", b.fast.ID)), link)
	require.Nil(t, htmltest.ByID(b.pageDoc(t, b.viewer, b.url(fmt.Sprintf("/profiles/%d", b.fast.SpecID))), "run-profile"), "a viewer does not run")
	doc = b.pageDoc(t, b.engineer, link)
	require.Equal(t, id(b.fast.ID), selected(t, doc, "profile_version"))
	require.Equal(t, id(b.baseline), selected(t, doc, "baseline"))
	require.Contains(t, htmltest.Text(htmltest.ByID(doc, "run-form")), "Proposed: the last passing run of TTFT local NVMe, the local-NVMe profile with the same steps.")

	// A candidate judged by the uplift gate set against the baseline: the
	// next form proposes the same again (the latest run's profile, gate set
	// and baseline path).
	cand := b.finishedRun(t, b.fast.ID, b.uplift, &b.baseline, "PASS", 400)
	doc = b.pageDoc(t, b.engineer, b.url("/runs/new"))
	require.Equal(t, id(b.fast.ID), selected(t, doc, "profile_version"))
	require.Equal(t, id(b.uplift), selected(t, doc, "gate_set_version"))
	require.Equal(t, id(b.baseline), selected(t, doc, "baseline"))
	require.Contains(t, htmltest.Text(htmltest.ByID(doc, "run-form")), fmt.Sprintf("the baseline path run #%d was compared with", cand))
	require.NotNil(t, htmltest.ByID(doc, "prerun-ok"), "this run can be judged")

	// A rollout stage judging the NVMe-oF profile by MLPerf: its gate set.
	fastSpec, err := b.store.GetSpecVersionByID(ctx, store.KindProfile, b.programID, b.fast.ID)
	require.NoError(t, err)
	_, err = b.store.AddRolloutStage(ctx, b.programID, "pilot", store.StageGates{GateSetVersionID: b.mlperf,
		Profiles: []store.StageProfile{{ProfileID: fastSpec.SpecID, ProfileName: "TTFT NVMe-oF"}}}, 0)
	require.NoError(t, err)
	doc = b.pageDoc(t, b.engineer, b.url("/runs/new"))
	require.Equal(t, id(b.mlperf), selected(t, doc, "gate_set_version"))
	require.Contains(t, htmltest.Text(htmltest.ByID(doc, "run-form")), "Proposed: the gate set of the rollout's current stage, pilot.")

	// What the link asks for stays asked for.
	doc = b.pageDoc(t, b.engineer, b.url(fmt.Sprintf("/runs/new?profile_version=%d&gate_set_version=%d", b.fast.ID, b.uplift)))
	require.Equal(t, id(b.uplift), selected(t, doc, "gate_set_version"))
}

// The form says before anything starts that the gates cannot judge the
// run; starting anyway takes a tick and the warnings stay with the run.
func TestRunFormWarnsBeforeTheRunAndKeepsTheWarning(t *testing.T) {
	t.Parallel()
	b := setupPaths(t)
	ctx := context.Background()
	choice := url.Values{"profile_version": {id(b.fast.ID)}, "host": {id(b.host)}, "gate_set_version": {id(b.uplift)}, "label": {"no baseline"}}

	// The pre-check the form asks for as its choices change (htmx).
	res, body := b.get(t, b.engineer, b.url("/runs/precheck?"+choice.Encode()))
	require.Equal(t, http.StatusOK, res.StatusCode)
	frag := htmltest.Parse(t, body)
	warn := htmltest.ByID(frag, "prerun-warnings")
	require.NotNil(t, warn)
	items := htmltest.All(warn, func(n *html.Node) bool { return n.Data == "li" })
	require.Len(t, items, 2)
	require.Equal(t, "throughput-uplift compares with a baseline run, and none is chosen: it would be INCONCLUSIVE. Choose the run to compare with (the local-NVMe path, say).", htmltest.Text(items[0]))
	require.NotNil(t, htmltest.ByID(frag, "confirm-warnings"))
	// The form itself asks for it.
	form := htmltest.ByID(b.pageDoc(t, b.engineer, b.url("/runs/new")), "run-form")
	require.Equal(t, b.url("/runs/precheck"), htmltest.Attr(form, "hx-get"))
	require.Equal(t, "change", htmltest.Attr(form, "hx-trigger"))

	// Sent without the tick: nothing starts, the warnings are on the form.
	res, page := b.postPage(t, b.engineer, b.url("/runs"), choice)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.NotNil(t, htmltest.ByID(htmltest.Parse(t, page), "prerun-warnings"))
	var runs int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM runs WHERE label = 'no baseline'`).Scan(&runs))
	require.Zero(t, runs)

	// With it: the run starts, and its page says what was said.
	choice.Set("confirm_warnings", "1")
	res = b.postForm(t, b.engineer, b.url("/runs"), choice)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	runPath := res.Header.Get("Location")
	doc := b.pageDoc(t, b.viewer, runPath)
	kept := htmltest.ByID(doc, "run-warnings")
	require.NotNil(t, kept)
	keptItems := htmltest.All(kept, func(n *html.Node) bool { return n.Data == "li" })
	require.Len(t, keptItems, 2)
	require.Equal(t, htmltest.Text(items[0]), htmltest.Text(keptItems[0]))

	// With the baseline chosen, the same request has nothing to say.
	choice.Set("baseline", id(b.baseline))
	_, body = b.get(t, b.engineer, b.url("/runs/precheck?"+choice.Encode()))
	require.Nil(t, htmltest.ByID(htmltest.Parse(t, body), "prerun-warnings"))
	require.NotNil(t, htmltest.ByID(htmltest.Parse(t, body), "prerun-ok"))
}

// A pipeline's run starts whatever the pre-check says; the answer carries
// the warnings.
func TestAPIRunAnswerCarriesThePreRunWarnings(t *testing.T) {
	t.Parallel()
	b := setupPaths(t)
	body, _ := json.Marshal(map[string]any{"profile_version_id": b.fast.ID, "host_id": b.host, "gate_set_version_id": b.uplift})
	code, out := b.api(t, "POST", "/api/v1"+b.url("/runs"), "application/json", body)
	require.Equal(t, http.StatusCreated, code, "%v", out)
	ws, _ := out["warnings"].([]any)
	require.Len(t, ws, 2)
	first := ws[0].(map[string]any)
	require.Equal(t, "no-baseline", first["kind"])
	require.Equal(t, "throughput-uplift", first["criterion"])

	body, _ = json.Marshal(map[string]any{"profile_version_id": b.fast.ID, "host_id": b.host, "gate_set_version_id": b.uplift, "baseline_run_id": b.baseline})
	code, out = b.api(t, "POST", "/api/v1"+b.url("/runs"), "application/json", body)
	require.Equal(t, http.StatusCreated, code, "%v", out)
	require.NotContains(t, out, "warnings")
}
