package acceptance

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCanonicalThreshold(t *testing.T) {
	t.Parallel()
	cases := []struct {
		metric string
		mode   CriterionMode
		value  float64
		unit   string
		want   float64
	}{
		{MetricTTFT, Absolute, 2000, "ms", 2000},
		{MetricTTFT, Absolute, 2, "s", 2000},
		{MetricTTFT, Absolute, 1500, "us", 1.5},
		{MetricTTFT, Absolute, 250e6, "ns", 250},
		{MetricTTFT, Absolute, 2000, "", 2000}, // empty unit: canonical
		{MetricReadCLat, Absolute, 500, "µs", 500},
		{MetricReadCLat, Absolute, 500, "μs", 500},
		{MetricReadCLat, Absolute, 2, "ms", 2000},
		{MetricReadCLat, Absolute, 80000, "ns", 80},
		{MetricReadBW, Absolute, 100, "MiB/s", 100 << 20},
		{MetricReadBW, Absolute, 1, "GB/s", 1e9},
		{MetricReadBW, Absolute, 3, "KiB/s", 3072},
		{MetricReadIOPS, Absolute, 500000, "IOPS", 500000},
		{MetricRequestThroughput, Absolute, 12.5, "req/s", 12.5},
		{MetricOutputTokenThroughput, Absolute, 900, "tok/s", 900},
		{MetricErrorRate, Absolute, 1, "%", 0.01},
		{MetricErrorRate, Absolute, 0.02, "ratio", 0.02},
		{MetricCPUUtil, Absolute, 0.5, "ratio", 50},
		{MetricCPUUtil, Absolute, 75, "%", 75},
		{MetricTTFT, Relative, -20, "%", -20},
		{MetricOutputTokenThroughput, Relative, 25, "", 25},
	}
	for _, tc := range cases {
		got, err := CanonicalThreshold(Criterion{Name: "c", Metric: tc.metric, Mode: tc.mode, Threshold: tc.value, Unit: tc.unit})
		require.NoError(t, err, "%g %s of %s", tc.value, tc.unit, tc.metric)
		require.InDelta(t, tc.want, got, 1e-9*math.Max(1, math.Abs(tc.want)), "%g %s of %s", tc.value, tc.unit, tc.metric)
	}
}

func TestCanonicalThresholdErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		c    Criterion
		want string
	}{
		{Criterion{Name: "a", Metric: MetricTTFT, Threshold: 1, Unit: "MB/s"}, `criterion a: unit "MB/s" does not measure Time to first token; use one of ms, ns, us, µs, μs, s`},
		{Criterion{Name: "b", Metric: MetricTTFT, Threshold: 1, Unit: "fortnights"}, `criterion b: unit "fortnights" is unknown; use one of ms, ns, us, µs, μs, s`},
		{Criterion{Name: "c", Metric: "nope", Threshold: 1, Unit: "ms"}, `criterion c: unknown metric "nope"`},
		{Criterion{Name: "d", Metric: MetricTTFT, Mode: Relative, Threshold: 1, Unit: "ms"}, `criterion d: a relative threshold is in %, not "ms"`},
		{Criterion{Name: "e", Metric: MetricTTFT, Threshold: math.Inf(1), Unit: "ms"}, `criterion e: +Inf is not a finite number`},
		{Criterion{Name: "f", Metric: MetricReadBW, Threshold: math.MaxFloat64, Unit: "GiB/s"}, `criterion f: 1.7976931348623157e+308 GiB/s is out of range`},
	}
	for _, tc := range cases {
		_, err := CanonicalThreshold(tc.c)
		require.EqualError(t, err, tc.want)
	}
}

func TestCanonicalStopLoss(t *testing.T) {
	t.Parallel()
	v, ok, err := CanonicalStopLoss(Criterion{Name: "a", Metric: MetricTTFT, Threshold: 2, Unit: "s", StopLoss: tmplPtr(4.0)})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 4000.0, v)

	_, ok, err = CanonicalStopLoss(Criterion{Name: "a", Metric: MetricTTFT, Threshold: 2, Unit: "s"})
	require.NoError(t, err)
	require.False(t, ok)
}

func TestUnitsFor(t *testing.T) {
	t.Parallel()
	ttft, _ := LookupMetric(MetricTTFT)
	require.Equal(t, []string{"ms", "ns", "us", "µs", "μs", "s"}, UnitsFor(ttft))
	clat, _ := LookupMetric(MetricReadCLat)
	require.Equal(t, "us", UnitsFor(clat)[0])
	bw, _ := LookupMetric(MetricReadBW)
	require.Equal(t, []string{"B/s", "KB/s", "MB/s", "GB/s", "KiB/s", "MiB/s", "GiB/s"}, UnitsFor(bw))
	// Every metric of the catalog has a unit thresholds can be written in.
	for _, m := range Metrics() {
		require.NotEmpty(t, UnitsFor(m), m.ID)
		require.Equal(t, string(m.Unit), UnitsFor(m)[0], m.ID)
	}
}
