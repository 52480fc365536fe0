package chartdata

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/accordlab/accord/acceptance"
)

// Aggregates are a run's chart data: one stored document per key (see
// documents.go).
type Aggregates struct {
	Meta    Meta
	Summary []SeriesStats
	// CDF is by KeyCDF, then metric.
	CDF map[string]map[string]CDFCurve
	// OverRun is by step.
	OverRun    map[string]OverRun
	TimeSeries []TimeSeries
	// Percentiles is by KeyPercentiles.
	Percentiles map[string][]PercentileComparison
	// Facts are the run's comparable host facts (nil: the run has none).
	Facts map[string]string
	Hist  []LogHistogram
}

func newAggregates() Aggregates {
	return Aggregates{CDF: map[string]map[string]CDFCurve{}, OverRun: map[string]OverRun{}, Percentiles: map[string][]PercentileComparison{}}
}

// Documents encodes the aggregates as stored: a document per key. Empty
// histograms and time series are left out, as is Facts when nil.
func (a Aggregates) Documents() (map[string]json.RawMessage, error) {
	docs := map[string]json.RawMessage{}
	put := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("chartdata: encode %s: %w", key, err)
		}
		docs[key] = b
		return nil
	}
	summary := a.Summary
	if summary == nil {
		summary = []SeriesStats{}
	}
	if err := put(KeySummary, summary); err != nil {
		return nil, err
	}
	for key, m := range a.CDF {
		if err := put(key, m); err != nil {
			return nil, err
		}
	}
	if len(a.Hist) > 0 {
		if err := put(KeyHist, a.Hist); err != nil {
			return nil, err
		}
	}
	for step, or := range a.OverRun {
		if err := put(KeyOverRun(step), or); err != nil {
			return nil, err
		}
	}
	if len(a.TimeSeries) > 0 {
		if err := put(KeyTimeSeries, a.TimeSeries); err != nil {
			return nil, err
		}
	}
	for key, rows := range a.Percentiles {
		if err := put(key, rows); err != nil {
			return nil, err
		}
	}
	if a.Facts != nil {
		if err := put(KeyFacts, a.Facts); err != nil {
			return nil, err
		}
	}
	if err := put(KeyMeta, a.Meta); err != nil {
		return nil, err
	}
	return docs, nil
}

// Decode reads stored documents back (any subset of the keys). ok is
// false when there is no meta document of this build's Version: the page
// then shows tables only.
func Decode(docs map[string]json.RawMessage) (Aggregates, bool, error) {
	a := newAggregates()
	raw, ok := docs[KeyMeta]
	if !ok {
		return a, false, nil
	}
	if err := json.Unmarshal(raw, &a.Meta); err != nil {
		return a, false, fmt.Errorf("meta: %w", err)
	}
	if a.Meta.Version != Version {
		return a, false, nil
	}
	// Levels as numbers (c=1, c=4, c=16), also in documents stored before
	// chartSteps ordered them so.
	for _, st := range a.Meta.Steps {
		slices.SortStableFunc(st.Levels, acceptance.CompareLevels)
	}
	for key, raw := range docs {
		var err error
		switch {
		case key == KeyMeta:
		case key == KeySummary:
			err = json.Unmarshal(raw, &a.Summary)
		case key == KeyTimeSeries:
			err = json.Unmarshal(raw, &a.TimeSeries)
		case key == KeyFacts:
			err = json.Unmarshal(raw, &a.Facts)
		case key == KeyHist:
			err = json.Unmarshal(raw, &a.Hist)
		case strings.HasPrefix(key, "cdf:"):
			var m map[string]CDFCurve
			err = json.Unmarshal(raw, &m)
			a.CDF[key] = m
		case strings.HasPrefix(key, "overrun:"):
			var o OverRun
			err = json.Unmarshal(raw, &o)
			a.OverRun[strings.TrimPrefix(key, "overrun:")] = o
		case strings.HasPrefix(key, "pct:"):
			var rows []PercentileComparison
			err = json.Unmarshal(raw, &rows)
			a.Percentiles[key] = rows
		}
		if err != nil {
			return a, false, fmt.Errorf("%s: %w", key, err)
		}
	}
	return a, true, nil
}

// Stat returns a statistic of a metric in a series.
func (a Aggregates) Stat(metric, step, level, statistic string) (float64, bool) {
	if s, ok := a.Stats(metric, step, level); ok {
		return s.Stat(statistic)
	}
	return 0, false
}

// Stats returns the statistics of a metric in a series.
func (a Aggregates) Stats(metric, step, level string) (SeriesStats, bool) {
	for _, s := range a.Summary {
		if s.Metric == metric && s.Step == step && s.Level == level {
			return s, true
		}
	}
	return SeriesStats{}, false
}
