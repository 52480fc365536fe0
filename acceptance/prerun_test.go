package acceptance

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func gateTemplate(t *testing.T, id string) *GateSetSpec {
	t.Helper()
	for _, tm := range GateSetTemplates() {
		if tm.ID == id {
			g := tm.Spec
			return &g
		}
	}
	t.Fatalf("no gate set template %q", id)
	return nil
}

// demoTTFT is a one-level TTFT profile like the demo's (c=8, 15 s, 3 repetitions).
func demoTTFT(endpoint string) ProfileSpec {
	return ProfileSpec{Name: "ttft " + endpoint, Purpose: PurposeInferenceServing, Storage: Storage{Transport: TransportEmulated}, Repetitions: 3,
		Steps: []StepSpec{{Name: "ttft", Kind: StepInference, Inference: &InferenceStep{Endpoint: endpoint, Model: "m", API: APIChat,
			PromptTokens: TokenDist{Dist: DistFixed, Mean: 512}, OutputTokens: TokenDist{Dist: DistFixed, Mean: 32},
			Load: Load{Mode: LoadConcurrency, Concurrency: 8}, Duration: Duration(15 * time.Second)}}}}.Normalized()
}

// samples gives every metric of the criteria n samples at the series.
func samples(n int64, keys ...SeriesKey) map[string]map[SeriesKey]int64 {
	out := map[string]map[SeriesKey]int64{}
	for _, m := range []string{MetricTTFT, MetricOutputTokenThroughput, MetricTPOT, MetricErrorRate} {
		out[m] = map[SeriesKey]int64{}
		for _, k := range keys {
			out[m][k] = n
		}
	}
	return out
}

func kinds(ws []RunWarning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Kind+":"+w.Criterion)
	}
	return out
}

func TestPreRunCheck(t *testing.T) {
	t.Parallel()
	c8 := SeriesKey{Step: "ttft", Level: "c=8"}
	baseline := &PreRunBaseline{RunID: 1, Profile: demoTTFT("http://slow/v1"), Facts: map[string]string{"kernel": "6.1"}, Samples: samples(754, c8), Verdict: "PASS"}

	t.Run("a comparable candidate against its baseline: nothing to say", func(t *testing.T) {
		ws := PreRunCheck(PreRunInput{Profile: demoTTFT("http://fast/v1"), Gates: gateTemplate(t, "nvmeof-uplift"), Baseline: baseline,
			HostFacts: map[string]string{"kernel": "6.1"}, Observed: samples(754, c8)})
		require.Empty(t, ws)
	})

	t.Run("a relative gate set without a baseline", func(t *testing.T) {
		ws := PreRunCheck(PreRunInput{Profile: demoTTFT("http://fast/v1"), Gates: gateTemplate(t, "nvmeof-uplift")})
		require.Equal(t, []string{"no-baseline:throughput-uplift", "no-baseline:ttft-p99-reduction"}, kinds(ws))
		require.Contains(t, ws[0].Message, "throughput-uplift compares with a baseline run, and none is chosen: it would be INCONCLUSIVE")
	})

	t.Run("a sweep against a one-level baseline", func(t *testing.T) {
		var sweep ProfileSpec
		for _, tm := range ProfileTemplates() {
			if tm.ID == "inference-ttft-sweep" {
				sweep = tm.Spec.Normalized()
			}
		}
		sweep.Steps[0].Name = "ttft"
		ws := PreRunCheck(PreRunInput{Profile: sweep, Gates: gateTemplate(t, "nvmeof-uplift"), Baseline: baseline})
		require.NotEmpty(t, ws)
		require.Equal(t, WarnProfileShape, ws[0].Kind)
		require.Equal(t, `Step "ttft" sweeps c=1, c=2, c=4, c=8, c=16, c=32, c=64 here and c=8 in the baseline run #1: levels the baseline lacks would be INCOMPARABLE.`, ws[0].Message)
		var missing string
		for _, w := range ws {
			if w.Kind == WarnProfileShape && w.Criterion == "throughput-uplift" {
				missing = w.Message
			}
		}
		require.Equal(t, "The baseline run #1 has no output token throughput for step ttft at c=1, step ttft at c=2, step ttft at c=4, step ttft at c=16, step ttft at c=32 and step ttft at c=64, so throughput-uplift would be INCOMPARABLE there; it has step ttft at c=8.", missing)
	})

	t.Run("other work and another kind of host", func(t *testing.T) {
		cand := demoTTFT("http://fast/v1")
		cand.Steps[0].Inference.OutputTokens.Mean = 128
		ws := PreRunCheck(PreRunInput{Profile: cand, Gates: gateTemplate(t, "nvmeof-uplift"), Baseline: baseline,
			HostFacts: map[string]string{"kernel": "6.8"}, Observed: samples(754, c8)})
		require.Equal(t, []string{"profile-shape:", "host-facts:"}, kinds(ws))
		require.Contains(t, ws[0].Message, "output tokens 128 vs 32")
		require.Contains(t, ws[1].Message, "kernel 6.8 here, 6.1 on the baseline")
	})

	t.Run("too few requests for the percentile", func(t *testing.T) {
		gates := &GateSetSpec{Name: "tail", Criteria: []Criterion{{Name: "ttft-p999", Metric: MetricTTFT, Statistic: StatP999, Mode: Absolute,
			Comparator: LessOrEqual, Threshold: 2000, Unit: "ms", Severity: Blocking}}}
		ws := PreRunCheck(PreRunInput{Profile: demoTTFT("http://fast/v1"), Gates: gates, Observed: samples(754, c8)})
		require.Len(t, ws, 1)
		require.Equal(t, "ttft-p999 at step ttft at c=8 needs at least 2,995 samples for a bound on the p99.9 at 95 % confidence; a previous run of this profile gives about 754, so it would be INCONCLUSIVE. Run longer, at more repetitions, or judge a lower percentile.", ws[0].Message)

		// A profile that fixes its requests says so without a previous run.
		p := demoTTFT("http://fast/v1")
		p.Steps[0].Inference.Duration, p.Steps[0].Inference.Requests = 0, 500
		ws = PreRunCheck(PreRunInput{Profile: p, Gates: gates})
		require.Len(t, ws, 1)
		require.Contains(t, ws[0].Message, "the profile (3 repetitions of about 500 requests) gives about 1,500")
		// Without anything to go by, nothing is claimed.
		require.Empty(t, PreRunCheck(PreRunInput{Profile: demoTTFT("http://fast/v1"), Gates: gates}))
	})

	t.Run("no gate set: nothing is judged", func(t *testing.T) {
		require.Empty(t, PreRunCheck(PreRunInput{Profile: demoTTFT("http://fast/v1")}))
	})
}

func TestLevelsSortAsNumbers(t *testing.T) {
	t.Parallel()
	keys := []SeriesKey{{Step: "s", Level: "c=16"}, {Step: "s", Level: "c=4"}, {Step: "s", Level: "c=1"}, {Step: "a", Level: "r=10"}, {Step: "a", Level: "r=2.5"}}
	SortSeriesKeys(keys)
	var got []string
	for _, k := range keys {
		got = append(got, k.Step+" "+k.Level)
	}
	require.Equal(t, "a r=2.5, a r=10, s c=1, s c=4, s c=16", strings.Join(got, ", "))
}
