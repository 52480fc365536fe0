package charts

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
)

// The live charts: a series per level and statistic, p50 and tokens/s
// dashed, the stop-loss lines as steps on their axis, and a table of the
// newest windows.
func TestLiveCharts(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	rate := func(v float64) *float64 { return &v }
	var snaps []acceptance.InterimSnapshot
	for i, level := range []string{"c=1", "c=1", "c=8"} {
		snaps = append(snaps, acceptance.InterimSnapshot{Step: "chat", Level: level, Repetition: 1, At: t0.Add(time.Duration(2*i+2) * time.Second), WindowSec: 2,
			Metrics: map[string]acceptance.InterimValue{
				acceptance.MetricTTFT:                  {N: 10, P50: float64(100 * (i + 1)), P99: float64(200 * (i + 1))},
				acceptance.MetricRequestThroughput:     {N: 10, Rate: rate(5)},
				acceptance.MetricOutputTokenThroughput: {N: 10, Rate: rate(80)},
			}})
	}
	lines := func(string, string) []acceptance.StopLossLine {
		return []acceptance.StopLossLine{
			{Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Comparator: acceptance.LessOrEqual, Value: 2000},
			{Name: "tokens", Metric: acceptance.MetricOutputTokenThroughput, Statistic: acceptance.StatRate, Comparator: acceptance.GreaterOrEqual, Value: 50},
		}
	}
	d := chartdata.LiveFrom(snaps, lines)

	raw, err := LiveTTFT(d)
	require.NoError(t, err)
	o := decode(t, raw)
	require.Equal(t, []string{"p50 · c=1", "p99 · c=1", "p50 · c=8", "p99 · c=8", "stop-loss ttft-p99 (p99 Time to first token ≤)"}, o.names())
	require.Equal(t, []Point{{X: 2, Y: 200}, {X: 4, Y: 400}}, pairsOf(t, o.series(t, "p99 · c=1")))
	require.Equal(t, o.series(t, "p99 · c=1").Color, o.series(t, "p50 · c=1").Color, "one colour per level")
	require.NotEqual(t, o.series(t, "p99 · c=1").Color, o.series(t, "p99 · c=8").Color)
	stop := o.series(t, "stop-loss ttft-p99 (p99 Time to first token ≤)")
	require.Equal(t, "end", stop.Step)
	require.Equal(t, []Point{{X: 2, Y: 2000}, {X: 4, Y: 2000}, {X: 6, Y: 2000}}, pairsOf(t, stop))

	raw, err = LiveThroughput(d)
	require.NoError(t, err)
	o = decode(t, raw)
	require.Equal(t, []string{"requests/s · c=1", "tokens/s · c=1", "requests/s · c=8", "tokens/s · c=8", "stop-loss tokens (Output token throughput ≥)"}, o.names())
	require.Equal(t, 1, o.series(t, "tokens/s · c=8").YAxisIndex)
	require.Equal(t, 1, o.series(t, "stop-loss tokens (Output token throughput ≥)").YAxisIndex, "on the tokens' axis")
	require.Equal(t, "right", o.YAxis[1].Position)

	table := LiveTable(d, 2)
	require.Equal(t, [][]string{{"6", "c=8", "1", "10", "300", "600", "5", "80"}, {"4", "c=1", "1", "10", "200", "400", "5", "80"}}, table.Rows)

	_, err = LiveTTFT(chartdata.Live{})
	require.Error(t, err)
}
