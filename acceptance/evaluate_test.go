package acceptance

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance/stats"
)

type evalBundle struct {
	rng *rand.Rand
}

func setupEval(t *testing.T, seed uint64) *evalBundle {
	t.Helper()
	return &evalBundle{rng: rand.New(rand.NewPCG(seed, 0x5eed))}
}

// sequence returns 1, 2, …, n (in milliseconds, say).
func sequence(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i + 1)
	}
	return v
}

func evaluate(t *testing.T, in EvaluationInput) Evaluation {
	t.Helper()
	if in.Resamples == 0 {
		in.Resamples = MinResamples
	}
	ev, err := Evaluate(in)
	require.NoError(t, err)
	return ev
}

func TestAbsolutePercentileNeedsEnoughSamplesForABound(t *testing.T) {
	t.Parallel()
	gates := gateSet(absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 2, "s"))
	run := func(values []float64) SeriesResult {
		ev := evaluate(t, EvaluationInput{Gates: gates, Candidate: []Measurement{{Metric: MetricTTFT, Step: "decode", Repetition: 1, Values: values}}})
		require.Len(t, ev.Criteria[0].Series, 1)
		return ev.Criteria[0].Series[0]
	}

	// 100 samples, all far under the limit: no upper bound on p99 exists yet.
	sr := run(sequence(100))
	require.Equal(t, Inconclusive, sr.Verdict)
	require.Equal(t, reasonTooFewForBound, sr.Reason)
	require.Nil(t, sr.Upper)
	require.Equal(t, int64(299), sr.Needed.CandidateSamples)
	require.Contains(t, sr.Explanation, "needs at least 299 samples")
	require.Greater(t, *sr.PValue, 0.05)

	// 299 samples: the largest is the upper bound, and it is under the limit.
	sr = run(sequence(299))
	require.Equal(t, Pass, sr.Verdict)
	require.Equal(t, 299.0, *sr.Upper)

	// 100 samples, 10 of them above the limit: a lower bound exists and is
	// above the limit, so it fails even with few samples.
	v := sequence(100)
	for i := 90; i < 100; i++ {
		v[i] = 5000
	}
	sr = run(v)
	require.Equal(t, Fail, sr.Verdict)
	require.Greater(t, *sr.Lower, 2000.0)
}

func TestAbsolutePercentileBoundsDecide(t *testing.T) {
	t.Parallel()
	// 1..1000 ms: p99 is 990; the exact 95 % bounds are order statistics.
	u, _ := stats.UpperBoundRank(1000, 0.99, 0.95)
	l, _ := stats.LowerBoundRank(1000, 0.99, 0.95)
	ms := []Measurement{{Metric: MetricTTFT, Step: "decode", Repetition: 1, Values: sequence(1000)}}
	for _, tc := range []struct {
		limit float64
		want  Verdict
	}{
		{float64(u), Pass}, {float64(u) - 0.5, Inconclusive}, {990, Inconclusive},
		{float64(l), Inconclusive}, {float64(l) - 0.5, Fail}, {500, Fail}, {5000, Pass},
	} {
		ev := evaluate(t, EvaluationInput{Gates: gateSet(absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, tc.limit, "ms")), Candidate: ms})
		sr := ev.Criteria[0].Series[0]
		require.Equal(t, tc.want, sr.Verdict, "limit %v (bounds %d..%d)", tc.limit, l, u)
		require.Equal(t, 990.0, *sr.Estimate)
		require.Equal(t, float64(u), *sr.Upper)
		require.Equal(t, float64(l), *sr.Lower)
		require.Equal(t, IntervalOrderStatistic, sr.Interval)
		if tc.want == Inconclusive && tc.limit != 990 {
			require.NotNil(t, sr.Needed, "limit %v", tc.limit)
			require.Greater(t, sr.Needed.CandidateSamples, int64(1000))
		}
		if tc.limit == 990 { // exactly at the limit: no number of samples would decide
			require.Nil(t, sr.Needed)
			require.NotContains(t, sr.Explanation, "About")
		}
	}
	// The same with ≥: p50 of 1..1000 is 500.
	ev := evaluate(t, EvaluationInput{Gates: gateSet(absoluteCriterion(MetricTTFT, StatP50, GreaterOrEqual, 450, "ms")), Candidate: ms})
	require.Equal(t, Pass, ev.Criteria[0].Verdict)
	require.Contains(t, ev.Criteria[0].Explanation, "clearing the 450 ms minimum")
	ev = evaluate(t, EvaluationInput{Gates: gateSet(absoluteCriterion(MetricTTFT, StatP50, GreaterOrEqual, 550, "ms")), Candidate: ms})
	require.Equal(t, Fail, ev.Criteria[0].Verdict)
	require.Contains(t, ev.Criteria[0].Explanation, "below the 550 ms minimum")
}

func TestExplanationStatesTheNumbers(t *testing.T) {
	t.Parallel()
	b := setupEval(t, 1)
	cand := lognormalMeasurements(b.rng, MetricTTFT, "decode", 3, 4000, 1000, 0.15, 1)
	ev := evaluate(t, EvaluationInput{Gates: gateSet(absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 2000, "ms")), Candidate: cand})
	cr := ev.Criteria[0]
	require.Equal(t, Pass, cr.Verdict)
	require.Regexp(t, regexp.MustCompile(`^p99 TTFT is 1,\d{3} ms \(95 % upper bound 1,\d{3} ms, n = 12,000 over 3 repetitions\), under the 2,000 ms limit\.$`), cr.Explanation)
	sr := cr.Series[0]
	require.Equal(t, IntervalOrderStatBoot, sr.Interval)
	require.Equal(t, int64(12000), sr.Candidate.N)
	require.Equal(t, 3, sr.Candidate.Repetitions)
	require.Len(t, sr.Candidate.PerRepetition, 3)
	require.Equal(t, MinResamples, sr.Resamples)
	require.Len(t, sr.Seed, 32)
	require.Contains(t, sr.Method, "two-stage bootstrap")
	require.Contains(t, sr.Method, "Student's t on the log of each repetition's own nearest-rank p99 (3 repetitions, 2 degrees of freedom)")
	require.Less(t, *sr.PValue, 1e-4, "t with 2 degrees of freedom, 30 % under the limit")
	require.Equal(t, "PASS: all 1 blocking criteria passed.", ev.Explanation)
}

// A relative percentile from one repetition a side says that run-to-run
// variation is not in its interval; from three a side the repetitions'
// own p99s are tested as well.
func TestRelativeIntervalSaysWhenRunToRunVariationIsMissing(t *testing.T) {
	t.Parallel()
	b := setupEval(t, 7)
	for _, reps := range []int{1, 3} {
		cand := lognormalMeasurements(b.rng, MetricTTFT, "decode", reps, 4000, 1000, 0.15, 1)
		base := lognormalMeasurements(b.rng, MetricTTFT, "decode", reps, 4000, 1000, 0.15, 1)
		ev := evaluate(t, EvaluationInput{Gates: gateSet(relativeCriterion(MetricTTFT, StatP99, LessOrEqual, 5)), Candidate: cand, Baseline: base})
		method := ev.Criteria[0].Series[0].Method
		if reps == 1 {
			require.Contains(t, method, "with 1 vs 1 repetitions the interval covers the sampling within runs only, not run-to-run variation")
		} else {
			require.NotContains(t, method, "within runs only", "three repetitions a side: %s", method)
			require.Contains(t, method, "Student's t on the log of each repetition's own nearest-rank p99 (3 vs 3 repetitions, 2 degrees of freedom)")
		}
	}
}

func TestCanonicalJSONIsDeterministic(t *testing.T) {
	t.Parallel()
	b := setupEval(t, 2)
	cand := lognormalMeasurements(b.rng, MetricTTFT, "decode", 2, 3000, 500, 0.3, 1)
	cand = append(cand, rateMeasurements(b.rng, MetricOutputTokenThroughput, "decode", 4, 5000, 0.03)...)
	base := lognormalMeasurements(b.rng, MetricTTFT, "decode", 2, 3000, 500, 0.3, 1.03)
	base = append(base, rateMeasurements(b.rng, MetricOutputTokenThroughput, "decode", 4, 4000, 0.03)...)
	in := EvaluationInput{
		Gates: gateSet(
			absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 2000, "ms"),
			relativeCriterion(MetricTTFT, StatP99, LessOrEqual, 5),
			relativeCriterion(MetricTTFT, StatMean, LessOrEqual, 5),
			relativeCriterion(MetricOutputTokenThroughput, StatRate, GreaterOrEqual, 10),
		),
		Candidate: cand, Baseline: base,
		CandidateFacts: map[string]string{"kernel": "6.8.0", "gpu_model": "H100"},
		BaselineFacts:  map[string]string{"gpu_model": "H100", "kernel": "6.8.0"},
		ProfileDigest:  "sha256:profile", GateDigest: "sha256:gates",
		// The real resample count, once.
		Resamples: DefaultResamples,
	}
	ev1, err := Evaluate(in)
	require.NoError(t, err)
	j1, err := ev1.CanonicalJSON()
	require.NoError(t, err)

	// Same inputs in another order: same bytes.
	shuffled := in
	shuffled.Candidate = slices.Clone(cand)
	slices.Reverse(shuffled.Candidate)
	ev2, err := Evaluate(shuffled)
	require.NoError(t, err)
	j2, err := ev2.CanonicalJSON()
	require.NoError(t, err)
	require.Equal(t, string(j1), string(j2))
	require.Equal(t, DefaultResamples, ev1.Criteria[1].Series[0].Resamples)

	// Canonical form: sorted keys, no HTML escaping, no whitespace.
	require.True(t, bytes.HasPrefix(j1, []byte(`{"comparability":{`)), string(j1[:40]))
	require.Contains(t, string(j1), `"comparator":"<="`)
	require.NotContains(t, string(j1), "\n")
	var tree map[string]any
	require.NoError(t, json.Unmarshal(j1, &tree))

	// One changed sample changes the digest and every seed: different
	// seeds come only from different inputs.
	changed := in
	changed.Baseline = slices.Clone(base)
	changed.Baseline[0].Values = slices.Clone(base[0].Values)
	changed.Baseline[0].Values[7] *= 1.0000001
	ev3, err := Evaluate(changed)
	require.NoError(t, err)
	require.NotEqual(t, ev1.Inputs.BaselineDigest, ev3.Inputs.BaselineDigest)
	require.Equal(t, ev1.Inputs.CandidateDigest, ev3.Inputs.CandidateDigest)
	for i := range ev1.Criteria {
		if s := ev1.Criteria[i].Series[0].Seed; s != "" {
			require.NotEqual(t, s, ev3.Criteria[i].Series[0].Seed)
		}
	}
	// Seeds differ between criteria and series of one evaluation too.
	require.NotEqual(t, ev1.Criteria[1].Series[0].Seed, ev1.Criteria[2].Series[0].Seed)
}

func TestMeasurementsDigestCoversEveryField(t *testing.T) {
	t.Parallel()
	base := Measurement{Metric: MetricITL, Step: "s", Level: "c=4", Repetition: 1, Values: []float64{1, 2}, Counts: []int64{3, 4},
		ToolSummary: map[string]float64{"p99": 2}, Source: Source{Tool: "t", ToolVersion: "1", Field: "f", PercentileMethod: "m"}}
	d0 := MeasurementsDigest([]Measurement{base})
	require.True(t, strings.HasPrefix(d0, DigestPrefix))
	for name, mutate := range map[string]func(m *Measurement){
		"metric":  func(m *Measurement) { m.Metric = MetricTPOT },
		"step":    func(m *Measurement) { m.Step = "t" },
		"level":   func(m *Measurement) { m.Level = "c=8" },
		"rep":     func(m *Measurement) { m.Repetition = 2 },
		"value":   func(m *Measurement) { m.Values = []float64{1, 2.0000000001} },
		"count":   func(m *Measurement) { m.Counts = []int64{3, 5} },
		"nocount": func(m *Measurement) { m.Counts = nil },
		"summary": func(m *Measurement) { m.ToolSummary = map[string]float64{"p99": 3} },
		"tool":    func(m *Measurement) { m.Source.ToolVersion = "2" },
		"method":  func(m *Measurement) { m.Source.PercentileMethod = "n" },
		"trials":  func(m *Measurement) { m.Trials = 1000 },
		"sent":    func(m *Measurement) { m.SentIndex = []int64{0, 1} },
	} {
		m := base
		mutate(&m)
		require.NotEqual(t, d0, MeasurementsDigest([]Measurement{m}), name)
	}
	other := base
	other.Repetition = 2
	require.Equal(t, MeasurementsDigest([]Measurement{base, other}), MeasurementsDigest([]Measurement{other, base}))
	require.NotEqual(t, FactsDigest(map[string]string{"a": "b"}), FactsDigest(map[string]string{"a": "c"}))
	require.Equal(t, FactsDigest(nil), FactsDigest(map[string]string{}))
}

// histogram turns raw samples into (value, count) pairs after rounding to
// whole milliseconds.
func histogram(values []float64) ([]float64, []int64, []float64) {
	counts := map[float64]int64{}
	rounded := make([]float64, len(values))
	for i, v := range values {
		rounded[i] = math.Round(v)
		counts[rounded[i]]++
	}
	var vs []float64
	for v := range counts {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	cs := make([]int64, len(vs))
	for i, v := range vs {
		cs[i] = counts[v]
	}
	return vs, cs, rounded
}

func TestHistogramModeAgreesWithRawSamples(t *testing.T) {
	t.Parallel()
	b := setupEval(t, 3)
	// Three repetitions a side: the per-repetition t test (2 degrees of
	// freedom) then decides a 5 % difference too.
	raw := lognormalMeasurements(b.rng, MetricITL, "decode", 3, 20000, 30, 0.4, 1)
	rawBase := lognormalMeasurements(b.rng, MetricITL, "decode", 3, 20000, 30, 0.4, 1.05)
	toHist := func(ms []Measurement) (hist, rounded []Measurement) {
		for _, m := range ms {
			vs, cs, r := histogram(m.Values)
			h := m
			h.Values, h.Counts = vs, cs
			hist = append(hist, h)
			m.Values = r
			rounded = append(rounded, m)
		}
		return hist, rounded
	}
	hc, rc := toHist(raw)
	hb, rb := toHist(rawBase)
	gates := gateSet(
		absoluteCriterion(MetricITL, StatP99, LessOrEqual, 100, "ms"),
		relativeCriterion(MetricITL, StatP99, LessOrEqual, 0),
		relativeCriterion(MetricITL, StatMean, LessOrEqual, 0),
	)
	evH := evaluate(t, EvaluationInput{Gates: gates, Candidate: hc, Baseline: hb})
	evR := evaluate(t, EvaluationInput{Gates: gates, Candidate: rc, Baseline: rb})
	for i := range gates.Criteria {
		sh, sr := evH.Criteria[i].Series[0], evR.Criteria[i].Series[0]
		require.Equal(t, sr.Verdict, sh.Verdict, "criterion %d", i)
		require.Equal(t, *sr.Estimate, *sh.Estimate, "criterion %d", i)
		require.Equal(t, sr.Candidate.N, sh.Candidate.N)
		require.InDelta(t, *sr.Upper, *sh.Upper, 0.5+0.05*math.Abs(*sr.Upper), "criterion %d", i)
		require.Equal(t, dataHistogram, sh.Candidate.Data)
		require.Equal(t, dataSamples, sr.Candidate.Data)
	}
	// The candidate is 5 % faster: both relative criteria pass.
	require.Equal(t, Pass, evH.Criteria[1].Verdict)
	require.Equal(t, Pass, evH.Criteria[2].Verdict)
	require.Contains(t, evH.Criteria[0].Series[0].Method, "histogram")
}

func summaryMeasurement(metric, step string, rep int, summary map[string]float64) Measurement {
	return Measurement{Metric: metric, Step: step, Repetition: rep, ToolSummary: summary,
		Source: Source{Tool: "fio", ToolVersion: "3.33", PercentileDefinition: stats.FioBins}}
}

func pointEstimates(g GateSetSpec) GateSetSpec {
	for i := range g.Criteria {
		g.Criteria[i].PointEstimate = true
	}
	return g
}

// A percentile or mean known only from a tool's summary is a point
// estimate: INCONCLUSIVE unless the gate set asks for point estimates.
func TestSummaryOnlyIsInconclusiveByDefault(t *testing.T) {
	t.Parallel()
	cand := []Measurement{
		summaryMeasurement(MetricReadCLat, "randread", 1, map[string]float64{"p99": 900, "mean": 300}),
		summaryMeasurement(MetricReadCLat, "randread", 2, map[string]float64{"p99": 1000, "mean": 320}),
	}
	base := []Measurement{summaryMeasurement(MetricReadCLat, "randread", 1, map[string]float64{"p99": 1000, "mean": 300, "n": 50000})}
	gates := gateSet(
		absoluteCriterion(MetricReadCLat, StatP99, LessOrEqual, 1, "ms"),
		absoluteCriterion(MetricReadCLat, StatMean, LessOrEqual, 250, "us"),
		relativeCriterion(MetricReadCLat, StatP99, LessOrEqual, 0),
		relativeCriterion(MetricReadCLat, StatMean, LessOrEqual, 0),
	)
	ev := evaluate(t, EvaluationInput{Gates: gates, Candidate: cand, Baseline: base})
	require.Equal(t, Inconclusive, ev.Verdict)
	for i, cr := range ev.Criteria {
		sr := cr.Series[0]
		require.Equal(t, Inconclusive, sr.Verdict, "criterion %d", i)
		require.Equal(t, reasonPointEstimate, sr.Reason, "criterion %d", i)
		require.False(t, cr.PointEstimate)
		require.Contains(t, sr.Explanation, "a point estimate, with no per-request samples or histogram to bound it, so it is not judged")
		require.Contains(t, sr.Explanation, "point_estimate: true", "it says what would make it judgeable")
		require.Contains(t, sr.Explanation, "profile_export.jsonl")
		require.NotNil(t, sr.Needed)
	}
	require.Contains(t, ev.Criteria[0].Series[0].Explanation, "p99 read completion latency is known on the run only from fio 3.33's own summary (950 µs): a point estimate")

	// A side with samples against a summary is no better: one side is a point estimate.
	samples := []Measurement{{Metric: MetricReadCLat, Step: "randread", Repetition: 1, Values: []float64{100, 200, 300}, Source: Source{Tool: "accord-probe"}}}
	ev = evaluate(t, EvaluationInput{Gates: gateSet(relativeCriterion(MetricReadCLat, StatP99, LessOrEqual, 0)), Candidate: samples, Baseline: base})
	require.Equal(t, reasonPointEstimate, ev.Criteria[0].Series[0].Reason)
	require.Contains(t, ev.Criteria[0].Series[0].Explanation, "on the baseline only")
}

func TestSummaryOnlyWithPointEstimatesDecidesOnThePointEstimate(t *testing.T) {
	t.Parallel()
	cand := []Measurement{
		summaryMeasurement(MetricReadCLat, "randread", 1, map[string]float64{"p99": 900, "mean": 300}),
		summaryMeasurement(MetricReadCLat, "randread", 2, map[string]float64{"p99": 1000, "mean": 320}),
	}
	base := []Measurement{summaryMeasurement(MetricReadCLat, "randread", 1, map[string]float64{"p99": 1000, "mean": 300, "n": 50000})}
	gates := pointEstimates(gateSet(
		absoluteCriterion(MetricReadCLat, StatP99, LessOrEqual, 1, "ms"),
		absoluteCriterion(MetricReadCLat, StatMean, LessOrEqual, 250, "us"),
		relativeCriterion(MetricReadCLat, StatP99, LessOrEqual, 0),
		absoluteCriterion(MetricReadCLat, StatP50, LessOrEqual, 1, "ms"),
	))
	ev := evaluate(t, EvaluationInput{Gates: gates, Candidate: cand, Baseline: base})

	require.True(t, ev.Criteria[0].PointEstimate, "the verdict shows the opt-in")
	abs := ev.Criteria[0].Series[0]
	require.Equal(t, Pass, abs.Verdict)
	require.Equal(t, IntervalNone, abs.Interval)
	require.Equal(t, 950.0, *abs.Estimate) // mean of the repetitions' p99
	require.Nil(t, abs.Upper)
	require.Nil(t, abs.PValue)
	require.Equal(t, dataSummary, abs.Candidate.Data)
	require.Contains(t, abs.Method, "point_estimate: true")
	require.Equal(t, "p99 read completion latency is 950 µs by fio 3.33's own summary; there are no samples, so there is no confidence interval (interval: none) and the verdict rests on the point estimate alone, as the gate set allows for this criterion (point_estimate: true): under the 1,000 µs limit.", abs.Explanation)

	require.Equal(t, Fail, ev.Criteria[1].Verdict)
	rel := ev.Criteria[2].Series[0]
	require.Equal(t, Pass, rel.Verdict)
	require.Equal(t, IntervalNone, rel.Interval)
	require.InDelta(t, -5, *rel.Estimate, 1e-9)
	require.Contains(t, rel.Explanation, "interval: none")
	require.Contains(t, rel.Explanation, "point_estimate: true")
	// The summary lacks p50.
	require.Equal(t, Inconclusive, ev.Criteria[3].Verdict)
	require.Equal(t, reasonNoData, ev.Criteria[3].Series[0].Reason)
	// No interval: no p-value, so Holm's family holds no summary criterion.
	require.Nil(t, ev.Criteria[0].Holm)

	// min_samples cannot be checked without a count.
	withMin := pointEstimates(gateSet(absoluteCriterion(MetricReadCLat, StatP99, LessOrEqual, 1, "ms")))
	withMin.Criteria[0].MinSamples = 1000
	ev = evaluate(t, EvaluationInput{Gates: withMin, Candidate: cand})
	require.Equal(t, reasonUnknownSampleSize, ev.Criteria[0].Series[0].Reason)
	require.Equal(t, Inconclusive, ev.Verdict)
}

// A comparison never mixes percentile definitions: samples compared with
// a tool's summary are read by the tool's rule, and two tools' summaries
// made by different rules are not compared.
func TestPointEstimateComparisonUsesOneDefinition(t *testing.T) {
	t.Parallel()
	v := make([]float64, 100)
	for i := range v {
		v[i] = float64(i + 1)
	}
	samples := []Measurement{{Metric: MetricTTFT, Step: "s", Repetition: 1, Values: v, Source: Source{Tool: "accord-probe"}}}
	vllm := []Measurement{{Metric: MetricTTFT, Step: "s", Repetition: 1, ToolSummary: map[string]float64{"p99": 99.01},
		Source: Source{Tool: "vllm-bench", PercentileDefinition: stats.NumpyLinear}}}
	gates := pointEstimates(gateSet(relativeCriterion(MetricTTFT, StatP99, LessOrEqual, 0)))
	ev := evaluate(t, EvaluationInput{Gates: gates, Candidate: samples, Baseline: vllm})
	sr := ev.Criteria[0].Series[0]
	// Nearest rank would say 99 against 99.01 (−0.01 %); numpy's rule on the
	// same samples gives 99.01: no change.
	require.Equal(t, 99.01, *sr.Candidate.Value)
	require.Equal(t, stats.NumpyLinear, sr.Candidate.Definition)
	require.InDelta(t, 0, *sr.Estimate, 1e-9)
	require.Equal(t, Pass, sr.Verdict)
	require.Contains(t, strings.Join(sr.Notes, " "), "numpy linear interpolation")

	fio := []Measurement{{Metric: MetricTTFT, Step: "s", Repetition: 1, ToolSummary: map[string]float64{"p99": 99},
		Source: Source{Tool: "fio", PercentileDefinition: stats.FioBins}}}
	ev = evaluate(t, EvaluationInput{Gates: gates, Candidate: fio, Baseline: vllm})
	require.Equal(t, reasonDefinitionsDiffer, ev.Criteria[0].Series[0].Reason)
	require.Equal(t, Inconclusive, ev.Criteria[0].Verdict)
	require.Contains(t, ev.Criteria[0].Series[0].Explanation, "compute percentiles differently")

	unknown := []Measurement{{Metric: MetricTTFT, Step: "s", Repetition: 1, ToolSummary: map[string]float64{"p99": 99}, Source: Source{Tool: "vllm-bench"}}}
	ev = evaluate(t, EvaluationInput{Gates: gates, Candidate: samples, Baseline: unknown})
	require.Equal(t, reasonDefinitionsDiffer, ev.Criteria[0].Series[0].Reason)
	require.Contains(t, ev.Criteria[0].Series[0].Explanation, "Import the file again")

	// Means have no definition to mix.
	ev = evaluate(t, EvaluationInput{Gates: pointEstimates(gateSet(relativeCriterion(MetricTTFT, StatMean, LessOrEqual, 1))),
		Candidate: samples, Baseline: []Measurement{{Metric: MetricTTFT, Step: "s", Repetition: 1, ToolSummary: map[string]float64{"mean": 50.5}, Source: Source{Tool: "vllm-bench"}}}})
	require.Equal(t, Pass, ev.Criteria[0].Verdict)
}

func TestPointEstimateValidation(t *testing.T) {
	t.Parallel()
	g := gateSet(absoluteCriterion(MetricOutputTokenThroughput, StatRate, GreaterOrEqual, 10, "tok/s"))
	g.Criteria[0].PointEstimate = true
	err := g.Validate()
	require.ErrorContains(t, err, "point_estimate")
	require.ErrorContains(t, err, "applies to percentile and mean criteria only")
	g = pointEstimates(gateSet(absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 10, "ms")))
	require.NoError(t, g.Validate())
}

func TestRateMetricsUseRepetitions(t *testing.T) {
	t.Parallel()
	b := setupEval(t, 4)
	one := rateMeasurements(b.rng, MetricOutputTokenThroughput, "decode", 1, 5000, 0.02)
	ev := evaluate(t, EvaluationInput{Gates: gateSet(absoluteCriterion(MetricOutputTokenThroughput, StatRate, GreaterOrEqual, 1000, "tok/s")), Candidate: one})
	sr := ev.Criteria[0].Series[0]
	require.Equal(t, Inconclusive, sr.Verdict)
	require.Equal(t, reasonTooFewReps, sr.Reason)
	require.Equal(t, 2, sr.Needed.CandidateRepetitions)
	require.Contains(t, sr.Explanation, "single repetition")

	five := rateMeasurements(b.rng, MetricOutputTokenThroughput, "decode", 5, 5000, 0.02)
	ev = evaluate(t, EvaluationInput{Gates: gateSet(absoluteCriterion(MetricOutputTokenThroughput, StatRate, GreaterOrEqual, 1000, "tok/s")), Candidate: five})
	sr = ev.Criteria[0].Series[0]
	require.Equal(t, Pass, sr.Verdict)
	require.Equal(t, IntervalStudentT, sr.Interval)
	require.Equal(t, int64(5), sr.Candidate.N)
	require.Contains(t, sr.Explanation, "5 repetitions")

	// Relative with two repetitions a side: the interval needs three.
	two := rateMeasurements(b.rng, MetricOutputTokenThroughput, "decode", 2, 5000, 0.02)
	twoBase := rateMeasurements(b.rng, MetricOutputTokenThroughput, "decode", 2, 3000, 0.02)
	ev = evaluate(t, EvaluationInput{Gates: gateSet(relativeCriterion(MetricOutputTokenThroughput, StatRate, GreaterOrEqual, 25)), Candidate: two, Baseline: twoBase})
	sr = ev.Criteria[0].Series[0]
	require.Equal(t, Inconclusive, sr.Verdict)
	require.Equal(t, reasonTooFewReps, sr.Reason)
	require.Equal(t, MinRateRepetitions, sr.Needed.CandidateRepetitions)
	require.Contains(t, sr.Explanation, "at least 3 on each side")
	require.InDelta(t, 66.7, *sr.Estimate, 5)

	fiveBase := rateMeasurements(b.rng, MetricOutputTokenThroughput, "decode", 5, 3800, 0.02)
	ev = evaluate(t, EvaluationInput{Gates: gateSet(relativeCriterion(MetricOutputTokenThroughput, StatRate, GreaterOrEqual, 25)), Candidate: five, Baseline: fiveBase})
	sr = ev.Criteria[0].Series[0]
	require.Equal(t, Pass, sr.Verdict, sr.Explanation)
	require.Equal(t, IntervalExpandedBoot, sr.Interval)
	require.Contains(t, sr.Method, "Student's t with 4 degrees of freedom")
	require.Regexp(t, `^Output token throughput changed by \+3\d\.\d % against the baseline \(\d,\d{3} tok/s vs \d,\d{3} tok/s; 95 % lower bound \+2\d(\.\d)? %, 5 vs 5 repetitions\), clearing the required \+25 %\. Neither run recorded host facts`, sr.Explanation)

	_, err := Evaluate(EvaluationInput{Gates: gateSet(absoluteCriterion(MetricOutputTokenThroughput, StatRate, GreaterOrEqual, 1, "tok/s")),
		Candidate: []Measurement{{Metric: MetricOutputTokenThroughput, Step: "decode", Repetition: 1, Values: []float64{1, 2}}}})
	require.ErrorContains(t, err, "one value per repetition")
}

func TestIncomparableHostsVoidRelativeCriteria(t *testing.T) {
	t.Parallel()
	b := setupEval(t, 5)
	cand := lognormalMeasurements(b.rng, MetricTTFT, "decode", 1, 2000, 500, 0.3, 1)
	base := lognormalMeasurements(b.rng, MetricTTFT, "decode", 1, 2000, 500, 0.3, 1)
	gates := gateSet(
		absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 5000, "ms"),
		relativeCriterion(MetricTTFT, StatP99, LessOrEqual, 50),
	)
	in := EvaluationInput{Gates: gates, Candidate: cand, Baseline: base,
		CandidateFacts: map[string]string{"kernel": "6.8.0", "gpu_driver": "550.54", "gpu_model": "H100"},
		BaselineFacts:  map[string]string{"kernel": "6.1.0", "gpu_model": "H100", "nvme_model": "PM1743"},
	}
	ev := evaluate(t, in)
	require.False(t, ev.Comparability.Comparable)
	require.Equal(t, []FactDiff{
		{Fact: "gpu_driver", Candidate: "550.54", BaselineAbsent: true},
		{Fact: "kernel", Candidate: "6.8.0", Baseline: "6.1.0"},
		{Fact: "nvme_model", Baseline: "PM1743", CandidateAbsent: true},
	}, ev.Comparability.Differences)
	require.Equal(t, Pass, ev.Criteria[0].Verdict)
	rel := ev.Criteria[1].Series[0]
	require.Equal(t, Incomparable, rel.Verdict)
	require.Equal(t, reasonFactsDiffer, rel.Reason)
	require.NotNil(t, rel.Estimate) // still computed, for information
	require.Contains(t, rel.Explanation, "kernel (6.8.0 vs 6.1.0)")
	require.Contains(t, rel.Explanation, "gpu_driver (550.54 vs unknown)")
	require.Equal(t, Incomparable, ev.Verdict)
	require.True(t, strings.HasPrefix(ev.Explanation, `INCOMPARABLE: "c1" cannot be judged`))
	// Not tested, so not in Holm's family.
	require.Nil(t, ev.Criteria[1].Holm)

	// A failing absolute criterion outranks it.
	in.Gates.Criteria[0].Threshold = 100
	ev = evaluate(t, in)
	require.Equal(t, Fail, ev.Verdict)

	// Same facts: comparable.
	in.BaselineFacts = in.CandidateFacts
	in.Gates.Criteria[0].Threshold = 5000
	ev = evaluate(t, in)
	require.True(t, ev.Comparability.Comparable)
	require.Equal(t, Pass, ev.Verdict)
	require.False(t, ev.Comparability.NoFacts)
	require.NotContains(t, ev.Criteria[1].Series[0].Explanation, "host facts")

	// No facts on either side (imported results): comparable as far as
	// anyone can tell, and the explanation says it was not checked.
	in.CandidateFacts, in.BaselineFacts = nil, nil
	ev = evaluate(t, in)
	require.True(t, ev.Comparability.NoFacts)
	require.Equal(t, Pass, ev.Verdict)
	require.Contains(t, ev.Criteria[1].Series[0].Explanation, "Neither run recorded host facts", "the relative criterion")
	require.NotContains(t, ev.Criteria[0].Series[0].Explanation, "host facts", "not the absolute one")
}

// rates with mean 100 and standard error 1/√2 over 5 repetitions (df 4):
// a ≥ L criterion has p = 1 − T₄((100 − L)·√2).
var marginalRates = []float64{100, 102, 98, 101, 99}

func rateSeries(step string, values []float64) []Measurement {
	out := make([]Measurement, len(values))
	for i, v := range values {
		out[i] = Measurement{Metric: MetricRequestThroughput, Step: step, Repetition: i + 1, Values: []float64{v}}
	}
	return out
}

func TestHolmHoldsBackMarginalPasses(t *testing.T) {
	t.Parallel()
	var cand []Measurement
	for _, s := range []string{"a", "b", "c", "d"} {
		cand = append(cand, rateSeries(s, marginalRates)...)
	}
	crit := func(step string, limit float64, sev Severity) Criterion {
		c := absoluteCriterion(MetricRequestThroughput, StatRate, GreaterOrEqual, limit, "req/s")
		c.Step, c.Name, c.Severity = step, "throughput-"+step, sev
		return c
	}
	gates := gateSet(
		crit("a", 90, Blocking),    // p ≈ 1e-5: rank 1
		crit("b", 98.2, Blocking),  // p ≈ 0.032: rank 2, level 0.025: not rejected
		crit("c", 98.25, Blocking), // p ≈ 0.033: rank 3, level 0.05, but the step-down stopped
		crit("d", 98.2, Advisory),  // not in the family
	)
	wantP := func(limit float64) float64 { return 1 - stats.StudentCDF((100-limit)*math.Sqrt2, 4) }

	gates.Correction = CorrectionNone
	ev := evaluate(t, EvaluationInput{Gates: gates, Candidate: cand})
	for i := range 4 {
		require.Equal(t, Pass, ev.Criteria[i].Verdict, "criterion %d without correction", i)
		require.Nil(t, ev.Criteria[i].Holm)
	}

	gates.Correction = CorrectionHolm
	ev = evaluate(t, EvaluationInput{Gates: gates, Candidate: cand})
	require.Equal(t, Pass, ev.Criteria[0].Verdict)
	require.Equal(t, roundHolm(&HolmAdjustment{Family: 3, Rank: 1, Level: 0.05 / 3, AdjustedP: 3 * wantP(90), Alpha: 0.05, Rejected: true}), roundHolm(ev.Criteria[0].Holm))
	pb := wantP(98.2)
	require.InDelta(t, pb, *ev.Criteria[1].PValue, 1e-9)
	require.Equal(t, roundHolm(&HolmAdjustment{Family: 3, Rank: 2, Level: 0.025, AdjustedP: 2 * pb, Alpha: 0.05}), roundHolm(ev.Criteria[1].Holm))
	require.Equal(t, roundHolm(&HolmAdjustment{Family: 3, Rank: 3, Level: 0.05, AdjustedP: 2 * pb, Alpha: 0.05}), roundHolm(ev.Criteria[2].Holm))
	for _, i := range []int{1, 2} {
		sr := ev.Criteria[i].Series[0]
		require.Equal(t, Inconclusive, sr.Verdict, "criterion %d", i)
		require.Equal(t, reasonHolm, sr.Reason)
		require.Contains(t, sr.Explanation, "Holm's correction over 3 blocking criteria")
		require.Greater(t, sr.Needed.CandidateRepetitions, 5)
	}
	require.Equal(t, Pass, ev.Criteria[3].Verdict)
	require.Nil(t, ev.Criteria[3].Holm)
	require.Equal(t, Inconclusive, ev.Verdict)
}

func roundHolm(h *HolmAdjustment) *HolmAdjustment {
	if h == nil {
		return nil
	}
	c := *h
	r := func(v float64) float64 { return math.Round(v*1e9) / 1e9 }
	c.Level, c.AdjustedP, c.Alpha = r(c.Level), r(c.AdjustedP), r(c.Alpha)
	return &c
}

func TestCriterionWithoutStepJudgesEverySeries(t *testing.T) {
	t.Parallel()
	b := setupEval(t, 6)
	var cand []Measurement
	for _, level := range []string{"c=16", "c=2", "c=1"} {
		scale := 100.0
		if level == "c=16" {
			scale = 1000
		}
		for _, m := range lognormalMeasurements(b.rng, MetricTTFT, "sweep", 1, 3000, scale, 0.2, 1) {
			m.Level = level
			cand = append(cand, m)
		}
	}
	cand = append(cand, lognormalMeasurements(b.rng, MetricTTFT, "warm", 1, 3000, 100, 0.2, 1)...)
	ev := evaluate(t, EvaluationInput{Gates: gateSet(absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 1000, "ms")), Candidate: cand})
	cr := ev.Criteria[0]
	var keys []string
	for _, s := range cr.Series {
		keys = append(keys, s.Step+"/"+s.Level)
	}
	require.Equal(t, []string{"sweep/c=1", "sweep/c=2", "sweep/c=16", "warm/"}, keys)
	require.Equal(t, Fail, cr.Verdict)
	require.Equal(t, &SeriesKey{Step: "sweep", Level: "c=16"}, cr.Worst)
	require.True(t, strings.HasPrefix(cr.Explanation, "Over 4 series (1 FAIL and 3 PASS), the worst is step sweep at c=16: p99 TTFT is"), cr.Explanation)

	// With a step, only that step counts.
	c := absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 1000, "ms")
	c.Step = "warm"
	ev = evaluate(t, EvaluationInput{Gates: gateSet(c), Candidate: cand})
	require.Len(t, ev.Criteria[0].Series, 1)
	require.Equal(t, Pass, ev.Criteria[0].Verdict)

	// A step that produced nothing.
	c.Step = "prefill"
	ev = evaluate(t, EvaluationInput{Gates: gateSet(c), Candidate: cand})
	require.Equal(t, Inconclusive, ev.Criteria[0].Verdict)
	require.Equal(t, reasonNoData, ev.Criteria[0].Series[0].Reason)
	require.Contains(t, ev.Criteria[0].Explanation, "no TTFT for step prefill")
}

func TestMinSamplesAndMissingBaseline(t *testing.T) {
	t.Parallel()
	b := setupEval(t, 7)
	cand := lognormalMeasurements(b.rng, MetricTTFT, "decode", 1, 1000, 100, 0.2, 1)
	c := absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 1000, "ms")
	c.MinSamples = 5000
	ev := evaluate(t, EvaluationInput{Gates: gateSet(c), Candidate: cand})
	sr := ev.Criteria[0].Series[0]
	require.Equal(t, Inconclusive, sr.Verdict)
	require.Equal(t, reasonMinSamples, sr.Reason)
	require.Equal(t, int64(5000), sr.Needed.CandidateSamples)
	require.Contains(t, sr.Explanation, "Only 1,000 samples of TTFT")

	rel := relativeCriterion(MetricTTFT, StatP99, LessOrEqual, 5)
	ev = evaluate(t, EvaluationInput{Gates: gateSet(rel), Candidate: cand})
	require.Equal(t, reasonNoBaseline, ev.Criteria[0].Series[0].Reason)
	require.Equal(t, Inconclusive, ev.Verdict)
	require.False(t, ev.Comparability.Checked)

	other := lognormalMeasurements(b.rng, MetricTTFT, "prefill", 1, 1000, 100, 0.2, 1)
	ev = evaluate(t, EvaluationInput{Gates: gateSet(rel), Candidate: cand, Baseline: other})
	require.Equal(t, Incomparable, ev.Criteria[0].Verdict)
	require.Equal(t, reasonBaselineNoSeries, ev.Criteria[0].Series[0].Reason)

	zero := []Measurement{{Metric: MetricErrorRate, Step: "decode", Repetition: 1, Values: []float64{0}},
		{Metric: MetricErrorRate, Step: "decode", Repetition: 2, Values: []float64{0}}, {Metric: MetricErrorRate, Step: "decode", Repetition: 3, Values: []float64{0}}}
	some := []Measurement{{Metric: MetricErrorRate, Step: "decode", Repetition: 1, Values: []float64{0.01}},
		{Metric: MetricErrorRate, Step: "decode", Repetition: 2, Values: []float64{0.02}}, {Metric: MetricErrorRate, Step: "decode", Repetition: 3, Values: []float64{0}}}
	ev = evaluate(t, EvaluationInput{Gates: gateSet(relativeCriterion(MetricErrorRate, StatRate, LessOrEqual, 10)), Candidate: some, Baseline: zero})
	require.Equal(t, reasonBaselineZero, ev.Criteria[0].Series[0].Reason)
}

func TestMaxHasNoInterval(t *testing.T) {
	t.Parallel()
	ms := []Measurement{{Metric: MetricE2EL, Step: "decode", Repetition: 1, Values: sequence(500)}}
	ev := evaluate(t, EvaluationInput{Gates: gateSet(absoluteCriterion(MetricE2EL, StatMax, LessOrEqual, 600, "ms")), Candidate: ms})
	sr := ev.Criteria[0].Series[0]
	require.Equal(t, Pass, sr.Verdict)
	require.Equal(t, IntervalNone, sr.Interval)
	require.Contains(t, sr.Explanation, "interval: none")
	ev = evaluate(t, EvaluationInput{Gates: gateSet(absoluteCriterion(MetricE2EL, StatMax, LessOrEqual, 400, "ms")), Candidate: ms})
	require.Equal(t, Fail, ev.Criteria[0].Verdict)
	require.Contains(t, ev.Criteria[0].Explanation, "certain failure")
}

func TestAdvisoryCriteriaAreReportedBeside(t *testing.T) {
	t.Parallel()
	ms := []Measurement{{Metric: MetricTTFT, Step: "decode", Repetition: 1, Values: sequence(1000)}}
	adv := absoluteCriterion(MetricTTFT, StatP50, LessOrEqual, 100, "ms")
	adv.Severity = Advisory
	ev := evaluate(t, EvaluationInput{Gates: gateSet(absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 2000, "ms"), adv), Candidate: ms})
	require.Equal(t, Fail, ev.Criteria[1].Verdict)
	require.Equal(t, Pass, ev.Verdict)
	require.Equal(t, `PASS: all 1 blocking criteria passed. Advisory: c1 FAIL.`, ev.Explanation)
}

func TestEvaluateRejectsMalformedInput(t *testing.T) {
	t.Parallel()
	good := gateSet(absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 2000, "ms"))
	m := func(rep int, v ...float64) Measurement {
		return Measurement{Metric: MetricTTFT, Step: "decode", Repetition: rep, Values: v}
	}
	for name, tc := range map[string]struct {
		in   EvaluationInput
		want string
	}{
		"bad gate set":   {EvaluationInput{Gates: gateSet(absoluteCriterion("nope", StatP99, LessOrEqual, 1, "ms"))}, "gate set"},
		"duplicate rep":  {EvaluationInput{Gates: good, Candidate: []Measurement{m(1, 1), m(1, 2)}}, "repetition 1 twice"},
		"negative":       {EvaluationInput{Gates: good, Candidate: []Measurement{m(1, 1, -2)}}, "negative"},
		"nan":            {EvaluationInput{Gates: good, Candidate: []Measurement{m(1, 1, math.NaN())}}, "NaN"},
		"counts":         {EvaluationInput{Gates: good, Candidate: []Measurement{{Metric: MetricTTFT, Step: "d", Repetition: 1, Values: []float64{1, 2}, Counts: []int64{1}}}}, "counts"},
		"few resamples":  {EvaluationInput{Gates: good, Resamples: 10}, "resamples"},
		"baseline dupes": {EvaluationInput{Gates: good, Baseline: []Measurement{m(2, 1), m(2, 1)}}, "baseline"},
	} {
		_, err := Evaluate(tc.in)
		require.ErrorContains(t, err, tc.want, name)
	}
}

func TestVerdictOrder(t *testing.T) {
	t.Parallel()
	order := []Verdict{Pass, Inconclusive, Incomparable, Fail}
	for i, a := range order {
		require.True(t, a.Valid())
		for j, b := range order {
			want := a
			if j > i {
				want = b
			}
			require.Equal(t, want, Worse(a, b), "%s vs %s", a, b)
		}
	}
	require.False(t, Verdict("MAYBE").Valid())
}

func TestCompareFacts(t *testing.T) {
	t.Parallel()
	require.Empty(t, CompareFacts(nil, nil))
	require.Empty(t, CompareFacts(map[string]string{"kernel": "6.8"}, map[string]string{"kernel": "6.8"}))
	require.Equal(t, []FactDiff{{Fact: "fabric_transport", Candidate: "nvmeof-rdma", Baseline: "local-nvme"}},
		CompareFacts(map[string]string{"fabric_transport": "nvmeof-rdma", "kernel": "6.8"}, map[string]string{"fabric_transport": "local-nvme", "kernel": "6.8"}))
}

func TestNumberFormatting(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{1412.3: "1,412", 999.4: "999.4", 14.234: "14.23", 0.012345: "0.01235", 1234567: "1,234,567", 0: "0", -2500: "-2,500", 0.00001: "1e-05"} {
		require.Equal(t, want, fmtNum(v), "%v", v)
	}
	for v, want := range map[float64]string{31.24: "+31.2 %", -0.995: "−0.995 %", 0: "0 %", 250: "+250 %", 5: "+5 %", 1500: "+1,500 %"} {
		require.Equal(t, want, fmtPct(v), "%v", v)
	}
	require.Equal(t, "1.25 GB/s", fmtValue(1.25e9, UnitBytesPerSec))
	require.Equal(t, "812 µs", fmtValue(812, UnitMicrosecond))
	require.Equal(t, "97.5 %", fmtConf(0.975))
}

// An error rate that was 0 in every repetition has no spread, but it is
// still a share of a finite number of requests: with the requests known,
// the bound comes from the binomial count (rule of three), and too few
// requests cannot pass a tight limit.
func TestErrorRateBoundCountsTheRequests(t *testing.T) {
	t.Parallel()
	errorRates := func(trials int64) []Measurement {
		out := make([]Measurement, 3)
		for i := range out {
			out[i] = Measurement{Metric: MetricErrorRate, Step: "chat", Repetition: i + 1, Values: []float64{0}, Trials: trials}
		}
		return out
	}
	gates := gateSet(absoluteCriterion(MetricErrorRate, StatRate, LessOrEqual, 0.005, "ratio"))

	ev := evaluate(t, EvaluationInput{Gates: gates, Candidate: errorRates(1000)})
	sr := ev.Criteria[0].Series[0]
	require.Equal(t, Pass, sr.Verdict, sr.Explanation)
	require.InDelta(t, 1-math.Pow(0.05, 1.0/3000), *sr.Upper, 1e-9, "the rule of three over 3,000 requests")
	require.Contains(t, sr.Method, "exact binomial test (Clopper–Pearson bound) on the 0 of 3,000 requests pooled")
	require.Contains(t, sr.Explanation, "Error rate is 0 % (95 % upper bound 0.0998 %, 3 repetitions), under the 0.5 % limit.")

	ev = evaluate(t, EvaluationInput{Gates: gates, Candidate: errorRates(100)})
	sr = ev.Criteria[0].Series[0]
	require.NotEqual(t, Pass, sr.Verdict, "300 requests cannot show an error rate under 0.5 %% at 95 %%: %s", sr.Explanation)
	require.Greater(t, *sr.Upper, 0.005)

	// Unknown request counts (older measurements): Student's t alone, as before.
	ev = evaluate(t, EvaluationInput{Gates: gates, Candidate: errorRates(0)})
	sr = ev.Criteria[0].Series[0]
	require.NotContains(t, sr.Method, "binomial")
}
