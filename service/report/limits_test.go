package report

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
)

// The charts draw a gate set's absolute criteria in the metric's canonical
// unit and its relative ones as the allowed change, to be made absolute
// with the baseline's figure.
func TestGateLimits(t *testing.T) {
	t.Parallel()
	g := acceptance.GateSetSpec{Criteria: []acceptance.Criterion{
		{Name: "abs", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute, Comparator: acceptance.LessOrEqual, Threshold: 2, Unit: "s"},
		{Name: "rel", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Relative, Comparator: acceptance.LessOrEqual, Threshold: -20, Unit: "%"},
	}}
	limits := gateLimits(g)
	require.Len(t, limits, 2)
	require.Equal(t, Limit{Metric: acceptance.MetricTTFT, Statistic: "p99", Comparator: acceptance.LessOrEqual, Value: 2000,
		Label: "p99 Time to first token ≤ 2000 ms"}, limits[0])
	require.True(t, limits[1].Relative)
	require.Equal(t, -20.0, limits[1].Value)
	require.Equal(t, "p99 Time to first token ≤ -20 % against the baseline", limits[1].Label)
}
