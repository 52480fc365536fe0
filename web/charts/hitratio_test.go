package charts

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The hit-ratio chart draws each run's p99 (solid, labelled by level) and
// p50 (dashed) at the measured ratio in percent, the run in blue and the
// baseline in grey, the limit as a line; the table lists every level.
func TestHitRatioChart(t *testing.T) {
	t.Parallel()
	pts := func(scale float64) []HitRatioPoint {
		return []HitRatioPoint{
			{Label: "reuse=0", HitRatio: 0, P50: 120 * scale, P99: 300 * scale, N: 90},
			{Label: "reuse=0.5", HitRatio: 0.48, P50: 70 * scale, P99: 160 * scale, N: 95},
			{Label: "reuse=0.9", HitRatio: 0.86, P50: 25 * scale, P99: 60 * scale, N: 99},
		}
	}
	raw, table, err := HitRatio(HitRatioInput{Series: []HitRatioSeries{
		{Name: "run #2", Role: RoleCandidate, Points: pts(1)},
		{Name: "baseline run #1", Role: RoleBaseline, Points: pts(1.5)},
	}, Limit: 250, LimitLabel: "p99 TTFT ≤ 250 ms"})
	require.NoError(t, err)
	o := decode(t, raw)
	require.Equal(t, []string{"TTFT p99 run #2", "TTFT p50 run #2", "TTFT p99 baseline run #1", "TTFT p50 baseline run #1", "Gate limits"}, o.names())
	p99 := o.series(t, "TTFT p99 run #2")
	require.Equal(t, ColorCandidate, p99.Color)
	require.Equal(t, ColorBaseline, o.series(t, "TTFT p50 baseline run #1").Color)
	items := itemsOf(t, p99)
	require.Len(t, items, 3)
	require.Equal(t, "reuse=0.5", items[1].Name)
	var v [2]float64
	require.NoError(t, json.Unmarshal(items[1].Value, &v))
	require.Equal(t, [2]float64{48, 160}, v, "x: the measured ratio in %, y: p99 TTFT")
	require.Contains(t, items[2].Tooltip.Formatter, "hit ratio 86 % · TTFT p99 60 ms")
	require.Equal(t, map[float64]string{250: "p99 TTFT ≤ 250 ms"}, markLines(t, o.series(t, "Gate limits"), false))
	require.Equal(t, "Prefix cache hit ratio, measured (%)", o.XAxis[0].Name)
	require.EqualValues(t, 100, o.XAxis[0].Max)
	require.Equal(t, []string{"run #2", "reuse=0.9", "86", "25", "60", "99"}, table.Rows[2])
	require.Len(t, table.Rows, 6)

	_, _, err = HitRatio(HitRatioInput{Series: []HitRatioSeries{{Name: "x", Points: []HitRatioPoint{{HitRatio: 1.2, P50: 1, P99: 2}}}}})
	require.Error(t, err, "a ratio above 1 is no measurement")
	_, _, err = HitRatio(HitRatioInput{Series: []HitRatioSeries{{Name: "x", Points: []HitRatioPoint{{HitRatio: 0.5, P50: math.NaN(), P99: 2}}}}})
	require.Error(t, err)
	_, _, err = HitRatio(HitRatioInput{})
	require.Error(t, err)
}
