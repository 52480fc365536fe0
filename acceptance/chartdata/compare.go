package chartdata

import (
	"slices"
	"strings"

	"github.com/accordlab/accord/acceptance"
)

// MetricStatistic is one statistic of one metric, as a comparison asks
// for it.
type MetricStatistic struct {
	Metric    string
	Statistic acceptance.Statistic
}

// ComparisonGates is a gate set of relative, advisory "≤ +0 %" criteria,
// one per metric and statistic asked for (in the step when step is not
// ""), made only to obtain the engine's estimates and intervals of the
// relative difference: each criterion asks for a one-sided bound at
// 97.5 %, so the pair is a two-sided 95 % interval.
func ComparisonGates(criteria []MetricStatistic, step string) acceptance.GateSetSpec {
	g := acceptance.GateSetSpec{SchemaVersion: acceptance.GateSchemaVersion, Name: "comparison", Correction: "none"}
	for _, c := range criteria {
		g.Criteria = append(g.Criteria, acceptance.Criterion{
			Name:   strings.ReplaceAll(c.Metric+"-"+string(c.Statistic), ".", "_"),
			Metric: c.Metric, Statistic: c.Statistic, Mode: acceptance.Relative, Comparator: acceptance.LessOrEqual,
			Threshold: 0, Unit: "%", Confidence: 1 - (1-pctConfidence)/2, Severity: acceptance.Advisory, Step: step,
		})
	}
	return g.Normalized()
}

// comparePercentiles compares every percentile of the latency metrics with
// the baseline by the gate engine's own rules for a relative criterion
// (acceptance.Evaluate): the relative difference of the pooled
// nearest-rank percentile, with a percentile-bootstrap interval (two
// stages: repetitions, then samples; 10,000 resamples, seeded by the
// inputs).
func comparePercentiles(cand, base []acceptance.Measurement) (map[string][]PercentileComparison, error) {
	has := func(ms []acceptance.Measurement, metric string) bool {
		return slices.ContainsFunc(ms, func(m acceptance.Measurement) bool { return m.Metric == metric })
	}
	var criteria []MetricStatistic
	for _, metric := range PercentileMetrics {
		meta, known := acceptance.LookupMetric(metric)
		if !known || !has(cand, metric) || !has(base, metric) {
			continue
		}
		for _, st := range PercentileStatistics {
			if st.AppliesTo(meta) {
				criteria = append(criteria, MetricStatistic{metric, st})
			}
		}
	}
	if len(criteria) == 0 {
		return nil, nil
	}
	ev, err := acceptance.Evaluate(acceptance.EvaluationInput{Gates: ComparisonGates(criteria, ""), Candidate: cand, Baseline: base, Resamples: acceptance.DefaultResamples})
	if err != nil {
		return nil, err
	}
	out := map[string][]PercentileComparison{}
	for _, cr := range ev.Criteria {
		for _, s := range cr.Series {
			key := KeyPercentiles(s.Step, s.Level)
			out[key] = append(out[key], comparisonOf(cr, s))
		}
	}
	return out, nil
}

// comparisonOf reads one series of a comparison criterion.
func comparisonOf(cr acceptance.CriterionResult, s acceptance.SeriesResult) PercentileComparison {
	pc := PercentileComparison{Metric: cr.Metric, Statistic: string(cr.Statistic), Confidence: pctConfidence, Interval: s.Interval,
		DiffPct: s.Estimate, LowerPct: s.Lower, UpperPct: s.Upper}
	pc.Candidate = s.Candidate.Value
	if s.Baseline != nil {
		pc.Baseline = s.Baseline.Value
	}
	if s.Lower == nil || s.Upper == nil {
		pc.LowerPct, pc.UpperPct = nil, nil
		pc.Why = s.Explanation
	}
	return pc
}
