package acceptance

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func isolationCriterion(st Statistic, pct float64) Criterion {
	return Criterion{Metric: MetricTTFT, Statistic: st, Mode: Isolation, Comparator: LessOrEqual, Threshold: pct, Unit: "%",
		Step: "victim-noisy", Reference: "victim-alone"}
}

// The victim beside the aggressor is 50 % slower than alone: the isolation
// criterion measures that change within the run, by the same numbers a
// relative criterion gets when the quiet phase is made the baseline run.
func TestIsolationCriterionJudgesTheVictimAgainstItselfAlone(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 11))
	alone := lognormalMeasurements(r, MetricTTFT, "victim-alone", 3, 2000, 100, 0.3, 1)
	noisy := lognormalMeasurements(r, MetricTTFT, "victim-noisy", 3, 2000, 100, 0.3, 1.5)
	run := append(append([]Measurement{}, alone...), noisy...)

	ev := evaluate(t, EvaluationInput{Gates: gateSet(isolationCriterion(StatP99, 10)), Candidate: run})
	cr := ev.Criteria[0]
	require.Equal(t, Fail, cr.Verdict, cr.Explanation)
	require.Equal(t, "victim-alone", cr.Reference)
	require.Equal(t, "%", cr.Unit)
	require.Len(t, cr.Series, 1)
	sr := cr.Series[0]
	require.Equal(t, "victim-noisy", sr.Step)
	require.InDelta(t, 50, *sr.Estimate, 10)
	require.Greater(t, *sr.Lower, 10.0)
	require.Contains(t, sr.Explanation, "under interference (step victim-noisy) against alone (step victim-alone)")
	require.Contains(t, sr.Explanation, "beyond the allowed +10 %")
	require.Contains(t, sr.Method, "baseline = step victim-alone (alone)")
	require.Contains(t, sr.Method, "Student's t on the log of each repetition's own")
	require.Equal(t, Fail, ev.Verdict)

	// The same comparison as a relative criterion against a baseline run
	// holding the quiet phase: the same estimate and sides.
	asStep := func(ms []Measurement) []Measurement {
		out := make([]Measurement, len(ms))
		for i, m := range ms {
			m.Step = "victim"
			out[i] = m
		}
		return out
	}
	rel := relativeCriterion(MetricTTFT, StatP99, LessOrEqual, 10)
	evRel := evaluate(t, EvaluationInput{Gates: gateSet(rel), Candidate: asStep(noisy), Baseline: asStep(alone)})
	srRel := evRel.Criteria[0].Series[0]
	require.Equal(t, *srRel.Estimate, *sr.Estimate)
	require.Equal(t, *srRel.Candidate.Value, *sr.Candidate.Value)
	require.Equal(t, *srRel.Baseline.Value, *sr.Baseline.Value)
	require.Equal(t, srRel.Verdict, sr.Verdict)
	require.InDelta(t, *srRel.Lower, *sr.Lower, 3)

	// A victim that the aggressor does not slow passes a 10 % margin.
	same := lognormalMeasurements(r, MetricTTFT, "victim-noisy", 3, 2000, 100, 0.3, 1)
	ev = evaluate(t, EvaluationInput{Gates: gateSet(isolationCriterion(StatP50, 10)), Candidate: append(append([]Measurement{}, alone...), same...)})
	require.Equal(t, Pass, ev.Criteria[0].Verdict, ev.Criteria[0].Explanation)
}

func TestIsolationWithoutTheQuietPhaseIsInconclusive(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	noisy := lognormalMeasurements(r, MetricTTFT, "victim-noisy", 1, 500, 100, 0.3, 1.5)
	ev := evaluate(t, EvaluationInput{Gates: gateSet(isolationCriterion(StatP99, 10)), Candidate: noisy})
	sr := ev.Criteria[0].Series[0]
	require.Equal(t, Inconclusive, sr.Verdict)
	require.Equal(t, reasonNoReference, sr.Reason)
	require.Contains(t, sr.Explanation, "victim alone (step victim-alone)")
}

// soakMeasurement is one repetition of a step of secs seconds at rate
// requests a second, each second's TTFT lognormal around 100 ms times
// slow(second), with its send-time index.
func soakMeasurement(r *rand.Rand, secs, rate int, slow func(s int) float64) Measurement {
	m := Measurement{Metric: MetricTTFT, Step: "soak", Repetition: 1, Source: Source{Tool: "accord-probe"}}
	for s := range secs {
		m.SentIndex = append(m.SentIndex, int64(len(m.Values)))
		for range rate {
			m.Values = append(m.Values, 100*math.Exp(0.2*r.NormFloat64())*slow(s))
		}
	}
	return m
}

func driftCriterion(st Statistic, pct float64, window time.Duration) Criterion {
	return Criterion{Metric: MetricTTFT, Statistic: st, Mode: Drift, Comparator: LessOrEqual, Threshold: pct, Unit: "%", Window: Duration(window)}
}

func TestDriftComparesTheLastWindowWithTheFirst(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	// 10 minutes at 20 requests a second; from minute 8 on, 30 % slower.
	slowing := soakMeasurement(r, 600, 20, func(s int) float64 {
		if s >= 480 {
			return 1.3
		}
		return 1
	})
	ev := evaluate(t, EvaluationInput{Gates: gateSet(driftCriterion(StatP99, 5, 2*time.Minute)), Candidate: []Measurement{slowing}})
	sr := ev.Criteria[0].Series[0]
	require.Equal(t, Fail, sr.Verdict, sr.Explanation)
	require.Equal(t, int64(2400), sr.Candidate.N)
	require.Equal(t, int64(2400), sr.Baseline.N)
	require.InDelta(t, 30, *sr.Estimate, 8)
	require.Contains(t, sr.Explanation, "in the last 2m0s against the first 2m0s")
	require.Contains(t, sr.Method, "requests sent in the last 2m0s of each repetition")

	// Slower only in the middle: the windows agree.
	middle := soakMeasurement(r, 600, 20, func(s int) float64 {
		if s >= 200 && s < 400 {
			return 2
		}
		return 1
	})
	ev = evaluate(t, EvaluationInput{Gates: gateSet(driftCriterion(StatP50, 10, 2*time.Minute)), Candidate: []Measurement{middle}})
	require.Equal(t, Pass, ev.Criteria[0].Verdict, ev.Criteria[0].Explanation)
}

func TestDriftIsInconclusiveWithoutEnoughInAWindow(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(8, 9))
	flat := func(int) float64 { return 1 }

	// One request a second: 120 in a window, fewer than p99 needs.
	sparse := soakMeasurement(r, 600, 1, flat)
	sr := evaluate(t, EvaluationInput{Gates: gateSet(driftCriterion(StatP99, 5, 2*time.Minute)), Candidate: []Measurement{sparse}}).Criteria[0].Series[0]
	require.Equal(t, Inconclusive, sr.Verdict)
	require.Equal(t, reasonTooFewForBound, sr.Reason)
	require.Equal(t, int64(120), sr.Candidate.N)

	// A step shorter than two windows.
	short := soakMeasurement(r, 200, 20, flat)
	sr = evaluate(t, EvaluationInput{Gates: gateSet(driftCriterion(StatP99, 5, 2*time.Minute)), Candidate: []Measurement{short}}).Criteria[0].Series[0]
	require.Equal(t, Inconclusive, sr.Verdict)
	require.Equal(t, reasonWindowsOverlap, sr.Reason)
	require.Contains(t, sr.Explanation, "lasted 3m20s, shorter than two windows")

	// Samples without send times (another tool's import).
	noTimes := soakMeasurement(r, 600, 20, flat)
	noTimes.SentIndex = nil
	sr = evaluate(t, EvaluationInput{Gates: gateSet(driftCriterion(StatP99, 5, 2*time.Minute)), Candidate: []Measurement{noTimes}}).Criteria[0].Series[0]
	require.Equal(t, Inconclusive, sr.Verdict)
	require.Equal(t, reasonNoSendTimes, sr.Reason)
}

func TestWithinRunCriteriaValidate(t *testing.T) {
	t.Parallel()
	bad := func(c Criterion) []string {
		errs := ValidateGateSet(gateSet(c))
		var out []string
		for _, e := range errs {
			out = append(out, e.Path+": "+e.Message)
		}
		return out
	}
	noRef := isolationCriterion(StatP99, 10)
	noRef.Reference = ""
	require.Contains(t, bad(noRef), "criteria[0].reference: is required for isolation: the same victim measured alone, a step on its own")
	same := isolationCriterion(StatP99, 10)
	same.Reference = same.Step
	require.Contains(t, bad(same), "criteria[0].reference: must be another step than step: the victim alone, not beside the aggressor")
	stop := 20.0
	withStop := driftCriterion(StatP99, 5, time.Hour)
	withStop.StopLoss = &stop
	require.Contains(t, bad(withStop)[0], "criteria[0].stop_loss: a criterion of mode drift compares stretches")
	require.Contains(t, bad(driftCriterion(StatP99, 5, 0)), "criteria[0].window: is required for drift: the length of the first and of the last window compared, like 1h")
	rate := driftCriterion(StatRate, 5, time.Hour)
	rate.Metric = MetricRequestThroughput
	require.Contains(t, bad(rate)[0], "criteria[0].metric: drift compares requests sent early and late")
	abs := absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 2, "s")
	abs.Window, abs.Reference = Duration(time.Hour), "x"
	require.ElementsMatch(t, []string{"criteria[0].reference: applies to isolation criteria only (the victim measured alone)", "criteria[0].window: applies to drift criteria only"}, bad(abs))
	require.Empty(t, bad(isolationCriterion(StatP99, 10)))
	require.Empty(t, bad(driftCriterion(StatP99, 5, time.Hour)))
}

// noisyProfile measures a victim alone, then beside an aggressor.
func noisyProfile() ProfileSpec {
	inf := func(name, group string) StepSpec {
		return StepSpec{Name: name, Kind: StepInference, Group: group, Inference: &InferenceStep{Endpoint: "http://127.0.0.1:8000/v1", Model: "m", API: APIChat,
			PromptTokens: TokenDist{Dist: DistFixed, Mean: 64}, OutputTokens: TokenDist{Dist: DistFixed, Mean: 8},
			Load: Load{Mode: LoadRate, Rate: 10}, Duration: Duration(time.Minute)}}
	}
	return ProfileSpec{SchemaVersion: 1, Name: "noisy", Purpose: PurposeInferenceServing, Storage: Storage{Transport: TransportEmulated}, Repetitions: 1,
		Steps: []StepSpec{
			inf("victim-alone", ""),
			inf("victim-noisy", "noisy"),
			{Name: "aggressor", Kind: StepFio, Group: "noisy", Fio: &FioStep{RW: RWRandRead, BlockSize: 64 << 10, IODepth: 16, NumJobs: 1, Size: 64 << 20,
				Runtime: Duration(time.Minute), IOEngine: IOEngineLibaio, Direct: true, Target: "/tmp/kv.bin"}},
		}}.Normalized()
}

func TestIsolationCriterionFitsTheProfile(t *testing.T) {
	t.Parallel()
	p := noisyProfile()
	require.NoError(t, p.Validate())
	msgs := func(c Criterion, p ProfileSpec) []string {
		var out []string
		for _, e := range ValidateGateSetForProfile(gateSet(c), p) {
			out = append(out, e.Path+": "+e.Message)
		}
		return out
	}
	require.Empty(t, msgs(isolationCriterion(StatP99, 10), p))

	swapped := isolationCriterion(StatP99, 10)
	swapped.Step, swapped.Reference = "victim-alone", "victim-noisy"
	require.ElementsMatch(t, []string{
		`criteria[0].reference: step "victim-noisy" runs in parallel group "noisy": the victim alone must be a step on its own`,
		`criteria[0].step: step "victim-alone" runs on its own: the victim under interference must be in a parallel group beside the aggressor (group)`,
	}, msgs(swapped, p))

	kind := isolationCriterion(StatP99, 10)
	kind.Reference = "aggressor"
	require.Contains(t, msgs(kind, p)[0], `step "aggressor" is a fio step and "victim-noisy" a inference step`)

	missing := isolationCriterion(StatP99, 10)
	missing.Reference = "nope"
	require.Equal(t, []string{`criteria[0].reference: the profile "noisy" has no step named "nope"`}, msgs(missing, p))

	levels := p.Clone()
	levels.Steps[0].Inference.Load.Rate = 20
	require.Contains(t, msgs(isolationCriterion(StatP99, 10), levels)[0], "run different load levels ([r=10] and [r=20])")

	faulted := p.Clone()
	faulted.Steps = append(faulted.Steps, StepSpec{Name: "f", Kind: StepFault, Fault: &FaultStep{Action: FaultNetem, Interface: "lo", Delay: Duration(time.Millisecond), Duration: Duration(time.Second), During: "victim-alone"}})
	require.Contains(t, msgs(isolationCriterion(StatP99, 10), faulted), `criteria[0].reference: fault "f" runs during step "victim-alone", so it is not the victim alone`)

	drift := driftCriterion(StatP99, 5, time.Minute)
	drift.Step = "aggressor"
	require.Contains(t, msgs(drift, p)[0], "drift needs an inference step")

	// Before a run: the 1-minute level at 10 requests a second has 600
	// requests alone and beside the aggressor, enough for p99; the drift
	// windows of a minute do not fit a 1-minute level.
	gates := gateSet(isolationCriterion(StatP99, 10), driftCriterion(StatP50, 5, time.Minute))
	ws := PreRunCheck(PreRunInput{Profile: p, Gates: &gates})
	require.Len(t, ws, 2, "%v", ws)
	require.Contains(t, ws[0].Message, "shorter than two windows")
}

func TestWithinRunCriteriaRoundTrip(t *testing.T) {
	t.Parallel()
	g := gateSet(isolationCriterion(StatP99, 10), driftCriterion(StatP99, 5, time.Hour))
	g = g.Normalized()
	y, err := ExportGateSetYAML(g)
	require.NoError(t, err)
	require.Contains(t, string(y), "mode: isolation\n")
	require.Contains(t, string(y), "reference: victim-alone\n")
	require.Contains(t, string(y), "window: 1h0m0s\n")
	fromY, err := ImportGateSetYAML(y)
	require.NoError(t, err)
	require.Equal(t, g, fromY)
	j, err := ExportGateSetJSON(g)
	require.NoError(t, err)
	fromJ, err := ImportGateSetJSON(j)
	require.NoError(t, err)
	require.Equal(t, g, fromJ)
	require.Equal(t, "p99 TTFT ≤ +10 % beside the aggressor against alone (95 % confidence) (step victim-noisy beside the aggressor against step victim-alone alone); blocking", g.Criteria[0].Rule())
	require.Equal(t, "p99 TTFT ≤ +5 % in the last window against the first (95 % confidence) (last 1h0m0s against first 1h0m0s); blocking", g.Criteria[1].Rule())
}
