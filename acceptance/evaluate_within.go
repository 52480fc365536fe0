package acceptance

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/accordlab/accord/acceptance/stats"
)

// Isolation and drift criteria compare two sets of samples from the judged
// run itself: the victim under interference with the same victim alone,
// or a step's last window with its first. Both are then judged exactly as
// a relative criterion against a baseline is (evaluator.relative): the
// bootstrap of the relative change of the two sides' pooled statistic,
// and Student's t on each repetition's own statistic where both sides
// have two or more repetitions.

// againstPhrase is what a criterion's change is measured against, for
// explanations.
func againstPhrase(c Criterion) string {
	switch c.Mode {
	case Isolation:
		return fmt.Sprintf("under interference (step %s) against alone (step %s)", c.Step, c.Reference)
	case Drift:
		return fmt.Sprintf("in the last %s against the first %s", c.Window, c.Window)
	}
	return "against the baseline"
}

// isolation judges the victim under interference (cs, the criterion's
// step at this level) against the victim alone (its reference step at
// the same level) of the same run.
func (e *evaluator) isolation(cc *critCtx, key SeriesKey, cs *preparedSide, sr SeriesResult) (SeriesResult, error) {
	ref := SeriesKey{Step: cc.c.Reference, Level: key.Level}
	bs, err := e.prepared(false, cc.m, ref)
	if err != nil {
		return SeriesResult{}, err
	}
	if !bs.hasData() {
		sr.Verdict, sr.Reason, sr.Method = Inconclusive, reasonNoReference, "no quiet phase to compare with"
		sr.Explanation = fmt.Sprintf("The run has no %s of the victim alone (%s), so the interference cannot be measured against it.",
			metricLabel(cc.m), seriesLabel(ref))
		return sr, nil
	}
	b := sideSummary(cc, bs)
	sr.Baseline = &b
	sr.Notes = append(sr.Notes, prefixed("alone", bs.notes)...)
	sr, err = e.relative(cc, key, cs, bs, sr)
	if err != nil {
		return SeriesResult{}, err
	}
	sr.Method = fmt.Sprintf("within the run: candidate = %s (beside the aggressor), baseline = %s (alone); ", seriesLabel(key), seriesLabel(ref)) + sr.Method
	return sr, nil
}

// drift judges the last Window of each repetition of the series against
// its first Window, the windows cut by the requests' send times.
func (e *evaluator) drift(cc *critCtx, key SeriesKey, cs *preparedSide, sr SeriesResult) (SeriesResult, error) {
	w := int64(math.Ceil(cc.c.Window.D().Seconds()))
	first, last, spans, why := driftWindows(cs, w)
	if why != "" {
		sr.Verdict, sr.Method = Inconclusive, "windows not cut"
		sr.Reason = reasonNoSendTimes
		if strings.HasPrefix(why, "overlap:") {
			sr.Reason = reasonWindowsOverlap
			why = strings.TrimPrefix(why, "overlap:")
			sr.Needed = &Needed{Basis: fmt.Sprintf("each repetition at least two windows long (%s)", Duration(2*w*1e9))}
		}
		sr.Explanation = fmt.Sprintf("%s of %s cannot be compared between its first and last %s: %s.",
			capitalize(statLabel(cc.c.Statistic, cc.m)), seriesLabel(key), cc.c.Window, why)
		return sr, nil
	}
	// The late window is the candidate, the early one the baseline.
	sr.Candidate = sideSummary(cc, last)
	b := sideSummary(cc, first)
	sr.Baseline = &b
	sr, err := e.relative(cc, key, last, first, sr)
	if err != nil {
		return SeriesResult{}, err
	}
	sr.Method = fmt.Sprintf("within the run: candidate = requests sent in the last %s of each repetition, baseline = those sent in its first %s (repetitions lasting %s); ",
		cc.c.Window, cc.c.Window, spans) + sr.Method
	return sr, nil
}

// driftWindows cuts the first and last w seconds out of every repetition
// of a side, by its values' send times (Measurement.SentIndex). why says,
// when they cannot be cut, what is missing ("overlap:…" when a
// repetition is shorter than two windows).
func driftWindows(p *preparedSide, w int64) (first, last *preparedSide, spans, why string) {
	if p.data != dataSamples || len(p.reps) == 0 {
		return nil, nil, "", "its values are " + map[string]string{dataHistogram: "histogram bins", dataSummary: "a tool's summary"}[p.data] + " without the time each request was sent"
	}
	first, last = &preparedSide{data: dataSamples, tools: p.tools}, &preparedSide{data: dataSamples, tools: p.tools}
	var lens []string
	for _, x := range p.ms {
		if len(x.Segments) > 0 {
			return nil, nil, "", fmt.Sprintf("repetition %d has more than %s samples, kept outside memory in the order their records came and without their send times, so its windows are not cut (not yet supported)",
				x.Repetition, fmtCount(int64(stats.InMemoryLimit)))
		}
		if len(x.Values) == 0 {
			continue
		}
		if len(x.SentIndex) == 0 || x.Counts != nil {
			return nil, nil, "", fmt.Sprintf("repetition %d does not record when its requests were sent (only the probe's own request records do)", x.Repetition)
		}
		if err := checkSentIndex(x); err != nil {
			return nil, nil, "", fmt.Sprintf("repetition %d: %v", x.Repetition, err)
		}
		secs := int64(len(x.SentIndex))
		lens = append(lens, Duration(secs*1e9).String())
		if secs < 2*w {
			return nil, nil, "", fmt.Sprintf("overlap:repetition %d lasted %s, shorter than two windows, so its first and last windows would share requests", x.Repetition, Duration(secs*1e9))
		}
		early := slices.Clone(x.Values[:x.SentIndex[w]])
		late := slices.Clone(x.Values[x.SentIndex[secs-w]:])
		for _, side := range []struct {
			p *preparedSide
			v []float64
		}{{first, early}, {last, late}} {
			m := x
			m.Values, m.SentIndex = side.v, nil
			side.p.ms = append(side.p.ms, m)
			if len(side.v) == 0 {
				side.p.notes = append(side.p.notes, fmt.Sprintf("repetition %d has no request in this window and is left out", x.Repetition))
				continue
			}
			s, err := stats.NewSample(side.v, nil)
			if err != nil {
				return nil, nil, "", fmt.Sprintf("repetition %d: %v", x.Repetition, err)
			}
			side.p.reps = append(side.p.reps, s)
		}
	}
	for _, side := range []*preparedSide{first, last} {
		if len(side.reps) == 0 {
			return nil, nil, "", "a window has no requests"
		}
		side.pooled = stats.Merge(side.reps...)
	}
	return first, last, strings.Join(lens, ", "), ""
}

// checkSentIndex checks that a send-time index is non-decreasing and
// inside the values.
func checkSentIndex(m Measurement) error {
	prev := int64(0)
	for s, i := range m.SentIndex {
		if i < prev || i > int64(len(m.Values)) {
			return fmt.Errorf("send-time index of second %d (%d) is out of order or beyond the %d values", s, i, len(m.Values))
		}
		prev = i
	}
	return nil
}
