package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/apiclient"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
)

// argoMeasure asks the stage's gate as Argo Rollouts' web metric provider
// does with the README's AnalysisTemplate (GET, the template's headers,
// jsonPath {$.state}) and reads the measurement as Argo Rollouts would:
// Successful on approved, Failed on halted, Inconclusive otherwise.
func (rb *rolloutBundle) argoMeasure(t *testing.T, token, stage string) (string, apiclient.StageGate) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rb.ts.URL+fmt.Sprintf("/api/v1/deploy/programs/%d/stages/%s", rb.programID, stage), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "a non-2xx status is a measurement error to Argo Rollouts")
	requireDocumented(t, http.MethodGet, "/api/v1/deploy/programs/{programID}/stages/{stage}", res.StatusCode)
	var g apiclient.StageGate
	require.NoError(t, json.NewDecoder(res.Body).Decode(&g))
	switch g.State {
	case "approved":
		return "Successful", g
	case "halted":
		return "Failed", g
	}
	return "Inconclusive", g
}

// flagger calls a Flagger webhook as Flagger does: POST of its payload,
// the token in the webhook's metadata (Flagger sends no headers).
func (rb *rolloutBundle) flagger(t *testing.T, token, stage, hook string) (int, apiclient.FlaggerAnswer) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"name": "llama-serving", "namespace": "inference", "phase": "Progressing",
		"checksum": "6f8d2e1c", "metadata": map[string]string{"token": token, "accord_stage": stage}})
	require.NoError(t, err)
	res, err := http.Post(rb.ts.URL+fmt.Sprintf("/api/v1/deploy/programs/%d/stages/%s/flagger/%s", rb.programID, stage, hook), "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer res.Body.Close()
	requireDocumented(t, http.MethodPost, "/api/v1/deploy/programs/{programID}/stages/{stage}/flagger/"+hook, res.StatusCode)
	var a apiclient.FlaggerAnswer
	require.NoError(t, json.NewDecoder(res.Body).Decode(&a))
	return res.StatusCode, a
}

// flaggerHooks answers each Flagger hook for the stage: the status codes
// of confirm-rollout, confirm-promotion and rollback.
func (rb *rolloutBundle) flaggerHooks(t *testing.T, token, stage string) [3]int {
	t.Helper()
	var out [3]int
	for i, hook := range []string{"confirm-rollout", "confirm-promotion", "rollback"} {
		code, a := rb.flagger(t, token, stage, hook)
		require.Equal(t, code == http.StatusOK, a.Yes, hook)
		require.Equal(t, hook, a.Hook)
		require.Equal(t, stage, a.Gate.Stage)
		out[i] = code
	}
	return out
}

// Argo Rollouts' analysis and Flagger's webhooks get the answer of the two
// sides' decisions in every state of a stage: pending, awaiting one side
// or both, halted, resumed, approved, and after a rollback request.
func TestDeployersAskAccordInEveryStageState(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	rb.addStages(t, "lab-acceptance", "pilot-5pct")
	rb.judgedRun(t, "PASS")
	token := rb.createTokenViaUI(t, rb.viewer, "deploy")
	const ok, no = http.StatusOK, http.StatusConflict

	// pilot-5pct is not reached yet.
	m, g := rb.argoMeasure(t, token, "pilot-5pct")
	require.Equal(t, "Inconclusive", m)
	require.Equal(t, apiclient.StageGate{Program: rb.programID, Stage: "pilot-5pct", State: "waiting", StageState: "pending", ApprovedBy: []string{},
		Reason: "The stage is not reached yet: lab-acceptance must be approved first.", CheckedAt: g.CheckedAt}, g)
	require.Equal(t, [3]int{no, no, no}, rb.flaggerHooks(t, token, "pilot-5pct"))

	// lab-acceptance is approved by both sides: pilot-5pct is current.
	for _, c := range []*http.Client{rb.vendorApprover, rb.custApprover} {
		code, _ := rb.decide(t, c, "lab-acceptance", "approve", "")
		require.Equal(t, http.StatusSeeOther, code)
	}
	m, g = rb.argoMeasure(t, token, "lab-acceptance")
	require.Equal(t, "Successful", m)
	require.True(t, g.Approved)
	require.Equal(t, []string{"vendor", "customer"}, g.ApprovedBy)
	require.Equal(t, [3]int{ok, ok, no}, rb.flaggerHooks(t, token, "lab-acceptance"))
	m, g = rb.argoMeasure(t, token, "pilot-5pct")
	require.Equal(t, "Inconclusive", m)
	require.True(t, g.Current)
	require.Equal(t, "awaiting-approval", g.StageState)
	require.Equal(t, "The stage awaits the approval of the vendor and the customer side.", g.Reason)
	require.Equal(t, [3]int{ok, no, no}, rb.flaggerHooks(t, token, "pilot-5pct"), "the canary may start, not be promoted")

	// One side approves: still waiting for the other.
	code, _ := rb.decide(t, rb.vendorApprover, "pilot-5pct", "approve", "")
	require.Equal(t, http.StatusSeeOther, code)
	m, g = rb.argoMeasure(t, token, "pilot-5pct")
	require.Equal(t, "Inconclusive", m)
	require.Equal(t, []string{"vendor"}, g.ApprovedBy)
	require.Equal(t, "The stage awaits the approval of the customer side.", g.Reason)
	require.Equal(t, [3]int{ok, no, no}, rb.flaggerHooks(t, token, "pilot-5pct"))

	// A member halts it: Argo's analysis fails, Flagger rolls back.
	code, _ = rb.decide(t, rb.viewer, "pilot-5pct", "halt", "p99 TTFT doubled on the pilot nodes")
	require.Equal(t, http.StatusSeeOther, code)
	m, g = rb.argoMeasure(t, token, "pilot-5pct")
	require.Equal(t, "Failed", m)
	require.True(t, g.Halted)
	require.Equal(t, "halted", g.StageState)
	require.Equal(t, "The stage was halted by view@customer.example: p99 TTFT doubled on the pilot nodes", g.Reason)
	require.Equal(t, [3]int{no, no, ok}, rb.flaggerHooks(t, token, "pilot-5pct"))

	// Both sides resume it: waiting again, from the start of its approval.
	for _, c := range []*http.Client{rb.custApprover, rb.vendorApprover} {
		code, _ = rb.decide(t, c, "pilot-5pct", "resume", "firmware 2.1.4 fixes the path flaps")
		require.Equal(t, http.StatusSeeOther, code)
	}
	m, _ = rb.argoMeasure(t, token, "pilot-5pct")
	require.Equal(t, "Inconclusive", m)
	require.Equal(t, [3]int{ok, no, no}, rb.flaggerHooks(t, token, "pilot-5pct"))

	// Both sides approve: promotion.
	for _, c := range []*http.Client{rb.custApprover, rb.vendorApprover} {
		code, _ = rb.decide(t, c, "pilot-5pct", "approve", "")
		require.Equal(t, http.StatusSeeOther, code)
	}
	m, g = rb.argoMeasure(t, token, "pilot-5pct")
	require.Equal(t, "Successful", m)
	require.Equal(t, "Approved by both sides: ca@customer.example (customer), va@vendor.example (vendor).", g.Reason)
	require.Equal(t, [3]int{ok, ok, no}, rb.flaggerHooks(t, token, "pilot-5pct"))

	// A rollback request stops every stage, approved ones too.
	res, page := rb.post(t, rb.custApprover, rb.url("/rollout/rollback"), url.Values{"reason": {"customer incident 7781"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
	for _, stage := range []string{"lab-acceptance", "pilot-5pct"} {
		m, g = rb.argoMeasure(t, token, stage)
		require.Equal(t, "Failed", m, stage)
		require.Equal(t, "A rollback was requested by ca@customer.example: customer incident 7781", g.Reason)
		require.Equal(t, [3]int{no, no, ok}, rb.flaggerHooks(t, token, stage), stage)
	}
}

// A deploy token reads the stage gates and nothing else; other tokens do
// not read the stage gates; a deploy token is made alone.
func TestDeployTokensAreScoped(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	rb.addStages(t, "pilot-5pct")
	deploy := rb.createTokenViaUI(t, rb.viewer, "deploy")
	read := rb.createTokenViaUI(t, rb.viewer, "read")
	gate := fmt.Sprintf("/api/v1/deploy/programs/%d/stages/pilot-5pct", rb.programID)

	code, _ := rb.apiGet(t, deploy, gate)
	require.Equal(t, http.StatusOK, code)
	code, body := rb.apiGet(t, read, gate)
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, "this token lacks the deploy scope", body["error"])
	code, body = rb.apiGet(t, deploy, fmt.Sprintf("/api/v1/programs/%d/rollout", rb.programID))
	require.Equal(t, http.StatusForbidden, code, "a deploy token reads nothing else")
	require.Equal(t, "this token lacks the read scope", body["error"])
	code, _ = rb.apiGet(t, "", gate)
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = rb.apiGet(t, deploy+"x", gate)
	require.Equal(t, http.StatusUnauthorized, code)
	code, body = rb.apiGet(t, deploy, fmt.Sprintf("/api/v1/deploy/programs/%d/stages/no-such-stage", rb.programID))
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "the program's rollout plan has no stage of that name", body["error"])

	// Flagger: the token in the metadata, or in a header; a body that is no
	// payload, or a large one, is refused.
	hook := rb.ts.URL + gate + "/flagger/confirm-rollout"
	post := func(header, body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, hook, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if header != "" {
			req.Header.Set("Authorization", "Bearer "+header)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		requireDocumented(t, http.MethodPost, "/api/v1/deploy/programs/{programID}/stages/{stage}/flagger/confirm-rollout", res.StatusCode)
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(out)
	}
	code, _ = post("", `{"name":"llama","namespace":"inference","phase":"Waiting","metadata":{"token":"`+deploy+`"}}`)
	require.Equal(t, http.StatusOK, code, "the first stage is current")
	code, _ = post(deploy, `{"name":"llama","namespace":"inference","phase":"Waiting"}`)
	require.Equal(t, http.StatusOK, code)
	code, _ = post("", `{"name":"llama","namespace":"inference","phase":"Waiting","metadata":{"token":"`+read+`"}}`)
	require.Equal(t, http.StatusForbidden, code)
	code, _ = post("", `{"name":"llama","namespace":"inference"}`)
	require.Equal(t, http.StatusUnauthorized, code)
	code, text := post(deploy, `not json`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, text, "is not a Flagger webhook payload")
	code, _ = post(deploy, `{"metadata":{"pad":"`+strings.Repeat("x", 70<<10)+`"}}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	require.NotContains(t, text, deploy, "the answer never carries the token")

	// A deploy token is created alone.
	form := url.Values{"name": {"argo"}, "expires_days": {"30"}, "scope": {"deploy", "read"}}
	res, page := rb.post(t, rb.viewer, "/tokens", form)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "A deploy token has the deploy scope alone")
}

// A stage stopped by a production watch's stop-loss, and one rejected by an
// approver: Argo's analysis fails and Flagger rolls back, each answer
// naming what stopped the stage.
func TestDeployersAskAccordAfterAStopLossAndARejection(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	rb.addStages(t, "pilot-5pct", "fleet-100pct")
	rb.judgedRun(t, "PASS")
	token := rb.createTokenViaUI(t, rb.viewer, "deploy")
	const ok, no = http.StatusOK, http.StatusConflict
	ctx := context.Background()

	watchID, err := rb.store.SetWatch(ctx, rb.programID, rb.stageID(t, "pilot-5pct"), store.NewWatch{Name: "p99 TTFT of the fleet",
		Endpoint: "http://127.0.0.1:9/prom", Query: "vllm_p99", Comparator: "<=", Line: 2, Unit: "s", Consecutive: 2, IntervalSeconds: 30})
	require.NoError(t, err)
	env := rollout.Env{Keyring: rb.keyring, Queue: jobs.NewQueue(rb.river)}
	t0 := time.Now()
	for i := range 2 {
		_, err := rollout.CheckWatch(ctx, rb.store, env, fallingPrometheus{crossed: t0.Add(-time.Second)}, watchID, t0.Add(time.Duration(i)*30*time.Second))
		require.NoError(t, err)
	}
	m, g := rb.argoMeasure(t, token, "pilot-5pct")
	require.Equal(t, "Failed", m)
	require.True(t, g.Halted)
	require.Equal(t, "halted", g.StageState)
	require.Contains(t, g.Reason, "The stage was stopped by a stop-loss by ")
	require.Equal(t, [3]int{no, no, ok}, rb.flaggerHooks(t, token, "pilot-5pct"))

	// Both sides resume it; then an approver rejects it.
	for _, c := range []*http.Client{rb.custApprover, rb.vendorApprover} {
		code, _ := rb.decide(t, c, "pilot-5pct", "resume", "the array's firmware was rolled back")
		require.Equal(t, http.StatusSeeOther, code)
	}
	require.Equal(t, [3]int{ok, no, no}, rb.flaggerHooks(t, token, "pilot-5pct"))
	code, _ := rb.decide(t, rb.custApprover, "pilot-5pct", "reject", "p99 TTFT is 40 % over the contract")
	require.Equal(t, http.StatusSeeOther, code)
	m, g = rb.argoMeasure(t, token, "pilot-5pct")
	require.Equal(t, "Failed", m)
	require.Equal(t, "rejected", g.StageState)
	require.Equal(t, "The stage was rejected by ca@customer.example: p99 TTFT is 40 % over the contract", g.Reason)
	require.Equal(t, [3]int{no, no, ok}, rb.flaggerHooks(t, token, "pilot-5pct"))
	m, _ = rb.argoMeasure(t, token, "fleet-100pct")
	require.Equal(t, "Inconclusive", m, "a stage after a rejected one is not reached")
}
