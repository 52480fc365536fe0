package acceptance

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestProfileTemplates(t *testing.T) {
	t.Parallel()
	ids := map[string]bool{}
	for _, tmpl := range ProfileTemplates() {
		require.False(t, ids[tmpl.ID], "duplicate id %s", tmpl.ID)
		ids[tmpl.ID] = true
		require.Regexp(t, `^[a-z0-9-]+$`, tmpl.ID)
		require.NotEmpty(t, tmpl.Title)
		require.NotEmpty(t, tmpl.Description)
		require.NotContains(t, tmpl.Description, "\n")
		require.Nil(t, ValidateProfile(tmpl.Spec), tmpl.ID)
		for _, s := range tmpl.Spec.Steps {
			if s.Inference != nil {
				require.Equal(t, EmulatorEndpoint, s.Inference.Endpoint, tmpl.ID)
				require.Equal(t, EmulatorModel, s.Inference.Model, tmpl.ID)
			}
		}
	}
	for _, id := range []string{"kv-cache-lookup", "checkpoint-restore", "inference-ttft-sweep", "cold-warm-ttft", "soak-2h", "noisy-neighbour", "soak-8h",
		"hit-ratio-sensitivity", "four-host-ramp"} {
		require.True(t, ids[id], id)
	}

	sweep, ok := LookupProfileTemplate("inference-ttft-sweep")
	require.True(t, ok)
	require.Equal(t, []float64{1, 2, 4, 8, 16, 32, 64}, sweep.Spec.Steps[0].Inference.Load.Sweep)
	kv, _ := LookupProfileTemplate("kv-cache-lookup")
	require.Equal(t, ByteSize(4096), kv.Spec.Steps[0].Fio.BlockSize)
	require.Equal(t, 32, kv.Spec.Steps[0].Fio.IODepth)
	cw, _ := LookupProfileTemplate("cold-warm-ttft")
	var kinds []StepKind
	for _, s := range cw.Spec.Steps {
		kinds = append(kinds, s.Kind)
	}
	require.Equal(t, []StepKind{StepDropCaches, StepInference, StepPause, StepInference}, kinds)
	soak, _ := LookupProfileTemplate("soak-2h")
	require.Equal(t, "2h0m0s", soak.Spec.Steps[0].Inference.Duration.String())

	_, ok = LookupProfileTemplate("nope")
	require.False(t, ok)
}

func TestGateSetTemplates(t *testing.T) {
	t.Parallel()
	ids := map[string]bool{}
	for _, tmpl := range GateSetTemplates() {
		require.False(t, ids[tmpl.ID], "duplicate id %s", tmpl.ID)
		ids[tmpl.ID] = true
		require.NotContains(t, tmpl.Description, "\n")
		require.Nil(t, ValidateGateSet(tmpl.Spec), tmpl.ID)
		require.NotEmpty(t, tmpl.Profiles, tmpl.ID)
		// Each gate set can judge every profile it is offered with.
		for _, pid := range tmpl.Profiles {
			p, ok := LookupProfileTemplate(pid)
			require.True(t, ok, "%s names unknown profile template %s", tmpl.ID, pid)
			require.Nil(t, ValidateGateSetForProfile(tmpl.Spec, p.Spec), "%s with %s", tmpl.ID, pid)
		}
	}
	mlperf, ok := LookupGateSetTemplate("mlperf-llama2-70b-server")
	require.True(t, ok)
	requireCriterion(t, mlperf.Spec, MetricTTFT, StatP99, LessOrEqual, 2000)
	requireCriterion(t, mlperf.Spec, MetricTPOT, StatP99, LessOrEqual, 200)
	uplift, _ := LookupGateSetTemplate("nvmeof-uplift")
	requireCriterion(t, uplift.Spec, MetricOutputTokenThroughput, StatRate, GreaterOrEqual, 25)
	requireCriterion(t, uplift.Spec, MetricTTFT, StatP99, LessOrEqual, -20)
	kv, _ := LookupGateSetTemplate("kv-cache-io")
	requireCriterion(t, kv.Spec, MetricReadIOPS, StatRate, GreaterOrEqual, -5)
	requireCriterion(t, kv.Spec, MetricReadCLat, StatP99, LessOrEqual, 500)

	stopLosses := 0
	for _, tmpl := range GateSetTemplates() {
		for _, c := range tmpl.Spec.Criteria {
			if c.StopLoss != nil {
				stopLosses++
			}
		}
	}
	require.GreaterOrEqual(t, stopLosses, 3)
}

// requireCriterion finds the criterion on metric × statistic and checks its
// comparator and its threshold in the canonical unit (or percent).
func requireCriterion(t *testing.T, g GateSetSpec, metric string, stat Statistic, cmp Comparator, canonical float64) {
	t.Helper()
	for _, c := range g.Criteria {
		if c.Metric == metric && c.Statistic == stat {
			require.Equal(t, cmp, c.Comparator)
			v, err := CanonicalThreshold(c)
			require.NoError(t, err)
			require.Equal(t, canonical, v)
			return
		}
	}
	t.Fatalf("%s has no %s %s criterion", g.Name, metric, stat)
}

// TestTemplatesRoundTrip: export → import gives the same version hash, for
// every template, in YAML and JSON.
func TestTemplatesRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tmpl := range ProfileTemplates() {
		want, err := ProfileDigest(tmpl.Spec)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(want, "sha256:"))
		y, err := ExportProfileYAML(tmpl.Spec)
		require.NoError(t, err)
		back, err := ImportProfileYAML(y)
		require.NoError(t, err, tmpl.ID)
		got, err := ProfileDigest(back)
		require.NoError(t, err)
		require.Equal(t, want, got, tmpl.ID)
		y2, err := ExportProfileYAML(back)
		require.NoError(t, err)
		require.Equal(t, string(y), string(y2), tmpl.ID)
	}
	for _, tmpl := range GateSetTemplates() {
		want, err := GateSetDigest(tmpl.Spec)
		require.NoError(t, err)
		y, err := ExportGateSetYAML(tmpl.Spec)
		require.NoError(t, err)
		back, err := ImportGateSetYAML(y)
		require.NoError(t, err, tmpl.ID)
		got, err := GateSetDigest(back)
		require.NoError(t, err)
		require.Equal(t, want, got, tmpl.ID)
	}
}

func TestTemplatesAreFreshCopies(t *testing.T) {
	t.Parallel()
	a := ProfileTemplates()
	a[0].Spec.Steps[0].Fio.IODepth = 1
	b := ProfileTemplates()
	require.Equal(t, 32, b[0].Spec.Steps[0].Fio.IODepth)
}

// The noisy-neighbour and soak templates validate, and their gate sets can
// judge a run of them: nothing the pre-run check would warn of.
func TestWithinRunTemplatesCanJudgeTheirRuns(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{{"noisy-neighbour", "noisy-neighbour-isolation"}, {"soak-8h", "soak-drift"}} {
		p, ok := LookupProfileTemplate(pair[0])
		require.True(t, ok)
		g, ok := LookupGateSetTemplate(pair[1])
		require.True(t, ok)
		require.Nil(t, ValidateProfile(p.Spec), pair[0])
		require.Nil(t, ValidateGateSet(g.Spec), pair[1])
		require.Nil(t, ValidateGateSetForProfile(g.Spec, p.Spec), pair[1])
		require.Empty(t, PreRunCheck(PreRunInput{Profile: p.Spec, Gates: &g.Spec}), pair[1])
		// A run of the 8-hour soak with a 6-hour step would not be judged:
		// the check sees it.
		if pair[0] == "soak-8h" {
			short := p.Spec.Clone()
			short.Steps[0].Inference.Duration = Duration(90 * time.Minute)
			ws := PreRunCheck(PreRunInput{Profile: short, Gates: &g.Spec})
			require.Len(t, ws, 2)
			require.Contains(t, ws[0].Message, "shorter than two windows")
		}
	}
	noisy, _ := LookupProfileTemplate("noisy-neighbour")
	phases := noisy.Spec.Phases()
	require.Len(t, phases, 3)
	require.Equal(t, "noisy-neighbour", phases[2].Group)
	require.Len(t, phases[2].Steps, 2)
}

// The hit-ratio and four-host templates validate, and their gate sets can
// judge a run of them: every level has enough requests for a bound on
// p99 (the four hosts' merged, on the ramp), and nothing else to warn of.
func TestSweepTemplatesCanJudgeTheirRuns(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"hit-ratio-sensitivity", "four-host-ramp"} {
		p, ok := LookupProfileTemplate(id)
		require.True(t, ok)
		g, ok := LookupGateSetTemplate(id)
		require.True(t, ok)
		require.Equal(t, []string{id}, g.Profiles)
		require.Nil(t, ValidateProfile(p.Spec), id)
		require.Nil(t, ValidateGateSet(g.Spec), id)
		require.Nil(t, ValidateGateSetForProfile(g.Spec, p.Spec), id)
		require.Empty(t, PreRunCheck(PreRunInput{Profile: p.Spec, Gates: &g.Spec}), id)
	}

	reuse, _ := LookupProfileTemplate("hit-ratio-sensitivity")
	step := reuse.Spec.Steps[0]
	require.Equal(t, []string{"reuse=0", "reuse=0.25", "reuse=0.5", "reuse=0.75", "reuse=0.9"}, StepLevels(step))
	require.Equal(t, EmulatorMetricsURL, step.Inference.MetricsURL, "the hit ratio is read from the server's counters")
	require.Contains(t, StepMetrics(step), MetricCacheHitRatio)

	ramp, _ := LookupProfileTemplate("four-host-ramp")
	require.True(t, ramp.Spec.MultiHost())
	lo, hi := ramp.Spec.Roles[0].HostLimits()
	require.Equal(t, [2]int{4, 4}, [2]int{lo, hi})
	require.Equal(t, []string{"c=1", "c=2", "c=4", "c=8", "c=16"}, StepLevels(ramp.Spec.Steps[0]))
	phases := ramp.Spec.Phases()
	require.Len(t, phases, 1, "the ramp runs alone: each level starts on every host at once")

	// The check counts every host's requests: 250 a level on one host
	// would not bound a p99.9 at 3 repetitions, on four it does.
	g, _ := LookupGateSetTemplate("four-host-ramp")
	tail := g.Spec.Clone()
	tail.Criteria[0].Statistic = StatP999
	tail.Criteria[0].MinSamples = 0
	require.Empty(t, PreRunCheck(PreRunInput{Profile: ramp.Spec, Gates: &tail}))
	one := ramp.Spec.Clone()
	one.Roles[0].MinHosts, one.Roles[0].MaxHosts = 1, 1
	ws := PreRunCheck(PreRunInput{Profile: one, Gates: &tail})
	require.NotEmpty(t, ws)
	require.Contains(t, ws[0].Message, "the profile (3 repetitions of about 250 requests) gives about 750")
	ws = PreRunCheck(PreRunInput{Profile: ramp.Spec, Gates: &GateSetSpec{Name: "far tail", Criteria: []Criterion{{Name: "ttft-p9999", Metric: MetricTTFT,
		Statistic: StatP999, Mode: Absolute, Comparator: LessOrEqual, Threshold: 2000, Unit: "ms", MinSamples: 5000}}}})
	require.NotEmpty(t, ws)
	require.Contains(t, ws[0].Message, "the profile (3 repetitions of about 250 requests on each of at least 4 hosts) gives about 3,000")
}
