package chartdata

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/stats"
)

// measurementGroup is one metric in one series (step × level), every
// repetition.
type measurementGroup struct {
	metric, step, level string
	ms                  []acceptance.Measurement
}

// groupMeasurements groups by metric and series, in a stable order.
func groupMeasurements(ms []acceptance.Measurement) []measurementGroup {
	idx := map[[3]string]int{}
	var out []measurementGroup
	for _, m := range ms {
		k := [3]string{m.Metric, m.Step, m.Level}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, measurementGroup{metric: m.Metric, step: m.Step, level: m.Level})
		}
		out[i].ms = append(out[i].ms, m)
	}
	for i := range out {
		slices.SortStableFunc(out[i].ms, func(a, b acceptance.Measurement) int { return cmp.Compare(a.Repetition, b.Repetition) })
	}
	return out
}

func seriesStats(g measurementGroup) (SeriesStats, error) {
	st := SeriesStats{Metric: g.metric, Step: g.step, Level: g.level, Repetitions: len(g.ms)}
	meta, known := acceptance.LookupMetric(g.metric)
	if known && meta.Kind == acceptance.KindRate {
		st.Rate = true
		for _, m := range g.ms {
			if len(m.Values) == 1 && finite(m.Values[0]) {
				st.PerRepetition = append(st.PerRepetition, m.Values[0])
			}
		}
		if len(st.PerRepetition) == 0 {
			return st, errors.New("no repetition has a value")
		}
		st.N = int64(len(st.PerRepetition))
		st.Mean = meanOf(st.PerRepetition)
		st.Min, st.Max = slices.Min(st.PerRepetition), slices.Max(st.PerRepetition)
		return st, nil
	}
	var samples []stats.Sample
	for _, m := range g.ms {
		if !m.HasSamples() {
			continue
		}
		s, err := m.Sample()
		if err != nil {
			return st, fmt.Errorf("repetition %d: %w", m.Repetition, err)
		}
		if s.N() > 0 {
			samples = append(samples, s)
		}
	}
	if len(samples) == 0 {
		// The tool's own summary, averaged over repetitions.
		st.Summary = true
		get := func(k string) float64 {
			var v []float64
			for _, m := range g.ms {
				if x, ok := m.ToolSummary[k]; ok && finite(x) {
					v = append(v, x)
				}
			}
			if len(v) == 0 {
				return math.NaN()
			}
			return meanOf(v)
		}
		for _, f := range []struct {
			name string
			to   *float64
		}{{"p50", &st.P50}, {"p90", &st.P90}, {"p95", &st.P95}, {"p99", &st.P99}, {"p99.9", &st.P999}, {"mean", &st.Mean}, {"max", &st.Max}, {"min", &st.Min}} {
			// Unknown figures are named in Missing and stored as 0 (JSON
			// has no NaN); Stat never returns them.
			if v := get(f.name); math.IsNaN(v) {
				st.Missing = append(st.Missing, f.name)
			} else {
				*f.to = v
			}
		}
		if slices.Contains(st.Missing, "p99") && slices.Contains(st.Missing, "mean") {
			return st, errors.New("no samples and no tool summary")
		}
		return st, nil
	}
	p := stats.Merge(samples...)
	st.N = p.N()
	st.Min, st.Max, st.Mean = p.Min(), p.Max(), p.Mean()
	st.P50, st.P90, st.P95 = p.Quantile(0.5), p.Quantile(0.9), p.Quantile(0.95)
	st.P99, st.P999 = p.Quantile(0.99), p.Quantile(0.999)
	return st, p.Err()
}

func meanOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// pooledCurve is the distribution of the repetitions' raw samples pooled
// (none when a repetition is a histogram: curves are drawn from raw
// samples); samples kept in segments are read rank by rank.
func pooledCurve(ms []acceptance.Measurement) (CDFCurve, bool, error) {
	segmented := false
	for _, m := range ms {
		if m.Counts != nil {
			return CDFCurve{}, false, nil
		}
		segmented = segmented || len(m.Segments) > 0
	}
	if !segmented {
		values := pooledValues(ms)
		return CurveOf(values), len(values) > 0, nil
	}
	var samples []stats.Sample
	for _, m := range ms {
		if !m.HasSamples() {
			continue
		}
		s, err := m.Sample()
		if err != nil {
			return CDFCurve{}, false, err
		}
		samples = append(samples, s)
	}
	p := stats.Merge(samples...)
	c := CurveOfSample(p)
	return c, true, p.Err()
}

// pooledValues returns all raw samples of the repetitions, sorted.
func pooledValues(ms []acceptance.Measurement) []float64 {
	n := 0
	for _, m := range ms {
		n += len(m.Values)
	}
	out := make([]float64, 0, n)
	for _, m := range ms {
		for _, v := range m.Values {
			if finite(v) {
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return out
}
