package jobs

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/internal/fakebin"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/store"
)

// startEmulator runs `accord emulate` on a free port of 127.0.0.1 and
// returns its OpenAI base URL.
func startEmulator(t *testing.T, args ...string) string {
	t.Helper()
	url, _ := startEmulatorProcess(t, args...)
	return url
}

// startEmulatorProcess is startEmulator that also returns the emulator's
// process id.
func startEmulatorProcess(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(sshtest.BuildAccord(t), append([]string{"emulate", "--listen", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := regexp.MustCompile(`127\.0\.0\.1:\d+`)
	lines := bufio.NewScanner(out)
	deadline := time.Now().Add(20 * time.Second)
	for lines.Scan() && time.Now().Before(deadline) {
		if m := addr.FindString(lines.Text()); m != "" {
			go func() {
				for lines.Scan() {
				}
			}()
			return "http://" + m + "/v1", cmd.Process.Pid
		}
	}
	t.Fatal("the emulator did not print its address")
	return "", 0
}

// A run against an inference server that degrades is aborted by its gate
// set's stop-loss line after k consecutive breaches, and the breach with
// its numbers is recorded.
func TestStopLossAbortsADegradingRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	endpoint := startEmulator(t, "--degrade-after", "5s", "--degrade-factor", "25", "--itl", "2ms", "--prefill-per-token", "200us")
	profile := acceptance.ProfileSpec{
		Name: "degrading inference", Purpose: acceptance.PurposeInferenceServing, Storage: acceptance.Storage{Transport: acceptance.TransportEmulated},
		Repetitions: 1,
		Steps: []acceptance.StepSpec{{Name: "serve", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{
			Endpoint: endpoint, Model: "emulated", API: "chat",
			PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 256}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 8},
			Load: acceptance.Load{Mode: "concurrency", Concurrency: 4}, Duration: acceptance.Duration(90 * time.Second),
		}}},
	}.Normalized()
	line := 400.0
	gates := acceptance.GateSetSpec{Name: "ttft guard", StopLossConsecutive: 2, Criteria: []acceptance.Criterion{{
		Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
		Comparator: acceptance.LessOrEqual, Threshold: 200, Unit: "ms", Severity: acceptance.Blocking, StopLoss: &line,
	}}}.Normalized()
	gv := b.saveGates(t, gates)
	started := time.Now()
	runID := b.submit(t, b.river, b.saveProfile(t, profile), &gv, nil)
	run := b.waitFor(t, runID, 80*time.Second, "abort", func(r store.Run) bool { return store.RunFinal(r.State) })
	require.Equal(t, store.RunFailed, run.State)
	require.Contains(t, run.Reason, "stopped by the stop-loss: p99 TTFT crossed the 400 ms line")
	require.NotContains(t, run.Reason, "stop-loss: Stop-loss", "said once")
	require.Less(t, time.Since(started), 60*time.Second, "aborted long before the step's 90 s")

	raw, err := b.store.RunStopLoss(ctx, runID)
	require.NoError(t, err)
	var breach acceptance.StopLossBreach
	require.NoError(t, json.Unmarshal(raw, &breach))
	require.Equal(t, "ttft-p99", breach.Name)
	require.Equal(t, 2, breach.Consecutive)
	require.Len(t, breach.Breaches, 2)
	for _, p := range breach.Breaches {
		require.Greater(t, p.Value, line, "each breach is over the line")
	}

	// The probe stopped: its status says cancelled, and from the second
	// breach to the probe's end took a bounded time (reported as a figure).
	var st wire.Status
	data, err := os.ReadFile(filepath.Join(b.runDir(runID), wire.StatusFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &st))
	require.Equal(t, wire.StateCancelled, st.State)
	finished, err := time.Parse(time.RFC3339Nano, st.FinishedAt)
	require.NoError(t, err)
	abort := finished.Sub(breach.Breaches[len(breach.Breaches)-1].At)
	t.Logf("breach to abort: %s (last interim window at %s, probe ended %s)", abort, breach.Breaches[1].At.Format(time.RFC3339Nano), st.FinishedAt)
	require.Less(t, abort, 15*time.Second)

	// The probe's raw outputs up to the abort were kept.
	arts, err := b.store.RunArtifacts(ctx, runID)
	require.NoError(t, err)
	require.NotEmpty(t, arts)

	// Every event the probe wrote is stored, those after the breach's
	// batch included (its step result and its "done"), each once.
	onHost := probeEvents(t, filepath.Join(b.runDir(runID), wire.EventsFile))
	require.Equal(t, wire.EventDone, onHost[len(onHost)-1].Type)
	rows, err := b.pool.Query(ctx, `SELECT seq, type FROM run_events WHERE run_id = $1 AND seq IS NOT NULL ORDER BY seq`, runID)
	require.NoError(t, err)
	var stored []wire.Event
	for rows.Next() {
		var e wire.Event
		require.NoError(t, rows.Scan(&e.Seq, &e.Type))
		stored = append(stored, e)
	}
	require.NoError(t, rows.Err())
	require.Len(t, stored, len(onHost), "the stored log is the probe's whole log")
	for i, e := range onHost {
		require.Equal(t, e.Seq, stored[i].Seq)
		require.Equal(t, e.Type, stored[i].Type)
	}
	require.Contains(t, typesOf(stored), wire.EventStepResult, "the aborted step's result is stored")
	final, err := b.store.RunByID(ctx, runID)
	require.NoError(t, err)
	info, err := os.Stat(filepath.Join(b.runDir(runID), wire.EventsFile))
	require.NoError(t, err)
	require.Equal(t, info.Size(), final.EventsOffset, "the offset reached the end of the stream")
}

func typesOf(events []wire.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}

// stopAnswerHeldBack is a ForceCommand for the lab host's sshd: the first
// `probe stop` is carried out, then its answer is held back for hold (the
// worker waits for it), and marker is created once the stop has run.
func stopAnswerHeldBack(t *testing.T, hold time.Duration) (config []string, marker string) {
	t.Helper()
	dir := t.TempDir()
	marker = filepath.Join(dir, "stopped")
	script := filepath.Join(dir, "force-command.sh")
	body := fmt.Sprintf(`#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
*" probe stop "*)
	if mkdir %s 2>/dev/null; then
		/bin/sh -c "$SSH_ORIGINAL_COMMAND"
		rc=$?
		touch %s
		sleep %d
		exit $rc
	fi
	;;
esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
`, filepath.Join(dir, "held"), marker, int(hold.Seconds()))
	fakebin.Write(t, script, body)
	return []string{"ForceCommand " + script}, marker
}

// The stop-loss crosses its line and the worker dies while it stops the
// probe (the stop reached the host; its answer never came back). The
// crossing was kept before the stop, so the worker that takes the run
// over ends it as stopped by the stop-loss, with the breach and its
// numbers, not as a probe that was cancelled for no reason.
func TestStopLossCrossingSurvivesAWorkerDyingAtTheStop(t *testing.T) {
	t.Parallel()
	config, stopped := stopAnswerHeldBack(t, 60*time.Second)
	b := setup(t, setupOpts{noRiver: true, leaseTTL: 3 * time.Second, sshdConfig: config})
	ctx := context.Background()
	endpoint := startEmulator(t, "--degrade-after", "5s", "--degrade-factor", "25", "--itl", "2ms", "--prefill-per-token", "200us")
	profile := acceptance.ProfileSpec{
		Name: "degrading inference", Purpose: acceptance.PurposeInferenceServing, Storage: acceptance.Storage{Transport: acceptance.TransportEmulated},
		Repetitions: 1,
		Steps: []acceptance.StepSpec{{Name: "serve", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{
			Endpoint: endpoint, Model: "emulated", API: "chat",
			PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 256}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 8},
			Load: acceptance.Load{Mode: "concurrency", Concurrency: 4}, Duration: acceptance.Duration(90 * time.Second),
		}}},
	}.Normalized()
	line := 400.0
	gates := acceptance.GateSetSpec{Name: "ttft guard", StopLossConsecutive: 2, Criteria: []acceptance.Criterion{{
		Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
		Comparator: acceptance.LessOrEqual, Threshold: 200, Unit: "ms", Severity: acceptance.Blocking, StopLoss: &line,
	}}}.Normalized()
	gv := b.saveGates(t, gates)
	first := b.startWorker(t, "server-1", "ACCORD_LEASE_TTL=3s")
	runID := b.submit(t, insertOnly(t, b), b.saveProfile(t, profile), &gv, nil)

	require.Eventually(t, func() bool {
		_, err := os.Stat(stopped)
		return err == nil
	}, 80*time.Second, 20*time.Millisecond, "the stop-loss stops the probe\n%s", first.logText())
	first.crash(t)
	var st wire.Status
	data, err := os.ReadFile(filepath.Join(b.runDir(runID), wire.StatusFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &st))
	require.Equal(t, wire.StateCancelled, st.State, "the stop reached the probe before the worker died")
	dying, err := b.store.RunByID(ctx, runID)
	require.NoError(t, err)
	require.False(t, store.RunFinal(dying.State), "the dead worker did not end the run")
	raw, err := b.store.RunStopLoss(ctx, runID)
	require.NoError(t, err)
	require.NotEmpty(t, raw, "the crossing was kept before the stop")

	second := b.startWorker(t, "server-2", "ACCORD_LEASE_TTL=3s")
	run := b.waitFor(t, runID, 120*time.Second, "the run is taken over and ends", func(r store.Run) bool { return store.RunFinal(r.State) })
	require.Equal(t, store.RunFailed, run.State, second.logText())
	require.Contains(t, run.Reason, "stopped by the stop-loss: p99 TTFT crossed the 400 ms line in 2 consecutive interim windows (", "said once, with its numbers")
	after, err := b.store.RunStopLoss(ctx, runID)
	require.NoError(t, err)
	require.JSONEq(t, string(raw), string(after), "the crossing is the one the first worker saw, kept once")
	var breach acceptance.StopLossBreach
	require.NoError(t, json.Unmarshal(after, &breach))
	require.Equal(t, "ttft-p99", breach.Name)
	require.Len(t, breach.Breaches, 2)

	// The probe's whole log is stored, its "done" last.
	onHost := probeEvents(t, filepath.Join(b.runDir(runID), wire.EventsFile))
	var stored int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM run_events WHERE run_id = $1 AND seq IS NOT NULL`, runID).Scan(&stored))
	require.Equal(t, len(onHost), stored)
	var transitions []string
	rows, err := b.pool.Query(ctx, `SELECT reason FROM run_transitions WHERE run_id = $1 ORDER BY at`, runID)
	require.NoError(t, err)
	for rows.Next() {
		var r string
		require.NoError(t, rows.Scan(&r))
		transitions = append(transitions, r)
	}
	require.NoError(t, rows.Err())
	t.Logf("transitions: %q", transitions)
}
