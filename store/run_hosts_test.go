package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// hostsAndMultiRuns makes a program with n hosts and two multi-host runs
// naming all of them (the second in the opposite order).
func hostsAndMultiRuns(t *testing.T, st *store.Store, n int) (hosts []int64, run1, run2 int64) {
	t.Helper()
	ctx := context.Background()
	p := newProgram(t, st)
	for i := 0; i < n; i++ {
		hosts = append(hosts, newHost(t, st, p.ID, uniqueName(t, "h")))
	}
	pv := newProfileVersion(t, st, p.ID, "p")
	mk := func(order []int64) int64 {
		id, err := st.CreateRun(ctx, store.NewRun{ProgramID: p.ID, ProfileVersionID: pv.ID, HostID: order[0]})
		require.NoError(t, err)
		var rh []store.NewRunHost
		for _, h := range order {
			rh = append(rh, store.NewRunHost{Role: "clients", HostID: h})
		}
		require.NoError(t, st.AddRunHosts(ctx, id, rh))
		return id
	}
	reversed := make([]int64, n)
	for i, h := range hosts {
		reversed[n-1-i] = h
	}
	return hosts, mk(hosts), mk(reversed)
}

func leaseRows(t *testing.T, st *store.Store, runID int64) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM host_leases WHERE run_id = $1`, runID).Scan(&n))
	return n
}

// A multi-host run gets every host or none: a set of which one host is
// busy is given up whole, naming the host and the run that keeps it.
func TestAcquireLeasesAllOrNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	hosts, run1, run2 := hostsAndMultiRuns(t, st, 3)

	// Another run holds the last host only.
	_, busyRun, err := st.AcquireLease(ctx, hosts[2], run2, "w2", time.Minute)
	require.NoError(t, err, "%d", busyRun)
	_, busyHost, busy, err := st.AcquireLeases(ctx, hosts, run1, "w1", time.Minute)
	require.ErrorIs(t, err, store.ErrHostBusy)
	require.Equal(t, hosts[2], busyHost)
	require.Equal(t, run2, busy)
	require.Zero(t, leaseRows(t, st, run1), "the hosts it could have had are not held")

	require.NoError(t, st.ReleaseRunLease(ctx, hosts[2], run2))
	leases, _, _, err := st.AcquireLeases(ctx, hosts, run1, "w1", time.Minute)
	require.NoError(t, err)
	require.Len(t, leases, 3)
	require.NoError(t, st.CheckFences(ctx, leases))
	require.NoError(t, st.RenewLeases(ctx, leases, time.Minute))
	// The run's next attempt takes its own leases over; the old ones are fenced.
	again, _, _, err := st.AcquireLeases(ctx, hosts, run1, "w1b", time.Minute)
	require.NoError(t, err)
	require.ErrorIs(t, st.CheckFences(ctx, leases), store.ErrFenced)
	require.NoError(t, st.ReleaseLeases(ctx, again))
	require.Zero(t, leaseRows(t, st, run1))
}

// Two runs asking for the same hosts in opposite orders at once never
// wait for each other in a cycle (the leases are taken in host order),
// and never both hold hosts: each round one of them gets every host.
func TestAcquireLeasesNeverDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	hosts, run1, run2 := hostsAndMultiRuns(t, st, 4)
	for round := 0; round < 20; round++ {
		var wg sync.WaitGroup
		got := make([][]store.Lease, 2)
		errs := make([]error, 2)
		for i, run := range []int64{run1, run2} {
			order := append([]int64(nil), hosts...)
			if i == 1 {
				for a, b := 0, len(order)-1; a < b; a, b = a+1, b-1 {
					order[a], order[b] = order[b], order[a]
				}
			}
			wg.Go(func() { got[i], _, _, errs[i] = st.AcquireLeases(ctx, order, run, "w", time.Minute) })
		}
		wg.Wait()
		won := 0
		for i := range errs {
			if errs[i] == nil {
				won++
				require.Len(t, got[i], 4)
			} else {
				require.True(t, errors.Is(errs[i], store.ErrHostBusy), "round %d: %v", round, errs[i])
			}
		}
		require.Equal(t, 1, won, "round %d: exactly one run gets the hosts", round)
		require.Equal(t, 4, leaseRows(t, st, run1)+leaseRows(t, st, run2))
		for i := range got {
			require.NoError(t, st.ReleaseLeases(ctx, got[i]))
		}
	}
}

// The launch window of a multi-host run covers each of its hosts until
// that host's probe is seen to end: an expired lease does not free it.
func TestMultiHostLaunchWindowKeepsEachHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	hosts, run1, _ := hostsAndMultiRuns(t, st, 2)
	other, err := st.CreateRun(ctx, store.NewRun{ProgramID: mustRun(t, st, run1).ProgramID, ProfileVersionID: *mustRun(t, st, run1).ProfileVersionID, HostID: hosts[1]})
	require.NoError(t, err)

	leases, _, _, err := st.AcquireLeases(ctx, hosts, run1, "w1", 100*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, st.RecordRunHostIntent(ctx, run1, 0, "/runs/1-1-a", time.Hour))
	require.NoError(t, st.RecordRunHostIntent(ctx, run1, 1, "/runs/1-1-b", time.Hour))
	require.NoError(t, st.MarkRunHostLaunched(ctx, run1, 0, "/runs/1-1-a"))
	r := mustRun(t, st, run1)
	require.True(t, r.Launched)
	require.True(t, r.ProbeMayRun)
	time.Sleep(200 * time.Millisecond) // the worker is gone: the leases lapse
	_ = leases

	_, busy, err := st.AcquireLease(ctx, hosts[1], other, "w2", time.Minute)
	require.ErrorIs(t, err, store.ErrHostBusy, "its probe may run there")
	require.Equal(t, run1, busy)

	// The probe on the second host is seen to end: that host is free, the
	// first is still the run's.
	require.NoError(t, st.MarkRunHostProbeEnded(ctx, run1, 1))
	require.True(t, mustRun(t, st, run1).ProbeMayRun)
	l, _, err := st.AcquireLease(ctx, hosts[1], other, "w2", time.Minute)
	require.NoError(t, err)
	require.NoError(t, st.ReleaseLease(ctx, l))
	_, _, err = st.AcquireLease(ctx, hosts[0], other, "w2", time.Minute)
	require.ErrorIs(t, err, store.ErrHostBusy)
	require.NoError(t, st.MarkRunHostProbeEnded(ctx, run1, 0))
	require.False(t, mustRun(t, st, run1).ProbeMayRun, "every probe ended: the run's window closes")
	_, _, err = st.AcquireLease(ctx, hosts[0], other, "w2", time.Minute)
	require.NoError(t, err)
}

// Each host's events have their own sequence: the same seq from two hosts
// is two events, the same from one host once.
func TestHostEventsHaveTheirOwnSequence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	hosts, run1, _ := hostsAndMultiRuns(t, st, 2)
	leases, _, _, err := st.AcquireLeases(ctx, hosts, run1, "w1", time.Minute)
	require.NoError(t, err)
	seq := int64(1)
	ev := store.RunEvent{Seq: &seq, At: time.Now(), Type: "log", Level: "info", Message: "hello"}
	waiting := 3
	for _, ord := range []int{0, 1, 0} {
		require.NoError(t, st.AppendHostFollowed(ctx, run1, ord, leases, store.HostFollowUpdate{
			FollowUpdate: store.FollowUpdate{Offset: 42, Events: []store.RunEvent{ev}, Progress: []byte(`{"fraction": 0.25}`)}, WaitingAt: &waiting}))
	}
	var n int
	require.NoError(t, st.Pool.QueryRow(ctx, `SELECT count(*) FROM run_events WHERE run_id = $1`, run1).Scan(&n))
	require.Equal(t, 2, n)
	rows, err := st.RunHosts(ctx, run1)
	require.NoError(t, err)
	for _, h := range rows {
		require.EqualValues(t, 42, h.EventsOffset)
		require.Equal(t, 3, h.WaitingAt)
	}
	require.JSONEq(t, `{"fraction": 0.25}`, string(mustRun(t, st, run1).Progress))

	// A worker whose leases were taken over stores nothing.
	_, _, _, err = st.AcquireLeases(ctx, hosts, run1, "w2", time.Minute)
	require.NoError(t, err)
	seq2 := int64(2)
	err = st.AppendHostFollowed(ctx, run1, 1, leases, store.HostFollowUpdate{FollowUpdate: store.FollowUpdate{Offset: 99, Events: []store.RunEvent{{Seq: &seq2, At: time.Now(), Type: "log"}}}})
	require.ErrorIs(t, err, store.ErrFenced)
}

func mustRun(t *testing.T, st *store.Store, id int64) store.Run {
	t.Helper()
	r, err := st.RunByID(context.Background(), id)
	require.NoError(t, err)
	return r
}

// The last two hosts of a multi-host run whose probes end at the same
// time, each in its own transaction: the run's probe has ended, so its
// hosts are free. (Each used to see the other's probe still running,
// and the run kept its hosts until the probe's time limit.)
func TestHostsEndingTogetherEndTheRunsProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	_, runID, _ := hostsAndMultiRuns(t, st, 2)

	aMarked, commitA := make(chan struct{}), make(chan struct{})
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	go func() {
		aDone <- st.InTx(ctx, func(tx *store.Store) error {
			if err := tx.MarkRunHostProbeEnded(ctx, runID, 0); err != nil {
				return err
			}
			close(aMarked)
			<-commitA
			return nil
		})
	}()
	<-aMarked
	go func() {
		bDone <- st.InTx(ctx, func(tx *store.Store) error { return tx.MarkRunHostProbeEnded(ctx, runID, 1) })
	}()
	// Host 1 counts while host 0's transaction is still open (given the
	// time to get there; it waits for host 0's to end).
	bEarly := false
	select {
	case err := <-bDone:
		require.NoError(t, err)
		bEarly = true
	case <-time.After(300 * time.Millisecond):
	}
	close(commitA)
	require.NoError(t, <-aDone)
	if !bEarly {
		require.NoError(t, <-bDone)
	}
	run, err := st.RunByID(ctx, runID)
	require.NoError(t, err)
	require.NotNil(t, run.ProbeEndedAt, "both hosts' probes ended, so the run's has")
}
