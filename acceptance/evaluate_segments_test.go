package acceptance

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance/stats"
)

// segmented returns the measurements with their values kept in segments
// (as an import of more than stats.InMemoryLimit samples keeps them).
func segmented(t *testing.T, ms []Measurement) []Measurement {
	t.Helper()
	out := make([]Measurement, len(ms))
	for i, m := range ms {
		segs, err := stats.MemorySegments(m.Values)
		require.NoError(t, err)
		m.Values, m.Segments, m.SentIndex = nil, segs, nil
		out[i] = m
	}
	return out
}

// The same samples judged from segments and from memory come to the same
// verdicts with the same exact figures: point estimates and order-statistic
// bounds read off the exact samples either way; the bootstrap draws its
// replicates from the same bucket counts (with a seed of its own, since
// the inputs' digest covers segments by their digests), so its bounds
// agree to its own resolution.
func TestSegmentedSamplesJudgedAsInMemory(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(71, 72))
	cand := lognormalMeasurements(r, MetricTTFT, "chat", 2, 4000, 100, 0.5, 1)
	base := lognormalMeasurements(r, MetricTTFT, "chat", 2, 4000, 100, 0.5, 1.02)
	gates := gateSet(
		absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 400, "ms"),
		absoluteCriterion(MetricTTFT, StatP50, LessOrEqual, 101, "ms"),
		absoluteCriterion(MetricTTFT, StatMean, LessOrEqual, 130, "ms"),
		relativeCriterion(MetricTTFT, StatP99, LessOrEqual, 5),
		relativeCriterion(MetricTTFT, StatMean, LessOrEqual, 5),
	)
	mem, err := Evaluate(EvaluationInput{Gates: gates, Candidate: cand, Baseline: base})
	require.NoError(t, err)
	seg, err := Evaluate(EvaluationInput{Gates: gates, Candidate: segmented(t, cand), Baseline: segmented(t, base)})
	require.NoError(t, err)
	require.NotEqual(t, mem.Inputs.CandidateDigest, seg.Inputs.CandidateDigest)
	require.Equal(t, mem.Verdict, seg.Verdict)
	for i, mc := range mem.Criteria {
		ms, ss := mc.Series[0], seg.Criteria[i].Series[0]
		require.Equal(t, ms.Verdict, ss.Verdict, mc.Name)
		require.Equal(t, ms.Candidate.N, ss.Candidate.N, mc.Name)
		require.InEpsilon(t, *ms.Candidate.Value, *ss.Candidate.Value, 1e-12, mc.Name)
		require.Equal(t, len(ms.Candidate.PerRepetition), len(ss.Candidate.PerRepetition))
		for k := range ms.Candidate.PerRepetition {
			require.InEpsilon(t, ms.Candidate.PerRepetition[k], ss.Candidate.PerRepetition[k], 1e-12, mc.Name)
		}
		require.InEpsilon(t, *ms.Estimate, *ss.Estimate, 1e-9, mc.Name)
		if mc.Mode == Relative { // percentage points
			require.InDelta(t, *ms.Upper, *ss.Upper, 0.5, mc.Name)
		} else {
			require.InEpsilon(t, *ms.Upper, *ss.Upper, 0.01, mc.Name)
		}
		require.Equal(t, ms.Method, ss.Method, mc.Name)
	}
}

// A drift criterion on samples kept in segments says that their windows
// are not cut, rather than judging anything else.
func TestDriftOnSegmentedSamplesSaysWhy(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 10))
	m := soakMeasurement(r, 600, 20, func(int) float64 { return 1 })
	m = segmented(t, []Measurement{m})[0]
	m.SentIndex = nil
	sr := evaluate(t, EvaluationInput{Gates: gateSet(driftCriterion(StatP99, 5, 2*time.Minute)), Candidate: []Measurement{m}}).Criteria[0].Series[0]
	require.Equal(t, Inconclusive, sr.Verdict)
	require.Equal(t, reasonNoSendTimes, sr.Reason)
	require.Contains(t, sr.Explanation, "kept outside memory in the order their records came")
}
