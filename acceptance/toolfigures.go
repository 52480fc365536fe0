package acceptance

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/accordlab/accord/acceptance/stats"
)

// ToolFigure is one of a tool's own summary figures beside the figure
// Accord computes from the same measurement's samples (or bins) under the
// tool's own definition, and Accord's canonical (nearest-rank) figure. The
// two under one definition must agree; the canonical one may differ, and
// is labelled so that nobody compares it with the tool's.
type ToolFigure struct {
	// Statistic as the tool summary names it: p50, p99, p99.9, mean.
	Statistic string `json:"statistic"`
	// Tool is the tool's own number, in the metric's canonical unit.
	Tool float64 `json:"tool"`
	// Accord is Accord's number under the tool's Definition; absent when
	// the measurement has no samples (a tool's summary only).
	Accord *float64 `json:"accord,omitempty"`
	// Definition is the rule both Tool and Accord follow; for a mean, empty.
	Definition stats.Definition `json:"definition,omitempty"`
	// Canonical is Accord's nearest-rank percentile (for a mean, the same
	// mean), absent without samples.
	Canonical *float64 `json:"canonical,omitempty"`
	// Difference is 100·(Accord − Tool)/Tool, in percent, when both exist
	// and Tool is not 0.
	Difference *float64 `json:"difference_pct,omitempty"`
	// Note says why the two may differ by more than rounding (a mean of
	// bin values, say).
	Note string `json:"note,omitempty"`
}

// ToolPercentile parses a tool summary key ("p99", "p99.9") into a
// percentage.
func ToolPercentile(key string) (float64, bool) {
	if len(key) < 2 || key[0] != 'p' {
		return 0, false
	}
	p, err := strconv.ParseFloat(key[1:], 64)
	if err != nil || math.IsNaN(p) || p < 0 || p > 100 || strings.ContainsAny(key[1:], "+-eE") {
		return 0, false
	}
	return p, true
}

// ToolFigures lays each of the measurement's tool percentiles and its mean
// beside Accord's figure from the measurement's own samples under the
// tool's definition. Without samples the figures carry the tool's numbers
// only. Rates (one value) compare the value with the tool's "rate".
func ToolFigures(m Measurement) ([]ToolFigure, error) {
	if len(m.ToolSummary) == 0 {
		return nil, nil
	}
	def := m.Source.PercentileDefinition
	if def == "" {
		def = stats.NearestRank
	}
	if !def.Valid() {
		return nil, fmt.Errorf("acceptance: %s: unknown percentile definition %q", m.Metric, def)
	}
	var sample *stats.Sample
	if m.HasSamples() {
		s, err := m.Sample()
		if err != nil {
			return nil, fmt.Errorf("acceptance: %s: %w", m.Metric, err)
		}
		if s.N() > 0 {
			sample = &s
		}
	}
	keys := make([]string, 0, len(m.ToolSummary))
	for k := range m.ToolSummary {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return figureOrder(keys[i]) < figureOrder(keys[j]) || figureOrder(keys[i]) == figureOrder(keys[j]) && keys[i] < keys[j]
	})
	var out []ToolFigure
	for _, k := range keys {
		tool := m.ToolSummary[k]
		f := ToolFigure{Statistic: k, Tool: tool}
		p, isP := ToolPercentile(k)
		switch {
		case isP:
			f.Definition = def
			if sample != nil {
				a, err := sample.Percentile(def, p)
				if err != nil {
					return nil, fmt.Errorf("acceptance: %s %s: %w", m.Metric, k, err)
				}
				c := sample.Quantile(p / 100)
				f.Accord, f.Canonical = &a, &c
			}
		case k == "mean":
			if sample != nil {
				a := sample.Mean()
				f.Accord, f.Canonical = &a, &a
				if m.Counts != nil {
					f.Note = "mean of the bins' representative values: within a bin's width of the exact mean"
				}
			}
		case k == "rate":
			if len(m.Values) == 1 {
				a := m.Values[0]
				f.Accord, f.Canonical = &a, &a
			}
		default:
			continue // min, max, stddev, counts: kept in the summary, not compared
		}
		if f.Accord != nil && tool != 0 {
			d := 100 * (*f.Accord - tool) / tool
			f.Difference = &d
		}
		out = append(out, f)
	}
	if sample != nil {
		if err := sample.Err(); err != nil {
			return nil, fmt.Errorf("acceptance: %s: %w", m.Metric, err)
		}
	}
	return out, nil
}

func figureOrder(k string) float64 {
	if p, ok := ToolPercentile(k); ok {
		return p
	}
	if k == "mean" {
		return 1000
	}
	return 2000
}
