package acceptance

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A run another run measured beside is never judged PASS, nor FAIL: its
// numbers are not evidence either way. The criteria keep their own
// verdicts, the overall one says why it is INCONCLUSIVE, and the
// canonical (signed) evaluation names what contaminated it.
func TestContaminatedRunIsNeverAPass(t *testing.T) {
	t.Parallel()
	ms := []Measurement{{Metric: MetricTTFT, Step: "decode", Repetition: 1, Values: sequence(1000)}}
	note := "run #7 was active on the host from 10:00:01 to 10:00:09 UTC (seen by this run's probe)"
	for limit, criteria := range map[float64]Verdict{5000: Pass, 500: Fail} {
		gates := gateSet(absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, limit, "ms"))
		clean := evaluate(t, EvaluationInput{Gates: gates, Candidate: ms})
		require.Equal(t, criteria, clean.Verdict)
		require.Empty(t, clean.Contamination)

		ev := evaluate(t, EvaluationInput{Gates: gates, Candidate: ms, Contamination: []string{note}})
		require.Equal(t, Inconclusive, ev.Verdict, "criteria said %s", criteria)
		require.Equal(t, criteria, ev.Criteria[0].Verdict, "the criterion keeps its own verdict")
		require.Equal(t, []string{note}, ev.Contamination)
		require.Contains(t, ev.Explanation, "Contaminated: another run measured on the host")
		require.Contains(t, ev.Explanation, note)
		require.Contains(t, ev.Explanation, "The criteria alone said "+string(criteria))
		canon, err := ev.CanonicalJSON()
		require.NoError(t, err)
		require.Contains(t, string(canon), `"contamination":["run #7 was active`)
	}
	// An INCOMPARABLE stays INCOMPARABLE.
	v, _ := contaminated(Evaluation{Verdict: Incomparable, Contamination: []string{note}})
	require.Equal(t, Incomparable, v)
}
