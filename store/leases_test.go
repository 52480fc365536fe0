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
	_, err = st.LeaseOf(ctx, host)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A launched run whose worker died still has its probe on the host: its
// expired lease is not taken by another run until the run is final.
func TestExpiredLeaseOfALaunchedRunKeepsTheHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	host, run1, run2 := hostAndRuns(t, st)
	require.NoError(t, st.SetRunState(ctx, run1, store.RunPreparing, ""))
	require.NoError(t, st.SetRunState(ctx, run1, store.RunRunning, ""))
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

	// Run 1 ends (stopped on the host): once its lease expires the host is free.
	_, _, err = st.AcquireLease(ctx, host, run1, "worker-c", 100*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, st.SetRunState(ctx, run1, store.RunCancelled, "stopped"))
	time.Sleep(200 * time.Millisecond)
	_, _, err = st.AcquireLease(ctx, host, run2, "worker-b", time.Minute)
	require.NoError(t, err)
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
