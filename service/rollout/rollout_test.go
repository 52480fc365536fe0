package rollout_test

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/service/servicetest"
	"github.com/accordlab/accord/store"
)

// testBundle is a program with a two-stage rollout plan (lab, pilot),
// each judged by one gate set on one profile, and a run of that profile
// judged PASS, on a transaction rolled back at the test's end.
type testBundle struct {
	st       *store.Store
	env      rollout.Env
	program  servicetest.Program
	profile  store.SpecVersion
	gates    store.SpecVersion
	host     int64
	passed   store.Run
	vendor   acceptance.Actor
	customer acceptance.Actor
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	ctx := context.Background()
	st := servicetest.Store(t)
	b := &testBundle{st: st, env: servicetest.Env(t), program: servicetest.NewProgram(t, st)}
	b.profile = b.program.Profile(t, st, acceptance.ProfileSpec{
		Name: "kv reads", Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe}, Repetitions: 1,
		Steps: []acceptance.StepSpec{{Name: "read", Kind: acceptance.StepFio, Fio: &acceptance.FioStep{RW: "randread", BlockSize: 4 << 10, IODepth: 32, NumJobs: 1,
			Size: 1 << 30, Runtime: acceptance.Duration(time.Minute), IOEngine: "libaio", Target: "/srv/scratch/kv.dat"}}},
	})
	b.gates = b.program.GateSet(t, st, acceptance.GateSetSpec{Name: "reads", Criteria: []acceptance.Criterion{{
		Name: "read-p99", Metric: acceptance.MetricReadCLat, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
		Comparator: acceptance.LessOrEqual, Threshold: 2000, Unit: "us", Severity: acceptance.Blocking}}})
	for _, name := range []string{"lab", "pilot"} {
		_, err := st.AddRolloutStage(ctx, b.program.ID, name, store.StageGates{GateSetVersionID: b.gates.ID,
			Profiles: []store.StageProfile{{ProfileID: b.profile.SpecID}}}, 0)
		require.NoError(t, err)
	}
	b.host = b.program.Host(t, st, "lab")
	b.passed = b.program.Run(t, st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, GateSetVersionID: &b.gates.ID})
	_, err := st.SaveEvaluation(ctx, store.StoredEvaluation{RunID: b.passed.ID, GateSetVersionID: b.gates.ID, Overall: "PASS", Result: []byte(`{}`),
		Canonical: []byte(`{}`), Digest: "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", EngineVersion: "test"})
	require.NoError(t, err)
	require.NoError(t, st.SetRunState(ctx, b.passed.ID, store.RunDone, "verdict: PASS"))
	b.vendor = acceptance.Actor{UserID: "vera@vendor.example", Name: "Vera", OrgKind: acceptance.OrgVendor, Approver: true}
	b.customer = acceptance.Actor{UserID: "chen@customer.example", Name: "Chen", OrgKind: acceptance.OrgCustomer, Approver: true}
	return b
}

func (b *testBundle) decide(t *testing.T, kind acceptance.DecisionKind, stage string, who acceptance.Actor, reason string) (rollout.DecisionOutcome, error) {
	t.Helper()
	return rollout.RecordDecision(context.Background(), b.st, b.env, rollout.DecisionInput{ProgramID: b.program.ID, Kind: kind, Stage: stage, Actor: who, Reason: reason})
}

func (b *testBundle) stageState(t *testing.T, name string) acceptance.StageState {
	t.Helper()
	ro, err := rollout.Load(context.Background(), b.st, b.program.ID)
	require.NoError(t, err)
	require.NoError(t, ro.ReplayErr)
	for _, s := range ro.State.Stages {
		if s.Name == name {
			return s.State
		}
	}
	t.Fatalf("no stage %s", name)
	return ""
}

// Every decision is signed into the program's hash chain and raises its
// events: the second side's approval approves the stage (one webhook
// delivery enqueued with its job), a refused decision writes nothing, and
// Accord's stop-loss halts the current stage; the stored log verifies as
// `accord verify` checks an export.
func TestDecisionsAreSignedChainedAndRaiseTheirEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	hook, err := b.st.CreateWebhook(ctx, b.program.ID, "https://deploy.example/accord", []string{store.EventStageApproved}, 0)
	require.NoError(t, err)

	out, err := b.decide(t, acceptance.DecisionApprove, "lab", b.vendor, "")
	require.NoError(t, err)
	require.Empty(t, out.Events, "one side only")
	require.Equal(t, acceptance.StageAwaitingApproval, b.stageState(t, "lab"))
	out, err = b.decide(t, acceptance.DecisionApprove, "lab", b.customer, "")
	require.NoError(t, err)
	require.Equal(t, []string{store.EventStageApproved}, out.Events)
	require.Equal(t, 1, out.Deliveries)
	require.Equal(t, acceptance.StageApproved, b.stageState(t, "lab"))
	require.Equal(t, int64(2), out.Record.Record.Seq)
	require.Contains(t, out.Record.Record.Evidence.RunIDs, itoa(b.passed.ID), "the gate's evidence is the judged run")
	deliveries, err := b.st.ListDeliveries(ctx, b.program.ID, hook, 10)
	require.NoError(t, err)
	require.Len(t, deliveries, 1)
	require.Equal(t, []int64{deliveries[0].ID}, servicetest.EnqueuedBy(t, b.st, "deliver_webhook", "delivery_id"))

	// A viewer's approval is refused, and nothing is written.
	viewer := acceptance.Actor{UserID: "view@customer.example", OrgKind: acceptance.OrgCustomer}
	_, err = b.decide(t, acceptance.DecisionApprove, "pilot", viewer, "")
	var refused *acceptance.TransitionError
	require.ErrorAs(t, err, &refused)
	ds, err := b.st.ListDecisions(ctx, b.program.ID)
	require.NoError(t, err)
	require.Len(t, ds, 2)

	// Accord's stop-loss halts the pilot: a stop-loss is also a halt.
	out, err = b.decide(t, acceptance.DecisionStopLoss, "pilot", rollout.SystemActor, "p99 TTFT past the line")
	require.NoError(t, err)
	require.Equal(t, []string{store.EventStopLoss, store.EventStageHalted}, out.Events)
	require.Zero(t, out.Deliveries, "the webhook is not subscribed to these")
	require.Equal(t, acceptance.StageHalted, b.stageState(t, "pilot"))

	ds, err = b.st.ListDecisions(ctx, b.program.ID)
	require.NoError(t, err)
	chain, err := b.st.ProgramDecisionChain(ctx, b.program.ID)
	require.NoError(t, err)
	require.Equal(t, int64(3), chain.HeadSeq)
	require.NoError(t, rollout.VerifyStoredLog(b.env.Keyring, b.program.ID, ds, chain))
	for i := 1; i < len(ds); i++ {
		require.Equal(t, ds[i-1].Hash, ds[i].Record.PrevHash, "each record chains to the one before")
	}

	// A program without a plan has nothing to decide on.
	other := servicetest.NewProgram(t, b.st)
	_, err = rollout.RecordDecision(ctx, b.st, b.env, rollout.DecisionInput{ProgramID: other.ID, Kind: acceptance.DecisionHalt, Stage: "lab", Actor: b.vendor, Reason: "x"})
	require.True(t, errors.Is(err, rollout.ErrNoPlan), "%v", err)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A run's stop-loss halts a stage only where the run is evidence for it
// (the stage's gate set judged it, on one of its profiles), once.
func TestRunStopLossHaltsOnlyTheStageItIsEvidenceFor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	breach := &acceptance.StopLossBreach{Name: "read-p99", Metric: acceptance.MetricReadCLat, Line: 4000, Consecutive: 2, Explanation: "Stop-loss: reads past 4 ms"}

	// Another gate set's run is no evidence for the lab stage.
	otherGates := b.program.GateSet(t, b.st, acceptance.GateSetSpec{Name: "other", Criteria: []acceptance.Criterion{{
		Name: "read-p99", Metric: acceptance.MetricReadCLat, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
		Comparator: acceptance.LessOrEqual, Threshold: 1000, Unit: "us", Severity: acceptance.Blocking}}})
	stranger := b.program.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, GateSetVersionID: &otherGates.ID})
	halted, err := rollout.HaltForRunStopLoss(ctx, b.st, b.env, stranger, breach)
	require.NoError(t, err)
	require.False(t, halted)
	require.Equal(t, acceptance.StageAwaitingApproval, b.stageState(t, "lab"))

	run := b.program.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, GateSetVersionID: &b.gates.ID})
	halted, err = rollout.HaltForRunStopLoss(ctx, b.st, b.env, run, breach)
	require.NoError(t, err)
	require.True(t, halted)
	require.Equal(t, acceptance.StageHalted, b.stageState(t, "lab"))
	ds, err := b.st.ListDecisions(ctx, b.program.ID)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	rec := ds[0].Record
	require.Equal(t, string(acceptance.DecisionStopLoss), rec.Kind)
	require.Equal(t, "STOP-LOSS", rec.Evidence.Verdicts[itoa(run.ID)+"/read-p99"])
	require.Contains(t, rec.Evidence.Digests, "stop_loss/"+itoa(run.ID))
	require.Equal(t, "Run "+itoa(run.ID)+": Stop-loss: reads past 4 ms", rec.Reason)

	halted, err = rollout.HaltForRunStopLoss(ctx, b.st, b.env, run, breach)
	require.NoError(t, err)
	require.False(t, halted, "already halted: no new decision")
	ds, err = b.st.ListDecisions(ctx, b.program.ID)
	require.NoError(t, err)
	require.Len(t, ds, 1)
}

// The webhook signature is the HMAC-SHA256 of the body under the secret,
// as `openssl dgst -sha256 -hmac` computes it, and it checks nothing else.
func TestWebhookSignatureIsHMACSHA256(t *testing.T) {
	t.Parallel()
	secret, err := rollout.NewWebhookSecret()
	require.NoError(t, err)
	require.Regexp(t, `^whsec_[0-9a-f]{64}$`, secret)
	body := []byte(`{"event":"stop_loss","stage":"pilot-5pct"}`)
	cmd := exec.Command("openssl", "dgst", "-sha256", "-hmac", secret)
	cmd.Stdin = strings.NewReader(string(body))
	out, err := cmd.Output()
	require.NoError(t, err)
	want := strings.TrimSpace(string(out))
	want = want[strings.LastIndex(want, " ")+1:]
	sig := rollout.WebhookSignature(secret, body)
	require.Equal(t, "sha256="+want, sig)
	require.True(t, rollout.VerifyWebhookSignature(secret, body, sig))
	require.False(t, rollout.VerifyWebhookSignature(secret, append(body, ' '), sig), "another body")
	require.False(t, rollout.VerifyWebhookSignature(secret+"x", body, sig), "another secret")
	require.False(t, rollout.VerifyWebhookSignature(secret, body, want), "without the sha256= prefix")
}

// Records and pages name a watch's endpoint without its credentials or
// query string, and write its figures with their units.
func TestWatchTextsNameNoSecret(t *testing.T) {
	t.Parallel()
	require.Equal(t, "https://prom.example:9090/prometheus", rollout.RedactEndpoint("https://alice:s3cret@prom.example:9090/prometheus?token=abc"))
	require.Equal(t, "(unreadable URL)", rollout.RedactEndpoint("http://[::1"))
	require.Equal(t, "1.235 s", rollout.FormatSeconds(1234567*time.Microsecond))
	require.Equal(t, "0.000 s", rollout.FormatSeconds(0))
	require.Equal(t, "2.5 s", rollout.FormatWatchValue(2.5, "s"))
	require.Equal(t, "1.23457e+06", rollout.FormatWatchValue(1234567, ""))
}
