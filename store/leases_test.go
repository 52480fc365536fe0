package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// hostAndRuns makes a program with one host and two runs on it.
func hostAndRuns(t *testing.T, st *store.Store) (hostID, run1, run2 int64) {
	t.Helper()
	ctx := context.Background()
	v, err := st.CreateOrganization(ctx, "V", "vendor")
	require.NoError(t, err)
	c, err := st.CreateOrganization(ctx, "C", "customer")
	require.NoError(t, err)
	pid, err := st.CreateProgram(ctx, "P", "", v, c, nil)
	require.NoError(t, err)
	hostID, err = st.CreateHost(ctx, pid, store.NewHost{Name: "h", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	_, pv, err := st.CreateSpec(ctx, store.KindProfile, pid, store.NewSpecVersion{Name: "p", Spec: []byte(`{}`), Digest: "sha256:x"})
	require.NoError(t, err)
	run1, err = st.CreateRun(ctx, store.NewRun{ProgramID: pid, ProfileVersionID: pv.ID, HostID: hostID})
	require.NoError(t, err)
	run2, err = st.CreateRun(ctx, store.NewRun{ProgramID: pid, ProfileVersionID: pv.ID, HostID: hostID})
	require.NoError(t, err)
	return hostID, run1, run2
}

// One run per host; an expired lease is taken over, and the stale holder's
// fenced writes are refused.
func TestHostLeaseFencing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	host, run1, run2 := hostAndRuns(t, st)

	l1, _, err := st.AcquireLease(ctx, host, run1, "worker-a", 300*time.Millisecond)
	require.NoError(t, err)
	_, busy, err := st.AcquireLease(ctx, host, run2, "worker-b", time.Minute)
	require.ErrorIs(t, err, store.ErrHostBusy)
	require.Equal(t, run1, busy)
	require.NoError(t, st.CheckFence(ctx, l1))
	require.NoError(t, st.RenewLease(ctx, l1, 300*time.Millisecond))

	time.Sleep(400 * time.Millisecond) // worker A stopped heartbeating
	l2, _, err := st.AcquireLease(ctx, host, run2, "worker-b", time.Minute)
	require.NoError(t, err, "an expired lease can be taken over")
	require.Greater(t, l2.Token, l1.Token)

	// Worker A comes back: every write it makes is refused.
	require.ErrorIs(t, st.RenewLease(ctx, l1, time.Minute), store.ErrFenced)
	err = st.AppendFollowed(ctx, run1, l1, store.FollowUpdate{Offset: 100, Events: []store.RunEvent{{Seq: new(int64), At: time.Now(), Type: "log", Level: "info", Message: "stale"}}})
	require.ErrorIs(t, err, store.ErrFenced)
	var n int
	require.NoError(t, st.Pool.QueryRow(ctx, `SELECT count(*) FROM run_events WHERE run_id = $1`, run1).Scan(&n))
	require.Zero(t, n, "the stale worker's events were not stored")
	r, err := st.RunByID(ctx, run1)
	require.NoError(t, err)
	require.Zero(t, r.EventsOffset)

	// The same run's next attempt may take its own live lease over; the
	// previous holder is then fenced.
	l3, _, err := st.AcquireLease(ctx, host, run2, "worker-c", time.Minute)
	require.NoError(t, err)
	require.ErrorIs(t, st.CheckFence(ctx, l2), store.ErrFenced)
	require.NoError(t, st.CheckFence(ctx, l3))
	require.NoError(t, st.ReleaseLease(ctx, l3))
	_, err = st.HostLease(ctx, host)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A launched run whose worker died still has its probe on the host: its
// expired lease is not taken by another run until the probe is seen to end.
func TestExpiredLeaseOfALaunchedRunKeepsTheHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	host, run1, run2 := hostAndRuns(t, st)
	require.NoError(t, st.SetRunState(ctx, run1, store.RunPreparing, "x"))
	require.NoError(t, st.SetRunState(ctx, run1, store.RunRunning, "y"))
	require.NoError(t, st.MarkLaunched(ctx, run1, "/tmp/runs/1"))
	_, _, err := st.AcquireLease(ctx, host, run1, "worker-a", 100*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond) // worker A died

	_, busy, err := st.AcquireLease(ctx, host, run2, "worker-b", time.Minute)
	require.ErrorIs(t, err, store.ErrHostBusy, "the probe of run 1 may still be measuring")
	require.Equal(t, run1, busy)
	l, _, err := st.AcquireLease(ctx, host, run1, "worker-c", time.Minute)
	require.NoError(t, err, "run 1's next attempt takes its host back")
	require.NoError(t, st.ReleaseLease(ctx, l))

	// Even with its lease gone, run 1 keeps the host while its probe may run.
	_, busy, err = st.AcquireLease(ctx, host, run2, "worker-b", time.Minute)
	require.ErrorIs(t, err, store.ErrHostBusy)
	require.Equal(t, run1, busy)

	// Run 1's probe is seen to end (stopped on the host): the host is free.
	require.NoError(t, st.MarkProbeEnded(ctx, run1))
	require.NoError(t, st.SetRunState(ctx, run1, store.RunCancelled, "stopped"))
	_, _, err = st.AcquireLease(ctx, host, run2, "worker-b", time.Minute)
	require.NoError(t, err)
}

// The intent to launch, recorded before the launch, keeps the host as a
// recorded launch does: the launch may have happened with its answer lost.
func TestLaunchIntentKeepsTheHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	host, run1, run2 := hostAndRuns(t, st)
	require.NoError(t, st.SetRunState(ctx, run1, store.RunPreparing, "uploading the plan"))
	l1, _, err := st.AcquireLease(ctx, host, run1, "worker-a", 100*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, st.InTx(ctx, func(tx *store.Store) error {
		if err := tx.CheckFence(ctx, l1); err != nil {
			return err
		}
		return tx.RecordLaunchIntent(ctx, run1, "/tmp/runs/1-1", time.Hour)
	}))
	r1, err := st.RunByID(ctx, run1)
	require.NoError(t, err)
	require.False(t, r1.Launched)
	require.True(t, r1.ProbeMayRun)
	require.Equal(t, "/tmp/runs/1-1", r1.RemoteDir, "the run folder is known before the launch")
	time.Sleep(200 * time.Millisecond) // worker A died while launching

	_, busy, err := st.AcquireLease(ctx, host, run2, "worker-b", time.Minute)
	require.ErrorIs(t, err, store.ErrHostBusy, "run 1's probe may be measuring")
	require.Equal(t, run1, busy)

	// Run 1 fails without its probe being stopped (its host unreachable):
	// the host stays its own until the probe's deadline.
	require.NoError(t, st.SetRunState(ctx, run1, store.RunFailed, "gave up"))
	_, _, err = st.AcquireLease(ctx, host, run2, "worker-b", time.Minute)
	require.ErrorIs(t, err, store.ErrHostBusy, "the probe's own time limit has not passed")
	left, err := st.ProbesLeftBehind(ctx)
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, run1, left[0].ID)
	_, err = st.Pool.Exec(ctx, `UPDATE runs SET probe_deadline = now() - interval '1 second' WHERE id = $1`, run1)
	require.NoError(t, err)
	_, _, err = st.AcquireLease(ctx, host, run2, "worker-b", time.Minute)
	require.NoError(t, err, "past the probe's deadline the host is free")
}

// A launch intent committed while another run's acquisition waits for the
// lease row is seen by that acquisition: the intent's fenced transaction
// and the acquisition lock the same row, so the host is never taken from
// under a launch.
func TestLaunchIntentAndAcquisitionAreSerialised(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	host, run1, run2 := hostAndRuns(t, st)
	l1, _, err := st.AcquireLease(ctx, host, run1, "worker-a", 100*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond) // the lease expired, but worker A is only slow

	tx, err := st.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	fenced := st.WithTx(tx)
	require.NoError(t, fenced.CheckFence(ctx, l1))
	require.NoError(t, fenced.RecordLaunchIntent(ctx, run1, "/tmp/runs/1-1", time.Hour))

	type answer struct {
		busy int64
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		_, busy, err := st.AcquireLease(ctx, host, run2, "worker-b", time.Minute)
		got <- answer{busy, err}
	}()
	select {
	case a := <-got:
		t.Fatalf("the acquisition did not wait for the fenced write: %v", a.err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, tx.Commit(ctx))
	a := <-got
	require.ErrorIs(t, a.err, store.ErrHostBusy)
	require.Equal(t, run1, a.busy)
}

func TestRunStatesAreFinalOnceEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	_, run, _ := hostAndRuns(t, st)
	require.NoError(t, st.SetRunState(ctx, run, store.RunPreparing, "x"))
	require.NoError(t, st.SetRunState(ctx, run, store.RunRunning, ""))
	require.NoError(t, st.SetRunState(ctx, run, store.RunFailed, "boom"))
	require.ErrorIs(t, st.SetRunState(ctx, run, store.RunDone, ""), store.ErrRunFinal)
	tr, err := st.RunTransitions(ctx, run)
	require.NoError(t, err)
	require.Len(t, tr, 4)
	require.Equal(t, "boom", tr[3].Reason)
	r, err := st.RunByID(ctx, run)
	require.NoError(t, err)
	require.NotNil(t, r.StartedAt)
	require.NotNil(t, r.FinishedAt)
}
