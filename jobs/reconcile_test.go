package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

// A run's job is cancelled from River (its UI, or the rescuer) while the
// probe measures: the run is left behind, and its host stays its own so
// that no second probe measures beside the first. The reconciler stops the
// probe and ends the run; the waiting run then gets the host.
func TestReconcilerEndsARunItsJobLeftBehind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first, dir := b.probeLeftBehind(t)
	second := b.submit(t, b.river, b.saveProfile(t, b.quickProfile(100*time.Millisecond)), nil, nil)
	waiting := b.waitFor(t, second, 30*time.Second, "second waits", func(r store.Run) bool { return r.State == store.RunWaitingForHost })
	require.Contains(t, waiting.Reason, "busy with run #")
	left, err := b.store.RunByID(ctx, first)
	require.NoError(t, err)
	require.Equal(t, store.RunRunning, left.State, "left behind")
	require.NotEmpty(t, processesOf(t, dir), "its probe still measures")
	time.Sleep(b.deps.LeaseTTL + time.Second) // the kept lease expires: the host is still the first run's
	r2, err := b.store.RunByID(ctx, second)
	require.NoError(t, err)
	require.Equal(t, store.RunWaitingForHost, r2.State)

	_, err = b.river.Insert(ctx, ReconcileRunsArgs{}, nil)
	require.NoError(t, err)
	ended := b.waitFor(t, first, 60*time.Second, "reconciled", func(r store.Run) bool { return store.RunFinal(r.State) })
	require.Equal(t, store.RunFailed, ended.State)
	require.Contains(t, ended.Reason, "its job ended (cancelled) without finishing the run")
	require.Contains(t, ended.Reason, "the probe was stopped")
	require.Eventually(t, func() bool { return len(processesOf(t, dir)) == 0 }, 10*time.Second, 50*time.Millisecond)

	r2 = b.waitFor(t, second, 90*time.Second, "second ends", settled)
	require.Equal(t, store.RunDone, r2.State, r2.Reason)
}

// A cancel can land after the probe was launched on the host but before
// the launch was recorded: stopping goes by the run folder the worker
// reached, not by the record, so the probe is stopped all the same.
func TestStopReachesAProbeWhoseLaunchWasNotRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// Take the job away from the worker without a cancel, then forget the
	// launch, as if the worker had died between launching and recording.
	runID, dir := b.probeLeftBehind(t)
	_, err := b.pool.Exec(ctx, `UPDATE runs SET launched = false, remote_dir = '' WHERE id = $1`, runID)
	require.NoError(t, err)
	require.NotEmpty(t, processesOf(t, dir), "the probe still runs")

	host, err := b.store.GetHost(ctx, b.programID, b.hostID)
	require.NoError(t, err)
	fresh, err := b.store.RunByID(ctx, runID)
	require.NoError(t, err)
	require.NoError(t, stopAndCancel(ctx, b.deps, fresh, host, nil, dir))
	ended, err := b.store.RunByID(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, store.RunCancelled, ended.State)
	require.Contains(t, ended.Reason, "the probe was stopped")
	require.Eventually(t, func() bool { return len(processesOf(t, dir)) == 0 }, 10*time.Second, 50*time.Millisecond)
}

// probeLeftBehind starts a minute-long run and, once its probe measures on
// the host, cancels its job in River without Accord asking for a cancel
// (River's UI, or its rescuer): the run is left behind, its probe running.
func (b *testBundle) probeLeftBehind(t *testing.T) (runID int64, dir string) {
	t.Helper()
	ctx := context.Background()
	runID = b.submit(t, b.river, b.saveProfile(t, b.quickProfile(60*time.Second)), nil, nil)
	run := b.waitFor(t, runID, 60*time.Second, "run", func(r store.Run) bool { return r.State == store.RunRunning && r.EventsOffset > 0 })
	dir = b.runDir(runID)
	require.NotEmpty(t, processesOf(t, dir), "the probe runs on the host")
	_, err := b.river.JobCancel(ctx, *run.RiverJobID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		j, err := b.river.JobGet(ctx, *run.RiverJobID)
		return err == nil && j.State == "cancelled"
	}, 30*time.Second, 50*time.Millisecond, "the job ends cancelled")
	return runID, dir
}
