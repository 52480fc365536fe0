package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/dsse"
	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
	"github.com/accordlab/accord/web"
)

// rolloutBundle is an installation with a program whose plan has stages
// judged by one gate set version on one profile, and a River client
// working the rollout's jobs (no lab host: runs are stored directly).
type rolloutBundle struct {
	store          *store.Store
	deps           Deps
	river          *river.Client[pgx.Tx]
	programID      int64
	profileID      int64
	profileVersion int64
	gateVersion    int64
	hostID         int64
	// periodic, when set before River starts, are the jobs River
	// schedules by itself (the production watch's tick, as the server has).
	periodic []*river.PeriodicJob
}

func setupRollouts(t *testing.T, stages ...string) *rolloutBundle {
	t.Helper()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	b := &rolloutBundle{store: store.New(pool)}
	sealer, err := runners.NewSealer([]byte("0123456789abcdef0123456789abcdef-rollouts"))
	require.NoError(t, err)
	// The hook and Prometheus servers listen on loopback, which only an
	// operator's allow-list opens (ACCORD_EGRESS_ALLOW_CIDRS).
	b.deps = Deps{Log: quietLogger(), Store: b.store, Sealer: sealer, Holder: "test", Version: "test", Report: web.RenderReport,
		Egress: egress.NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, nil)}
	// The key is made before the decisions the tests date on a fixed clock.
	b.deps.Keyring, err = attest.OpenKeyring(t.TempDir(), attest.KeyringOptions{Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }})
	require.NoError(t, err)

	vendor, err := b.store.CreateOrganization(ctx, "Acme Storage", "vendor")
	require.NoError(t, err)
	customer, err := b.store.CreateOrganization(ctx, "BigCloud", "customer")
	require.NoError(t, err)
	b.programID, err = b.store.CreateProgram(ctx, "P", "", vendor, customer, nil)
	require.NoError(t, err)
	b.hostID, err = b.store.CreateHost(ctx, b.programID, store.NewHost{Name: "lab", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	profile := acceptance.ProfileSpec{Name: "kv lookups", Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe},
		Repetitions: 1, Steps: []acceptance.StepSpec{{Name: "read", Kind: acceptance.StepFio, Fio: &acceptance.FioStep{RW: "randread", BlockSize: 4 << 10, IODepth: 1,
			NumJobs: 1, Size: 16 << 20, Runtime: acceptance.Duration(time.Second), IOEngine: "psync", Target: "/tmp/fio.dat"}}}}.Normalized()
	b.profileVersion, b.profileID = saveSpec(t, b.store, b.programID, store.KindProfile, profile, profile.Name)
	gates := quickGates()
	b.gateVersion, _ = saveSpec(t, b.store, b.programID, store.KindGateSet, gates, gates.Name)
	for _, name := range stages {
		_, err := b.store.AddRolloutStage(ctx, b.programID, name, store.StageGates{GateSetVersionID: b.gateVersion,
			Profiles: []store.StageProfile{{ProfileID: b.profileID}}}, 0)
		require.NoError(t, err)
	}
	return b
}

// saveSpec stores a spec's version 1 and returns the version's and the spec's ids.
func saveSpec(t *testing.T, st *store.Store, programID int64, kind store.SpecKind, spec any, name string) (int64, int64) {
	t.Helper()
	canon, err := json.Marshal(spec)
	require.NoError(t, err)
	sp, v, err := st.CreateSpec(context.Background(), kind, programID, store.NewSpecVersion{Name: name, Spec: canon, Digest: fmt.Sprintf("sha256:%064x", len(canon))})
	require.NoError(t, err)
	return v.ID, sp.ID
}

// startRiver works the rollout's jobs; webhook retries wait backoff.
func (b *rolloutBundle) startRiver(t *testing.T, backoff time.Duration) {
	t.Helper()
	b.startRiverWith(t, backoff, func(*Deps) {})
}

// startRiverWith starts River with the webhook worker's dependencies
// changed by change.
func (b *rolloutBundle) startRiverWith(t *testing.T, backoff time.Duration, change func(*Deps)) {
	t.Helper()
	hookDeps := b.deps
	change(&hookDeps)
	workers := river.NewWorkers()
	river.AddWorker(workers, &WatchTickWorker{deps: b.deps})
	river.AddWorker(workers, &WatchCheckWorker{deps: b.deps})
	river.AddWorker(workers, &DeliverWebhookWorker{deps: hookDeps, backoff: backoff})
	river.AddWorker(workers, &EvaluateRunWorker{deps: b.deps})
	river.AddWorker(workers, &SignRunWorker{deps: b.deps}) // inserted after an evaluation, not worked here
	client, err := river.NewClient(riverpgxv5.New(b.store.Pool), &river.Config{
		Logger: b.deps.Log, Queues: map[string]river.QueueConfig{QueueDefault: {MaxWorkers: 4}}, Workers: workers,
		FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, TestOnly: true,
		PeriodicJobs: b.periodic,
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(ctx)
	})
	b.river = client
}

// insertOnly is a River client that inserts jobs without working them.
func (b *rolloutBundle) insertOnly(t *testing.T) *river.Client[pgx.Tx] {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(b.store.Pool), &river.Config{})
	require.NoError(t, err)
	return client
}

func (b *rolloutBundle) env(ins Inserter) rollout.Env {
	return rollout.Env{Keyring: b.deps.Keyring, Queue: NewQueue(ins)}
}

var (
	vera = acceptance.Actor{UserID: "vera@acme.example", Name: "Vera", OrgKind: acceptance.OrgVendor, Approver: true}
	chen = acceptance.Actor{UserID: "chen@bigcloud.example", Name: "Chen", OrgKind: acceptance.OrgCustomer, Approver: true}
)

// decide records a person's decision in its own transaction.
func (b *rolloutBundle) decide(t *testing.T, ins Inserter, kind acceptance.DecisionKind, stage string, who acceptance.Actor, reason string) rollout.DecisionOutcome {
	t.Helper()
	var out rollout.DecisionOutcome
	require.NoError(t, b.store.InTx(context.Background(), func(tx *store.Store) error {
		var err error
		out, err = rollout.RecordDecision(context.Background(), tx, b.env(ins), rollout.DecisionInput{ProgramID: b.programID, Kind: kind, Stage: stage, Actor: who,
			OrgName: string(who.OrgKind) + " org", Reason: reason})
		return err
	}))
	return out
}

// judgedRun stores a finished run judged by the gate set version.
func (b *rolloutBundle) judgedRun(t *testing.T, verdict string) store.Run {
	t.Helper()
	ctx := context.Background()
	gv := b.gateVersion
	id, err := b.store.CreateRun(ctx, store.NewRun{ProgramID: b.programID, ProfileVersionID: b.profileVersion, GateSetVersionID: &gv, HostID: b.hostID})
	require.NoError(t, err)
	_, err = b.store.SaveEvaluation(ctx, store.StoredEvaluation{RunID: id, GateSetVersionID: gv, Overall: verdict, Result: []byte(`{}`), Canonical: []byte(`{}`),
		Digest: "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", EngineVersion: "test"})
	require.NoError(t, err)
	require.NoError(t, b.store.SetRunState(ctx, id, store.RunDone, "judged"))
	run, err := b.store.RunByID(ctx, id)
	require.NoError(t, err)
	return run
}

// verifyLog checks the program's log as `accord verify` checks its export.
func (b *rolloutBundle) verifyLog(t *testing.T) []store.StoredDecision {
	t.Helper()
	ctx := context.Background()
	ds, err := b.store.ListDecisions(ctx, b.programID)
	require.NoError(t, err)
	chain, err := b.store.ProgramDecisionChain(ctx, b.programID)
	require.NoError(t, err)
	records := make([]attest.Decision, len(ds))
	envs := make([]*dsse.Envelope, len(ds))
	for i, d := range ds {
		records[i], envs[i] = d.Record, d.Envelope
	}
	keys, err := b.deps.Keyring.KeySet()
	require.NoError(t, err)
	require.NoError(t, attest.VerifyChain(records, envs, chain.Checkpoint, keys))
	return ds
}

func (b *rolloutBundle) rollout(t *testing.T) rollout.Rollout {
	t.Helper()
	ro, err := rollout.Load(context.Background(), b.store, b.programID)
	require.NoError(t, err)
	require.NoError(t, ro.ReplayErr)
	return ro
}

// hookServer is a deployment system's webhook endpoint on 127.0.0.1: it
// answers each request with the next status of its script (then 200).
type hookServer struct {
	*httptest.Server
	mu       sync.Mutex
	script   []int
	received []hookRequest
}

type hookRequest struct {
	Header http.Header
	Body   []byte
	Status int
}

func startHookServer(t *testing.T, script ...int) *hookServer {
	t.Helper()
	h := &hookServer{script: script}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		status := http.StatusOK
		if len(h.script) > 0 {
			status, h.script = h.script[0], h.script[1:]
		}
		h.received = append(h.received, hookRequest{Header: r.Header.Clone(), Body: body, Status: status})
		h.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.received...)
}

// addWebhook registers a webhook with its sealed secret.
func (b *rolloutBundle) addWebhook(t *testing.T, url string, events ...string) (int64, string) {
	t.Helper()
	ctx := context.Background()
	id, err := b.store.CreateWebhook(ctx, b.programID, url, events, 0)
	require.NoError(t, err)
	secret, err := rollout.NewWebhookSecret()
	require.NoError(t, err)
	sealed, err := b.deps.Sealer.Seal([]byte(secret), rollout.WebhookSealLabel(id))
	require.NoError(t, err)
	require.NoError(t, b.store.SetWebhookSecret(ctx, id, sealed))
	return id, secret
}

// waitDelivery waits until a webhook's deliveries are all settled.
func (b *rolloutBundle) waitDeliveries(t *testing.T, hookID int64, n int, timeout time.Duration) []store.WebhookDelivery {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ds, err := b.store.ListDeliveries(context.Background(), b.programID, hookID, 100)
		require.NoError(t, err)
		done := len(ds) == n
		for _, d := range ds {
			done = done && d.State != store.DeliveryPending
		}
		if done {
			return ds
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook %d: %d deliveries not settled within %s: %+v", hookID, n, timeout, ds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRunStopLossHaltsTheStageItIsEvidenceFor(t *testing.T) {
	t.Parallel()
	b := setupRollouts(t, "lab-acceptance", "pilot-5pct")
	b.startRiver(t, 20*time.Millisecond)
	hooks := startHookServer(t)
	hookID, secret := b.addWebhook(t, hooks.URL+"/argo", store.EventStopLoss, store.EventStageHalted)
	ctx := context.Background()
	b.judgedRun(t, "PASS")
	b.decide(t, b.river, acceptance.DecisionApprove, "lab-acceptance", vera, "")
	b.decide(t, b.river, acceptance.DecisionApprove, "lab-acceptance", chen, "")

	gv := b.gateVersion
	breach := &acceptance.StopLossBreach{Name: "read-latency", Metric: acceptance.MetricReadCLat, Statistic: acceptance.StatP99, Line: 800, Unit: "µs",
		Consecutive: 2, Explanation: "Stop-loss: p99 read latency crossed the 800 µs line in 2 consecutive interim windows (912 µs, 1.04 ms)."}
	stopped := func(profileVersion int64) store.Run {
		id, err := b.store.CreateRun(ctx, store.NewRun{ProgramID: b.programID, ProfileVersionID: profileVersion, GateSetVersionID: &gv, HostID: b.hostID})
		require.NoError(t, err)
		run, err := b.store.RunByID(ctx, id)
		require.NoError(t, err)
		return run
	}
	halt := func(run store.Run) bool {
		var halted bool
		require.NoError(t, b.store.InTx(ctx, func(tx *store.Store) error {
			var err error
			halted, err = rollout.HaltForRunStopLoss(ctx, tx, b.env(b.river), run, breach)
			return err
		}))
		return halted
	}

	// A run of a profile the stage does not name is not its evidence.
	other := acceptance.ProfileSpec{Name: "other", Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe},
		Repetitions: 1, Steps: []acceptance.StepSpec{{Name: "p", Kind: acceptance.StepPause, Pause: &acceptance.PauseStep{Duration: acceptance.Duration(time.Second)}}}}.Normalized()
	otherVersion, _ := saveSpec(t, b.store, b.programID, store.KindProfile, other, other.Name)
	require.False(t, halt(stopped(otherVersion)))
	require.Len(t, b.verifyLog(t), 2)

	// The stage's own evidence halts it with Accord's signed decision.
	run := stopped(b.profileVersion)
	require.True(t, halt(run))
	ro := b.rollout(t)
	cur, _ := ro.State.CurrentStage()
	require.Equal(t, "pilot-5pct", cur.Name)
	require.Equal(t, acceptance.StageHalted, cur.State)
	require.Equal(t, acceptance.DecisionStopLoss, cur.Halt.Kind)
	ds := b.verifyLog(t)
	require.Len(t, ds, 3)
	rec := ds[2].Record
	require.Equal(t, "stop-loss-triggered", rec.Kind)
	require.Equal(t, "accord", rec.Actor)
	require.Equal(t, "system", rec.Organisation)
	require.Equal(t, "pilot-5pct", rec.Stage)
	require.Contains(t, rec.Reason, fmt.Sprintf("Run %d: Stop-loss: p99 read latency crossed the 800 µs line", run.ID))
	require.Contains(t, rec.Evidence.RunIDs, strconv.FormatInt(run.ID, 10))
	require.Equal(t, "STOP-LOSS", rec.Evidence.Verdicts[fmt.Sprintf("%d/read-latency", run.ID)])
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, rec.Evidence.Digests[fmt.Sprintf("stop_loss/%d", run.ID)])
	notes, err := b.store.RunLogTail(ctx, run.ID, 5)
	require.NoError(t, err)
	require.Contains(t, notes[len(notes)-1].Message, "rollout stage pilot-5pct halted")

	// The webhook is called once, signed, with the most specific event.
	delivered := b.waitDeliveries(t, hookID, 1, 20*time.Second)
	require.Equal(t, store.DeliveryDelivered, delivered[0].State)
	got := hooks.requests()
	require.Len(t, got, 1)
	require.Equal(t, "stop_loss", got[0].Header.Get(rollout.HeaderWebhookEvent))
	require.True(t, rollout.VerifyWebhookSignature(secret, got[0].Body, got[0].Header.Get(rollout.HeaderWebhookSignature)))
	var body rollout.WebhookBody
	require.NoError(t, json.Unmarshal(got[0].Body, &body))
	require.Equal(t, []string{"stop_loss", "stage_halted"}, body.Events)
	require.Equal(t, "pilot-5pct", body.Stage)
	require.Equal(t, 2, body.StagePosition)
	require.Equal(t, "halted", body.RolloutStatus)
	require.Equal(t, ds[2].Hash, body.Decision.Hash)
	require.Equal(t, int64(3), body.Decision.Record.Seq)

	// Another stop-loss on the halted stage records nothing more.
	require.False(t, halt(stopped(b.profileVersion)))
	require.Len(t, b.verifyLog(t), 3)
}

// A run whose interim windows never crossed the line three times in a row,
// but whose final p99 is past it, is caught by the evaluation: the breach is
// kept on the run, and the stage it is evidence for halts.
func TestFinalEvaluationPastStopLossHaltsTheStage(t *testing.T) {
	t.Parallel()
	b := setupRollouts(t)
	ctx := context.Background()
	line := 800.0
	gates := acceptance.GateSetSpec{Name: "latency with a stop-loss", Criteria: []acceptance.Criterion{{
		Name: "read-latency", Metric: acceptance.MetricReadCLat, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
		Comparator: acceptance.LessOrEqual, Threshold: 500, Unit: "µs", StopLoss: &line, Severity: acceptance.Blocking,
	}}}.Normalized()
	gv, _ := saveSpec(t, b.store, b.programID, store.KindGateSet, gates, gates.Name)
	_, err := b.store.AddRolloutStage(ctx, b.programID, "lab-acceptance", store.StageGates{GateSetVersionID: gv,
		Profiles: []store.StageProfile{{ProfileID: b.profileID}}}, 0)
	require.NoError(t, err)
	b.startRiver(t, 20*time.Millisecond)

	// Latencies of 600 µs with a tail of 1 in 20 at 1.2 ms: p99 1.2 ms.
	samples := func() []float64 {
		v := make([]float64, 400)
		for i := range v {
			v[i] = 600 + float64(i%7)
			if i%20 == 0 {
				v[i] = 1200
			}
		}
		return v
	}
	judge := func() store.Run {
		id, err := b.store.CreateRun(ctx, store.NewRun{ProgramID: b.programID, ProfileVersionID: b.profileVersion, GateSetVersionID: &gv, HostID: b.hostID})
		require.NoError(t, err)
		require.NoError(t, b.store.SaveMeasurements(ctx, id, []acceptance.Measurement{{Metric: acceptance.MetricReadCLat, Step: "read", Repetition: 1,
			Values: samples(), Source: acceptance.Source{Tool: "fio", ToolVersion: "fio-3.33"}}}))
		require.NoError(t, b.store.SetRunState(ctx, id, store.RunEvaluating, "judging"))
		_, err = b.river.Insert(ctx, EvaluateRunArgs{RunID: id}, &river.InsertOpts{Queue: QueueDefault})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			run, err := b.store.RunByID(ctx, id)
			require.NoError(t, err)
			return run.State == store.RunDone
		}, 20*time.Second, 50*time.Millisecond, "the run is judged")
		run, err := b.store.RunByID(ctx, id)
		require.NoError(t, err)
		return run
	}

	run := judge()
	require.Equal(t, "FAIL", run.Verdict)
	raw, err := b.store.RunStopLoss(ctx, run.ID)
	require.NoError(t, err)
	var breach acceptance.StopLossBreach
	require.NoError(t, json.Unmarshal(raw, &breach))
	require.Equal(t, "final", breach.Interim)
	require.Equal(t, 1200.0, breach.Breaches[0].Value)
	require.Equal(t, "Stop-loss: the run's final p99 read completion latency, 1,200 µs in step read, is past the 800 µs line.", breach.Explanation)

	cur, _ := b.rollout(t).State.CurrentStage()
	require.Equal(t, acceptance.StageHalted, cur.State)
	require.Equal(t, acceptance.DecisionStopLoss, cur.Halt.Kind)
	ds := b.verifyLog(t)
	require.Len(t, ds, 1)
	require.Contains(t, ds[0].Record.Reason, fmt.Sprintf("Run %d: Stop-loss: the run's final p99", run.ID))

	// Judging it again records nothing more.
	_, err = b.river.Insert(ctx, EvaluateRunArgs{RunID: run.ID}, &river.InsertOpts{Queue: QueueDefault})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n := 0
		require.NoError(t, b.store.Pool.QueryRow(ctx, `SELECT count(*) FROM evaluations WHERE run_id = $1`, run.ID).Scan(&n))
		return n == 2
	}, 20*time.Second, 50*time.Millisecond, "the second evaluation")
	require.Len(t, b.verifyLog(t), 1)
}

// End to end: a real run on a lab host crosses its gate set's stop-loss
// line; the run is aborted, the rollout stage it is evidence for halts with
// Accord's signed decision, and the deployment system's webhook is called.
func TestRunCrossingStopLossHaltsStageAndCallsWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	profile := acceptance.ProfileSpec{
		Name: "kv lookups", Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe}, Repetitions: 1,
		Steps: []acceptance.StepSpec{{Name: "read", Kind: acceptance.StepFio, Fio: &acceptance.FioStep{RW: "randread", BlockSize: 4 << 10, IODepth: 1, NumJobs: 1,
			Size: 16 << 20, Runtime: acceptance.Duration(time.Minute), IOEngine: "psync", Target: b.work + "/fio.dat"}}},
	}.Normalized()
	// No lab reaches a trillion IOPS: the first interim window crosses the line.
	line := 1e12
	gates := acceptance.GateSetSpec{Name: "iops floor", StopLossConsecutive: 1, Criteria: []acceptance.Criterion{{
		Name: "read-iops", Metric: acceptance.MetricReadIOPS, Statistic: acceptance.StatRate, Mode: acceptance.Absolute,
		Comparator: acceptance.GreaterOrEqual, Threshold: 2e12, Unit: "IOPS", Severity: acceptance.Blocking, StopLoss: &line,
	}}}.Normalized()
	pv := b.saveProfile(t, profile)
	gv := b.saveGates(t, gates)
	var profileID int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT profile_id FROM profile_versions WHERE id = $1`, pv).Scan(&profileID))
	_, err := b.store.AddRolloutStage(ctx, b.programID, "pilot-5pct", store.StageGates{GateSetVersionID: gv, Profiles: []store.StageProfile{{ProfileID: profileID}}}, 0)
	require.NoError(t, err)
	hooks := startHookServer(t)
	hookID, err := b.store.CreateWebhook(ctx, b.programID, hooks.URL+"/flagger", []string{store.EventStopLoss}, 0)
	require.NoError(t, err)
	secret, err := rollout.NewWebhookSecret()
	require.NoError(t, err)
	sealed, err := b.deps.Sealer.Seal([]byte(secret), rollout.WebhookSealLabel(hookID))
	require.NoError(t, err)
	require.NoError(t, b.store.SetWebhookSecret(ctx, hookID, sealed))

	started := time.Now()
	runID := b.submit(t, b.river, pv, &gv, nil)
	run := b.waitFor(t, runID, 90*time.Second, "abort", func(r store.Run) bool { return store.RunFinal(r.State) })
	require.Equal(t, store.RunFailed, run.State)
	require.Contains(t, run.Reason, "stopped by the stop-loss")
	// From the start of the measurement to its abort took far less than
	// the step's minute.
	trans, err := b.store.RunTransitions(ctx, runID)
	require.NoError(t, err)
	var running, ended time.Time
	for _, tr := range trans {
		switch tr.ToState {
		case store.RunRunning:
			running = tr.At
		case store.RunCollecting:
			ended = tr.At
		}
	}
	require.Less(t, ended.Sub(running), 45*time.Second, "aborted before the step's 60 s (submitted %s ago)", time.Since(started))
	ro, err := rollout.Load(ctx, b.store, b.programID)
	require.NoError(t, err)
	require.NoError(t, ro.ReplayErr)
	cur, ok := ro.State.CurrentStage()
	require.True(t, ok)
	require.Equal(t, acceptance.StageHalted, cur.State)
	require.Equal(t, acceptance.DecisionStopLoss, cur.Halt.Kind)

	ds, err := b.store.ListDecisions(ctx, b.programID)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	chain, err := b.store.ProgramDecisionChain(ctx, b.programID)
	require.NoError(t, err)
	keys, err := b.deps.Keyring.KeySet()
	require.NoError(t, err)
	require.NoError(t, attest.VerifyChain([]attest.Decision{ds[0].Record}, []*dsse.Envelope{ds[0].Envelope}, chain.Checkpoint, keys), "the decision is signed")
	rec := ds[0].Record
	require.Equal(t, "stop-loss-triggered", rec.Kind)
	require.Equal(t, "accord", rec.Actor)
	require.Equal(t, []string{strconv.FormatInt(runID, 10)}, rec.Evidence.RunIDs)
	require.Contains(t, rec.Reason, fmt.Sprintf("Run %d: Stop-loss:", runID))

	deadline := time.Now().Add(30 * time.Second)
	for len(hooks.requests()) == 0 {
		require.True(t, time.Now().Before(deadline), "the webhook was not called")
		time.Sleep(100 * time.Millisecond)
	}
	got := hooks.requests()[0]
	require.Equal(t, "stop_loss", got.Header.Get(rollout.HeaderWebhookEvent))
	require.True(t, rollout.VerifyWebhookSignature(secret, got.Body, got.Header.Get(rollout.HeaderWebhookSignature)))
	var body rollout.WebhookBody
	require.NoError(t, json.Unmarshal(got.Body, &body))
	require.Equal(t, "pilot-5pct", body.Stage)
	require.Equal(t, ds[0].Hash, body.Decision.Hash)
}

// Decisions taken at once are judged one at a time: of many halts of one
// stage exactly one is recorded, and the chain stays whole.
func TestConcurrentDecisionsAreSerialized(t *testing.T) {
	t.Parallel()
	b := setupRollouts(t, "pilot-5pct")
	ins := b.insertOnly(t)
	ctx := context.Background()
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			who := acceptance.Actor{UserID: fmt.Sprintf("member%d@bigcloud.example", i), OrgKind: acceptance.OrgCustomer}
			errs <- b.store.InTx(ctx, func(tx *store.Store) error {
				_, err := rollout.RecordDecision(ctx, tx, b.env(ins), rollout.DecisionInput{ProgramID: b.programID, Kind: acceptance.DecisionHalt, Stage: "pilot-5pct",
					Actor: who, OrgName: "BigCloud", Reason: fmt.Sprintf("halt %d", i)})
				return err
			})
		}()
	}
	recorded, refused := 0, 0
	for range n {
		err := <-errs
		var te *acceptance.TransitionError
		switch {
		case err == nil:
			recorded++
		case errors.As(err, &te):
			require.Contains(t, te.Message, `stage "pilot-5pct" is already halted`)
			refused++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	require.Equal(t, 1, recorded)
	require.Equal(t, n-1, refused)
	require.Len(t, b.verifyLog(t), 1)

	// Both sides resume at once: both are recorded, in some order.
	for _, who := range []acceptance.Actor{vera, chen} {
		go func() {
			errs <- b.store.InTx(ctx, func(tx *store.Store) error {
				_, err := rollout.RecordDecision(ctx, tx, b.env(ins), rollout.DecisionInput{ProgramID: b.programID, Kind: acceptance.DecisionResume, Stage: "pilot-5pct",
					Actor: who, OrgName: "org", Reason: "fixed"})
				return err
			})
		}()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	ds := b.verifyLog(t)
	require.Len(t, ds, 3)
	cur, _ := b.rollout(t).State.CurrentStage()
	require.Equal(t, acceptance.StageAwaitingApproval, cur.State)
	require.Equal(t, 2, cur.Attempt)
}

// On a log that does not verify, nothing moves a rollout on, but Accord's
// stop-loss still halts it: stopping is safe whatever the log says.
func TestBrokenLogRefusesApprovalsButNotStopLoss(t *testing.T) {
	t.Parallel()
	b := setupRollouts(t, "lab-acceptance")
	ctx := context.Background()
	ins := b.insertOnly(t)
	b.judgedRun(t, "PASS")
	b.decide(t, ins, acceptance.DecisionApprove, "lab-acceptance", vera, "")
	_, err := b.store.Pool.Exec(ctx, `ALTER TABLE decisions DISABLE TRIGGER decisions_append_only;
		UPDATE decisions SET reason = 'approved long ago' WHERE seq = 1;
		ALTER TABLE decisions ENABLE TRIGGER decisions_append_only`)
	require.NoError(t, err)

	err = b.store.InTx(ctx, func(tx *store.Store) error {
		_, err := rollout.RecordDecision(ctx, tx, b.env(ins), rollout.DecisionInput{ProgramID: b.programID, Kind: acceptance.DecisionApprove,
			Stage: "lab-acceptance", Actor: chen, OrgName: "BigCloud"})
		return err
	})
	var refused *acceptance.TransitionError
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Message, "The decision log does not verify (decision log: record 1 (position 0): changed: field reason differs")
	ds, err := b.store.ListDecisions(ctx, b.programID)
	require.NoError(t, err)
	require.Len(t, ds, 1, "nothing was appended")

	gv := b.gateVersion
	id, err := b.store.CreateRun(ctx, store.NewRun{ProgramID: b.programID, ProfileVersionID: b.profileVersion, GateSetVersionID: &gv, HostID: b.hostID})
	require.NoError(t, err)
	run, err := b.store.RunByID(ctx, id)
	require.NoError(t, err)
	var halted bool
	require.NoError(t, b.store.InTx(ctx, func(tx *store.Store) error {
		halted, err = rollout.HaltForRunStopLoss(ctx, tx, b.env(ins), run, &acceptance.StopLossBreach{Name: "read-latency", Explanation: "Stop-loss: p99 past the line."})
		return err
	}))
	require.True(t, halted)
	cur, _ := b.rollout(t).State.CurrentStage()
	require.Equal(t, acceptance.StageHalted, cur.State)
}

// A run signed in a program with decisions carries the program's log as
// of signing, and it verifies as `accord verify` checks it.
func TestReportBundlesCarryTheProgramsDecisionLog(t *testing.T) {
	t.Parallel()
	b := setupRollouts(t, "pilot-5pct")
	ctx := context.Background()
	signer, err := b.deps.Keyring.Active()
	require.NoError(t, err)
	keys, err := b.deps.Keyring.KeySet()
	require.NoError(t, err)
	raw, err := b.deps.signer().DecisionLog(ctx, signer, b.programID, time.Now())
	require.NoError(t, err)
	empty, err := attest.ParseDecisionLog(raw)
	require.NoError(t, err)
	report, err := empty.Verify(keys)
	require.NoError(t, err)
	require.Equal(t, 0, report.Records, "no decisions yet: an empty log, its checkpoint at seq 0")
	require.Equal(t, int64(0), report.Seq)

	ins := b.insertOnly(t)
	require.NoError(t, b.store.InTx(ctx, func(tx *store.Store) error {
		_, err := rollout.RecordDecision(ctx, tx, b.env(ins), rollout.DecisionInput{ProgramID: b.programID, Kind: acceptance.DecisionHalt, Stage: "pilot-5pct",
			Actor: chen, OrgName: "BigCloud", Reason: "p99 TTFT above the line"})
		return err
	}))
	raw, err = b.deps.signer().DecisionLog(ctx, signer, b.programID, time.Now())
	require.NoError(t, err)
	log, err := attest.ParseDecisionLog(raw)
	require.NoError(t, err)
	report, err = log.Verify(keys)
	require.NoError(t, err)
	require.NotNil(t, report)
	require.Contains(t, string(raw), "p99 TTFT above the line")
}
