package acceptance

import "fmt"

// RuleText writes a criterion's rule for pages, with the metric's label
// rather than its id: "p99 TTFT ≤ 2000 ms (95 % confidence)", "output
// token throughput ≥ +25 % against the baseline (95 % confidence)". It is
// the one sentence that carries a criterion's numbers, so that they are
// never stale.
func RuleText(metric string, st Statistic, mode CriterionMode, cmp Comparator, threshold float64, unit string, confidence float64) string {
	name := metric
	if m, ok := LookupMetric(metric); ok {
		name = statLabel(st, m)
	} else if st != StatRate {
		name = string(st) + " " + metric
	}
	op := "≤"
	if cmp == GreaterOrEqual {
		op = "≥"
	}
	var rule string
	switch mode {
	case Relative:
		rule = fmt.Sprintf("%s %s %s against the baseline", name, op, fmtPct(threshold))
	case Isolation:
		rule = fmt.Sprintf("%s %s %s beside the aggressor against alone", name, op, fmtPct(threshold))
	case Drift:
		rule = fmt.Sprintf("%s %s %s in the last window against the first", name, op, fmtPct(threshold))
	default:
		rule = fmt.Sprintf("%s %s %s %s", name, op, fmtNum(threshold), unit)
	}
	if confidence > 0 {
		rule += " (" + fmtConf(confidence) + " confidence)"
	}
	return rule
}

// Rule is the criterion's rule, its stop-loss line and its severity.
func (c Criterion) Rule() string {
	rule := RuleText(c.Metric, c.Statistic, c.Mode, c.Comparator, c.Threshold, c.Unit, c.Confidence) + withinRunText(c)
	if c.StopLoss != nil {
		if c.Mode == Relative {
			rule += "; stop-loss at " + fmtPct(*c.StopLoss)
		} else {
			rule += "; stop-loss at " + fmtNum(*c.StopLoss) + " " + c.Unit
		}
	}
	if c.Severity != "" {
		rule += "; " + string(c.Severity)
	}
	return rule
}
