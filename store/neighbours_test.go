package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// A run's probe saw another run of this installation active on the host:
// both runs are contaminated (the other from this one's sighting), a run
// of another installation is kept by its folder only, sightings merge, a
// stale worker records nothing, and a run judged already is named for
// judging again.
func TestNeighboursContaminateBothRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	host, run1, run2 := hostAndRuns(t, st)
	lease, _, err := st.AcquireLease(ctx, host, run1, "worker-a", time.Minute)
	require.NoError(t, err)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	seen := []store.SightedNeighbour{
		{Dir: "/home/lab/.accord/aa/runs/2-1", RunID: run2, PID: 4242, FirstSeen: t0, LastSeen: t0.Add(2 * time.Second)},
		{Dir: "/home/lab/.accord/bb/runs/9-1", FirstSeen: t0, LastSeen: t0},
	}
	rejudge, err := st.RecordNeighbours(ctx, run1, lease, ".accord/aa/runs/1-1", seen)
	require.NoError(t, err)
	require.Empty(t, rejudge, "run 2 was not judged yet")
	// Seen again later: one sighting, its span widened.
	seen[0].FirstSeen, seen[0].LastSeen = t0.Add(time.Second), t0.Add(6*time.Second)
	_, err = st.RecordNeighbours(ctx, run1, lease, ".accord/aa/runs/1-1", seen[:1])
	require.NoError(t, err)

	mine, err := st.RunNeighbours(ctx, run1)
	require.NoError(t, err)
	require.Len(t, mine, 2)
	require.Equal(t, run2, *mine[0].OtherRunID)
	require.Equal(t, 4242, mine[0].OtherPID)
	require.Equal(t, t0, mine[0].FirstSeen.UTC())
	require.Equal(t, t0.Add(6*time.Second), mine[0].LastSeen.UTC())
	require.Equal(t, store.SeenByThisRun, mine[0].SeenBy)
	require.Nil(t, mine[1].OtherRunID, "another installation's run is known by its folder")
	require.Contains(t, mine[1].Describe(), "another Accord installation's run in /home/lab/.accord/bb/runs/9-1")

	theirs, err := st.RunNeighbours(ctx, run2)
	require.NoError(t, err)
	require.Len(t, theirs, 1)
	require.Equal(t, run1, *theirs[0].OtherRunID)
	require.Equal(t, ".accord/aa/runs/1-1", theirs[0].OtherDir)
	require.Equal(t, store.SeenByOtherRun, theirs[0].SeenBy)
	require.Contains(t, theirs[0].Describe(), "whose probe saw this run")
	for _, id := range []int64{run1, run2} {
		r, err := st.RunByID(ctx, id)
		require.NoError(t, err)
		require.True(t, r.Contaminated, "run %d", id)
	}

	// Run 2 judged already: a later sighting names it for judging again.
	_, gv, err := st.CreateSpec(ctx, store.KindGateSet, mustProgramOf(t, st, run2), store.NewSpecVersion{Name: "g", Spec: []byte(`{}`), Digest: "sha256:g"})
	require.NoError(t, err)
	_, err = st.SaveEvaluation(ctx, store.StoredEvaluation{RunID: run2, GateSetVersionID: gv.ID, Overall: "PASS", Result: []byte(`{}`), Canonical: []byte(`{}`), Digest: "d", EngineVersion: "e"})
	require.NoError(t, err)
	rejudge, err = st.RecordNeighbours(ctx, run1, lease, ".accord/aa/runs/1-1", seen[:1])
	require.NoError(t, err)
	require.Equal(t, []int64{run2}, rejudge)

	// A worker whose lease was taken over records nothing.
	_, _, err = st.AcquireLease(ctx, host, run1, "worker-b", time.Minute)
	require.NoError(t, err)
	_, err = st.RecordNeighbours(ctx, run1, lease, ".accord/aa/runs/1-1", []store.SightedNeighbour{{Dir: "/x", FirstSeen: t0, LastSeen: t0}})
	require.ErrorIs(t, err, store.ErrFenced)
	mine, err = st.RunNeighbours(ctx, run1)
	require.NoError(t, err)
	require.Len(t, mine, 2)
}

func mustProgramOf(t *testing.T, st *store.Store, runID int64) int64 {
	t.Helper()
	r, err := st.RunByID(context.Background(), runID)
	require.NoError(t, err)
	return r.ProgramID
}
