package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

// The prune job drops production-watch checks past their retention and
// keeps the others.
func TestPruneDropsOldWatchChecks(t *testing.T) {
	t.Parallel()
	b := setupRollouts(t, "pilot-5pct")
	ctx := context.Background()
	w := b.addWatch(t, "pilot-5pct", "http://127.0.0.1:9/prom", 3)
	now := time.Now()
	for _, at := range []time.Time{now.Add(-WatchCheckRetention - time.Hour), now.Add(-WatchCheckRetention + time.Hour), now} {
		require.NoError(t, b.store.AddWatchCheck(ctx, store.WatchCheck{WatchID: w.ID, At: at, Line: 2, Error: "query: HTTP 503"}))
	}
	require.NoError(t, (&PruneWorker{deps: b.deps}).Work(ctx, &river.Job[PruneArgs]{}))
	left, err := b.store.ListWatchChecks(ctx, w.ID, time.Time{}, 10)
	require.NoError(t, err)
	require.Len(t, left, 2)
	require.True(t, left[0].At.After(now.Add(-WatchCheckRetention)))
}
