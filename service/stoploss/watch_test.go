package stoploss_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/service/servicetest"
	"github.com/accordlab/accord/service/stoploss"
	"github.com/accordlab/accord/store"
)

// recorded is the run's stored crossing (nil: none).
func (b *testBundle) recorded(t *testing.T, runID int64) *acceptance.StopLossBreach {
	t.Helper()
	raw, err := b.st.RunStopLoss(context.Background(), runID)
	require.NoError(t, err)
	if len(raw) == 0 {
		return nil
	}
	var breach acceptance.StopLossBreach
	require.NoError(t, json.Unmarshal(raw, &breach))
	return &breach
}

// check feeds one batch of windows from host to the watch in a
// transaction of its own, as a worker's Events hook does.
func (b *testBundle) check(t *testing.T, w *stoploss.Watch, host string, snaps ...acceptance.InterimSnapshot) *acceptance.StopLossBreach {
	t.Helper()
	var crossed *acceptance.StopLossBreach
	require.NoError(t, b.st.InTx(context.Background(), func(tx *store.Store) error {
		var err error
		crossed, err = w.Check(context.Background(), tx, servicetest.Env(t), host, snaps)
		return err
	}))
	return crossed
}

// A multi-host run's hosts are each judged on their own windows: one
// host past the line twice in a row crosses although another host's
// windows, in between, are well under it. The crossing names the host, is
// recorded with the batch that made it, and is the run's only one.
func TestWatchJudgesEachHostOnItsOwnWindows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	gates := b.program.GateSet(t, b.st, ttftGuard(2))
	run := b.run(t, &gates, nil)
	w := b.watch(t, run, "lab-1", "lab-2")
	require.Equal(t, []string{acceptance.MetricTTFT}, w.Metrics())
	resumed, err := w.Resume(ctx, b.st)
	require.NoError(t, err)
	require.Nil(t, resumed)

	require.Nil(t, b.check(t, w, "lab-1", window(1, 450)))
	require.Nil(t, b.check(t, w, "lab-2", window(1, 150)), "under the line")
	crossed := b.check(t, w, "lab-1", window(2, 460))
	require.NotNil(t, crossed, "lab-1's second window in a row past the line")
	require.True(t, strings.HasPrefix(crossed.Explanation, "on host lab-1: Stop-loss: p99 TTFT crossed the 400 ms line"), crossed.Explanation)
	require.Equal(t, crossed.Explanation, b.recorded(t, run.ID).Explanation, "recorded by Check")
	require.Equal(t, crossed, w.Crossed())

	require.Nil(t, b.check(t, w, "lab-2", window(2, 480), window(3, 490)), "a run crosses once")
	require.Nil(t, b.check(t, w, "lab-1", window(3, 500)), "the windows a stopped probe still sends do not stop it again")
	require.Equal(t, crossed.Explanation, b.recorded(t, run.ID).Explanation)
}

// The crossing is recorded in the caller's transaction: rolled back with
// the batch's events, it is not kept.
func TestWatchRecordsInTheCallersTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	gates := b.program.GateSet(t, b.st, ttftGuard(2))
	run := b.run(t, &gates, nil)
	w := b.watch(t, run, "lab-1", "lab-2")
	failed := errors.New("the batch's events could not be stored")
	var crossed *acceptance.StopLossBreach
	err := b.st.InTx(ctx, func(tx *store.Store) error {
		var err error
		crossed, err = w.Check(ctx, tx, servicetest.Env(t), "lab-2", []acceptance.InterimSnapshot{window(1, 450), window(2, 460)})
		require.NoError(t, err)
		require.NotNil(t, crossed)
		raw, err := tx.RunStopLoss(ctx, run.ID)
		require.NoError(t, err)
		require.NotEmpty(t, raw, "recorded within the transaction")
		return failed
	})
	require.ErrorIs(t, err, failed)
	require.Nil(t, b.recorded(t, run.ID), "rolled back with the batch")
	require.Equal(t, crossed, w.Crossed(), "until the caller retracts it")
	w.Retract(crossed)
	require.Nil(t, w.Crossed(), "retracted: the attempt's end does not act on it")
}

// A resumed watch of a multi-host run replays each host's stored windows
// into that host's monitor: a host's window past the line before the
// resume counts toward its breaches in a row, another host's does not; a
// host whose stored windows crossed is the run's crossing, named. One
// whose earlier attempt recorded a crossing returns it and judges no
// window after it.
func TestWatchResumesWhereTheEarlierAttemptLeft(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	gates := b.program.GateSet(t, b.st, ttftGuard(2))

	run := b.run(t, &gates, nil)
	b.hostWindows(t, run, 0, 150, 450)
	b.hostWindows(t, run, 1, 450, 150)
	w := b.watch(t, run, "lab-1", "lab-2")
	resumed, err := w.Resume(ctx, b.st)
	require.NoError(t, err)
	require.Nil(t, resumed, "no host has two windows in a row past the line")
	require.Nil(t, b.check(t, w, "lab-2", window(3, 480)), "lab-2's last stored window was under the line")
	crossed := b.check(t, w, "lab-1", window(3, 480))
	require.NotNil(t, crossed, "lab-1's stored window counts")
	require.Equal(t, []int64{2, 3}, []int64{crossed.Breaches[0].Seq, crossed.Breaches[1].Seq})
	require.True(t, strings.HasPrefix(crossed.Explanation, "on host lab-1: "), crossed.Explanation)
	require.Equal(t, crossed.Explanation, b.recorded(t, run.ID).Explanation)

	stored := b.run(t, &gates, nil)
	b.hostWindows(t, stored, 0, 150, 150)
	b.hostWindows(t, stored, 1, 150, 420, 460)
	w = b.watch(t, stored, "lab-1", "lab-2")
	resumed, err = w.Resume(ctx, b.st)
	require.NoError(t, err)
	require.NotNil(t, resumed, "lab-2's stored windows crossed")
	require.True(t, strings.HasPrefix(resumed.Explanation, "on host lab-2: "), resumed.Explanation)
	require.Equal(t, []float64{420, 460}, []float64{resumed.Breaches[0].Value, resumed.Breaches[1].Value})
	require.Nil(t, b.recorded(t, stored.ID), "the caller records it before it stops the probes")

	many := b.run(t, &gates, nil)
	earlier := &acceptance.StopLossBreach{Name: "ttft-p99", Metric: acceptance.MetricTTFT, Line: 400, Consecutive: 2, Explanation: "on host lab-2: recorded before the stop"}
	require.NoError(t, stoploss.Record(ctx, b.st, servicetest.Env(t), many, earlier))
	w = b.watch(t, many, "lab-1", "lab-2")
	resumed, err = w.Resume(ctx, b.st)
	require.NoError(t, err)
	require.Equal(t, earlier.Explanation, resumed.Explanation)
	require.Nil(t, b.check(t, w, "lab-1", window(1, 450), window(2, 460)), "crossed already")
	require.Equal(t, earlier.Explanation, w.Crossed().Explanation)
}

// watch is the stop-loss watch of run: of a one-host run when no host is
// named, else of a multi-host run whose hosts are named in order.
func (b *testBundle) watch(t *testing.T, run store.Run, hosts ...string) *stoploss.Watch {
	t.Helper()
	watched := make([]stoploss.Host, len(hosts))
	for i, n := range hosts {
		watched[i] = stoploss.Host{Ordinal: i, Name: n}
	}
	w, err := stoploss.NewWatch(context.Background(), b.st, run, watched...)
	require.NoError(t, err)
	return w
}

// Hosts checked at the same time make one crossing between them.
func TestWatchCrossesOnceWithHostsAtTheSameTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	gates := b.program.GateSet(t, b.st, ttftGuard(2))
	run := b.run(t, &gates, nil)
	hosts := []string{"lab-1", "lab-2", "lab-3", "lab-4"}
	w := b.watch(t, run, hosts...)
	// Only the crossing touches the store (the test's is one transaction,
	// which two crossings at once would not share quietly).
	var wg sync.WaitGroup
	crossings := make([]*acceptance.StopLossBreach, len(hosts))
	for i, h := range hosts {
		wg.Go(func() {
			for seq := int64(1); seq <= 3; seq++ {
				c, err := w.Check(ctx, b.st, servicetest.Env(t), h, []acceptance.InterimSnapshot{window(seq, 450)})
				if err != nil {
					t.Error(err)
				}
				if c != nil {
					crossings[i] = c
				}
			}
		})
	}
	wg.Wait()
	var n int
	for _, c := range crossings {
		if c != nil {
			n++
			require.Equal(t, c.Explanation, b.recorded(t, run.ID).Explanation)
		}
	}
	require.Equal(t, 1, n, "one crossing for the run")
}

// A run without a gate set, or whose gate set has no stop-loss line, is
// watched for nothing.
func TestWatchWithoutLinesJudgesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.watch(t, b.run(t, nil, nil), "lab-1")
	require.Empty(t, w.Metrics())
	require.Nil(t, b.check(t, w, "lab-1", window(1, 5000), window(2, 5000)))
	require.Nil(t, b.check(t, w, "unknown", window(1, 5000), window(2, 5000)))
}
