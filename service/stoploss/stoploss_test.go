package stoploss_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/service/servicetest"
	"github.com/accordlab/accord/service/stoploss"
	"github.com/accordlab/accord/store"
)

// testBundle is a program with an inference profile and a host, on a
// transaction rolled back at the test's end.
type testBundle struct {
	st      *store.Store
	program servicetest.Program
	profile store.SpecVersion
	host    int64
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	st := servicetest.Store(t)
	b := &testBundle{st: st, program: servicetest.NewProgram(t, st)}
	b.profile = b.program.Profile(t, st, acceptance.ProfileSpec{
		Name: "chat", Purpose: acceptance.PurposeInferenceServing, Storage: acceptance.Storage{Transport: acceptance.TransportEmulated}, Repetitions: 1,
		Steps: []acceptance.StepSpec{{Name: "serve", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{
			Endpoint: "http://127.0.0.1:9/v1", Model: "m", API: "chat",
			PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 64}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 8},
			Load: acceptance.Load{Mode: "concurrency", Concurrency: 4}, Duration: acceptance.Duration(time.Minute),
		}}},
	})
	b.host = b.program.Host(t, st, "lab")
	return b
}

func line(v float64) *float64 { return &v }

// ttftGuard is a gate set whose p99 TTFT must stay at or below 200 ms,
// stopping a run past 400 ms in k windows in a row.
func ttftGuard(k int, extra ...acceptance.Criterion) acceptance.GateSetSpec {
	return acceptance.GateSetSpec{Name: "ttft guard", StopLossConsecutive: k, Criteria: append([]acceptance.Criterion{{
		Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
		Comparator: acceptance.LessOrEqual, Threshold: 200, Unit: "ms", Severity: acceptance.Blocking, StopLoss: line(400),
	}}, extra...)}
}

// run is a run of the bundle's profile judged by gates (nil: none).
func (b *testBundle) run(t *testing.T, gates *store.SpecVersion, baseline *int64) store.Run {
	t.Helper()
	r := store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, BaselineRunID: baseline}
	if gates != nil {
		r.GateSetVersionID = &gates.ID
	}
	return b.program.Run(t, b.st, r)
}

// windows stores interim windows of the probe for the run, as the worker
// does (p99 TTFT of each, in ms), their seqs from 1, a window 2 s apart.
func (b *testBundle) windows(t *testing.T, run store.Run, p99s ...float64) {
	t.Helper()
	b.storeWindows(t, run, nil, p99s...)
}

// hostWindows stores interim windows as host ordinal of a multi-host run
// sent them.
func (b *testBundle) hostWindows(t *testing.T, run store.Run, ordinal int, p99s ...float64) {
	t.Helper()
	b.storeWindows(t, run, &ordinal, p99s...)
}

func (b *testBundle) storeWindows(t *testing.T, run store.Run, ordinal *int, p99s ...float64) {
	t.Helper()
	ctx := context.Background()
	lease, _, err := b.st.AcquireLease(ctx, b.host, run.ID, "test", time.Minute)
	require.NoError(t, err)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var u store.FollowUpdate
	for i, p99 := range p99s {
		data, err := json.Marshal(wire.Interim{Step: "serve", Level: "c=4", Repetition: 1, WindowSec: 2,
			Metrics: map[string]wire.InterimStats{acceptance.MetricTTFT: {N: 50, P50: p99 / 2, P95: p99 * 0.9, P99: p99, Mean: p99 / 2, Max: p99}}})
		require.NoError(t, err)
		seq := int64(i + 1)
		u.Events = append(u.Events, store.RunEvent{Seq: &seq, At: t0.Add(time.Duration(2*seq) * time.Second), Type: wire.EventInterim, Level: "info", Data: data})
	}
	u.Offset = int64(100 * len(p99s))
	if ordinal == nil {
		require.NoError(t, b.st.AppendFollowed(ctx, run.ID, lease, u))
	} else {
		require.NoError(t, b.st.AppendHostFollowed(ctx, run.ID, *ordinal, []store.Lease{lease}, store.HostFollowUpdate{FollowUpdate: u}))
	}
	require.NoError(t, b.st.ReleaseLease(ctx, lease))
}

// window is one interim snapshot of the step, for a monitor.
func window(seq int64, p99 float64) acceptance.InterimSnapshot {
	return wire.Interim{Step: "serve", Level: "c=4", Repetition: 1, WindowSec: 2,
		Metrics: map[string]wire.InterimStats{acceptance.MetricTTFT: {N: 50, P50: p99 / 2, P99: p99, Max: p99}}}.
		Snapshot(seq, time.Date(2026, 12, 1, 10, 0, int(2*seq), 0, time.UTC))
}

// The interim check comes from the run's gate set: none without one, no
// monitor without a stop-loss line, each line's metric reported once, a
// relative line made absolute with the baseline's value of the window's
// series; a gate set that does not read is an error.
func TestForRunBuildsTheInterimCheckFromTheGateSet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	in, err := stoploss.ForRun(ctx, b.st, b.run(t, nil, nil))
	require.NoError(t, err)
	require.Nil(t, in.Monitor)
	require.Empty(t, in.Metrics)

	plain := b.program.GateSet(t, b.st, acceptance.GateSetSpec{Name: "no lines", Criteria: []acceptance.Criterion{{
		Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
		Comparator: acceptance.LessOrEqual, Threshold: 200, Unit: "ms", Severity: acceptance.Blocking}}})
	in, err = stoploss.ForRun(ctx, b.st, b.run(t, &plain, nil))
	require.NoError(t, err)
	require.Nil(t, in.Monitor, "no stop-loss line: nothing to watch")
	require.Empty(t, in.Metrics)

	// A baseline whose p99 TTFT (nearest rank of 1..100 ms) is 99 ms.
	base := b.run(t, nil, nil)
	values := make([]float64, 100)
	for i := range values {
		values[i] = float64(i + 1)
	}
	require.NoError(t, b.st.SaveMeasurements(ctx, base.ID, []acceptance.Measurement{{Metric: acceptance.MetricTTFT, Step: "serve", Level: "c=4", Repetition: 1,
		Values: values, Source: acceptance.Source{Tool: "accord-probe", ToolVersion: "test"}}}))
	guard := b.program.GateSet(t, b.st, ttftGuard(2,
		acceptance.Criterion{Name: "ttft-p50", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP50, Mode: acceptance.Absolute,
			Comparator: acceptance.LessOrEqual, Threshold: 100, Unit: "ms", Severity: acceptance.Blocking, StopLoss: line(300)},
		acceptance.Criterion{Name: "ttft-vs-base", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Relative,
			Comparator: acceptance.LessOrEqual, Threshold: 10, Unit: "%", Severity: acceptance.Blocking, StopLoss: line(20)},
		acceptance.Criterion{Name: "e2el-p99", Metric: acceptance.MetricE2EL, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
			Comparator: acceptance.LessOrEqual, Threshold: 2000, Unit: "ms", Severity: acceptance.Blocking, StopLoss: line(4000)}))
	in, err = stoploss.ForRun(ctx, b.st, b.run(t, &guard, &base.ID))
	require.NoError(t, err)
	require.NotNil(t, in.Monitor)
	require.Equal(t, 4, in.Monitor.Lines())
	require.Equal(t, []string{acceptance.MetricTTFT, acceptance.MetricE2EL}, in.Metrics, "each metric once, in the gate set's order")
	values2 := map[string]float64{}
	for _, l := range in.Monitor.LinesAt("serve", "c=4") {
		values2[l.Name] = l.Value
	}
	require.Equal(t, 400.0, values2["ttft-p99"])
	require.InDelta(t, 99*1.2, values2["ttft-vs-base"], 1e-9, "the baseline's 99 ms, +20 %")
	_, ok := func() (float64, bool) {
		for _, l := range in.Monitor.LinesAt("serve", "c=64") {
			if l.Name == "ttft-vs-base" {
				return l.Value, true
			}
		}
		return 0, false
	}()
	require.False(t, ok, "no relative line where the baseline has no such series")

	// A gate set that does not read.
	var broken store.SpecVersion
	_, broken, err = b.st.CreateSpec(ctx, store.KindGateSet, b.program.ID, store.NewSpecVersion{Name: "broken", Spec: []byte(`{"criteria": "not a list"}`), Digest: "sha256:broken"})
	require.NoError(t, err)
	_, err = stoploss.ForRun(ctx, b.st, b.run(t, &broken, nil))
	require.Error(t, err)
}

// A resumed check starts where the earlier attempt left it: the windows
// stored before the resume count toward the breaches in a row, a stored
// run of k windows past the line is the crossing, and a crossing the
// earlier attempt recorded is returned as it was recorded.
func TestResumeStartsWhereTheEarlierAttemptLeft(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	gates := b.program.GateSet(t, b.st, ttftGuard(2))

	// One window past the line, then the resume: the next one past it is
	// the second in a row.
	run := b.run(t, &gates, nil)
	b.windows(t, run, 150, 450)
	fresh := b.watch(t, run)
	require.Nil(t, b.check(t, fresh, "", window(3, 480)), "without the replay, one window past the line")
	w := b.watch(t, run)
	crossed, err := w.Resume(ctx, b.st)
	require.NoError(t, err)
	require.Nil(t, crossed, "one window past the line is not k = 2")
	breach := b.check(t, w, "", window(3, 480))
	require.NotNil(t, breach, "the window before the resume counts")
	require.Equal(t, []int64{2, 3}, []int64{breach.Breaches[0].Seq, breach.Breaches[1].Seq})

	// Two stored windows past the line: the crossing itself.
	run = b.run(t, &gates, nil)
	b.windows(t, run, 450, 150, 420, 460)
	w = b.watch(t, run)
	crossed, err = w.Resume(ctx, b.st)
	require.NoError(t, err)
	require.NotNil(t, crossed)
	require.Equal(t, "ttft-p99", crossed.Name)
	require.Equal(t, []float64{420, 460}, []float64{crossed.Breaches[0].Value, crossed.Breaches[1].Value}, "the last two, in a row")

	// A recorded crossing wins over the windows, as recorded.
	run = b.run(t, &gates, nil)
	b.windows(t, run, 150)
	recorded := &acceptance.StopLossBreach{Name: "ttft-p99", Metric: acceptance.MetricTTFT, Line: 400, Consecutive: 2, Explanation: "recorded before the stop"}
	require.NoError(t, stoploss.Record(ctx, b.st, servicetest.Env(t), run, recorded))
	w = b.watch(t, run)
	crossed, err = w.Resume(ctx, b.st)
	require.NoError(t, err)
	require.Equal(t, recorded.Explanation, crossed.Explanation)
}

// A stored event decodes to the window the monitor judged; anything else
// does not.
func TestSnapshotDecodesStoredInterimEvents(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 4, 0, time.UTC)
	seq := int64(7)
	data, err := json.Marshal(wire.Interim{Step: "serve", Level: "c=4", Repetition: 2, WindowSec: 2,
		Metrics: map[string]wire.InterimStats{acceptance.MetricTTFT: {N: 50, P99: 310}}})
	require.NoError(t, err)
	snap, ok := stoploss.Snapshot(store.RunEvent{Seq: &seq, At: at, Type: wire.EventInterim, Data: data})
	require.True(t, ok)
	require.Equal(t, int64(7), snap.Seq)
	require.Equal(t, at, snap.At)
	require.Equal(t, "serve", snap.Step)
	require.Equal(t, 2, snap.Repetition)
	require.Equal(t, 310.0, snap.Metrics[acceptance.MetricTTFT].P99)
	_, ok = stoploss.Snapshot(store.RunEvent{Seq: &seq, At: at, Type: wire.EventLog, Data: data})
	require.False(t, ok, "a log line is no window")
	_, ok = stoploss.Snapshot(store.RunEvent{Seq: &seq, At: at, Type: wire.EventInterim, Data: []byte(`{"metrics": 3}`)})
	require.False(t, ok, "a window that does not decode")
}

// A run keeps its first crossing, recorded once however often it is
// recorded (the interim check records it before the stop, the ingest at
// the run's end), and the rollout stage the run is evidence for is
// halted once, with Accord's signed stop-loss decision.
func TestRecordKeepsTheFirstCrossingAndHaltsTheStageOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	gates := b.program.GateSet(t, b.st, ttftGuard(2))
	_, err := b.st.AddRolloutStage(ctx, b.program.ID, "pilot", store.StageGates{GateSetVersionID: gates.ID,
		Profiles: []store.StageProfile{{ProfileID: b.profile.SpecID}}}, 0)
	require.NoError(t, err)
	run := b.run(t, &gates, nil)
	env := servicetest.Env(t)

	first := &acceptance.StopLossBreach{Name: "ttft-p99", Metric: acceptance.MetricTTFT, Line: 400, Consecutive: 2, Explanation: "Stop-loss: first"}
	require.NoError(t, stoploss.Record(ctx, b.st, env, run, first))
	require.NoError(t, stoploss.Record(ctx, b.st, env, run, &acceptance.StopLossBreach{Name: "ttft-p99", Explanation: "Stop-loss: second"}))
	raw, err := b.st.RunStopLoss(ctx, run.ID)
	require.NoError(t, err)
	var kept acceptance.StopLossBreach
	require.NoError(t, json.Unmarshal(raw, &kept))
	require.Equal(t, "Stop-loss: first", kept.Explanation)

	ro, err := rollout.Load(ctx, b.st, b.program.ID)
	require.NoError(t, err)
	stage, status, ok := ro.CurrentStage()
	require.True(t, ok)
	require.Equal(t, "pilot", stage.Name)
	require.Equal(t, acceptance.StageHalted, status.State)
	ds, err := b.st.ListDecisions(ctx, b.program.ID)
	require.NoError(t, err)
	require.Len(t, ds, 1, "halted once")
	require.Equal(t, string(acceptance.DecisionStopLoss), ds[0].Record.Kind)
	require.Contains(t, ds[0].Record.Reason, "Stop-loss: first")
}
