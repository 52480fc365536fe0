package chartdata_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance/chartdata"
)

var watchT0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return watchT0.Add(time.Duration(sec) * time.Second) }

// A watch's chart keeps each check's value, the line as it was, the count
// of breaches in a row as a step at each change, and the halt; checks
// without a value are counted, not drawn; +Inf is drawn at the top.
func TestReduceWatchKeepsWhatHappened(t *testing.T) {
	t.Parallel()
	c := func(sec int, v float64, has bool, line float64, past bool, breaches int, trig bool) chartdata.WatchCheck {
		return chartdata.WatchCheck{At: at(sec), Value: v, HasValue: has, Line: line, PastLine: past, Breaches: breaches, Triggered: trig}
	}
	checks := []chartdata.WatchCheck{
		c(30, 2.5, true, 2, true, 1, false), // out of order on purpose
		c(0, 1.2, true, 2, false, 0, false),
		c(60, 0, false, 2, false, 1, false), // the query failed: the count stays
		c(90, math.Inf(1), true, 2, true, 2, false),
		c(120, 3.1, true, 2, true, 0, true), // the third in a row halts; the count starts afresh
		c(150, 1.0, true, 1.5, false, 0, false),
	}
	got := chartdata.ReduceWatch(checks, 0)
	require.Equal(t, 6, got.Checks)
	require.Equal(t, 1, got.WithoutValue)
	require.Equal(t, 3, got.PastLine)
	require.InDelta(t, 3.1*1.2, got.Top, 1e-12, "above every finite value")
	require.Equal(t, []chartdata.WatchValue{
		{At: at(0), Value: 1.2},
		{At: at(30), Value: 2.5, Past: true},
		{At: at(90), Value: got.Top, Past: true, Infinite: true},
		{At: at(120), Value: 3.1, Past: true},
		{At: at(150), Value: 1.0},
	}, got.Values)
	require.Equal(t, []chartdata.WatchLevel{{At: at(0), Value: 2}, {At: at(150), Value: 1.5}}, got.Lines)
	require.Equal(t, []chartdata.WatchLevel{{At: at(0), Value: 0}, {At: at(30), Value: 1}, {At: at(90), Value: 2}, {At: at(120), Value: 0},
		{At: at(150), Value: 0}}, got.Breaches, "a step where the count changes, carried to the last check")
	require.Equal(t, []time.Time{at(120)}, got.Halts)

	empty := chartdata.ReduceWatch(nil, 0)
	require.Zero(t, empty.Checks)
	require.Empty(t, empty.Values)
	require.Equal(t, 1.2, empty.Top)
}

// A long history is reduced to the budget, but every breach and every
// halt stays drawn.
func TestReduceWatchKeepsEveryBreach(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	var checks []chartdata.WatchCheck
	breaches, wantPast := 0, 0
	for i := range 20000 {
		v := 1 + rng.Float64()
		past := i%997 == 0 || (i > 15000 && i < 15040)
		if past {
			v, breaches = 2.5+rng.Float64(), breaches+1
			wantPast++
		} else {
			breaches = 0
		}
		checks = append(checks, chartdata.WatchCheck{At: at(5 * i), Value: v, HasValue: true, Line: 2, PastLine: past, Breaches: breaches, Triggered: breaches == 3})
		if breaches == 3 {
			breaches = 0
		}
	}
	got := chartdata.ReduceWatch(checks, 500)
	require.LessOrEqual(t, len(got.Values), 500)
	drawnPast := 0
	for i, v := range got.Values {
		if v.Past {
			drawnPast++
		}
		if i > 0 {
			require.True(t, got.Values[i-1].At.Before(v.At), "in time order")
		}
	}
	require.Equal(t, wantPast, drawnPast, "every breach is drawn")
	require.Equal(t, wantPast, got.PastLine)
	require.Len(t, got.Halts, 13, "the run of 40 breaches halts 13 times")
	require.Equal(t, checks[0].At, got.Values[0].At, "the first check is kept")
	require.Equal(t, checks[len(checks)-1].At, got.Values[len(got.Values)-1].At, "and the last")
}
