package jobs

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

// Two Accord installations (two databases) drive one lab host, so no lease
// keeps their runs apart: a long run of the first measures while a run of
// the second starts. Each probe sees the other run folder active, both
// runs are marked contaminated, and neither passes its gates, which both
// would pass alone.
func TestRunsMeasuringTogetherAreContaminated(t *testing.T) {
	t.Parallel()
	first := setup(t)
	second := setup(t, setupOpts{sshd: first.sshd, remote: filepath.Join(filepath.Dir(first.remote), "installation-2")})
	ctx := context.Background()

	long := first.submit(t, first.river, first.saveProfile(t, first.quickProfile(10*time.Second)), ptr(first.saveGates(t, quickGates())), nil)
	first.waitFor(t, long, 60*time.Second, "the long run measures", func(r store.Run) bool { return r.State == store.RunRunning && r.EventsOffset > 0 })
	short := second.submit(t, second.river, second.saveProfile(t, second.quickProfile(3*time.Second)), ptr(second.saveGates(t, quickGates())), nil)

	for _, side := range []struct {
		b     *testBundle
		run   int64
		other string
	}{{second, short, first.runDir(long)}, {first, long, second.runDir(short)}} {
		run := side.b.waitFor(t, side.run, 120*time.Second, "judged", settled)
		require.Equal(t, store.RunDone, run.State, run.Reason)
		require.True(t, run.Contaminated)
		require.Equal(t, "INCONCLUSIVE", run.Verdict, "a contaminated run never passes")
		require.Contains(t, run.Reason, "contaminated")
		neighbours, err := side.b.store.RunNeighbours(ctx, run.ID)
		require.NoError(t, err)
		require.Len(t, neighbours, 1)
		require.Equal(t, side.other, neighbours[0].OtherDir)
		require.Nil(t, neighbours[0].OtherRunID, "a run of another installation")
		require.Equal(t, store.SeenByThisRun, neighbours[0].SeenBy)

		ev, err := side.b.store.RunLatestEvaluation(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, "INCONCLUSIVE", ev.Overall)
		require.Contains(t, string(ev.Canonical), `"contamination":["another Accord installation's run in `+side.other)
		notes, err := side.b.store.RunLogTail(ctx, run.ID, 200)
		require.NoError(t, err)
		var said bool
		for _, n := range notes {
			said = said || strings.Contains(n.Message, "this run is contaminated and cannot pass")
		}
		require.True(t, said, "the run's log says so")
	}
}

func ptr[T any](v T) *T { return &v }
