package chartdata

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
)

func TestSpreadOverKeepsTheAmount(t *testing.T) {
	t.Parallel()
	a := NewRecords(nil)
	a.grow(9)
	spreadOver(a.tokens, a.tokenRate, 1.5, 4.5, 30)
	spreadOver(a.tokens, a.tokenRate, 7.2, 7.2, 3)
	spreadOver(a.tokens, a.tokenRate, 8.25, 8.75, 2)
	a.tokenSeconds()
	require.Equal(t, []float64{0, 5, 10, 10, 5, 0, 0, 3, 2, 0}, a.tokens[:10])
	var sum float64
	for _, v := range a.tokens {
		sum += v
	}
	require.InDelta(t, 35, sum, 1e-9)
}

// A series with only a tool's summary (vLLM's bench gives mean, median and
// p99) keeps the tool's figures, averaged over repetitions, and says which
// statistics it lacks instead of showing them as 0.
func TestSeriesStatsFromAToolSummaryNameWhatIsMissing(t *testing.T) {
	t.Parallel()
	g := groupMeasurements([]acceptance.Measurement{
		{Metric: acceptance.MetricTTFT, Step: "chat", Repetition: 1, ToolSummary: map[string]float64{"mean": 10, "p50": 9, "p99": 30}},
		{Metric: acceptance.MetricTTFT, Step: "chat", Repetition: 2, ToolSummary: map[string]float64{"mean": 12, "p50": 11, "p99": 34}},
	})
	require.Len(t, g, 1)
	st, err := seriesStats(g[0])
	require.NoError(t, err)
	require.True(t, st.Summary)
	require.ElementsMatch(t, []string{"p90", "p95", "p99.9", "max", "min"}, st.Missing)
	raw, err := json.Marshal(st)
	require.NoError(t, err)
	var back SeriesStats
	require.NoError(t, json.Unmarshal(raw, &back))
	for name, want := range map[string]float64{"p50": 10, "p99": 32, "mean": 11} {
		v, ok := back.Stat(name)
		require.True(t, ok, name)
		require.Equal(t, want, v, name)
	}
	for _, name := range []string{"p90", "p95", "p99.9", "max", "min"} {
		_, ok := back.Stat(name)
		require.False(t, ok, "%s is not known, not 0", name)
	}
}

// A sweep's levels are charted as numbers (c=1, c=4, c=16) whatever order
// the measurements came in (an imported run's are named by them), and
// documents stored with another order read back in that one.
func TestChartStepsOrderLevelsAsNumbers(t *testing.T) {
	t.Parallel()
	var ms []acceptance.Measurement
	for _, lv := range []string{"c=1", "c=16", "c=4"} {
		ms = append(ms, acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: "sweep", Level: lv, Repetition: 1, Values: []float64{10, 20, 30}})
	}
	a := Compute(Input{Measurements: ms})
	require.Len(t, a.Meta.Steps, 1)
	require.Equal(t, []string{"c=1", "c=4", "c=16"}, a.Meta.Steps[0].Levels)

	// Run order from a profile whose sweep ran downwards: still as numbers.
	prof := acceptance.ProfileSpec{Steps: []acceptance.StepSpec{{Name: "sweep", Kind: acceptance.StepInference}}}
	var runs []StepRun
	for _, lv := range []string{"c=16", "c=4", "c=1"} {
		runs = append(runs, StepRun{Step: "sweep", Level: lv, Repetition: 1})
	}
	require.Equal(t, []string{"c=1", "c=4", "c=16"}, Compute(Input{Profile: prof, Steps: runs, Measurements: ms}).Meta.Steps[0].Levels)

	docs, err := a.Documents()
	require.NoError(t, err)
	var meta Meta
	require.NoError(t, json.Unmarshal(docs[KeyMeta], &meta))
	meta.Steps[0].Levels = []string{"c=16", "c=1", "c=4"}
	docs[KeyMeta], err = json.Marshal(meta)
	require.NoError(t, err)
	back, ok, err := Decode(docs)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []string{"c=1", "c=4", "c=16"}, back.Meta.Steps[0].Levels)
}
