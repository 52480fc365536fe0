package acceptance

import (
	"fmt"
	"strings"
	"time"
)

// InterimValue summarises one metric over an interim window of a running
// step. The server converts the probe's interim events into it (acceptance
// cannot import the probe's wire package).
type InterimValue struct {
	N    int64   `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	// Rate is set for rate metrics (throughputs, error rate) over the window.
	Rate *float64 `json:"rate,omitempty"`
}

// InterimSnapshot is one interim window of one step (and sweep level).
type InterimSnapshot struct {
	Step       string `json:"step"`
	Level      string `json:"level,omitempty"`
	Repetition int    `json:"repetition"`
	// Seq is the event's sequence number and At its time, both recorded in
	// a breach (the monitor never reads a clock).
	Seq int64     `json:"seq"`
	At  time.Time `json:"at"`
	// WindowSec is the window's length: it ended at At.
	WindowSec float64                 `json:"window_sec,omitempty"`
	Metrics   map[string]InterimValue `json:"metrics"`
}

// BaselinePoint is a baseline run's point value of one statistic in one
// series, for relative stop-loss lines.
type BaselinePoint struct {
	Metric    string    `json:"metric"`
	Statistic Statistic `json:"statistic"`
	Step      string    `json:"step"`
	Level     string    `json:"level,omitempty"`
	Value     float64   `json:"value"`
}

// StopLossBreach says which stop-loss line was crossed, in how many
// consecutive windows, with the values of each.
type StopLossBreach struct {
	Criterion  int           `json:"criterion"`
	Name       string        `json:"name"`
	Metric     string        `json:"metric"`
	Statistic  Statistic     `json:"statistic"`
	Mode       CriterionMode `json:"mode"`
	Comparator Comparator    `json:"comparator"`
	// Interim is the interim field compared (p99, mean, rate …); Note says
	// when it is the nearest available rather than the statistic itself.
	// "final" marks a line crossed by the final evaluation's estimate
	// (FinalStopLoss), with no consecutive windows.
	Interim string `json:"interim"`
	Note    string `json:"note,omitempty"`
	// Line is the stop-loss line in Unit (canonical unit, or % for relative).
	Line        float64       `json:"line"`
	Unit        string        `json:"unit"`
	Consecutive int           `json:"consecutive"`
	Breaches    []BreachPoint `json:"breaches"`
	Explanation string        `json:"explanation"`
}

// BreachPoint is one interim window past the line.
type BreachPoint struct {
	Seq        int64     `json:"seq"`
	At         time.Time `json:"at"`
	Step       string    `json:"step"`
	Level      string    `json:"level,omitempty"`
	Repetition int       `json:"repetition"`
	N          int64     `json:"n"`
	// Value is the interim statistic; for relative lines Baseline is the
	// baseline's value and Relative the change in percent.
	Value    float64  `json:"value"`
	Baseline *float64 `json:"baseline,omitempty"`
	Relative *float64 `json:"relative,omitempty"`
}

// StopLossMonitor watches interim snapshots of a run for the stop-loss
// lines of a gate set: k (StopLossConsecutive) consecutive windows past the
// same criterion's line trigger. A window that carries the criterion's
// metric and is not past the line resets its count; windows without the
// metric (another step, or no samples) leave it as it is. Once triggered,
// the monitor stays triggered. It is not safe for concurrent use.
type StopLossMonitor struct {
	k        int
	lines    []stopLine
	baseline map[baselineKey]float64
	tripped  *StopLossBreach
}

type baselineKey struct {
	metric string
	stat   Statistic
	series SeriesKey
}

type stopLine struct {
	index  int
	c      Criterion
	m      Metric
	line   float64
	field  Statistic // the interim statistic compared
	note   string
	recent []BreachPoint
}

// NewStopLossMonitor builds a monitor for the criteria with a stop-loss
// line. baseline gives the baseline's point values for relative lines (see
// BaselinePoints); without them, relative lines are not checked.
func NewStopLossMonitor(g GateSetSpec, baseline []BaselinePoint) (*StopLossMonitor, error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("stop-loss: gate set: %w", err)
	}
	g = g.Normalized()
	mon := &StopLossMonitor{k: g.StopLossConsecutive, baseline: map[baselineKey]float64{}}
	for i, c := range g.Criteria {
		line, ok, err := CanonicalStopLoss(c)
		if err != nil {
			return nil, fmt.Errorf("stop-loss: %w", err)
		}
		if !ok {
			continue
		}
		m, _ := LookupMetric(c.Metric)
		field, note := interimStatistic(c.Statistic)
		mon.lines = append(mon.lines, stopLine{index: i, c: c, m: m, line: line, field: field, note: note})
	}
	for _, b := range baseline {
		mon.baseline[baselineKey{b.Metric, b.Statistic, SeriesKey{Step: b.Step, Level: b.Level}}] = b.Value
	}
	return mon, nil
}

// Lines is the number of stop-loss lines watched.
func (m *StopLossMonitor) Lines() int { return len(m.lines) }

// StopLossLine is a stop-loss line as it applies to one interim window,
// for drawing: the interim statistic compared and the line in the metric's
// canonical unit (a relative line made absolute with the baseline's value
// of the window's series).
type StopLossLine struct {
	Name       string
	Metric     string
	Statistic  Statistic // the interim statistic compared (p95 for p90 …)
	Comparator Comparator
	Value      float64
	Relative   bool
}

// LinesAt returns the lines that apply to a window of step and level, in
// the gate set's order; a relative line only where the baseline has the
// series (as Observe checks it). It does not change the monitor.
func (m *StopLossMonitor) LinesAt(step, level string) []StopLossLine {
	var out []StopLossLine
	for _, l := range m.lines {
		if l.c.Step != "" && l.c.Step != step {
			continue
		}
		sl := StopLossLine{Name: l.c.Name, Metric: l.c.Metric, Statistic: l.field, Comparator: l.c.Comparator, Value: l.line}
		if l.c.Mode == Relative {
			b, ok := m.baseline[baselineKey{l.c.Metric, l.field, SeriesKey{Step: step, Level: level}}]
			if !ok || b == 0 {
				continue
			}
			// x = 100·(v−b)/b is past L exactly when v is past b·(1+L/100)
			// (b > 0: values and baselines of these metrics are positive).
			sl.Value, sl.Relative = b*(1+l.line/100), true
		}
		out = append(out, sl)
	}
	return out
}

// interimStatistic maps a criterion's statistic onto what interim windows
// carry: p50, p95, p99, mean, max and rate directly; p90 and p99.9 onto
// the nearest available, with a note.
func interimStatistic(s Statistic) (Statistic, string) {
	switch s {
	case StatP90:
		return StatP95, "interim windows carry no p90; the nearest, p95, is compared (it is higher, so a ≤ line is crossed sooner)"
	case StatP999:
		return StatP99, "interim windows carry no p99.9; the nearest, p99, is compared (it is lower, so a ≤ line is crossed later)"
	}
	return s, ""
}

func (v InterimValue) statistic(s Statistic) (float64, bool) {
	switch s {
	case StatP50:
		return v.P50, v.N > 0
	case StatP95:
		return v.P95, v.N > 0
	case StatP99:
		return v.P99, v.N > 0
	case StatMean:
		return v.Mean, v.N > 0
	case StatMax:
		return v.Max, v.N > 0
	case StatRate:
		if v.Rate == nil {
			return 0, false
		}
		return *v.Rate, true
	}
	return 0, false
}

// Observe feeds one snapshot. It returns the breach and true when some
// line has now been crossed k times in a row (and on every call after).
func (m *StopLossMonitor) Observe(s InterimSnapshot) (*StopLossBreach, bool) {
	if m.tripped != nil {
		return m.tripped, true
	}
	for i := range m.lines {
		l := &m.lines[i]
		if l.c.Step != "" && l.c.Step != s.Step {
			continue
		}
		iv, ok := s.Metrics[l.c.Metric]
		if !ok {
			continue
		}
		v, ok := iv.statistic(l.field)
		if !ok {
			continue
		}
		bp := BreachPoint{Seq: s.Seq, At: s.At, Step: s.Step, Level: s.Level, Repetition: s.Repetition, N: iv.N, Value: v}
		x := v
		if l.c.Mode == Relative {
			b, ok := m.baseline[baselineKey{l.c.Metric, l.field, SeriesKey{Step: s.Step, Level: s.Level}}]
			if !ok || b == 0 {
				continue
			}
			x = 100 * (v - b) / b
			bp.Baseline, bp.Relative = &b, &x
		}
		if !PastLine(l.c.Comparator, x, l.line) {
			l.recent = l.recent[:0]
			continue
		}
		l.recent = append(l.recent, bp)
		if len(l.recent) >= m.k && m.tripped == nil {
			m.tripped = l.breach(m.k)
		}
	}
	return m.tripped, m.tripped != nil
}

// PastLine: x is on the wrong side of a stop-loss line (above a line that
// values must stay at or below, or below one they must stay at or above).
func PastLine(c Comparator, x, line float64) bool {
	return (c == LessOrEqual && x > line) || (c == GreaterOrEqual && x < line)
}

func (l *stopLine) breach(k int) *StopLossBreach {
	unit := string(l.m.Unit)
	if l.c.Mode == Relative {
		unit = "%"
	}
	b := &StopLossBreach{
		Criterion: l.index, Name: l.c.Name, Metric: l.c.Metric, Statistic: l.c.Statistic, Mode: l.c.Mode,
		Comparator: l.c.Comparator, Interim: string(l.field), Note: l.note, Line: l.line, Unit: unit,
		Consecutive: k, Breaches: append([]BreachPoint(nil), l.recent[len(l.recent)-k:]...),
	}
	vals := make([]string, len(b.Breaches))
	for i, p := range b.Breaches {
		if p.Relative != nil {
			vals[i] = fmtPct(*p.Relative)
		} else {
			vals[i] = fmtValue(p.Value, l.m.Unit)
		}
	}
	lineText := fmtValue(l.line, l.m.Unit)
	if l.c.Mode == Relative {
		lineText = fmtPct(l.line) + " against the baseline"
	}
	first, last := b.Breaches[0], b.Breaches[len(b.Breaches)-1]
	where := seriesLabel(SeriesKey{Step: last.Step, Level: last.Level})
	b.Explanation = fmt.Sprintf("Stop-loss: %s crossed the %s line in %d consecutive interim windows (%s; %s, %s to %s).",
		statLabel(l.field, l.m), lineText, k, joinList(vals), where,
		first.At.UTC().Format(time.RFC3339), last.At.UTC().Format(time.RFC3339))
	if l.note != "" {
		b.Explanation += " Note: " + strings.TrimSuffix(l.note, ".") + "."
	}
	return b
}

// BaselinePoints computes the baseline's point values that the relative
// stop-loss lines of g compare with: for each such criterion, each series
// of the baseline that has its metric, the statistic interim windows carry
// (p99 for p99.9, p95 for p90), from samples where there are any, else from
// the tool's summary.
func BaselinePoints(g GateSetSpec, baseline []Measurement) ([]BaselinePoint, error) {
	g = g.Normalized()
	idx, err := indexMeasurements(baseline, "baseline")
	if err != nil {
		return nil, fmt.Errorf("stop-loss: %w", err)
	}
	seen := map[baselineKey]bool{}
	var out []BaselinePoint
	for _, c := range g.Criteria {
		if c.StopLoss == nil || c.Mode != Relative {
			continue
		}
		m, ok := LookupMetric(c.Metric)
		if !ok {
			return nil, fmt.Errorf("stop-loss: criterion %s: unknown metric %q", c.Name, c.Metric)
		}
		field, _ := interimStatistic(c.Statistic)
		cc := &critCtx{c: Criterion{Statistic: field}, m: m}
		cc.q, cc.isQ = field.Quantile()
		for _, key := range idx.seriesKeys(c.Metric) {
			if c.Step != "" && key.Step != c.Step {
				continue
			}
			bk := baselineKey{c.Metric, field, key}
			if seen[bk] {
				continue
			}
			seen[bk] = true
			p, err := prepareSide(m, idx[c.Metric][key])
			if err != nil {
				return nil, fmt.Errorf("stop-loss: baseline %s in %s: %w", c.Metric, seriesLabel(key), err)
			}
			s := sideSummary(cc, p)
			if err := p.err(); err != nil {
				return nil, fmt.Errorf("stop-loss: baseline %s in %s: %w: %w", c.Metric, seriesLabel(key), ErrSamplesUnreadable, err)
			}
			if s.Value == nil {
				continue
			}
			out = append(out, BaselinePoint{Metric: c.Metric, Statistic: field, Step: key.Step, Level: key.Level, Value: *s.Value})
		}
	}
	return out, nil
}

// FinalStopLoss looks at a finished run's evaluation for a stop-loss line
// crossed by the final estimate of a criterion (the interim check may have
// missed it: too few windows in a row, or a run without interim windows).
// It returns the first crossing in the gate set's order, or nil. Series
// without an estimate, or not comparable with their baseline, are skipped:
// no line is crossed by a number that was not measured.
func FinalStopLoss(g GateSetSpec, ev Evaluation) (*StopLossBreach, error) {
	g = g.Normalized()
	results := map[int]CriterionResult{}
	for _, r := range ev.Criteria {
		results[r.Index] = r
	}
	for i, c := range g.Criteria {
		line, ok, err := CanonicalStopLoss(c)
		if err != nil {
			return nil, fmt.Errorf("stop-loss: %w", err)
		}
		r, judged := results[i]
		if !ok || !judged {
			continue
		}
		m, _ := LookupMetric(c.Metric)
		for _, s := range r.Series {
			if s.Estimate == nil || s.Verdict == Incomparable {
				continue
			}
			x := *s.Estimate
			if !PastLine(c.Comparator, x, line) {
				continue
			}
			return finalBreach(i, c, m, line, s), nil
		}
	}
	return nil, nil
}

func finalBreach(index int, c Criterion, m Metric, line float64, s SeriesResult) *StopLossBreach {
	unit, lineText := string(m.Unit), fmtValue(line, m.Unit)
	bp := BreachPoint{Step: s.Step, Level: s.Level, N: s.Candidate.N}
	value := fmtValue(*s.Estimate, m.Unit)
	if c.Mode == Relative {
		unit, lineText = "%", fmtPct(line)+" against the baseline"
		rel := *s.Estimate
		bp.Relative, value = &rel, fmtPct(rel)
		if s.Candidate.Value != nil {
			bp.Value = *s.Candidate.Value
		}
		if s.Baseline != nil && s.Baseline.Value != nil {
			b := *s.Baseline.Value
			bp.Baseline = &b
		}
	} else {
		bp.Value = *s.Estimate
	}
	return &StopLossBreach{
		Criterion: index, Name: c.Name, Metric: c.Metric, Statistic: c.Statistic, Mode: c.Mode,
		Comparator: c.Comparator, Interim: "final", Line: line, Unit: unit, Breaches: []BreachPoint{bp},
		Explanation: fmt.Sprintf("Stop-loss: the run's final %s, %s in %s, is past the %s line.",
			statLabel(c.Statistic, m), value, seriesLabel(SeriesKey{Step: s.Step, Level: s.Level}), lineText),
	}
}
