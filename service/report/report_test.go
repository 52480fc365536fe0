package report_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/attesttest"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/service/evaluation"
	"github.com/accordlab/accord/service/ingest"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/service/servicetest"
	"github.com/accordlab/accord/store"
)

// testBundle is a program with a vendor engineer and a customer engineer,
// an inference profile and a gate set on p99 TTFT, on a transaction
// rolled back at the test's end.
type testBundle struct {
	st       *store.Store
	program  servicetest.Program
	profile  store.SpecVersion
	gates    store.SpecVersion
	host     int64
	vendor   store.User
	customer store.User
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	st := servicetest.Store(t)
	b := &testBundle{st: st, program: servicetest.NewProgram(t, st)}
	b.profile = b.program.Profile(t, st, acceptance.ProfileSpec{
		Name: "chat", Purpose: acceptance.PurposeInferenceServing, Storage: acceptance.Storage{Transport: acceptance.TransportEmulated}, Repetitions: 3,
		Steps: []acceptance.StepSpec{{Name: "serve", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{
			Endpoint: "http://127.0.0.1:9/v1", Model: "m", API: "chat",
			PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 64}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 8},
			Load: acceptance.Load{Mode: "concurrency", Concurrency: 4}, Duration: acceptance.Duration(time.Minute),
		}}},
	})
	b.gates = b.program.GateSet(t, st, acceptance.GateSetSpec{Name: "ttft", Criteria: []acceptance.Criterion{{
		Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
		Comparator: acceptance.LessOrEqual, Threshold: 200, Unit: "ms", Severity: acceptance.Blocking}}})
	b.host = b.program.Host(t, st, "lab")
	b.vendor = b.program.Member(t, st, "vera", b.program.Vendor, store.RoleEngineer)
	b.customer = b.program.Member(t, st, "chen", b.program.Customer, store.RoleEngineer)
	return b
}

// runFiles are a run's facts and events, their content the test's own:
// the tests share one database, each in a transaction of its own, and two
// open transactions storing the same content wait for each other.
func runFiles(t *testing.T) map[string]string {
	return map[string]string{
		wire.FactsFile:  fmt.Sprintf(`{"kernel": {"release": {"value": "6.8.0"}}, "test": %q}`, t.Name()),
		wire.EventsFile: fmt.Sprintf(`{"seq":1,"type":"log","message":%q}`, t.Name()) + "\n",
	}
}

// judged is a run the vendor's engineer requested, measured (3 × 1,000
// TTFTs from 50 to 100 ms, its facts file kept) and judged.
func (b *testBundle) judged(t *testing.T) store.Run {
	t.Helper()
	ctx := context.Background()
	run := b.program.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, GateSetVersionID: &b.gates.ID, CreatedBy: b.vendor.ID})
	var ms []acceptance.Measurement
	for rep := 1; rep <= 3; rep++ {
		values := make([]float64, 1000)
		for i := range values {
			values[i] = 50 + 50*float64(i)/1000
		}
		ms = append(ms, acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: "serve", Level: "c=4", Repetition: rep, Values: values,
			Source: acceptance.Source{Tool: "accord-probe", ToolVersion: "test"}})
	}
	require.NoError(t, b.st.SaveMeasurements(ctx, run.ID, ms))
	for path, body := range runFiles(t) {
		blob, err := b.st.Artifacts().Put(ctx, strings.NewReader(body))
		require.NoError(t, err)
		require.NoError(t, b.st.AddRunArtifact(ctx, store.RunArtifact{RunID: run.ID, Path: path, SHA256: blob.SHA256, Size: blob.Size}))
	}
	require.NoError(t, b.st.SetRunState(ctx, run.ID, store.RunEvaluating, "judging the results"))
	_, _, err := evaluation.Evaluate(ctx, b.st, servicetest.Env(t), run.ID)
	require.NoError(t, err)
	run, err = b.st.RunByID(ctx, run.ID)
	require.NoError(t, err)
	return run
}

// A judged run is signed: its statements and its report bundle are
// stored, the bundle holds the report the renderer wrote and the run's
// files, and it verifies offline against the installation's keys.
func TestSignStoresABundleThatVerifies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	run := b.judged(t)
	kr := servicetest.Keyring(t)
	var rendered []byte
	render := func(_ context.Context, w io.Writer, c report.Contents) error {
		html := fmt.Sprintf("<!doctype html><title>Run %d</title><p>%s: %s</p>", c.Run.ID, c.Run.ProfileName, c.Evaluation.Verdict)
		rendered = []byte(html)
		_, err := io.WriteString(w, html)
		return err
	}
	rep, err := report.Signer{Store: b.st, Keyring: kr, Render: render}.Sign(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, "<!doctype html><title>Run "+strconv.FormatInt(run.ID, 10)+"</title><p>chat: PASS</p>", string(rendered))
	stored, err := b.st.RunLatestReport(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, rep.BundleSHA256, stored.BundleSHA256)
	atts, err := b.st.RunAttestations(ctx, run.ID)
	require.NoError(t, err)
	require.NotEmpty(t, atts)

	body, err := b.st.Artifacts().Open(ctx, rep.BundleSHA256)
	require.NoError(t, err)
	defer body.Close()
	var bundle bytes.Buffer
	_, err = io.Copy(&bundle, body)
	require.NoError(t, err)
	keys, err := kr.KeySet()
	require.NoError(t, err)
	checked, err := attest.VerifyBundle(ctx, bytes.NewReader(bundle.Bytes()), keys)
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(run.ID, 10), checked.RunID)
	require.False(t, checked.SelfTrusted, "checked against the installation's keys")
	require.Equal(t, []string{attest.FileProfile, attest.FileGateSet}, checked.Documents, "the profile and gate set documents are in the bundle")
	var names []string
	for _, f := range checked.Files {
		names = append(names, f.Name)
	}
	require.Contains(t, strings.Join(names, " "), wire.FactsFile)
	require.Contains(t, strings.Join(names, " "), "report.html")

	// Another installation's keys do not vouch for it.
	otherKeys, err := servicetest.Keyring(t).KeySet()
	require.NoError(t, err)
	_, err = attest.VerifyBundle(ctx, bytes.NewReader(bundle.Bytes()), otherKeys)
	require.Error(t, err)

	// Without a keyring nothing is signed.
	_, err = report.Signer{Store: b.st, Render: render}.Sign(ctx, run.ID)
	require.ErrorIs(t, err, report.ErrNoKeyring)
}

// Who may co-sign a run is the program's other organisation: the one its
// requester is not of; a run without a requester of either has none.
func TestOtherSideOfARun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	byVendor := b.program.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, CreatedBy: b.vendor.ID})
	other, err := report.OtherSideOf(ctx, b.st, byVendor)
	require.NoError(t, err)
	require.Equal(t, report.OtherSide{OrgID: b.program.Customer, OrgName: b.program.CustomerName, OrgKind: "customer"}, other)
	byCustomer := b.program.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, CreatedBy: b.customer.ID})
	other, err = report.OtherSideOf(ctx, b.st, byCustomer)
	require.NoError(t, err)
	require.Equal(t, "vendor", other.OrgKind)
	require.Equal(t, b.program.Vendor, other.OrgID)

	var refusal *report.CoSignRefusal
	_, err = report.OtherSideOf(ctx, b.st, b.program.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host}))
	require.ErrorAs(t, err, &refusal)
	require.Contains(t, refusal.Reason, "has no requesting member recorded")
	third, err := b.st.CreateOrganization(ctx, "Third "+t.Name(), "customer")
	require.NoError(t, err)
	stranger, err := b.st.CreateUser(ctx, store.NewUser{Email: "sam-" + strconv.FormatInt(third, 10) + "@third.example", DisplayName: "Sam", PasswordHash: "x", OrganizationID: &third})
	require.NoError(t, err)
	_, err = report.OtherSideOf(ctx, b.st, b.program.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, CreatedBy: stranger}))
	require.ErrorAs(t, err, &refusal)
	require.Contains(t, refusal.Reason, "of neither organisation of the program")
}

// A co-signature's file name is the signer's side, the file-safe local
// part of their address and their id: never shared by two members.
func TestCoSignerNamesAreFileSafeAndOwn(t *testing.T) {
	t.Parallel()
	require.Equal(t, "customer-erin-o-neil-lab-17", report.CoSignerName("customer", store.User{ID: 17, Email: "Erin.O'Neil+lab@BigCloud.example"}))
	require.Equal(t, "vendor-18", report.CoSignerName("vendor", store.User{ID: 18, Email: "@vendor.example"}))
	long := report.CoSignerName("vendor", store.User{ID: 19, Email: strings.Repeat("a", 60) + "@vendor.example"})
	require.Equal(t, "vendor-"+strings.Repeat("a", 40)+"-19", long)
	require.NotEqual(t, report.CoSignerName("vendor", store.User{ID: 20, Email: "a.b@x"}), report.CoSignerName("vendor", store.User{ID: 21, Email: "a-b@y"}))
}

// The bundle's title names what ran, where and its label, but not the run
// itself: the verifier writes "Run N: <title>", which read "Run 1: Run
// #1: …" when the title named the run too.
func TestBundleTitleDoesNotRepeatTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	run := b.judged(t)
	// A label, as the run form sets it when the run is requested.
	_, err := b.st.Tx().Exec(ctx, `UPDATE runs SET label = $1 WHERE id = $2`, "candidate: NVMe-oF", run.ID)
	require.NoError(t, err)
	kr := servicetest.Keyring(t)
	rep, err := report.Signer{Store: b.st, Keyring: kr, Render: func(_ context.Context, w io.Writer, _ report.Contents) error {
		_, err := io.WriteString(w, "<!doctype html><title>report</title>")
		return err
	}}.Sign(ctx, run.ID)
	require.NoError(t, err)
	body, err := b.st.Artifacts().Open(ctx, rep.BundleSHA256)
	require.NoError(t, err)
	defer body.Close()
	keys, err := kr.KeySet()
	require.NoError(t, err)
	checked, err := attest.VerifyBundle(ctx, body, keys)
	require.NoError(t, err)
	require.Equal(t, "chat v1 on lab (candidate: NVMe-oF)", checked.Title)
	var text bytes.Buffer
	require.NoError(t, checked.WriteText(&text))
	first, _, _ := strings.Cut(text.String(), "\n")
	require.True(t, strings.HasPrefix(first, "Run "+strconv.FormatInt(run.ID, 10)+": chat v1 on lab (candidate: NVMe-oF) (bundle created "), first)
	require.NotContains(t, text.String(), "Run #")
}

// A run without a gate set shipped without profile.json (the two
// documents went together), and was not signed at all: its results are
// stored done, unjudged, and it is signed as it is. Its bundle holds the
// profile, no gate set and no test-result statement; it verifies with
// accord verify and with VERIFY.md's standard-tool procedure (every
// tamper caught by both), and sha256sum of profile.json is the profile
// version's digest, which the benchmark statement names.
func TestAnUngatedRunIsSignedWithItsProfile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	env := servicetest.Env(t)
	run := b.program.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, CreatedBy: b.vendor.ID})
	files := &sshrun.Collection{}
	for name, body := range runFiles(t) {
		sum := sha256.Sum256([]byte(body))
		files.Files = append(files.Files, sshrun.File{Name: name, Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:]), Data: []byte(body)})
	}
	ms := []acceptance.Measurement{{Metric: acceptance.MetricTTFT, Step: "serve", Level: "c=4", Repetition: 1, Values: []float64{50, 60, 70},
		Source: acceptance.Source{Tool: "accord-probe", ToolVersion: "test"}}}
	require.NoError(t, b.st.SetRunState(ctx, run.ID, store.RunRunning, "measuring"))
	require.NoError(t, ingest.Save(ctx, b.st, env, run, ingest.Results{Files: files, Measurements: ms}, ingest.Outcome{State: store.RunEvaluating, Reason: "collected"}))
	run, err := b.st.RunByID(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunDone, run.State)
	require.Equal(t, []int64{run.ID}, servicetest.Enqueued(t, b.st, "sign_run"), "the unjudged run is signed")
	require.Empty(t, servicetest.Enqueued(t, b.st, "evaluate_run"))

	rep, err := report.Signer{Store: b.st, Keyring: env.Keyring, Render: func(_ context.Context, w io.Writer, c report.Contents) error {
		_, err := fmt.Fprintf(w, "<!doctype html><title>Run %d</title><p>%s: no gate set</p>", c.Run.ID, c.Run.ProfileName)
		return err
	}}.Sign(ctx, run.ID)
	require.NoError(t, err)
	body, err := b.st.Artifacts().Open(ctx, rep.BundleSHA256)
	require.NoError(t, err)
	bundle, err := io.ReadAll(body)
	body.Close()
	require.NoError(t, err)
	keys, err := env.Keyring.KeySet()
	require.NoError(t, err)
	checked, err := attest.VerifyBundle(ctx, bytes.NewReader(bundle), keys)
	require.NoError(t, err)
	require.Equal(t, []string{attest.FileProfile}, checked.Documents)
	require.Len(t, checked.Attestations, 1)
	require.Equal(t, attest.BenchmarkPredicateType, checked.Attestations[0].PredicateType, "no test-result: nothing judged it")
	var text bytes.Buffer
	require.NoError(t, checked.WriteText(&text))
	require.Contains(t, text.String(), "profile.json hashes to the digest the benchmark statement names (the run had no gate set)")

	// With the standard tools, in the unpacked bundle.
	dir := attesttest.Extract(t, bundle)
	require.NoFileExists(t, filepath.Join(dir, attest.FileGateSet))
	out, err := attesttest.Run(dir, "sha256sum "+attest.FileProfile)
	require.NoError(t, err)
	require.Equal(t, strings.TrimPrefix(b.profile.Digest, "sha256:")+"  "+attest.FileProfile+"\n", out, "sha256sum recomputes the profile version's digest")
	md, err := os.ReadFile(filepath.Join(dir, attest.FileVerifyMD))
	require.NoError(t, err)
	require.Contains(t, string(md), "## 4. The profile\n")
	require.Contains(t, string(md), "the run had no gate set, so nothing judged it")
	var profileBlock string
	for _, block := range attesttest.Blocks(t, dir, "sh") {
		if strings.Contains(block, "digest profile") {
			profileBlock = block
		}
	}
	require.NotContains(t, profileBlock, "gateSet")
	out, err = attesttest.Run(dir, profileBlock)
	require.NoError(t, err)
	require.Equal(t, attest.FileProfile+": OK\n", out, "VERIFY.md compares it with the statement's digest")
	m := attesttest.CheckTampers(t, bundle, keys)
	attesttest.RequireAllCaught(t, m)
}
