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

// Bootstrap sizes of a comparison's intervals. The seeds derive from the
// inputs and the size, so the same pair always shows the same numbers.
const (
	// StoredResamples is the size of the comparison with the baseline
	// computed at ingest and stored with the chart data.
	StoredResamples = acceptance.DefaultResamples
	// ViewResamples is the size of a comparison computed per page view
	// (the compare page, whose pairs are the viewer's choice): smaller,
	// so that the page answers quickly.
	ViewResamples = 2000
)

// Compared is one statistic of one series of a comparison: the gate
// engine's estimate and interval of the relative difference.
type Compared struct {
	Metric    string
	Statistic acceptance.Statistic
	acceptance.SeriesResult
}

// Compare compares the candidate's statistics asked for (in the step when
// step is not "") with the baseline's by the gate engine's rules for a
// relative criterion (acceptance.Evaluate, ComparisonGates): the relative
// difference with a percentile-bootstrap interval (two stages:
// repetitions, then samples) of the given number of resamples. It returns
// one result per statistic and series.
func Compare(cand, base []acceptance.Measurement, criteria []MetricStatistic, step string, resamples int) ([]Compared, error) {
	if len(criteria) == 0 {
		return nil, nil
	}
	ev, err := acceptance.Evaluate(acceptance.EvaluationInput{Gates: ComparisonGates(criteria, step), Candidate: cand, Baseline: base, Resamples: resamples})
	if err != nil {
		return nil, err
	}
	var out []Compared
	for _, cr := range ev.Criteria {
		for _, s := range cr.Series {
			out = append(out, Compared{Metric: cr.Metric, Statistic: cr.Statistic, SeriesResult: s})
		}
	}
	return out, nil
}

// CompareSeries compares one series (step and level) of two runs'
// aggregates, the statistics asked for, by Compare on the measurements
// rebuilt from the aggregates (SeriesMeasurements).
func CompareSeries(cand, base Aggregates, criteria []MetricStatistic, step, level string, resamples int) (map[MetricStatistic]acceptance.SeriesResult, error) {
	cmp, err := Compare(SeriesMeasurements(cand, step, level), SeriesMeasurements(base, step, level), criteria, step, resamples)
	if err != nil {
		return nil, err
	}
	out := map[MetricStatistic]acceptance.SeriesResult{}
	for _, c := range cmp {
		if c.Level == level {
			out[MetricStatistic{c.Metric, c.Statistic}] = c.SeriesResult
		}
	}
	return out, nil
}

// SeriesMeasurements rebuilds a run's measurements of one series from its
// aggregates: log histograms for distributions (≤ 0.1 % bucket error) and
// each repetition's value for rates.
func SeriesMeasurements(a Aggregates, step, level string) []acceptance.Measurement {
	var out []acceptance.Measurement
	for _, h := range a.Hist {
		if h.Step == step && h.Level == level {
			out = append(out, HistogramMeasurement(h))
		}
	}
	for _, st := range a.Summary {
		if st.Step != step || st.Level != level || !st.Rate {
			continue
		}
		for i, v := range st.PerRepetition {
			out = append(out, acceptance.Measurement{Metric: st.Metric, Step: step, Level: level, Repetition: i + 1, Values: []float64{v}})
		}
	}
	return out
}

// comparePercentiles compares every percentile of the latency metrics with
// the baseline (Compare, StoredResamples): the comparison stored at ingest.
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
	cmp, err := Compare(cand, base, criteria, "", StoredResamples)
	if err != nil || cmp == nil {
		return nil, err
	}
	out := map[string][]PercentileComparison{}
	for _, c := range cmp {
		key := KeyPercentiles(c.Step, c.Level)
		out[key] = append(out[key], comparisonOf(c))
	}
	return out, nil
}

// comparisonOf reads one compared series.
func comparisonOf(c Compared) PercentileComparison {
	pc := PercentileComparison{Metric: c.Metric, Statistic: string(c.Statistic), Confidence: pctConfidence, Interval: c.Interval,
		DiffPct: c.Estimate, LowerPct: c.Lower, UpperPct: c.Upper}
	pc.Candidate = c.Candidate.Value
	if c.Baseline != nil {
		pc.Baseline = c.Baseline.Value
	}
	if c.Lower == nil || c.Upper == nil {
		pc.LowerPct, pc.UpperPct = nil, nil
		pc.Why = c.Explanation
	}
	return pc
}
