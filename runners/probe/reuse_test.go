package probe

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
)

// A prefix-reuse sweep's levels are the step's one load level at each
// share, labelled as the server's results will be (acceptance.StepLevels);
// a step sweeping its load too is refused.
func TestReuseSweepLevels(t *testing.T) {
	t.Parallel()
	step := &acceptance.InferenceStep{Load: acceptance.Load{Mode: "rate", Rate: 4},
		Prefix: &acceptance.PrefixReuse{Distinct: 8, Sweep: []float64{0, 0.5, 0.9}}}
	levels, err := inferenceLevels(step)
	require.NoError(t, err)
	require.Len(t, levels, 3)
	for i, lv := range levels {
		require.Equal(t, 4.0, lv.Rate)
		require.Zero(t, lv.Concurrency)
		require.NotNil(t, lv.Reuse)
		require.Equal(t, step.Prefix.Sweep[i], *lv.Reuse)
	}
	labels := []string{levels[0].Label, levels[1].Label, levels[2].Label}
	require.Equal(t, acceptance.StepLevels(acceptance.StepSpec{Kind: acceptance.StepInference, Inference: step}), labels)
	require.Equal(t, []string{"reuse=0", "reuse=0.5", "reuse=0.9"}, labels)

	step.Load = acceptance.Load{Mode: "concurrency", Sweep: []float64{1, 2}}
	_, err = inferenceLevels(step)
	require.ErrorContains(t, err, "not both")
	step.Load = acceptance.Load{Mode: "concurrency", Concurrency: 2}
	step.Prefix.Sweep = []float64{1.5}
	_, err = inferenceLevels(step)
	require.ErrorContains(t, err, "between 0 and 1")
}
