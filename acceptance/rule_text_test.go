package acceptance

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCriterionRuleNamesTheMetricAndItsNumbers(t *testing.T) {
	t.Parallel()
	gates := map[string]Criterion{}
	for _, tm := range GateSetTemplates() {
		for _, c := range tm.Spec.Criteria {
			gates[c.Name] = c
		}
	}
	require.Equal(t, "output token throughput ≥ +25 % against the baseline (95 % confidence); stop-loss at −10 %; blocking", gates["throughput-uplift"].Rule())
	require.Equal(t, "p99 TTFT ≤ 2,000 ms (95 % confidence); stop-loss at 4,000 ms; blocking", gates["ttft-p99"].Rule())
	// A changed threshold is what the rule says; the help says why, with no figure to go stale.
	c := gates["throughput-uplift"]
	c.Threshold = 30
	require.Contains(t, c.Rule(), "≥ +30 % against the baseline")
	for _, tm := range GateSetTemplates() {
		for _, c := range tm.Spec.Criteria {
			require.NotRegexp(t, `[+−-]?\d+(\.\d+)? ?(%|ms|s\b|µs)`, c.Help, "template %s criterion %s", tm.ID, c.Name)
		}
	}
	require.Equal(t, "p99 some_new_metric ≤ 5 ms", RuleText("some_new_metric", StatP99, Absolute, LessOrEqual, 5, "ms", 0))
}
