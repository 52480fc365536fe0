package acceptance

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalizeFillsDefaults(t *testing.T) {
	t.Parallel()
	p := ProfileSpec{
		Name: "bare",
		Steps: []StepSpec{
			{Name: "f", Kind: StepFio, Fio: &FioStep{RW: RWRandMixed}},
			{Name: "i", Kind: StepInference, Inference: &InferenceStep{
				PromptTokens: TokenDist{Mean: 100},
				OutputTokens: TokenDist{Dist: DistUniform, Min: 10, Max: 31},
				Load:         Load{Rate: 2, Sweep: []float64{}},
			}},
			{Name: "c", Kind: StepCommand, Command: &CommandStep{Args: []string{}}},
		},
	}
	n := p.Normalized()
	require.Equal(t, ProfileSchemaVersion, n.SchemaVersion)
	require.Equal(t, DefaultRepetitions, n.Repetitions)
	f := n.Steps[0].Fio
	require.Equal(t, IOEngineLibaio, f.IOEngine)
	require.Equal(t, 1, f.IODepth)
	require.Equal(t, 1, f.NumJobs)
	require.Equal(t, 50, f.RWMixRead)
	in := n.Steps[1].Inference
	require.Equal(t, APIChat, in.API)
	require.Equal(t, DistFixed, in.PromptTokens.Dist)
	require.Equal(t, 20, in.OutputTokens.Mean) // the middle of 10..31
	require.Equal(t, LoadRate, in.Load.Mode)
	require.Equal(t, ArrivalConstant, in.Load.Arrival)
	require.Nil(t, in.Load.Sweep)
	require.Equal(t, DefaultRequestTimeout, in.RequestTimeout)
	require.Nil(t, n.Steps[2].Command.Args)

	// The input is untouched.
	require.Equal(t, 0, p.SchemaVersion)
	require.Equal(t, "", p.Steps[0].Fio.IOEngine)
	require.NotNil(t, p.Steps[1].Inference.Load.Sweep)

	g := GateSetSpec{Criteria: []Criterion{
		{Metric: MetricTTFT},
		{Metric: MetricReadIOPS, Mode: Relative},
		{Metric: "unknown"},
	}}
	ng := g.Normalized()
	require.Equal(t, GateSchemaVersion, ng.SchemaVersion)
	require.Equal(t, CorrectionHolm, ng.Correction)
	require.Equal(t, 3, ng.StopLossConsecutive)
	require.Equal(t, Absolute, ng.Criteria[0].Mode)
	require.Equal(t, Blocking, ng.Criteria[0].Severity)
	require.Equal(t, 0.95, ng.Criteria[0].Confidence)
	require.Equal(t, "ms", ng.Criteria[0].Unit)
	require.Equal(t, "%", ng.Criteria[1].Unit)
	require.Equal(t, "", ng.Criteria[2].Unit)
	require.Equal(t, CriterionMode(""), g.Criteria[0].Mode)
}

func TestNormalizedIsIdempotent(t *testing.T) {
	t.Parallel()
	for _, tmpl := range ProfileTemplates() {
		once := tmpl.Spec.Normalized()
		require.Equal(t, once, once.Normalized(), tmpl.ID)
	}
	for _, tmpl := range GateSetTemplates() {
		once := tmpl.Spec.Normalized()
		require.Equal(t, once, once.Normalized(), tmpl.ID)
	}
}

func TestCloneIsDeep(t *testing.T) {
	t.Parallel()
	p := validProfile()
	p.Steps[4].Inference.Prefix = &PrefixReuse{Tokens: 10, Distinct: 2}
	p.Steps[4].Inference.Load.Sweep = []float64{1, 2}
	before, err := ProfileDigest(p)
	require.NoError(t, err)

	c := p.Clone()
	c.Steps[0].Name = "x"
	c.Steps[1].Fault.Interface = "x"
	c.Steps[2].Fio.IODepth = 99
	c.Steps[3].Pause.Duration = 99
	c.Steps[4].Inference.Prefix.Tokens = 99
	c.Steps[4].Inference.Load.Sweep[0] = 99
	c.Steps[5].Command.Args[0] = "x"
	after, err := ProfileDigest(p)
	require.NoError(t, err)
	require.Equal(t, before, after)

	g := validGateSet()
	gc := g.Clone()
	*gc.Criteria[0].StopLoss = 99
	gc.Criteria[1].Name = "x"
	require.Equal(t, 4.0, *g.Criteria[0].StopLoss)
	require.Equal(t, "tput", g.Criteria[1].Name)
}
