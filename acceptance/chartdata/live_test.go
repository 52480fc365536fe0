package chartdata_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
)

// The live charts' data: a series per sweep level for TTFT p50 and p99 and
// for the throughputs, windows placed by their end since the first began,
// fio windows left out, and the stop-loss lines as they applied to each
// window (a relative one per level).
func TestLiveFromInterimWindows(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	rate := func(v float64) *float64 { return &v }
	win := func(sec int, level string, p50, p99, req, tok float64) acceptance.InterimSnapshot {
		return acceptance.InterimSnapshot{Step: "chat", Level: level, Repetition: 1, At: t0.Add(time.Duration(sec) * time.Second), WindowSec: 2,
			Metrics: map[string]acceptance.InterimValue{
				acceptance.MetricTTFT:                  {N: 40, P50: p50, P99: p99},
				acceptance.MetricRequestThroughput:     {N: 40, Rate: rate(req)},
				acceptance.MetricOutputTokenThroughput: {N: 40, Rate: rate(tok)},
				acceptance.MetricErrorRate:             {N: 40, Rate: rate(0)},
			}}
	}
	fio := acceptance.InterimSnapshot{Step: "warm", At: t0.Add(time.Second), WindowSec: 1,
		Metrics: map[string]acceptance.InterimValue{acceptance.MetricReadCLat: {N: 100, P99: 250}}}
	snaps := []acceptance.InterimSnapshot{
		fio,
		win(2, "c=1", 100, 180, 9.5, 150),
		win(4, "c=1", 110, 190, 9.4, 148),
		win(6, "c=8", 300, 900, 40, 600),
	}
	linesAt := func(step, level string) []acceptance.StopLossLine {
		out := []acceptance.StopLossLine{{Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Comparator: acceptance.LessOrEqual, Value: 2000},
			{Name: "read-p99", Metric: acceptance.MetricReadCLat, Statistic: acceptance.StatP99, Comparator: acceptance.LessOrEqual, Value: 500}}
		if level == "c=8" {
			out = append(out, acceptance.StopLossLine{Name: "tok", Metric: acceptance.MetricOutputTokenThroughput, Statistic: acceptance.StatRate,
				Comparator: acceptance.GreaterOrEqual, Value: 540, Relative: true})
		}
		return out
	}
	got := chartdata.LiveFrom(snaps, linesAt)
	require.Equal(t, []chartdata.LiveKey{{Step: "chat", Level: "c=1", Label: "c=1"}, {Step: "chat", Level: "c=8", Label: "c=8"}}, got.Keys)
	require.Equal(t, []chartdata.LiveSeries{
		{Key: 0, Statistic: "p50", Points: []chartdata.Point{{X: 2, Y: 100}, {X: 4, Y: 110}}},
		{Key: 0, Statistic: "p99", Points: []chartdata.Point{{X: 2, Y: 180}, {X: 4, Y: 190}}},
		{Key: 1, Statistic: "p50", Points: []chartdata.Point{{X: 6, Y: 300}}},
		{Key: 1, Statistic: "p99", Points: []chartdata.Point{{X: 6, Y: 900}}},
	}, got.TTFT, "x: the window's end, seconds since the first window (of 2 s, ending at 2 s) began")
	require.Len(t, got.Throughput, 4)
	require.Equal(t, chartdata.LiveSeries{Key: 1, Statistic: "tokens/s", Points: []chartdata.Point{{X: 6, Y: 600}}}, got.Throughput[3])
	require.Equal(t, []chartdata.LiveLine{
		{Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Comparator: acceptance.LessOrEqual,
			Points: []chartdata.Point{{X: 2, Y: 2000}, {X: 4, Y: 2000}, {X: 6, Y: 2000}}},
		{Name: "tok", Metric: acceptance.MetricOutputTokenThroughput, Statistic: acceptance.StatRate, Comparator: acceptance.GreaterOrEqual,
			Points: []chartdata.Point{{X: 6, Y: 540}}},
	}, got.Lines, "the fio line is not on these charts; the relative line only where it applies")
	require.Len(t, got.Windows, 3)
	require.Equal(t, 900.0, got.Windows[2].P99)
	require.Equal(t, 40.0, *got.Windows[2].Requests)

	// Two steps: the labels say which.
	other := win(8, "c=1", 1, 2, 3, 4)
	other.Step = "long"
	got = chartdata.LiveFrom(append(snaps, other), nil)
	require.Equal(t, "chat/c=1", got.Keys[0].Label)
	require.Equal(t, "long/c=1", got.Keys[2].Label)
	require.Empty(t, got.Lines)

	require.Empty(t, chartdata.LiveFrom([]acceptance.InterimSnapshot{fio}, nil).Windows, "no inference window: nothing to draw")
}
