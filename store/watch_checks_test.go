package store_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

// A watch's checks are kept as they were, listed oldest first (the newest
// when limited), and tell when the value was last within its line.
func TestWatchChecksKeepTheHistory(t *testing.T) {
	t.Parallel()
	w := setupRolloutWorld(t)
	ctx := context.Background()
	stage, err := w.st.AddRolloutStage(ctx, w.program, "pilot", store.StageGates{GateSetVersionID: w.gatesV, Profiles: []store.StageProfile{{ProfileID: w.profile}}}, 0)
	require.NoError(t, err)
	id, err := w.st.SetWatch(ctx, w.program, stage, store.NewWatch{Name: "p99 TTFT", Endpoint: "http://127.0.0.1:9090", Query: "up",
		Comparator: "<=", Line: 2, Unit: "s", Consecutive: 2, IntervalSeconds: 30})
	require.NoError(t, err)

	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	val := func(v float64) *float64 { return &v }
	checks := []store.WatchCheck{
		{WatchID: id, At: t0, Value: val(1.2), Line: 2},
		{WatchID: id, At: t0.Add(30 * time.Second), Error: "query: HTTP 503"},
		{WatchID: id, At: t0.Add(60 * time.Second), Value: val(2.5), Line: 2, PastLine: true, Breaches: 1},
		{WatchID: id, At: t0.Add(90 * time.Second), Value: val(math.Inf(1)), Line: 2, PastLine: true, Breaches: 2, Triggered: true},
	}
	for _, c := range checks {
		require.NoError(t, w.st.AddWatchCheck(ctx, c))
	}
	got, err := w.st.ListWatchChecks(ctx, id, t0, 100)
	require.NoError(t, err)
	require.Len(t, got, 4)
	for i := range got {
		require.True(t, checks[i].At.Equal(got[i].At))
		got[i].At = checks[i].At
	}
	require.Equal(t, checks, got, "+Inf is kept as a value")
	newest, err := w.st.ListWatchChecks(ctx, id, t0, 2)
	require.NoError(t, err)
	require.Len(t, newest, 2)
	require.Equal(t, 1, newest[0].Breaches, "the newest two, oldest first")
	require.True(t, newest[1].Triggered)
	later, err := w.st.ListWatchChecks(ctx, id, t0.Add(45*time.Second), 100)
	require.NoError(t, err)
	require.Len(t, later, 2)

	at, err := w.st.LastWatchCheckWithinLine(ctx, id, t0.Add(90*time.Second))
	require.NoError(t, err)
	require.True(t, at.Equal(t0), "a check without a value does not count")
	_, err = w.st.LastWatchCheckWithinLine(ctx, id, t0)
	require.ErrorIs(t, err, store.ErrNotFound)

	long := store.WatchCheck{WatchID: id, At: t0.Add(2 * time.Minute), Error: strings.Repeat("x", 5000)}
	require.NoError(t, w.st.AddWatchCheck(ctx, long), "a long error is cut, not refused")
	require.Error(t, w.st.InTx(ctx, func(tx *store.Store) error {
		return tx.AddWatchCheck(ctx, store.WatchCheck{WatchID: id, At: t0, PastLine: true})
	}), "past the line needs a value")

	pruned, err := w.st.PruneWatchChecks(ctx, t0.Add(61*time.Second))
	require.NoError(t, err)
	require.GreaterOrEqual(t, pruned, int64(3))
	got, err = w.st.ListWatchChecks(ctx, id, t0, 100)
	require.NoError(t, err)
	require.Len(t, got, 2)
}
