package acceptance

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStepMetrics(t *testing.T) {
	t.Parallel()
	p := validProfile()
	require.Empty(t, StepMetrics(p.Steps[0])) // drop-caches
	require.Empty(t, StepMetrics(p.Steps[1])) // fault
	require.Empty(t, StepMetrics(p.Steps[3])) // pause

	fio := p.Steps[2]
	require.True(t, StepProduces(fio, MetricReadCLat))
	require.False(t, StepProduces(fio, MetricWriteCLat))
	require.True(t, StepProduces(fio, MetricDiskUtil))
	fio.Fio.RW = RWRandMixed
	require.True(t, StepProduces(fio, MetricWriteIOPS))
	require.True(t, StepProduces(fio, MetricReadIOPS))

	inf := p.Steps[4]
	require.True(t, StepProduces(inf, MetricTTFTIntended))
	require.False(t, StepProduces(inf, MetricCacheHitRatio))
	inf.Inference.MetricsURL = "http://10.0.0.5:8000/metrics"
	require.True(t, StepProduces(inf, MetricCacheHitRatio))

	cmd := p.Steps[5]
	require.True(t, StepProduces(cmd, MetricTTFT))
	require.False(t, StepProduces(cmd, MetricTTFTContent))
	cmd.Command.Format = FormatText
	require.Equal(t, telemetryMetrics, StepMetrics(cmd))

	// Every metric named is in the catalog.
	for _, s := range []StepSpec{fio, inf, cmd, {Kind: StepCommand, Command: &CommandStep{Format: FormatFioJSON}}, {Kind: StepCommand, Command: &CommandStep{Format: FormatGenAIPerfJSON}}} {
		for _, m := range StepMetrics(s) {
			_, ok := LookupMetric(m)
			require.True(t, ok, m)
		}
	}
}
