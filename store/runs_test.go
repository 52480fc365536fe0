package store_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

func TestRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st *store.Store
		f  runFixture
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		return &testBundle{st: st, f: newRunFixture(t, st)}
	}

	t.Run("ASubmittedRunIsQueuedWithItsNames", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		gv := newGateSetVersion(t, b.st, b.f.ID, "ttft")
		user := b.f.member(t, b.st, "Engineer", store.RoleEngineer)
		baseline := b.f.run(t, b.st)
		id, err := b.st.CreateRun(ctx, store.NewRun{ProgramID: b.f.ID, ProfileVersionID: b.f.ProfileVersion.ID, GateSetVersionID: &gv.ID, HostID: b.f.Host,
			BaselineRunID: &baseline, Label: "nightly", Emulated: true, ReadinessOverride: json.RawMessage(`{"failed":["nvme.present"]}`), CreatedBy: user})
		require.NoError(t, err)
		r, err := b.st.GetRun(ctx, b.f.ID, id)
		require.NoError(t, err)
		require.Equal(t, store.RunQueued, r.State)
		require.Equal(t, "executed", r.Kind)
		require.Equal(t, "kv", r.ProfileName)
		require.Equal(t, 1, r.ProfileVersion)
		require.Equal(t, "ttft", r.GateSetName)
		require.Equal(t, "lab", r.HostName)
		require.Equal(t, &baseline, r.BaselineRunID)
		require.Equal(t, "Engineer", r.CreatedByName)
		require.True(t, r.Emulated)
		require.JSONEq(t, `{"failed":["nvme.present"]}`, string(r.ReadinessOverride))
		require.False(t, r.HasReport)
		require.Nil(t, r.StartedAt)
		require.Equal(t, "#"+strconv.FormatInt(id, 10)+" nightly", r.DisplayLabel())

		tr, err := b.st.RunTransitions(ctx, id)
		require.NoError(t, err)
		require.Len(t, tr, 1)
		require.Equal(t, store.RunTransition{At: tr[0].At, FromState: "", ToState: store.RunQueued, Reason: "submitted"}, tr[0])

		imported, err := b.st.CreateRun(ctx, store.NewRun{ProgramID: b.f.ID, Kind: "imported", ProfileVersionID: b.f.ProfileVersion.ID})
		require.NoError(t, err)
		r, err = b.st.RunByID(ctx, imported)
		require.NoError(t, err)
		require.Equal(t, "imported", r.Kind)
		require.Nil(t, r.HostID, "an imported run has no host")
		require.Equal(t, "#"+strconv.FormatInt(imported, 10)+" kv v1", r.DisplayLabel())
	})

	t.Run("AnotherProgramsRunIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.f.run(t, b.st)
		other := newRunFixture(t, b.st)
		_, err := b.st.GetRun(ctx, other.ID, id)
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = b.st.RunByID(ctx, -1)
		require.ErrorIs(t, err, store.ErrNotFound)
		list, err := b.st.ListRuns(ctx, other.ID, store.RunFilter{})
		require.NoError(t, err)
		require.Empty(t, list)
	})

	t.Run("AnIdempotencyKeyStartsOneRunPerUserAndProgram", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		alice := b.f.member(t, b.st, "alice", store.RoleEngineer)
		bob := b.f.member(t, b.st, "bob", store.RoleEngineer)
		submit := func(st *store.Store, user int64) (int64, error) {
			return st.CreateRun(ctx, store.NewRun{ProgramID: b.f.ID, ProfileVersionID: b.f.ProfileVersion.ID, HostID: b.f.Host, CreatedBy: user,
				IdempotencyKey: "ci-42", RequestDigest: "sha256:req"})
		}
		first, err := submit(b.st, alice)
		require.NoError(t, err)
		err = inSavepoint(b.st, func(tx *store.Store) error { _, err := submit(tx, alice); return err })
		require.ErrorIs(t, err, store.ErrConflict)
		_, err = submit(b.st, bob)
		require.NoError(t, err, "another user's key is their own")

		id, digest, err := b.st.RunByIdempotencyKey(ctx, b.f.ID, alice, "ci-42")
		require.NoError(t, err)
		require.Equal(t, first, id)
		require.Equal(t, "sha256:req", digest)
		_, _, err = b.st.RunByIdempotencyKey(ctx, b.f.ID, alice, "ci-43")
		require.ErrorIs(t, err, store.ErrNotFound)
		other := newRunFixture(t, b.st)
		_, _, err = b.st.RunByIdempotencyKey(ctx, other.ID, alice, "ci-42")
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("StatesRecordTheirTransitionsAndTimes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.f.run(t, b.st)
		for _, s := range []string{store.RunWaitingForHost, store.RunPreparing, store.RunRunning, store.RunRunning, store.RunCollecting, store.RunEvaluating} {
			require.NoError(t, b.st.SetRunState(ctx, id, s, "to "+s))
		}
		r, err := b.st.RunByID(ctx, id)
		require.NoError(t, err)
		require.NotNil(t, r.StartedAt, "started when preparing")
		require.Nil(t, r.FinishedAt)
		require.Equal(t, "to evaluating", r.Reason)
		require.NoError(t, b.st.SetRunState(ctx, id, store.RunDone, ""))
		r, err = b.st.RunByID(ctx, id)
		require.NoError(t, err)
		require.NotNil(t, r.FinishedAt)
		require.Empty(t, r.Reason, "the reason is always replaced: an earlier step's words do not outlive it")

		tr, err := b.st.RunTransitions(ctx, id)
		require.NoError(t, err)
		var to []string
		for _, x := range tr {
			to = append(to, x.ToState)
		}
		require.Equal(t, []string{"queued", "waiting_for_host", "preparing", "running", "collecting", "evaluating", "done"}, to,
			"a state set again is no transition")
		require.ErrorIs(t, b.st.SetRunState(ctx, id, store.RunRunning, ""), store.ErrRunFinal)
		require.ErrorIs(t, b.st.SetRunState(ctx, -1, store.RunRunning, ""), store.ErrNotFound)
	})

	t.Run("AnUnknownStateOrVerdictIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.f.run(t, b.st)
		err := inSavepoint(b.st, func(tx *store.Store) error { return tx.SetRunState(ctx, id, "paused", "") })
		require.ErrorContains(t, err, "runs_state_check")
		err = inSavepoint(b.st, func(tx *store.Store) error { return tx.SetRunVerdict(ctx, id, "MAYBE") })
		require.ErrorContains(t, err, "runs_verdict_check")
		require.ErrorIs(t, b.st.SetRunVerdict(ctx, -1, "PASS"), store.ErrNotFound)
	})

	t.Run("RunsAreListedNewestFirstAndFiltered", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		otherHost := newHost(t, b.st, b.f.ID, "lab-2")
		otherProfile := newProfileVersion(t, b.st, b.f.ID, "ttft")
		var ids []int64
		for i := range 5 {
			nr := store.NewRun{ProgramID: b.f.ID, ProfileVersionID: b.f.ProfileVersion.ID, HostID: b.f.Host}
			if i == 1 {
				nr.HostID = otherHost
			}
			if i == 2 {
				nr.ProfileVersionID = otherProfile.ID
			}
			id, err := b.st.CreateRun(ctx, nr)
			require.NoError(t, err)
			ids = append(ids, id)
		}
		require.NoError(t, b.st.SetRunState(ctx, ids[3], store.RunFailed, "boom"))
		list := func(f store.RunFilter) []int64 {
			runs, err := b.st.ListRuns(ctx, b.f.ID, f)
			require.NoError(t, err)
			var out []int64
			for _, r := range runs {
				out = append(out, r.ID)
			}
			return out
		}
		require.Equal(t, []int64{ids[4], ids[3], ids[2], ids[1], ids[0]}, list(store.RunFilter{}))
		require.Equal(t, []int64{ids[1]}, list(store.RunFilter{HostID: &otherHost}))
		require.Equal(t, []int64{ids[2]}, list(store.RunFilter{ProfileID: &otherProfile.SpecID}))
		require.Equal(t, []int64{ids[3]}, list(store.RunFilter{State: store.RunFailed}))
		require.Equal(t, []int64{ids[2], ids[1]}, list(store.RunFilter{BeforeID: ids[3], Limit: 2}), "a page before a cursor")
	})

	t.Run("RecentRunsAreThoseOfTheUsersPrograms", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		user := b.f.member(t, b.st, "member", store.RoleViewer)
		mine := b.f.run(t, b.st)
		other := newRunFixture(t, b.st)
		other.run(t, b.st)
		recent, err := b.st.RecentRunsFor(ctx, user, 10)
		require.NoError(t, err)
		require.Len(t, recent, 1)
		require.Equal(t, mine, recent[0].ID)
	})

	t.Run("RunsInExecutionAreThoseWithAJobNotYetCollected", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		queued, running, evaluating, noJob := b.f.run(t, b.st), b.f.run(t, b.st), b.f.run(t, b.st), b.f.run(t, b.st)
		for i, id := range []int64{queued, running, evaluating} {
			require.NoError(t, b.st.SetRunJob(ctx, id, int64(100+i)))
		}
		require.NoError(t, b.st.SetRunState(ctx, running, store.RunRunning, ""))
		require.NoError(t, b.st.SetRunState(ctx, evaluating, store.RunEvaluating, ""))
		ids, err := b.st.RunsInExecution(ctx)
		require.NoError(t, err)
		require.Contains(t, ids, queued)
		require.Contains(t, ids, running)
		require.NotContains(t, ids, evaluating)
		require.NotContains(t, ids, noJob)
		require.ErrorIs(t, b.st.SetRunJob(ctx, -1, 1), store.ErrNotFound)
	})

	t.Run("LaunchAndCancelAreRecordedOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.f.run(t, b.st)
		r, err := b.st.RunByID(ctx, id)
		require.NoError(t, err)
		require.False(t, r.ProbeMayRun)
		require.NoError(t, b.st.SetRunState(ctx, id, store.RunRunning, ""))
		require.NoError(t, b.st.MarkLaunched(ctx, id, "/srv/accord/runs/7-1"))
		r, err = b.st.RunByID(ctx, id)
		require.NoError(t, err)
		require.True(t, r.Launched)
		require.Equal(t, 1, r.Attempt)
		require.Equal(t, "/srv/accord/runs/7-1", r.RemoteDir)
		require.True(t, r.ProbeMayRun)
		require.ErrorIs(t, b.st.MarkLaunched(ctx, -1, "x"), store.ErrNotFound)

		asked, err := b.st.CancelRequested(ctx, id)
		require.NoError(t, err)
		require.False(t, asked)
		by, err := b.st.CancelRequester(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "a user", by, "nobody asked")
		require.NoError(t, b.st.RequestCancel(ctx, id, "eng@vendor.example"))
		require.NoError(t, b.st.RequestCancel(ctx, id, "own@customer.example"))
		asked, err = b.st.CancelRequested(ctx, id)
		require.NoError(t, err)
		require.True(t, asked)
		by, err = b.st.CancelRequester(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "eng@vendor.example", by, "the first who asked")
		require.ErrorIs(t, b.st.RequestCancel(ctx, -1, "x"), store.ErrNotFound)
		_, err = b.st.CancelRequested(ctx, -1)
		require.ErrorIs(t, err, store.ErrNotFound)

		require.NoError(t, b.st.MarkProbeEnded(ctx, id))
		require.NoError(t, b.st.SetRunState(ctx, id, store.RunEvaluating, ""))
		r, err = b.st.RunByID(ctx, id)
		require.NoError(t, err)
		require.False(t, r.ProbeMayRun, "its probe was seen to end")
		require.NotNil(t, r.ProbeEndedAt)
		require.ErrorIs(t, b.st.MarkProbeEnded(ctx, -1), store.ErrNotFound)
		require.ErrorIs(t, b.st.RecordLaunchIntent(ctx, -1, "x", time.Hour), store.ErrNotFound)
	})

	t.Run("EvaluationsAreKeptAndTheNewestCounts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		gv := newGateSetVersion(t, b.st, b.f.ID, "ttft")
		id := b.f.run(t, b.st)
		_, err := b.st.RunLatestEvaluation(ctx, id)
		require.ErrorIs(t, err, store.ErrNotFound)
		for _, overall := range []string{"FAIL", "PASS"} {
			_, err := b.st.SaveEvaluation(ctx, store.StoredEvaluation{RunID: id, GateSetVersionID: gv.ID, Overall: overall,
				Result: json.RawMessage(`{"verdict":"` + overall + `"}`), Canonical: []byte(overall), Digest: "sha256:" + overall, EngineVersion: "1"})
			require.NoError(t, err)
		}
		ev, err := b.st.RunLatestEvaluation(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "PASS", ev.Overall)
		require.Equal(t, []byte("PASS"), ev.Canonical)
		r, err := b.st.RunByID(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "PASS", r.Verdict, "the run carries the newest verdict")

		err = inSavepoint(b.st, func(tx *store.Store) error {
			_, err := tx.Tx().Exec(ctx, `UPDATE evaluations SET overall = 'PASS' WHERE run_id = $1`, id)
			return err
		})
		require.ErrorContains(t, err, "evaluations is append-only")
	})

	t.Run("TheStopLossBreachIsKept", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.f.run(t, b.st)
		breach, err := b.st.RunStopLoss(ctx, id)
		require.NoError(t, err)
		require.Nil(t, breach)
		require.NoError(t, b.st.RecordStopLoss(ctx, id, map[string]any{"metric": "ttft", "p99_ms": 2500.0}))
		breach, err = b.st.RunStopLoss(ctx, id)
		require.NoError(t, err)
		require.JSONEq(t, `{"metric":"ttft","p99_ms":2500}`, string(breach))
		_, err = b.st.RunStopLoss(ctx, -1)
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("ARunReleasesOnlyItsOwnLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		holder, other := b.f.run(t, b.st), b.f.run(t, b.st)
		_, _, err := b.st.AcquireLease(ctx, b.f.Host, holder, "worker", time.Minute)
		require.NoError(t, err)
		require.NoError(t, b.st.ReleaseRunLease(ctx, b.f.Host, other))
		l, err := b.st.HostLease(ctx, b.f.Host)
		require.NoError(t, err)
		require.Equal(t, holder, l.RunID)
		require.NoError(t, b.st.ReleaseRunLease(ctx, b.f.Host, holder))
		_, err = b.st.HostLease(ctx, b.f.Host)
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

// A state change, a verdict and a note wake the run's live pages: the
// notification carries the run's id, once the change is committed.
func TestRunChangesNotifyLivePages(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	f := newRunFixture(t, st)
	id := f.run(t, st)

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `LISTEN run_updates`)
	require.NoError(t, err)
	next := func() string {
		t.Helper()
		n, err := conn.Conn().WaitForNotification(ctx)
		require.NoError(t, err)
		return n.Payload
	}

	want := strconv.FormatInt(id, 10)
	require.NoError(t, st.SetRunState(ctx, id, store.RunRunning, ""))
	require.Equal(t, want, next())
	require.NoError(t, st.AddRunNote(ctx, id, "info", "probe started"))
	require.Equal(t, want, next())
	require.NoError(t, st.SetRunVerdict(ctx, id, "PASS"))
	require.Equal(t, want, next())

	// Inside a transaction that is rolled back, nothing is sent.
	err = st.InTx(ctx, func(tx *store.Store) error {
		if err := tx.SetRunState(ctx, id, store.RunCollecting, ""); err != nil {
			return err
		}
		return context.Canceled
	})
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, st.SetRunState(ctx, id, store.RunEvaluating, "")) // sent after the rolled-back one would have been
	require.Equal(t, want, next())
	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer wcancel()
	_, err = conn.Conn().WaitForNotification(wctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "one notification per committed change")
}
