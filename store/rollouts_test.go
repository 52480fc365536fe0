package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// rolloutWorld is a program (and another one) with a profile, a gate set
// and a host, in a transaction rolled back when the test ends.
type rolloutWorld struct {
	st                *store.Store
	program, other    int64
	profile, profileV int64
	gates, gatesV     int64
	host              int64
}

func setupRolloutWorld(t *testing.T) *rolloutWorld {
	t.Helper()
	ctx := context.Background()
	w := &rolloutWorld{st: store.New(nil).WithTx(storetest.Tx(t))}
	// Names unique to the test: the shared database is used concurrently.
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	v, err := w.st.CreateOrganization(ctx, "V "+name, "vendor")
	require.NoError(t, err)
	c, err := w.st.CreateOrganization(ctx, "C "+name, "customer")
	require.NoError(t, err)
	w.program, err = w.st.CreateProgram(ctx, "P", "", v, c, nil)
	require.NoError(t, err)
	w.other, err = w.st.CreateProgram(ctx, "Q", "", v, c, nil)
	require.NoError(t, err)
	sp, pv, err := w.st.CreateSpec(ctx, store.KindProfile, w.program, store.NewSpecVersion{Name: "kv", Spec: []byte(`{}`), Digest: "sha256:p"})
	require.NoError(t, err)
	w.profile, w.profileV = sp.ID, pv.ID
	gs, gv, err := w.st.CreateSpec(ctx, store.KindGateSet, w.program, store.NewSpecVersion{Name: "ttft", Spec: []byte(`{}`), Digest: "sha256:g"})
	require.NoError(t, err)
	w.gates, w.gatesV = gs.ID, gv.ID
	w.host, err = w.st.CreateHost(ctx, w.program, store.NewHost{Name: "h", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	return w
}

func (w *rolloutWorld) run(t *testing.T, gateVersion *int64, verdict, state string) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := w.st.CreateRun(ctx, store.NewRun{ProgramID: w.program, ProfileVersionID: w.profileV, GateSetVersionID: gateVersion, HostID: w.host})
	require.NoError(t, err)
	if verdict != "" {
		require.NoError(t, w.st.SetRunVerdict(ctx, id, verdict))
	}
	if state != "" {
		require.NoError(t, w.st.SetRunState(ctx, id, state, "test"))
	}
	return id
}

func TestRolloutStagesKeepTheirOrder(t *testing.T) {
	t.Parallel()
	w := setupRolloutWorld(t)
	ctx := context.Background()
	pinned := w.run(t, &w.gatesV, "PASS", store.RunDone)
	gates := store.StageGates{Description: "lab", GateSetVersionID: w.gatesV, Profiles: []store.StageProfile{{ProfileID: w.profile, RunID: &pinned}}}
	var ids []int64
	for _, name := range []string{"lab-acceptance", "pilot-5pct", "fleet-100pct"} {
		id, err := w.st.AddRolloutStage(ctx, w.program, name, gates, 0)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	// (Statements expected to fail run in a savepoint: InTx inside a transaction.)
	err := w.st.InTx(ctx, func(tx *store.Store) error {
		_, err := tx.AddRolloutStage(ctx, w.program, "pilot-5pct", gates, 0)
		return err
	})
	require.ErrorIs(t, err, store.ErrConflict)

	stages, err := w.st.ListRolloutStages(ctx, w.program)
	require.NoError(t, err)
	require.Len(t, stages, 3)
	for i, s := range stages {
		require.Equal(t, i+1, s.Position)
		require.Equal(t, "ttft v1", s.GateSetLabel())
		require.Equal(t, "sha256:g", s.GateSetDigest)
		require.Equal(t, []store.StageProfile{{ProfileID: w.profile, ProfileName: "kv", RunID: &pinned}}, s.Profiles)
	}
	_, err = w.st.GetRolloutStage(ctx, w.other, ids[0])
	require.ErrorIs(t, err, store.ErrNotFound, "another program's stage is not found")

	require.NoError(t, w.st.UpdateRolloutStage(ctx, w.program, ids[1], store.StageGates{Description: "5 % of the fleet", GateSetVersionID: w.gatesV,
		Profiles: []store.StageProfile{{ProfileID: w.profile}}}))
	s, err := w.st.GetRolloutStage(ctx, w.program, ids[1])
	require.NoError(t, err)
	require.Equal(t, "5 % of the fleet", s.Description)
	require.Nil(t, s.Profiles[0].RunID)
	require.ErrorIs(t, w.st.UpdateRolloutStage(ctx, w.other, ids[1], gates), store.ErrNotFound)

	require.ErrorIs(t, w.st.DeleteRolloutStage(ctx, w.other, ids[1]), store.ErrNotFound)
	require.NoError(t, w.st.DeleteRolloutStage(ctx, w.program, ids[1]))
	stages, err = w.st.ListRolloutStages(ctx, w.program)
	require.NoError(t, err)
	require.Equal(t, []string{"lab-acceptance", "fleet-100pct"}, []string{stages[0].Name, stages[1].Name})
	require.Equal(t, []int{1, 2}, []int{stages[0].Position, stages[1].Position}, "the gap is closed")
	id, err := w.st.AddRolloutStage(ctx, w.program, "pilot-25pct", gates, 0)
	require.NoError(t, err)
	s, err = w.st.GetRolloutStage(ctx, w.program, id)
	require.NoError(t, err)
	require.Equal(t, 3, s.Position)
}

func TestLatestJudgedRunIsTheNewestFinishedOne(t *testing.T) {
	t.Parallel()
	w := setupRolloutWorld(t)
	ctx := context.Background()
	_, err := w.st.LatestJudgedRun(ctx, w.program, w.profile, w.gatesV)
	require.ErrorIs(t, err, store.ErrNotFound)

	older := w.run(t, &w.gatesV, "PASS", store.RunDone)
	newest := w.run(t, &w.gatesV, "FAIL", store.RunDone)
	w.run(t, &w.gatesV, "", store.RunRunning)    // not finished
	w.run(t, &w.gatesV, "", store.RunDone)       // finished without a verdict
	w.run(t, &w.gatesV, "PASS", store.RunFailed) // failed
	w.run(t, nil, "", store.RunDone)             // not judged by the gate set
	_, gv2, err := w.st.CreateSpec(ctx, store.KindGateSet, w.program, store.NewSpecVersion{Name: "other", Spec: []byte(`{}`), Digest: "sha256:o"})
	require.NoError(t, err)
	w.run(t, &gv2.ID, "PASS", store.RunDone) // judged by another gate set

	run, err := w.st.LatestJudgedRun(ctx, w.program, w.profile, w.gatesV)
	require.NoError(t, err)
	require.Equal(t, newest, run.ID)
	require.NotEqual(t, older, run.ID)
	require.Equal(t, "FAIL", run.Verdict)
	_, err = w.st.LatestJudgedRun(ctx, w.other, w.profile, w.gatesV)
	require.ErrorIs(t, err, store.ErrNotFound, "another program's runs are not found")
}

func TestWatchesAreClaimedWhenDue(t *testing.T) {
	t.Parallel()
	w := setupRolloutWorld(t)
	ctx := context.Background()
	stage, err := w.st.AddRolloutStage(ctx, w.program, "pilot", store.StageGates{GateSetVersionID: w.gatesV, Profiles: []store.StageProfile{{ProfileID: w.profile}}}, 0)
	require.NoError(t, err)
	nw := store.NewWatch{Name: "p99 TTFT", Endpoint: "http://127.0.0.1:9090", Query: "up", Comparator: "<=", Line: 2, Unit: "s", Consecutive: 3, IntervalSeconds: 30}
	_, err = w.st.SetWatch(ctx, w.other, stage, nw)
	require.ErrorIs(t, err, store.ErrNotFound, "not on another program's stage")
	id, err := w.st.SetWatch(ctx, w.program, stage, nw)
	require.NoError(t, err)

	// Claimed when due, and then not again until an interval later (less
	// the slack: it was claimed long after it was due).
	now := time.Now().Add(time.Minute)
	due, err := w.st.ClaimDueWatches(ctx, now, 2*time.Second, 1000)
	require.NoError(t, err)
	var mine []store.Watch
	for _, d := range due {
		if d.ProgramID == w.program {
			mine = append(mine, d)
		}
	}
	require.Len(t, mine, 1)
	require.Equal(t, "pilot", mine[0].StageName)
	require.WithinDuration(t, now.Add(28*time.Second), mine[0].NextCheckAt, time.Millisecond)
	again, err := w.st.ClaimDueWatches(ctx, now.Add(25*time.Second), 2*time.Second, 1000)
	require.NoError(t, err)
	for _, d := range again {
		require.NotEqual(t, id, d.ID)
	}
	// Due within the slack: claimed, and the next check keeps the cadence.
	due, err = w.st.ClaimDueWatches(ctx, now.Add(26*time.Second+500*time.Millisecond), 2*time.Second, 1000)
	require.NoError(t, err)
	mine = mine[:0]
	for _, d := range due {
		if d.ID == id {
			mine = append(mine, d)
		}
	}
	require.Len(t, mine, 1, "due 1.5 s later, within the slack")
	require.WithinDuration(t, now.Add(58*time.Second), mine[0].NextCheckAt, time.Millisecond, "an interval after the check it stood for")

	v := 2.5
	points := []store.WatchPoint{{At: now.UTC().Truncate(time.Microsecond), Value: 2.5}}
	require.NoError(t, w.st.RecordWatchCheck(ctx, id, now, &v, "", 1, points))
	require.NoError(t, w.st.RecordWatchCheck(ctx, id, now.Add(time.Second), nil, "query: HTTP 503", 1, points))
	got, err := w.st.WatchByID(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, got.Breaches)
	require.Equal(t, 2.5, *got.LastValue, "a failed check keeps the last value")
	require.Equal(t, "query: HTTP 503", got.LastError)
	require.Equal(t, points[0].Value, got.Recent[0].Value)
	require.True(t, points[0].At.Equal(got.Recent[0].At))

	// Replacing the watch starts its count afresh.
	nw.Line = 3
	id2, err := w.st.SetWatch(ctx, w.program, stage, nw)
	require.NoError(t, err)
	require.Equal(t, id, id2, "one watch per stage")
	got, err = w.st.WatchByID(ctx, id)
	require.NoError(t, err)
	require.Zero(t, got.Breaches)
	require.Empty(t, got.Recent)
	require.Equal(t, 3.0, got.Line)

	removed, err := w.st.DeleteWatch(ctx, w.other, stage)
	require.NoError(t, err)
	require.False(t, removed)
	removed, err = w.st.DeleteWatch(ctx, w.program, stage)
	require.NoError(t, err)
	require.True(t, removed)
	_, err = w.st.WatchByID(ctx, id)
	require.ErrorIs(t, err, store.ErrNotFound)
}
