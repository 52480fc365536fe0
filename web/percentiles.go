package web

import (
	"fmt"
	"strings"

	"github.com/accordlab/accord/acceptance/chartdata"
)

// PooledRow is one metric in one series (step × level) over every
// repetition pooled, the figures the gate engine judges: the run's, or its
// baseline's right after it.
type PooledRow struct {
	Metric, Name, Unit, Step, Level string
	// Who is "this run" or "baseline run #N".
	Who      string
	Baseline bool
	// Has: the run (or baseline) has pooled figures here; Why says why not.
	Has   bool
	Why   string
	Stats chartdata.SeriesStats
	// Also names the metrics with the same figures in this series, shown
	// once, in this row (see FoldAlike).
	Also []string
	// First: the first row of its metric and series (the run's).
	First bool
}

// pooledStats are the pooled table's statistic columns, in order.
var pooledStats = []string{"p50", "p90", "p95", "p99", "p99.9", "max", "mean"}

// Figures are the row's cells after n, as the page writes them: a rate's
// mean over repetitions alone, "–" for a statistic a tool's summary did
// not give.
func (r PooledRow) Figures() []string {
	if !r.Has {
		return nil
	}
	if r.Stats.Rate {
		return []string{Num(r.Stats.Mean)}
	}
	out := make([]string, len(pooledStats))
	for i, st := range pooledStats {
		out[i] = "–"
		if v, ok := r.Stats.Stat(st); ok {
			out[i] = Num(v)
		}
	}
	return out
}

// RepetitionsText says what a rate's pooled figure is made of: "mean of
// 3 repetitions: 27.1, 28.5, 28.0".
func (r PooledRow) RepetitionsText() string {
	if !r.Stats.Rate || len(r.Stats.PerRepetition) < 2 {
		return ""
	}
	parts := make([]string, len(r.Stats.PerRepetition))
	for i, v := range r.Stats.PerRepetition {
		parts[i] = Num(v)
	}
	return fmt.Sprintf("mean of %d repetitions: %s", len(parts), strings.Join(parts, ", "))
}

// PooledRows lays out the pooled figures of the metrics the per-repetition
// rows hold, in their order (MetricRowsFrom's), each of the run's rows
// followed by its baseline's when the run has a baseline (baseName not
// ""): from the run's chart data's summary and the baseline's (nil: it
// has none).
func PooledRows(rows []MetricRow, run chartdata.Aggregates, base *chartdata.Aggregates, baseName string) []PooledRow {
	type key struct{ metric, step, level string }
	seen := map[key]bool{}
	var out []PooledRow
	for _, m := range rows {
		k := key{m.Metric, m.Step, m.Level}
		if seen[k] {
			continue
		}
		seen[k] = true
		r := PooledRow{Metric: m.Metric, Name: m.Name, Unit: m.Unit, Step: m.Step, Level: m.Level, Who: "this run", First: true}
		r.Stats, r.Has = run.Stats(m.Metric, m.Step, m.Level)
		if !r.Has {
			r.Why = "not pooled: see the repetitions below"
		}
		out = append(out, r)
		if baseName == "" {
			continue
		}
		b := PooledRow{Metric: m.Metric, Name: m.Name, Unit: m.Unit, Step: m.Step, Level: m.Level, Who: baseName, Baseline: true}
		switch {
		case base == nil:
			b.Why = "no baseline figures: the baseline has no results kept for charts"
		default:
			if b.Stats, b.Has = base.Stats(m.Metric, m.Step, m.Level); !b.Has {
				b.Why = "no baseline figures for this step and metric"
			}
		}
		out = append(out, b)
	}
	return out
}

// FoldAlike shows once the metrics of a series whose every figure is the
// same to the digits shown: pooled, the baseline's and each repetition's.
// They are different metrics that coincide by how the run went, not rows
// repeated by mistake: TTFT and TTFT to the first content token when no
// response reasons or calls a tool before its content; the latencies from
// the intended send time and from the actual one when every request is
// sent on time (the send delay is microseconds in a closed loop). The
// first in the catalog's order stays and names the others (Also); the
// table says why. Rates are left alone: two single numbers (an error rate
// and a cache hit ratio both 0) agree by coincidence.
func FoldAlike(pooled []PooledRow, reps []MetricRow) ([]PooledRow, []MetricRow) {
	type key struct{ step, level, metric string }
	figures := map[key][]string{}
	distribution := map[key]bool{}
	var order []key
	for _, r := range pooled {
		k := key{r.Step, r.Level, r.Metric}
		if _, ok := figures[k]; !ok {
			order = append(order, k)
		}
		figures[k] = append(figures[k], r.Who, r.Unit, fmt.Sprint(r.Has, r.Stats.N), strings.Join(r.Figures(), "|"))
		if r.First {
			distribution[k] = r.Has && !r.Stats.Rate && r.Stats.N > 0 && !r.Stats.Summary
		}
	}
	for _, m := range reps {
		k := key{m.Step, m.Level, m.Metric}
		if _, ok := figures[k]; !ok {
			order = append(order, k)
			distribution[k] = !m.Rate && m.Summary.N > 0
		}
		distribution[k] = distribution[k] && !m.Rate && m.Summary.N > 0 && len(m.Tool) == 0 && len(m.Summary.ToolFigures) == 0
		figures[k] = append(figures[k], fmt.Sprint(m.Repetition), m.Unit, strings.Join(repetitionFigures(m), "|"))
	}
	into := map[key]key{} // folded → kept
	kept := map[string]key{}
	for _, k := range order {
		if !distribution[k] {
			continue
		}
		id := k.step + "\x00" + k.level + "\x00" + strings.Join(figures[k], "\x00")
		if first, ok := kept[id]; ok {
			into[k] = first
			continue
		}
		kept[id] = k
	}
	if len(into) == 0 {
		return pooled, reps
	}
	names := map[key]string{}
	for _, r := range pooled {
		names[key{r.Step, r.Level, r.Metric}] = r.Name
	}
	for _, m := range reps {
		names[key{m.Step, m.Level, m.Metric}] = m.Name
	}
	also := map[key][]string{}
	for _, k := range order {
		if first, ok := into[k]; ok {
			also[first] = append(also[first], names[k])
		}
	}
	var outPooled []PooledRow
	for _, r := range pooled {
		k := key{r.Step, r.Level, r.Metric}
		if _, folded := into[k]; folded {
			continue
		}
		if r.First {
			r.Also = also[k]
		}
		outPooled = append(outPooled, r)
	}
	var outReps []MetricRow
	for _, m := range reps {
		k := key{m.Step, m.Level, m.Metric}
		if _, folded := into[k]; folded {
			continue
		}
		if m.First {
			m.Also = also[k]
		}
		outReps = append(outReps, m)
	}
	return outPooled, outReps
}

// repetitionFigures are a per-repetition row's cells as the page writes
// them.
func repetitionFigures(m MetricRow) []string {
	if m.Rate {
		return []string{fmt.Sprint(m.Summary.N), Num(m.Summary.Mean)}
	}
	s := m.Summary
	return []string{fmt.Sprint(s.N), Num(s.P50), Num(s.P90), Num(s.P95), Num(s.P99), Num(s.P999), Num(s.Max), Num(s.Mean)}
}
