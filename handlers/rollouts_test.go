package handlers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/store"
)

// rolloutBundle is a program with a profile, a gate set and a host, and
// the people of a rollout: an approver of each side (and a second vendor
// approver), a vendor owner who edits the plan, and a customer viewer.
type rolloutBundle struct {
	*testBundle
	programID      int64
	profileID      int64
	profileVersion int64
	gateSetID      int64
	gateVersion    int64
	hostID         int64
	vendorApprover *http.Client // va@vendor.example
	vendorSecond   *http.Client // vb@vendor.example
	custApprover   *http.Client // ca@customer.example
	owner          *http.Client // own@vendor.example
	viewer         *http.Client // view@customer.example
}

func setupRollout(t *testing.T, opts ...setupOpts) *rolloutBundle {
	t.Helper()
	b := setup(t, opts...)
	ctx := context.Background()
	vendor := b.createOrg(t, "Acme Storage", "vendor")
	customer := b.createOrg(t, "BigCloud", "customer")
	pid, err := b.store.CreateProgram(ctx, "Array X for Llama serving", "", vendor, customer, nil)
	require.NoError(t, err)
	rb := &rolloutBundle{testBundle: b, programID: pid}
	add := func(email string, org int64, role store.Role) *http.Client {
		id := b.createUser(t, email, &org, false)
		_, err := b.store.SetMember(ctx, pid, id, role)
		require.NoError(t, err)
		return b.signIn(t, email)
	}
	rb.vendorApprover = add("va@vendor.example", vendor, store.RoleApprover)
	rb.vendorSecond = add("vb@vendor.example", vendor, store.RoleApprover)
	rb.custApprover = add("ca@customer.example", customer, store.RoleApprover)
	rb.owner = add("own@vendor.example", vendor, store.RoleOwner)
	rb.viewer = add("view@customer.example", customer, store.RoleViewer)

	tmpl, _ := acceptance.LookupProfileTemplate("kv-cache-lookup")
	_, nv, errs, err := prepareSpec(profileOps, tmpl.Spec)
	require.NoError(t, err)
	require.Empty(t, errs)
	sp, pv, err := b.store.CreateSpec(ctx, store.KindProfile, pid, nv)
	require.NoError(t, err)
	rb.profileID, rb.profileVersion = sp.ID, pv.ID
	gtmpl, _ := acceptance.LookupGateSetTemplate("mlperf-llama2-70b-server")
	_, gnv, errs, err := prepareSpec(gateSetOps, gtmpl.Spec)
	require.NoError(t, err)
	require.Empty(t, errs)
	gs, gv, err := b.store.CreateSpec(ctx, store.KindGateSet, pid, gnv)
	require.NoError(t, err)
	rb.gateSetID, rb.gateVersion = gs.ID, gv.ID
	rb.hostID, err = b.store.CreateHost(ctx, pid, store.NewHost{Name: "gpu-node-07", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	return rb
}

func (rb *rolloutBundle) url(rest string) string {
	return fmt.Sprintf("/programs/%d%s", rb.programID, rest)
}

// judgedRun stores a finished run of the profile judged by the gate set
// version with the given verdict, as evaluate_run leaves it.
func (rb *rolloutBundle) judgedRun(t *testing.T, verdict string) int64 {
	t.Helper()
	ctx := context.Background()
	gv := rb.gateVersion
	run, err := rb.store.CreateRun(ctx, store.NewRun{ProgramID: rb.programID, ProfileVersionID: rb.profileVersion, GateSetVersionID: &gv, HostID: rb.hostID})
	require.NoError(t, err)
	canon := []byte(fmt.Sprintf(`{"run":%d,"verdict":%q}`, run, verdict))
	sum := sha256.Sum256(canon)
	_, err = rb.store.SaveEvaluation(ctx, store.StoredEvaluation{RunID: run, GateSetVersionID: gv, Overall: verdict, Result: canon, Canonical: canon,
		Digest: "sha256:" + hex.EncodeToString(sum[:]), EngineVersion: "test"})
	require.NoError(t, err)
	require.NoError(t, rb.store.SetRunState(ctx, run, store.RunDone, "judged"))
	return run
}

// addStages makes the plan through the editor, each stage judged by the
// gate set version on the profile.
func (rb *rolloutBundle) addStages(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		res, page := rb.post(t, rb.owner, rb.url("/rollout/stages"), url.Values{"name": {name}, "description": {"stage " + name},
			"gate_set_version": {fmt.Sprint(rb.gateVersion)}, "profile": {fmt.Sprint(rb.profileID)}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
	}
}

func (rb *rolloutBundle) post(t *testing.T, c *http.Client, path string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, rb.ts.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := c.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(body)
}

func (rb *rolloutBundle) stageID(t *testing.T, name string) int64 {
	t.Helper()
	stages, err := rb.store.ListRolloutStages(context.Background(), rb.programID)
	require.NoError(t, err)
	for _, s := range stages {
		if s.Name == name {
			return s.ID
		}
	}
	t.Fatalf("no stage %s", name)
	return 0
}

// decide posts a decision on a stage from the board.
func (rb *rolloutBundle) decide(t *testing.T, c *http.Client, stage, action, reason string) (int, string) {
	t.Helper()
	res, page := rb.post(t, c, rb.url(fmt.Sprintf("/rollout/stages/%d/%s", rb.stageID(t, stage), action)), url.Values{"reason": {reason}})
	return res.StatusCode, page
}

func (rb *rolloutBundle) board(t *testing.T, c *http.Client) string {
	t.Helper()
	res, page := rb.get(t, c, rb.url("/rollout"))
	require.Equal(t, http.StatusOK, res.StatusCode)
	return page
}

var stageStateRE = regexp.MustCompile(`id="stage-state-([A-Za-z0-9_-]+)" data-state="([a-z-]+)">([a-z -]+)<`)

// stageStates reads each stage's state (the rollout machine's) off the board.
func stageStates(page string) map[string]string {
	out := map[string]string{}
	for _, m := range stageStateRE.FindAllStringSubmatch(page, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// stageLabels reads each stage's state as the board says it.
func stageLabels(page string) map[string]string {
	out := map[string]string{}
	for _, m := range stageStateRE.FindAllStringSubmatch(page, -1) {
		out[m[1]] = m[3]
	}
	return out
}

func TestRolloutStageNeedsBothSides(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	rb.addStages(t, "lab-acceptance", "pilot-5pct", "fleet-100pct")
	run := rb.judgedRun(t, "PASS")

	page := rb.board(t, rb.viewer)
	require.Contains(t, page, fmt.Sprintf("run #%d", run))
	require.Equal(t, map[string]string{"lab-acceptance": "awaiting-approval", "pilot-5pct": "pending", "fleet-100pct": "pending"}, stageStates(page))
	require.Equal(t, map[string]string{"lab-acceptance": "awaiting approval", "pilot-5pct": "pending", "fleet-100pct": "pending"}, stageLabels(page))

	// Both approvers are awaited on their home pages.
	_, home := rb.get(t, rb.custApprover, "/")
	require.Contains(t, home, `id="awaiting"`)
	require.Contains(t, home, "lab-acceptance")

	// The vendor side approves: the stage is not approved by one side.
	code, _ := rb.decide(t, rb.vendorApprover, "lab-acceptance", "approve", "")
	require.Equal(t, http.StatusSeeOther, code)
	page = rb.board(t, rb.viewer)
	require.Equal(t, "awaiting-approval", stageStates(page)["lab-acceptance"])
	require.Contains(t, page, "Waiting for approval by the customer side.")
	require.Contains(t, page, "va &lt;va@vendor.example&gt;")
	_, home = rb.get(t, rb.vendorApprover, "/")
	require.NotContains(t, home, `id="awaiting"`, "the vendor side has signed")

	// A second vendor approver is not the customer side.
	code, page = rb.decide(t, rb.vendorSecond, "lab-acceptance", "approve", "")
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "the vendor side has already approved stage &#34;lab-acceptance&#34;")
	// A viewer may not approve at all.
	code, _ = rb.decide(t, rb.viewer, "lab-acceptance", "approve", "")
	require.Equal(t, http.StatusForbidden, code)

	// The customer side approves: the stage is approved, the next awaits.
	code, _ = rb.decide(t, rb.custApprover, "lab-acceptance", "approve", "")
	require.Equal(t, http.StatusSeeOther, code)
	page = rb.board(t, rb.viewer)
	require.Equal(t, map[string]string{"lab-acceptance": "approved", "pilot-5pct": "awaiting-approval", "fleet-100pct": "pending"}, stageStates(page))

	// A decision taken on a stale page is refused.
	code, page = rb.decide(t, rb.vendorApprover, "fleet-100pct", "approve", "")
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "the current stage is &#34;pilot-5pct&#34;")

	// Through to full rollout, then nothing more.
	for _, st := range []string{"pilot-5pct", "fleet-100pct"} {
		code, _ = rb.decide(t, rb.custApprover, st, "approve", "")
		require.Equal(t, http.StatusSeeOther, code)
		code, _ = rb.decide(t, rb.vendorApprover, st, "approve", "")
		require.Equal(t, http.StatusSeeOther, code)
	}
	page = rb.board(t, rb.viewer)
	require.Contains(t, page, ">complete<")
	require.Equal(t, map[string]string{"lab-acceptance": "approved", "pilot-5pct": "approved", "fleet-100pct": "approved"}, stageStates(page))

	// The log holds the six approvals, each with the run's evidence.
	ds, err := rb.store.ListDecisions(context.Background(), rb.programID)
	require.NoError(t, err)
	require.Len(t, ds, 6)
	for i, d := range ds {
		require.Equal(t, int64(i+1), d.Record.Seq)
		require.Equal(t, "approve", d.Record.Kind)
		require.Equal(t, []string{fmt.Sprint(run)}, d.Record.Evidence.RunIDs)
		require.Equal(t, "PASS", d.Record.Evidence.Verdicts["gates"])
		require.Contains(t, d.Record.Evidence.Digests, fmt.Sprintf("evaluation/%d", run))
	}
	require.Equal(t, "vendor:Acme Storage", ds[0].Record.Organisation)
	require.Equal(t, "customer:BigCloud", ds[1].Record.Organisation)
}

func TestRolloutWaiverNeedsAReason(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	rb.addStages(t, "lab-acceptance", "pilot-5pct")
	rb.judgedRun(t, "FAIL")

	page := rb.board(t, rb.vendorApprover)
	require.Contains(t, page, `id="gates-lab-acceptance">do not pass<`)
	require.Equal(t, "gates not met", stageLabels(page)["lab-acceptance"], "the machine's awaiting-approval, named for what it is")
	require.Equal(t, "awaiting-approval", stageStates(page)["lab-acceptance"])
	require.Contains(t, page, `id="waive-lab-acceptance"`, "failing gates offer a waiver, not an approval")
	require.NotContains(t, page, `id="approve-lab-acceptance"`)

	code, page := rb.decide(t, rb.vendorApprover, "lab-acceptance", "approve", "")
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "do not pass; approve them with a waiver and a written reason")

	code, page = rb.decide(t, rb.vendorApprover, "lab-acceptance", "waive", "  \r\n ")
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "a waive needs a written reason")
	ds, err := rb.store.ListDecisions(context.Background(), rb.programID)
	require.NoError(t, err)
	require.Empty(t, ds, "nothing is recorded for a refused decision")

	reason := "p99 TTFT miss is the known warm-up outlier; accepted for the lab"
	code, _ = rb.decide(t, rb.vendorApprover, "lab-acceptance", "waive", reason)
	require.Equal(t, http.StatusSeeOther, code)

	// The waiver's reason shows wherever the stage appears.
	page = rb.board(t, rb.viewer)
	require.Contains(t, page, "Waiver reason: "+reason)
	_, home := rb.get(t, rb.custApprover, "/")
	require.Contains(t, home, "lab-acceptance, awaits the customer approver: an approval once its gates pass, or a waiver with a reason (the vendor side approved it with a waiver: "+reason+")")
	_, log := rb.get(t, rb.viewer, rb.url("/decisions"))
	require.Contains(t, log, reason)
	_, plan := rb.get(t, rb.owner, rb.url("/rollout/plan"))
	require.Contains(t, plan, "(vendor side): "+reason, "the plan editor shows it too")
	status, api := rb.apiGet(t, rb.createTokenViaUI(t, rb.viewer, "read"), "/api/v1"+rb.url("/rollout"))
	require.Equal(t, http.StatusOK, status)
	stage := api["stages"].([]any)[0].(map[string]any)
	require.Equal(t, true, stage["waived"])
	require.Equal(t, reason, stage["approvals"].([]any)[0].(map[string]any)["reason"])

	code, _ = rb.decide(t, rb.custApprover, "lab-acceptance", "waive", "agreed for the lab stage only")
	require.Equal(t, http.StatusSeeOther, code)
	page = rb.board(t, rb.viewer)
	require.Equal(t, "approved", stageStates(page)["lab-acceptance"])
	require.Contains(t, page, "agreed for the lab stage only")
}

func TestRolloutApproverOfAnotherProgramGets404(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	rb.addStages(t, "lab-acceptance")
	rb.judgedRun(t, "PASS")
	ctx := context.Background()
	// An approver of the customer organisation, in another program only.
	customer, err := rb.store.ListOrganizations(ctx)
	require.NoError(t, err)
	var custOrg, vendOrg int64
	for _, o := range customer {
		if o.Kind == "customer" {
			custOrg = o.ID
		} else {
			vendOrg = o.ID
		}
	}
	other, err := rb.store.CreateProgram(ctx, "Other", "", vendOrg, custOrg, nil)
	require.NoError(t, err)
	id := rb.createUser(t, "elsewhere@customer.example", &custOrg, false)
	_, err = rb.store.SetMember(ctx, other, id, store.RoleApprover)
	require.NoError(t, err)
	c := rb.signIn(t, "elsewhere@customer.example")

	code, _ := rb.decide(t, c, "lab-acceptance", "approve", "")
	require.Equal(t, http.StatusNotFound, code)
	token := rb.createTokenViaUI(t, c, "read", "approve")
	status, _ := rb.apiPost(t, token, rb.url("/rollout/decisions"), `{"kind":"approve","stage":"lab-acceptance"}`)
	require.Equal(t, http.StatusNotFound, status)
	ds, err := rb.store.ListDecisions(ctx, rb.programID)
	require.NoError(t, err)
	require.Empty(t, ds)
}

func (rb *rolloutBundle) apiPost(t *testing.T, token, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, rb.ts.URL+"/api/v1"+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func TestRolloutDecisionAPI(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	rb.addStages(t, "lab-acceptance", "pilot-5pct")
	run := rb.judgedRun(t, "PASS")
	vendor := rb.createTokenViaUI(t, rb.vendorApprover, "read", "approve")
	customer := rb.createTokenViaUI(t, rb.custApprover, "read", "approve")
	readOnly := rb.createTokenViaUI(t, rb.custApprover, "read")

	status, out := rb.apiPost(t, readOnly, rb.url("/rollout/decisions"), `{"kind":"approve","stage":"lab-acceptance"}`)
	require.Equal(t, http.StatusForbidden, status, "deciding needs the approve scope")
	status, out = rb.apiPost(t, vendor, rb.url("/rollout/decisions"), `{"kind":"veto","stage":"lab-acceptance"}`)
	require.Equal(t, http.StatusUnprocessableEntity, status)
	status, out = rb.apiPost(t, vendor, rb.url("/rollout/decisions"), `{"kind":"approve","stage":"lab-acceptance"}`)
	require.Equal(t, http.StatusCreated, status, out)
	rec := out["decision"].(map[string]any)["record"].(map[string]any)
	require.Equal(t, "va@vendor.example", rec["actor"])
	require.Equal(t, float64(1), rec["seq"])
	require.Equal(t, []any{fmt.Sprint(run)}, rec["evidence"].(map[string]any)["run_ids"])

	status, out = rb.apiPost(t, customer, rb.url("/rollout/decisions"), `{"kind":"approve","stage":"lab-acceptance"}`)
	require.Equal(t, http.StatusCreated, status, out)
	require.Equal(t, []any{"stage_approved"}, out["events"])
	require.Equal(t, "pilot-5pct", out["rollout"].(map[string]any)["current_stage"])

	status, out = rb.apiPost(t, customer, rb.url("/rollout/decisions"), `{"kind":"halt","stage":"pilot-5pct"}`)
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, out["error"], "a halt needs a written reason")
	status, out = rb.apiPost(t, customer, rb.url("/rollout/decisions"), `{"kind":"halt","stage":"pilot-5pct","reason":"TTFT spikes on the pilot nodes"}`)
	require.Equal(t, http.StatusCreated, status, out)
	require.Equal(t, []any{"stage_halted"}, out["events"])
	require.Equal(t, "halted", out["rollout"].(map[string]any)["status"])

	status, out = rb.apiGet(t, readOnly, "/api/v1"+rb.url("/decisions"))
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, true, out["verified"], out["problem"])
	require.Len(t, out["decisions"], 3)
	require.Equal(t, float64(3), out["head_seq"])
}

// Tampering: a decision row changed or removed directly in PostgreSQL
// (with the append-only trigger disabled, as a superuser can) makes the
// chain fail verification, on the page, in the API and offline, naming
// the first bad record.
func TestRolloutDecisionLogTamperingIsFound(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	ctx := context.Background()
	rb.addStages(t, "lab-acceptance", "pilot-5pct")
	rb.judgedRun(t, "PASS")
	for _, c := range []*http.Client{rb.vendorApprover, rb.custApprover} {
		code, page := rb.decide(t, c, "lab-acceptance", "approve", "")
		require.Equal(t, http.StatusSeeOther, code, page)
	}
	code, page := rb.decide(t, rb.viewer, "pilot-5pct", "halt", "error budget burning on the pilot")
	require.Equal(t, http.StatusSeeOther, code, page)

	keys := rb.download(t, "/.well-known/accord/keys.json")
	trusted, err := attest.ParseTrustedKeys(keys)
	require.NoError(t, err)
	token := rb.createTokenViaUI(t, rb.viewer, "read")
	file := filepath.Join(t.TempDir(), "decisions.json")
	// verify checks the log on the page, in the API and offline (as
	// `accord verify` does); problem "" means verified.
	verify := func(t *testing.T, problem string) {
		t.Helper()
		_, log := rb.get(t, rb.viewer, rb.url("/decisions"))
		status, api := rb.apiGet(t, token, "/api/v1"+rb.url("/decisions"))
		require.Equal(t, http.StatusOK, status)
		require.NoError(t, os.WriteFile(file, rb.download(t, rb.url("/decisions/export")), 0o600))
		var out bytes.Buffer
		err := attest.VerifyFile(ctx, file, trusted, &out)
		if problem == "" {
			require.Contains(t, log, `id="chain-verdict">verified<`)
			require.Equal(t, true, api["verified"])
			require.NoError(t, err)
			require.Contains(t, out.String(), "3 records")
			return
		}
		require.Contains(t, log, `id="chain-verdict">broken<`)
		require.Contains(t, log, problem)
		require.Equal(t, false, api["verified"])
		require.Contains(t, api["problem"], problem)
		require.ErrorContains(t, err, problem)
	}
	verify(t, "")

	// The trigger refuses changes; a superuser can switch it off.
	_, err = rb.pool.Exec(ctx, `UPDATE decisions SET reason = 'x'`)
	require.ErrorContains(t, err, "append-only")
	_, err = rb.pool.Exec(ctx, `DELETE FROM decisions`)
	require.ErrorContains(t, err, "append-only")
	_, err = rb.pool.Exec(ctx, `TRUNCATE decisions`)
	require.ErrorContains(t, err, "append-only")
	_, err = rb.pool.Exec(ctx, `CREATE TABLE decisions_kept AS SELECT * FROM decisions`)
	require.NoError(t, err)
	asSuperuser := func(t *testing.T, sql string) {
		t.Helper()
		_, err := rb.pool.Exec(ctx, `ALTER TABLE decisions DISABLE TRIGGER decisions_append_only;`+sql+`;ALTER TABLE decisions ENABLE TRIGGER decisions_append_only`)
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		name    string
		tamper  string
		problem string
		// replays: the changed log still replays on the plan, so only its
		// verification stands between it and the next decision.
		replays bool
	}{
		{"reason rewritten", `UPDATE decisions SET reason = 'nothing to see' WHERE seq = 2`, "record 2 (position 1): changed: field reason differs from the signed record", true},
		{"actor swapped", `UPDATE decisions SET actor = 'vb@vendor.example' WHERE seq = 1`, "record 1 (position 0): changed: field actor differs from the signed record", true},
		{"evidence edited", `UPDATE decisions SET evidence = jsonb_set(evidence, '{verdicts,gates}', '"FAIL"') WHERE seq = 3`, "record 3 (position 2): changed: field evidence.verdicts differs from the signed record", false},
		{"time moved", `UPDATE decisions SET at = at - interval '1 day' WHERE seq = 1`, "record 1 (position 0): changed: field time differs from the signed record", false},
		{"record deleted", `DELETE FROM decisions WHERE seq = 2`, "record 2 (position 1): missing: the log goes from seq 1 to seq 3 (record deleted)", false},
		{"last record deleted", `DELETE FROM decisions WHERE seq = 3`, "checkpoint: signed head is seq 3, the log ends at seq 2 (records cut off the end)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asSuperuser(t, tc.tamper)
			verify(t, tc.problem)
			// The state a broken log gives is not trusted: nothing moves the
			// rollout on (halting would still be recorded).
			code, page := rb.decide(t, rb.vendorApprover, "pilot-5pct", "resume", "the NVMe-oF path is fixed")
			require.Equal(t, http.StatusUnprocessableEntity, code)
			if tc.replays {
				require.Contains(t, page, "The decision log does not verify")
				require.Contains(t, rb.board(t, rb.viewer), `id="rollout-unverified"`)
			} else {
				require.Regexp(t, "The decision log does not verify|does not replay on the plan", page)
			}
			asSuperuser(t, `DELETE FROM decisions; INSERT INTO decisions SELECT * FROM decisions_kept`)
			verify(t, "")
		})
	}
}

func (rb *rolloutBundle) download(t *testing.T, path string) []byte {
	t.Helper()
	res, err := rb.viewer.Get(rb.ts.URL + path)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, path)
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return b
}

func TestRolloutHaltAndResumeNeedBothSides(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	rb.addStages(t, "pilot-5pct")
	rb.judgedRun(t, "PASS")
	code, _ := rb.decide(t, rb.vendorApprover, "pilot-5pct", "approve", "")
	require.Equal(t, http.StatusSeeOther, code)

	// Any member halts at once; the approval given before no longer counts.
	code, page := rb.decide(t, rb.viewer, "pilot-5pct", "halt", "")
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "a halt needs a written reason")
	code, _ = rb.decide(t, rb.viewer, "pilot-5pct", "halt", "p99 TTFT doubled on the pilot nodes")
	require.Equal(t, http.StatusSeeOther, code)
	page = rb.board(t, rb.viewer)
	require.Equal(t, "halted", stageStates(page)["pilot-5pct"])
	require.Contains(t, page, "p99 TTFT doubled on the pilot nodes")
	require.Contains(t, page, "Waiting for the vendor and customer sides to agree to resume.")

	code, page = rb.decide(t, rb.custApprover, "pilot-5pct", "approve", "")
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "is halted (halt); both sides must resume it first")
	code, _ = rb.decide(t, rb.custApprover, "pilot-5pct", "resume", "firmware 2.1.4 fixes the path flaps")
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "halted", stageStates(rb.board(t, rb.viewer))["pilot-5pct"], "one side's consent does not resume")
	code, _ = rb.decide(t, rb.vendorApprover, "pilot-5pct", "resume", "agreed after the firmware update")
	require.Equal(t, http.StatusSeeOther, code)
	page = rb.board(t, rb.viewer)
	require.Equal(t, "awaiting-approval", stageStates(page)["pilot-5pct"])
	require.Contains(t, page, "attempt 2")
	require.Contains(t, page, "Waiting for approval by the vendor and customer sides.")
}

func TestRolloutPlanEditing(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	ctx := context.Background()

	// The editor refuses what would not make a stage.
	res, page := rb.post(t, rb.owner, rb.url("/rollout/stages"), url.Values{"name": {"10 %"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "stage names may use only letters, digits, - and _")
	require.Contains(t, page, "Choose the gate set version that must pass.")
	require.Contains(t, page, "Choose at least one profile the gates must pass on.")
	res, _ = rb.post(t, rb.vendorApprover, rb.url("/rollout/stages"), url.Values{"name": {"x"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "approvers do not edit the plan")

	rb.addStages(t, "lab-acceptance", "pilot-5pct")
	res, page = rb.post(t, rb.owner, rb.url("/rollout/stages"), url.Values{"name": {"pilot-5pct"}, "gate_set_version": {fmt.Sprint(rb.gateVersion)}, "profile": {fmt.Sprint(rb.profileID)}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "is already the name of stages[1]")

	// Runs chosen explicitly must be judged by the stage's gate set version.
	passing := rb.judgedRun(t, "PASS")
	failing := rb.judgedRun(t, "FAIL") // the latest qualifying run
	unjudged, err := rb.store.CreateRun(ctx, store.NewRun{ProgramID: rb.programID, ProfileVersionID: rb.profileVersion, HostID: rb.hostID})
	require.NoError(t, err)
	lab := rb.stageID(t, "lab-acceptance")
	edit := func(pinned string) (*http.Response, string) {
		return rb.post(t, rb.owner, rb.url(fmt.Sprintf("/rollout/stages/%d/edit", lab)), url.Values{"description": {"in the vendor's lab"},
			"gate_set_version": {fmt.Sprint(rb.gateVersion)}, "profile": {fmt.Sprint(rb.profileID)}, "pinned_runs": {pinned}})
	}
	res, page = edit(fmt.Sprint(unjudged))
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, fmt.Sprintf("Run #%d was not judged by the chosen gate set version.", unjudged))
	res, page = edit(fmt.Sprintf("%d, %d", passing, failing))
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "Choose at most one run of")
	require.Contains(t, rb.board(t, rb.viewer), `id="gates-lab-acceptance">do not pass<`, "the latest run fails")
	res, page = edit(fmt.Sprint(passing))
	require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
	page = rb.board(t, rb.viewer)
	require.Contains(t, page, `id="gates-lab-acceptance">pass<`, "the chosen run passes")
	require.Contains(t, page, "(chosen explicitly)")

	// Once a side approved, the stage's gates stay; a named stage stays.
	code, _ := rb.decide(t, rb.vendorApprover, "lab-acceptance", "approve", "")
	require.Equal(t, http.StatusSeeOther, code)
	res, page = edit("")
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "It has approvals given on these gates")
	res, page = rb.post(t, rb.owner, rb.url(fmt.Sprintf("/rollout/stages/%d/delete", lab)), url.Values{"confirm": {"1"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "is named by decisions in the log")

	// A stage no decision names can go.
	pilot := rb.stageID(t, "pilot-5pct")
	res, _ = rb.post(t, rb.owner, rb.url(fmt.Sprintf("/rollout/stages/%d/delete", pilot)), url.Values{})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, "removal needs its confirmation")
	res, _ = rb.post(t, rb.owner, rb.url(fmt.Sprintf("/rollout/stages/%d/delete", pilot)), url.Values{"confirm": {"1"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	stages, err := rb.store.ListRolloutStages(ctx, rb.programID)
	require.NoError(t, err)
	require.Len(t, stages, 1)

	// A new watch starts from the stage's gate set: its first absolute
	// stop-loss line (MLPerf's p99 TTFT, stopped at 4 s), unit and k.
	res, page = rb.get(t, rb.owner, rb.url("/rollout/plan"))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, fmt.Sprintf(`id="watch-from-%d"`, lab))
	require.Contains(t, page, "stop-loss of criterion ttft-p99 (p99 Time to first token)")
	require.Regexp(t, fmt.Sprintf(`id="line-%d"[^>]*value="4000"|value="4000"[^>]*id="line-%d"`, lab, lab), page)
	require.Regexp(t, fmt.Sprintf(`id="unit-%d"[^>]*value="ms"|value="ms"[^>]*id="unit-%d"`, lab, lab), page)

	// A watch's form is checked too.
	res, page = rb.post(t, rb.owner, rb.url(fmt.Sprintf("/rollout/stages/%d/watch", lab)), url.Values{"name": {"p99 TTFT"}, "endpoint": {"ftp://prom"},
		"query": {"x"}, "comparator": {"<="}, "line": {"NaN"}, "consecutive": {"0"}, "interval": {"30"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "Give the http:// or https:// base URL")
	require.Contains(t, page, "The line is a number")
	require.Contains(t, page, "From 1 to 100 checks in a row.")
	res, _ = rb.post(t, rb.owner, rb.url(fmt.Sprintf("/rollout/stages/%d/watch", lab)), url.Values{"name": {"p99 TTFT"}, "endpoint": {"http://127.0.0.1:9090"},
		"query": {`histogram_quantile(0.99, sum(rate(vllm:time_to_first_token_seconds_bucket[1m])) by (le))`}, "comparator": {"<="}, "line": {"2"}, "unit": {"s"},
		"consecutive": {"3"}, "interval": {"30"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	page = rb.board(t, rb.viewer)
	require.Contains(t, page, "must stay at or below 2 s, 3 in a row trigger the stop-loss")
}

func TestRolloutWebhookRegistrationAndDelivery(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	rb.addStages(t, "pilot-5pct")
	rb.judgedRun(t, "PASS")

	res, page := rb.post(t, rb.owner, rb.url("/webhooks"), url.Values{"url": {"file:///etc/passwd"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "Give an http:// or https:// URL")
	require.Contains(t, page, "Choose at least one event.")
	res, page = rb.post(t, rb.owner, rb.url("/webhooks"), url.Values{"url": {"http://127.0.0.1:9/argo"}, "event": {"stage_halted", "stop_loss"}})
	require.Equal(t, http.StatusOK, res.StatusCode)
	m := regexp.MustCompile(`<code id="webhook-secret">(whsec_[0-9a-f]{64})</code>`).FindStringSubmatch(page)
	require.NotNil(t, m, "the secret is shown once")
	_, list := rb.get(t, rb.owner, rb.url("/webhooks"))
	require.NotContains(t, list, m[1], "and never again")
	hooks, err := rb.store.ListWebhooks(context.Background(), rb.programID)
	require.NoError(t, err)
	require.Len(t, hooks, 1)
	require.NotContains(t, string(hooks[0].SealedSecret), m[1], "the secret is stored sealed")

	// An approval raises no subscribed event; a halt does.
	code, _ := rb.decide(t, rb.vendorApprover, "pilot-5pct", "approve", "")
	require.Equal(t, http.StatusSeeOther, code)
	code, _ = rb.decide(t, rb.custApprover, "pilot-5pct", "halt", "pilot nodes report NVMe-oF path flaps")
	require.Equal(t, http.StatusSeeOther, code)
	ds, err := rb.store.ListDeliveries(context.Background(), rb.programID, hooks[0].ID, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, "stage_halted", ds[0].Event)
	var body map[string]any
	require.NoError(t, json.Unmarshal(ds[0].Body, &body))
	require.Equal(t, "pilot-5pct", body["stage"])
	require.Equal(t, "halted", body["rollout_status"])
	var jobs int
	require.NoError(t, rb.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = 'deliver_webhook'`).Scan(&jobs))
	require.Equal(t, 1, jobs, "the delivery's job is inserted with it")

	_, page = rb.get(t, rb.owner, rb.url(fmt.Sprintf("/webhooks/%d", hooks[0].ID)))
	require.Contains(t, page, "stage_halted")
	require.Contains(t, page, ">pending<")
	require.NotContains(t, page, fmt.Sprintf(`id="redeliver-%d"`, ds[0].ID), "a pending delivery is still being tried")

	// A delivery that gave up is sent again, as a new delivery with the
	// same body and its own job; one that has not failed is not.
	redeliver := func(id int64) (*http.Response, string) {
		return rb.post(t, rb.owner, rb.url(fmt.Sprintf("/webhooks/%d/deliveries/%d/redeliver", hooks[0].ID, id)), url.Values{})
	}
	res, _ = redeliver(ds[0].ID)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page = rb.get(t, rb.owner, rb.url(fmt.Sprintf("/webhooks/%d", hooks[0].ID)))
	require.Contains(t, page, fmt.Sprintf("Delivery %d has not failed", ds[0].ID))
	status := 503
	require.NoError(t, rb.store.RecordDeliveryAttempt(context.Background(), ds[0].ID, time.Now(), &status, "HTTP 503", store.DeliveryFailed))
	_, page = rb.get(t, rb.owner, rb.url(fmt.Sprintf("/webhooks/%d", hooks[0].ID)))
	require.Contains(t, page, fmt.Sprintf(`id="redeliver-%d"`, ds[0].ID))
	res, _ = redeliver(ds[0].ID)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	again, err := rb.store.ListDeliveries(context.Background(), rb.programID, hooks[0].ID, 10)
	require.NoError(t, err)
	require.Len(t, again, 2)
	require.Equal(t, store.DeliveryPending, again[0].State)
	require.Equal(t, ds[0].Body, again[0].Body)
	require.Equal(t, *ds[0].DecisionSeq, *again[0].DecisionSeq)
	require.Equal(t, store.DeliveryFailed, again[1].State, "the failed one keeps its attempts")
	require.NoError(t, rb.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = 'deliver_webhook'`).Scan(&jobs))
	require.Equal(t, 2, jobs)
	_, page = rb.get(t, rb.owner, rb.url(fmt.Sprintf("/webhooks/%d", hooks[0].ID)))
	require.Contains(t, page, fmt.Sprintf("Delivery %d is sent again as delivery %d.", ds[0].ID, again[0].ID))
	res, _ = redeliver(again[0].ID + 1000)
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}
