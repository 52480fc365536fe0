package jobs

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/store"
)

// The worker process dies (SIGKILL) in the middle of a run; another worker
// takes the job over once River rescues it and the host lease expires, and
// the run completes without starting the measurement again.
func TestWorkerKilledMidRunAnotherTakesOver(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noRiver: true, leaseTTL: 4 * time.Second, budget: 8 * time.Second})
	ctx := context.Background()

	// A real `accord worker` process on the same database.
	worker := b.startWorker(t, "worker", "ACCORD_LEASE_TTL=4s")

	// Submit through an insert-only client: only the worker process works it.
	inserter, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{})
	require.NoError(t, err)
	runID := b.submit(t, inserter, b.saveProfile(t, b.quickProfile(15*time.Second)), nil, nil)
	b.waitFor(t, runID, 60*time.Second, "the worker process runs it", func(r store.Run) bool { return r.State == store.RunRunning && r.EventsOffset > 0 })

	worker.crash(t)
	before, err := b.store.RunByID(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, store.RunRunning, before.State, "the dead worker left the run running")

	// Another worker, whose River rescues jobs stuck longer than 3 s.
	b.startRiver(t, 3*time.Second)
	run := b.waitFor(t, runID, 150*time.Second, "the other worker completes it", settled)
	require.Equal(t, store.RunDone, run.State, run.Reason)

	events := probeEvents(t, filepath.Join(b.runDir(runID), wire.EventsFile))
	starts := 0
	for _, e := range events {
		if e.Type == wire.EventStepStart {
			starts++
		}
	}
	require.Equal(t, 2, starts, "the measurement was not started again")
	notes, err := b.store.RunLogTail(ctx, runID, 500)
	require.NoError(t, err)
	resumed := false
	for _, n := range notes {
		resumed = resumed || strings.HasPrefix(n.Message, "resuming: following the probe from byte")
	}
	require.True(t, resumed, "the second worker resumed from the stored offset")
	var stored int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM run_events WHERE run_id = $1 AND seq IS NOT NULL`, runID).Scan(&stored))
	require.Equal(t, len(events), stored, "every event stored exactly once")
}
