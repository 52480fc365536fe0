package evaluation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/service/evaluation"
	"github.com/accordlab/accord/service/servicetest"
	"github.com/accordlab/accord/store"
)

// testBundle is a program with an inference profile, a host and a gate
// set on p99 TTFT (at most 200 ms, a stop-loss line at 400 ms), on a
// transaction rolled back at the test's end.
type testBundle struct {
	st      *store.Store
	program servicetest.Program
	profile store.SpecVersion
	gates   store.SpecVersion
	host    int64
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
	stop := 400.0
	b.gates = b.program.GateSet(t, st, acceptance.GateSetSpec{Name: "ttft", Criteria: []acceptance.Criterion{{
		Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
		Comparator: acceptance.LessOrEqual, Threshold: 200, Unit: "ms", Severity: acceptance.Blocking, StopLoss: &stop,
	}}})
	b.host = b.program.Host(t, st, "lab")
	return b
}

// judgedRun is a run waiting for its verdict, whose three repetitions of
// 1,000 requests each took TTFTs spread evenly over [low, high) ms.
func (b *testBundle) judgedRun(t *testing.T, low, high float64) store.Run {
	t.Helper()
	ctx := context.Background()
	run := b.program.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, GateSetVersionID: &b.gates.ID})
	var ms []acceptance.Measurement
	for rep := 1; rep <= 3; rep++ {
		values := make([]float64, 1000)
		for i := range values {
			values[i] = low + (high-low)*float64(i)/1000
		}
		ms = append(ms, acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: "serve", Level: "c=4", Repetition: rep, Values: values,
			Source: acceptance.Source{Tool: "accord-probe", ToolVersion: "test"}})
	}
	require.NoError(t, b.st.SaveMeasurements(ctx, run.ID, ms))
	require.NoError(t, b.st.SetRunState(ctx, run.ID, store.RunEvaluating, "judging the results"))
	run, err := b.st.RunByID(ctx, run.ID)
	require.NoError(t, err)
	return run
}

// facts is a host facts document as the probe writes it.
func facts(kernel string) []byte {
	return []byte(`{"kernel": {"release": {"value": "` + kernel + `"}}}`)
}

// A run waiting for its verdict is judged by its gate set: the evaluation
// is stored (the same bytes when judged again), the run is done with its
// verdict, and its signing is enqueued in the same transaction.
func TestEvaluateJudgesTheRunAndEnqueuesItsSigning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	run := b.judgedRun(t, 50, 100)
	env := servicetest.Env(t)
	ev, id, err := evaluation.Evaluate(ctx, b.st, env, run.ID)
	require.NoError(t, err)
	require.Equal(t, acceptance.Pass, ev.Verdict)
	stored, err := b.st.RunLatestEvaluation(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, id, stored.ID)
	require.Equal(t, "PASS", stored.Overall)
	done, err := b.st.RunByID(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunDone, done.State)
	require.Equal(t, "verdict: PASS", done.Reason)
	require.Equal(t, "PASS", done.Verdict)
	require.Equal(t, []int64{run.ID}, servicetest.Enqueued(t, b.st, "sign_run"))
	raw, err := b.st.RunStopLoss(ctx, run.ID)
	require.NoError(t, err)
	require.Empty(t, raw, "no line crossed")

	// Judged again: a new row, the same bytes.
	_, again, err := evaluation.Evaluate(ctx, b.st, env, run.ID)
	require.NoError(t, err)
	require.NotEqual(t, id, again)
	second, err := b.st.RunLatestEvaluation(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, stored.Digest, second.Digest)
	require.True(t, bytes.Equal(stored.Canonical, second.Canonical))
}

// A run whose final numbers are past its stop-loss line fails its gate and
// has the crossing recorded, as an interim crossing would be, once.
func TestEvaluateRecordsAFinalStopLossCrossingOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	run := b.judgedRun(t, 450, 600)
	env := servicetest.Env(t)
	ev, _, err := evaluation.Evaluate(ctx, b.st, env, run.ID)
	require.NoError(t, err)
	require.Equal(t, acceptance.Fail, ev.Verdict)
	raw, err := b.st.RunStopLoss(ctx, run.ID)
	require.NoError(t, err)
	var breach acceptance.StopLossBreach
	require.NoError(t, json.Unmarshal(raw, &breach))
	require.Equal(t, "ttft-p99", breach.Name)
	require.Equal(t, "final", breach.Interim)
	_, _, err = evaluation.Evaluate(ctx, b.st, env, run.ID)
	require.NoError(t, err)
	var notes int
	require.NoError(t, b.st.Tx().QueryRow(ctx, `SELECT count(*) FROM run_events WHERE run_id = $1 AND message = $2`, run.ID, breach.Explanation).Scan(&notes))
	require.Equal(t, 1, notes, "the crossing is said once, however often the run is judged")
}

// A run another run measured beside cannot pass, and its reason says why.
func TestEvaluateNeverPassesAContaminatedRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	run := b.judgedRun(t, 50, 100)
	lease, _, err := b.st.AcquireLease(ctx, b.host, run.ID, "test", time.Minute)
	require.NoError(t, err)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	_, err = b.st.RecordNeighbours(ctx, run.ID, lease, "/home/lab/.accord/runs/1-1",
		[]store.SightedNeighbour{{Dir: "/home/lab/.accord-other/runs/9-1", FirstSeen: at, LastSeen: at.Add(4 * time.Second)}})
	require.NoError(t, err)
	ev, _, err := evaluation.Evaluate(ctx, b.st, servicetest.Env(t), run.ID)
	require.NoError(t, err)
	require.NotEqual(t, acceptance.Pass, ev.Verdict, "numbers that would pass")
	require.NotEmpty(t, ev.Contamination)
	done, err := b.st.RunByID(ctx, run.ID)
	require.NoError(t, err)
	require.Contains(t, done.Reason, "(contaminated: another run measured on the host meanwhile)")
}

// Host facts that do not read fail the run with the reason (in its state
// and its log) and ErrCannotJudge: retrying cannot make them read.
func TestEvaluateFailsARunWhoseFactsDoNotRead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	run := b.judgedRun(t, 50, 100)
	addArtifact(t, b.st, run.ID, wire.FactsFile, []byte(`{"kernel": `))
	_, _, err := evaluation.Evaluate(ctx, b.st, servicetest.Env(t), run.ID)
	require.ErrorIs(t, err, evaluation.ErrCannotJudge)
	failed, err := b.st.RunByID(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunFailed, failed.State)
	require.Contains(t, failed.Reason, "the gate set could not be applied: ")
	require.Contains(t, failed.Reason, "the host facts cannot be read")
	var notes int
	require.NoError(t, b.st.Tx().QueryRow(ctx, `SELECT count(*) FROM run_events WHERE run_id = $1 AND level = 'error' AND message = $2`, run.ID, failed.Reason).Scan(&notes))
	require.Equal(t, 1, notes, "the log says it too")
	require.Empty(t, servicetest.Enqueued(t, b.st, "sign_run"), "nothing to sign")
}

func addArtifact(t *testing.T, st *store.Store, runID int64, path string, data []byte) {
	t.Helper()
	ctx := context.Background()
	blob, err := st.Artifacts().Put(ctx, bytes.NewReader(data))
	require.NoError(t, err)
	require.NoError(t, st.AddRunArtifact(ctx, store.RunArtifact{RunID: runID, Path: path, SHA256: blob.SHA256, Size: blob.Size}))
}

// The facts that decide comparability are the run's host facts, or, for
// an imported run, its facts file; none is an empty set, not an error.
func TestStoredFactsOfLabAndImportedRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	lab := b.program.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host})
	_, err := b.st.AddHostFacts(ctx, b.host, &lab.ID, facts("6.8.0-lab"), "sha256:lab")
	require.NoError(t, err)
	addArtifact(t, b.st, lab.ID, wire.FactsFile, facts("6.1.0-artifact"))
	got, err := evaluation.StoredFacts(ctx, b.st, lab.ID)
	require.NoError(t, err)
	require.Equal(t, "6.8.0-lab", got["kernel"], "the host facts taken for the run win")

	imported := b.program.Run(t, b.st, store.NewRun{Kind: "imported", ProfileVersionID: b.profile.ID})
	addArtifact(t, b.st, imported.ID, wire.FactsFile, facts("5.15.0-imported"))
	got, err = evaluation.StoredFacts(ctx, b.st, imported.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"kernel": "5.15.0-imported"}, got)

	none := b.program.Run(t, b.st, store.NewRun{Kind: "imported", ProfileVersionID: b.profile.ID})
	got, err = evaluation.StoredFacts(ctx, b.st, none.ID)
	require.NoError(t, err)
	require.Empty(t, got)
	require.NotNil(t, got)
}
