package web

import (
	"context"
	"fmt"
	"io"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/service/report"
)

// RenderReport writes a signed run's human report: service/report's
// Renderer, wired in main.
func RenderReport(ctx context.Context, w io.Writer, c report.Contents) error {
	d := ReportData{Run: c.Run, Program: c.Program, Vendor: c.Vendor, Customer: c.Customer, Evaluation: c.Evaluation,
		Metrics: withBaselineRows(MetricRowsFrom(c.Measurements), nil), ProfileYAML: c.ProfileYAML, GateYAML: c.GateYAML, Artifacts: c.Artifacts,
		KeyID: c.KeyID, SignedAt: c.SignedAt, StopLoss: c.StopLoss, ClientFlags: ClientFlagsFrom(c.Measurements)}
	if c.HostFacts != nil {
		d.Facts = SummarizeFacts(*c.HostFacts)
	}
	if b := c.Baseline; b != nil {
		d.BaselineName = fmt.Sprintf("baseline #%d", b.RunID)
		d.Metrics = withBaselineRows(MetricRowsFrom(c.Measurements), MetricRowsFrom(b.Measurements))
		if b.HostFacts != nil {
			d.BaselineFacts = SummarizeFacts(*b.HostFacts)
		}
	}
	if c.Charts != nil {
		var base *chartdata.Aggregates
		if c.Baseline != nil {
			base = c.Baseline.Charts
		}
		d.Pooled = PooledRows(MetricRowsFrom(c.Measurements), *c.Charts, base, d.BaselineName)
	}
	d.FactRows = factRows(d.Facts, d.BaselineFacts)
	if len(c.Hosts) > 0 {
		// Every host's facts are in the hosts' section: no one host's stands
		// beside the baseline's.
		d.FactRows = nil
		d.Hosts, d.HostFactRows = reportHosts(c.Hosts)
	}
	if c.Evaluation != nil {
		d.CriterionFigures = criterionFigures(*c.Evaluation, c.Baseline)
	}
	figures, err := reportFigures(c)
	if err != nil {
		return err
	}
	d.Figures = figures
	return Report(d).Render(ctx, w)
}

var _ report.Renderer = RenderReport

// ReportMetricRow is a row of the report's measurements table: the run's,
// or the baseline's (shown right after the run's of the same series).
type ReportMetricRow struct {
	MetricRow
	Baseline bool
}

// withBaselineRows puts the baseline's rows of each metric, step and
// level right after the run's, marked as the baseline's.
func withBaselineRows(run, base []MetricRow) []ReportMetricRow {
	type key struct{ metric, step, level string }
	byKey := map[key][]ReportMetricRow{}
	for _, b := range base {
		k := key{b.Metric, b.Step, b.Level}
		byKey[k] = append(byKey[k], ReportMetricRow{MetricRow: b, Baseline: true})
	}
	out := make([]ReportMetricRow, 0, len(run)+len(base))
	for i, r := range run {
		out = append(out, ReportMetricRow{MetricRow: r})
		next := i + 1
		if next == len(run) || run[next].Metric != r.Metric || run[next].Step != r.Step || run[next].Level != r.Level {
			out = append(out, byKey[key{r.Metric, r.Step, r.Level}]...)
		}
	}
	return out
}

// ReportFactRow is one line of the host facts table: the run's value and the
// baseline's.
type ReportFactRow struct {
	Label, Run, Baseline string
	Differs              bool
}

func factRows(run, base *FactsSummary) []ReportFactRow {
	var out []ReportFactRow
	index := map[string]int{}
	if run != nil {
		for _, l := range run.Lines {
			index[l.Label] = len(out)
			out = append(out, ReportFactRow{Label: l.Label, Run: l.Value})
		}
	}
	if base != nil {
		for _, l := range base.Lines {
			i, ok := index[l.Label]
			if !ok {
				index[l.Label] = len(out)
				out = append(out, ReportFactRow{Label: l.Label, Baseline: l.Value})
				continue
			}
			out[i].Baseline = l.Value
		}
		for i := range out {
			out[i].Differs = out[i].Run != out[i].Baseline
		}
	}
	return out
}

// CriterionFigure is a criterion's statistic on the run and on the
// baseline, on the series that decided its verdict.
type CriterionFigure struct {
	Run, Baseline string
}

// criterionFigures reads each criterion's figures: the run's from the
// verdict's deciding series; the baseline's from the comparison (relative
// criteria) or the baseline's own statistics (absolute ones).
func criterionFigures(e acceptance.Evaluation, base *report.BaselineContents) []CriterionFigure {
	out := make([]CriterionFigure, len(e.Criteria))
	for i, c := range e.Criteria {
		s, ok := decidingSeries(c)
		if !ok {
			continue
		}
		unit := " " + c.Unit
		if c.Mode == acceptance.Relative {
			unit = ""
			if m, ok := acceptance.LookupMetric(c.Metric); ok {
				unit = " " + string(m.Unit)
			}
		}
		if s.Candidate.Value != nil {
			out[i].Run = Num(*s.Candidate.Value) + unit
		}
		switch {
		case s.Baseline != nil && s.Baseline.Value != nil:
			out[i].Baseline = Num(*s.Baseline.Value) + unit
		case base != nil && base.Charts != nil:
			if v, ok := base.Charts.Stat(c.Metric, s.Step, s.Level, string(c.Statistic)); ok {
				out[i].Baseline = Num(v) + unit
			}
		}
	}
	return out
}

func decidingSeries(c acceptance.CriterionResult) (acceptance.SeriesResult, bool) {
	for _, s := range c.Series {
		if c.Worst == nil || (s.Step == c.Worst.Step && s.Level == c.Worst.Level) {
			return s, true
		}
	}
	return acceptance.SeriesResult{}, false
}
