package jobs

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

// servingRolesProfile: the "degrading" role's hosts serve from one
// inference endpoint and the "steady" role's from another, at the same
// time, for 90 s.
func servingRolesProfile(degrading, steady string) acceptance.ProfileSpec {
	serve := func(name, endpoint string) acceptance.StepSpec {
		return acceptance.StepSpec{Name: name, Kind: acceptance.StepInference, Group: "load", Inference: &acceptance.InferenceStep{
			Endpoint: endpoint, Model: "emulated", API: "chat",
			PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 256}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 8},
			Load: acceptance.Load{Mode: "concurrency", Concurrency: 4}, Duration: acceptance.Duration(90 * time.Second),
		}}
	}
	return acceptance.ProfileSpec{
		Name: "two servers", Purpose: acceptance.PurposeInferenceServing, Storage: acceptance.Storage{Transport: acceptance.TransportEmulated},
		Repetitions: 1,
		Steps:       []acceptance.StepSpec{serve("serve-degrading", degrading), serve("serve-steady", steady)},
		Roles: []acceptance.RoleSpec{
			{Name: "degrading", Steps: []string{"serve-degrading"}, MaxHosts: 1},
			{Name: "steady", Steps: []string{"serve-steady"}, MaxHosts: 1},
		},
	}.Normalized()
}

// A multi-host run one of whose hosts crosses a stop-loss line is stopped
// on every host, and the crossing, naming the host, is recorded with the
// windows that made it before the probe is stopped: while the stop's
// answer is held back, the run has not ended and its crossing is stored.
func TestMultiHostStopLossIsRecordedBeforeTheProbeIsStopped(t *testing.T) {
	t.Parallel()
	config, stopped := stopAnswerHeldBack(t, 10*time.Second)
	b := setup(t, setupOpts{sshdConfig: config})
	ctx := context.Background()
	steadyHost := b.addHost(t, "lab-2", 0)
	degrading := startEmulator(t, "--degrade-after", "5s", "--degrade-factor", "25", "--itl", "2ms", "--prefill-per-token", "200us")
	steady := startEmulator(t, "--itl", "2ms", "--prefill-per-token", "200us")
	line := 400.0
	gates := b.saveGates(t, acceptance.GateSetSpec{Name: "ttft guard", StopLossConsecutive: 2, Criteria: []acceptance.Criterion{{
		Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
		Comparator: acceptance.LessOrEqual, Threshold: 200, Unit: "ms", Severity: acceptance.Blocking, StopLoss: &line,
	}}}.Normalized())
	started := time.Now()
	runID := b.submitMulti(t, b.river, b.saveProfile(t, servingRolesProfile(degrading, steady)), &gates, []store.NewRunHost{
		{Role: "degrading", HostID: b.hostID}, {Role: "steady", HostID: steadyHost}})

	// The stop reached the degrading host; its answer is held back.
	require.Eventually(t, func() bool {
		_, err := os.Stat(stopped)
		return err == nil
	}, 80*time.Second, 20*time.Millisecond, "the stop-loss stops the probe")
	require.False(t, store.RunFinal(mustRunByID(t, b, runID).State), "the worker still waits for the stop")
	raw, err := b.store.RunStopLoss(ctx, runID)
	require.NoError(t, err)
	require.NotEmpty(t, raw, "the crossing was recorded before the probe was stopped")
	var breach acceptance.StopLossBreach
	require.NoError(t, json.Unmarshal(raw, &breach))
	require.Equal(t, "ttft-p99", breach.Name)
	require.Contains(t, breach.Explanation, "on host lab: Stop-loss: p99 TTFT crossed the 400 ms line")
	require.Len(t, breach.Breaches, 2)
	seqs := make([]int64, len(breach.Breaches))
	for i, p := range breach.Breaches {
		require.Greater(t, p.Value, line)
		require.Equal(t, "serve-degrading", p.Step)
		seqs[i] = p.Seq
	}
	var windows int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM run_events r JOIN run_hosts h ON h.run_id = r.run_id AND h.ordinal = r.host_ordinal
		WHERE r.run_id = $1 AND h.host_id = $2 AND r.type = 'interim' AND r.seq = ANY($3)`, runID, b.hostID, seqs).Scan(&windows))
	require.Equal(t, len(seqs), windows, "the windows past the line were stored with the crossing")

	run := b.waitFor(t, runID, 90*time.Second, "the run ends", func(r store.Run) bool { return store.RunFinal(r.State) })
	require.Equal(t, store.RunFailed, run.State)
	require.Contains(t, run.Reason, "stopped by the stop-loss on host lab: Stop-loss: p99 TTFT crossed the 400 ms line")
	require.Less(t, time.Since(started), 75*time.Second, "stopped long before the steps' 90 s")
	after, err := b.store.RunStopLoss(ctx, runID)
	require.NoError(t, err)
	require.JSONEq(t, string(raw), string(after), "the crossing is kept once, as recorded before the stop")
	noRunProcesses(t, b.hostDir(runID, b.hostID), b.hostDir(runID, steadyHost))
}
