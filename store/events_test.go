package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

func TestRunEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st    *store.Store
		f     runFixture
		run   int64
		lease store.Lease
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		f := newRunFixture(t, st)
		run := f.run(t, st)
		lease, _, err := st.AcquireLease(ctx, f.Host, run, "worker", time.Minute)
		require.NoError(t, err)
		return &testBundle{st: st, f: f, run: run, lease: lease}
	}
	event := func(seq int64, typ, msg string) store.RunEvent {
		return store.RunEvent{Seq: &seq, At: time.Now(), Type: typ, Level: "info", Message: msg}
	}
	messages := func(events []store.RunEvent) []string {
		var out []string
		for _, e := range events {
			out = append(out, e.Message)
		}
		return out
	}

	// Each host of a multi-host run has its own events: a host's read
	// returns its own, in order, of the types asked, and none of the
	// other host's or of the run's own log.
	t.Run("HostEventsAreEachHostsOwn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		leases := []store.Lease{b.lease}
		require.NoError(t, b.st.AppendHostFollowed(ctx, b.run, 0, leases, store.HostFollowUpdate{FollowUpdate: store.FollowUpdate{Offset: 10,
			Events: []store.RunEvent{event(1, "interim", "h0 one"), event(2, "log", "h0 log"), event(3, "interim", "h0 two")}}}))
		require.NoError(t, b.st.AppendHostFollowed(ctx, b.run, 1, leases, store.HostFollowUpdate{FollowUpdate: store.FollowUpdate{Offset: 10,
			Events: []store.RunEvent{event(1, "interim", "h1 one")}}}))
		require.NoError(t, b.st.AddRunNote(ctx, b.run, "info", "the run's own"))

		h0, err := b.st.RunHostEventsOfType(ctx, b.run, 0, "interim")
		require.NoError(t, err)
		require.Equal(t, []string{"h0 one", "h0 two"}, messages(h0))
		h1, err := b.st.RunHostEventsOfType(ctx, b.run, 1, "interim", "log")
		require.NoError(t, err)
		require.Equal(t, []string{"h1 one"}, messages(h1))
		none, err := b.st.RunHostEventsOfType(ctx, b.run, 2, "interim", "log")
		require.NoError(t, err)
		require.Empty(t, none)
		all, err := b.st.RunEventsOfType(ctx, b.run, "interim")
		require.NoError(t, err)
		require.Len(t, all, 3, "the run's read has every host's")
	})

	t.Run("AResumedFollowStoresNothingTwice", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.st.AppendFollowed(ctx, b.run, b.lease, store.FollowUpdate{Offset: 120, Progress: json.RawMessage(`{"fraction":0.2}`),
			Events: []store.RunEvent{event(1, "log", "one"), event(2, "log", "two")}}))
		// The connection dropped after the worker read seq 2 but before it
		// stored the offset: the next read starts earlier and repeats seq 2.
		require.NoError(t, b.st.AppendFollowed(ctx, b.run, b.lease, store.FollowUpdate{Offset: 100,
			Events: []store.RunEvent{event(2, "log", "two"), event(3, "log", "three")}}))

		all, err := b.st.RunEventsAfter(ctx, b.run, 0, []string{"log"}, 100)
		require.NoError(t, err)
		require.Equal(t, []string{"one", "two", "three"}, messages(all))
		r, err := b.st.RunByID(ctx, b.run)
		require.NoError(t, err)
		require.EqualValues(t, 120, r.EventsOffset, "the offset never goes back")
		require.JSONEq(t, `{"fraction":0.2}`, string(r.Progress), "no progress in an update keeps the last one")
	})

	t.Run("AStaleWorkerStoresNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The run's next attempt takes the lease over.
		_, _, err := b.st.AcquireLease(ctx, b.f.Host, b.run, "worker-2", time.Minute)
		require.NoError(t, err)
		err = b.st.AppendFollowed(ctx, b.run, b.lease, store.FollowUpdate{Offset: 50, Events: []store.RunEvent{event(1, "log", "stale")}})
		require.ErrorIs(t, err, store.ErrFenced)
		all, err := b.st.RunEventsOfType(ctx, b.run, "log")
		require.NoError(t, err)
		require.Empty(t, all)
		r, err := b.st.RunByID(ctx, b.run)
		require.NoError(t, err)
		require.Zero(t, r.EventsOffset)
	})

	t.Run("ServerNotesHaveNoSequence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.st.AddRunNote(ctx, b.run, "warn", strings.Repeat("ü", 2500)))
		require.NoError(t, b.st.AddRunNote(ctx, b.run, "info", "second"))
		notes, err := b.st.RunLogTail(ctx, b.run, 10)
		require.NoError(t, err)
		require.Len(t, notes, 2)
		require.Nil(t, notes[0].Seq)
		require.Equal(t, "warn", notes[0].Level)
		require.Equal(t, strings.Repeat("ü", 2000), notes[0].Message, "cut to 4000 bytes")
		require.Error(t, inSavepoint(b.st, func(tx *store.Store) error { return tx.AddRunNote(ctx, -1, "info", "x") }), "the run must exist")
	})

	t.Run("TheLiveCursorReadsOnwardByTypeAndLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var events []store.RunEvent
		for i := int64(1); i <= 6; i++ {
			typ := "log"
			if i%2 == 0 {
				typ = "progress"
			}
			events = append(events, event(i, typ, fmt.Sprint(i)))
		}
		require.NoError(t, b.st.AppendFollowed(ctx, b.run, b.lease, store.FollowUpdate{Offset: 1, Events: events}))
		first, err := b.st.RunEventsAfter(ctx, b.run, 0, []string{"log", "progress"}, 2)
		require.NoError(t, err)
		require.Equal(t, []string{"1", "2"}, messages(first))
		rest, err := b.st.RunEventsAfter(ctx, b.run, first[1].ID, []string{"log"}, 100)
		require.NoError(t, err)
		require.Equal(t, []string{"3", "5"}, messages(rest))
		tail, err := b.st.RunLogTail(ctx, b.run, 2)
		require.NoError(t, err)
		require.Equal(t, []string{"3", "5"}, messages(tail), "the last log lines, oldest first")
		progress, err := b.st.RunEventsOfType(ctx, b.run, "progress")
		require.NoError(t, err)
		require.Equal(t, []string{"2", "4", "6"}, messages(progress))
		other := newRunFixture(t, b.st).run(t, b.st)
		none, err := b.st.RunEventsAfter(ctx, other, 0, []string{"log", "progress"}, 100)
		require.NoError(t, err)
		require.Empty(t, none, "another run's log is its own")
	})

	t.Run("EventDataComesBackAsJSON", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := event(1, "step_result", "fio done")
		e.Data = json.RawMessage(`{"iops": 181000, "step": "read"}`)
		require.NoError(t, b.st.AppendFollowed(ctx, b.run, b.lease, store.FollowUpdate{Offset: 1, Events: []store.RunEvent{e}}))
		got, err := b.st.RunEventsOfType(ctx, b.run, "step_result")
		require.NoError(t, err)
		require.JSONEq(t, string(e.Data), string(got[0].Data))
		require.EqualValues(t, 1, *got[0].Seq)
	})
}
