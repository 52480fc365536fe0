package chartdata

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// An eight-hour soak at 100 requests a second (2.88 million requests,
// generated): its chart data take memory bounded by the windows, not by
// the requests, and its rolling p99 spans the whole soak and shows the
// hour it slowed down. Not parallel: it measures the process's heap, which
// another test running beside it would grow (the suite saw 8.8 MB).
func TestSoakLatencyOverRunStaysBounded(t *testing.T) {
	const hours, rate = 8, 100
	rec := NewRecords(nil)
	r := rand.New(rand.NewPCG(42, 7))
	send := func(from, to int) {
		for s := from; s < to; s++ {
			slow := 1.0
			if s >= 6*3600 && s < 7*3600 {
				slow = 2 // the seventh hour is twice as slow
			}
			for i := range rate {
				sent := int64(s)*1e9 + int64(i)*1e9/rate + 1e6
				ttft := 100 * math.Exp(0.2*r.NormFloat64()) * slow // ms
				rec.AddRequest("soak", 0, Request{Sent: sent, FirstToken: sent + int64(ttft*1e6), Done: sent + int64(ttft*1e6) + 1e8, OutputTokens: 10})
			}
		}
	}
	send(0, 4*3600)
	half := heapInUse()
	send(4*3600, hours*3600)
	full := heapInUse()
	// 1.44 million more requests kept one point each would take 23 MB
	// (and twice that while a slice grows); the windows take a few.
	require.Less(t, int64(full)-int64(half), int64(4<<20), "heap grew from %d to %d bytes over the second four hours", half, full)

	t.Logf("heap after 4 h: %d B, after 8 h: %d B", half, full)
	sr := rec.steps["soak"]
	require.Empty(t, sr.points)
	require.LessOrEqual(t, len(sr.win.wins), maxWindows)

	or, ok, err := rec.overRun("soak")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(hours*3600*rate), or.Requests)
	require.Contains(t, or.Windowed, "step soak: 2880000 requests")
	require.NotEmpty(t, or.Rolling)
	require.Less(t, or.Rolling[0][0], 600.0)
	require.Greater(t, or.Rolling[len(or.Rolling)-1][0], float64(hours*3600)-600)
	require.LessOrEqual(t, len(or.Points), ScatterPoints)
	// p99 of a lognormal of median 100 ms and σ 0.2 is 159 ms; twice that
	// in the seventh hour.
	p99 := 100 * math.Exp(0.2*2.3263)
	for _, p := range or.Rolling {
		x, y := p[0], p[1]
		half := or.Window / 2
		switch {
		case x-half >= 6*3600 && x+half <= 7*3600:
			require.InDelta(t, 2*p99, y, 0.05*2*p99, "window at %v s", x)
		case x+half <= 6*3600 || x-half >= 7*3600:
			require.InDelta(t, p99, y, 0.05*p99, "window at %v s", x)
		}
	}
}

// Below the limit, every request is a point, as before.
func TestShortRunKeepsEveryRequest(t *testing.T) {
	t.Parallel()
	rec := NewRecords(nil)
	for i := range 1000 {
		sent := int64(i+1) * 1e7
		rec.AddRequest("s", 0, Request{Sent: sent, FirstToken: sent + 5e7, Done: sent + 6e7, OutputTokens: 2})
	}
	or, ok, err := rec.overRun("s")
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, or.Windowed)
	require.Len(t, rec.steps["s"].points, 1000)
}
