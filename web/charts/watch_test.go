package charts

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance/chartdata"
)

// The watch chart draws the values, each breach marked, the line as it
// was, the breaches in a row against the k that halts, and the halt.
func TestWatchChart(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	data := chartdata.ReduceWatch([]chartdata.WatchCheck{
		{At: at(0), Value: 1.2, HasValue: true, Line: 2},
		{At: at(5), Value: 2.5, HasValue: true, Line: 2, PastLine: true, Breaches: 1},
		{At: at(10), HasValue: false, Line: 2, Breaches: 1},
		{At: at(15), Value: math.Inf(1), HasValue: true, Line: 2, PastLine: true, Breaches: 2, Triggered: true},
	}, 0)
	raw, table, err := Watch(WatchInput{Name: "p99 TTFT {fleet}", Unit: "s", Consecutive: 2, Data: data})
	require.NoError(t, err)
	o := decode(t, raw)
	require.Equal(t, []string{"p99 TTFT (fleet)", "checks within the line", "past the line", "stop-loss line", "breaches in a row", "stage halted"}, o.names())
	require.Equal(t, "time", o.XAxis[0].Type)
	require.Equal(t, "p99 TTFT (fleet) (s)", o.YAxis[0].Name)
	require.Equal(t, "right", o.YAxis[1].Position)
	require.EqualValues(t, 2, o.YAxis[1].Max, "the count's axis ends at k")

	ms := func(s int) float64 { return float64(at(s).UnixMilli()) }
	require.Equal(t, []Point{{X: ms(0), Y: 1.2}, {X: ms(5), Y: 2.5}, {X: ms(15), Y: round(data.Top, 6)}}, pairsOf(t, o.series(t, "p99 TTFT (fleet)")))
	past := itemsOf(t, o.series(t, "past the line"))
	require.Len(t, past, 2)
	require.Equal(t, "past the line\n2026-12-01 09:00:05 UTC\n2.5 s", past[0].Tooltip.Formatter)
	require.Equal(t, "past the line\n2026-12-01 09:00:15 UTC\n+Inf (drawn at the top)", past[1].Tooltip.Formatter)
	require.Len(t, itemsOf(t, o.series(t, "checks within the line")), 1)
	stop := o.series(t, "stop-loss line")
	require.Equal(t, "end", stop.Step)
	require.Equal(t, []Point{{X: ms(0), Y: 2}, {X: ms(15), Y: 2}}, pairsOf(t, stop))
	count := o.series(t, "breaches in a row")
	require.Equal(t, 1, count.YAxisIndex)
	require.Equal(t, []Point{{X: ms(0), Y: 0}, {X: ms(5), Y: 1}, {X: ms(15), Y: 2}}, pairsOf(t, count))
	require.Equal(t, map[float64]string{2: "halts at 2 in a row"}, markLines(t, count, false))
	require.Equal(t, map[float64]string{ms(15): "halted 09:00:15"}, markLines(t, o.series(t, "stage halted"), true))
	require.Equal(t, [][]string{{"4", "1", "2", "1", "3"}}, table.Rows)

	_, _, err = Watch(WatchInput{Name: "x", Data: chartdata.ReduceWatch(nil, 0)})
	require.Error(t, err)
}
