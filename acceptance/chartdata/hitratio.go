package chartdata

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/accordlab/accord/acceptance"
)

// A prefix-reuse sweep runs an inference step at several shares of each
// prompt made a shared prefix (levels "reuse=0.5"); the inference server's
// own counters say what prefix (KV) cache hit ratio each share gave. Its
// chart is TTFT against that measured ratio: where a workload sits on the
// curve, and how steeply TTFT rises as the ratio drops.

// HitRatioPoint is one level of a prefix-reuse sweep.
type HitRatioPoint struct {
	Level string `json:"level"` // "reuse=0.5"
	// Share is the share of each prompt the profile made a shared prefix.
	Share float64 `json:"share"`
	// HitRatio is what the server's counters measured over the level
	// (hits / queries, in tokens, between its scrapes before and after),
	// the mean over repetitions; PerRepetition each repetition's.
	HitRatio      float64   `json:"hit_ratio"`
	PerRepetition []float64 `json:"per_repetition,omitempty"`
	// TTFT's p50 and p99 (ms) over every measured request of the level,
	// all repetitions pooled, and how many requests that is.
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	N   int64   `json:"n"`
}

// HitRatioCurve is one step's sweep, its levels ordered by the measured
// hit ratio (then by share).
type HitRatioCurve struct {
	Step   string          `json:"step"`
	Points []HitRatioPoint `json:"points"`
	// Left names each level that is not a point and why: a level whose
	// server counters gave no ratio (see the run's notes), or without
	// TTFT samples.
	Left []string `json:"left,omitempty"`
}

// IsReuseSweep reports whether a step's levels are a prefix-reuse sweep's.
func IsReuseSweep(step Step) bool {
	if len(step.Levels) == 0 {
		return false
	}
	for _, lv := range step.Levels {
		if _, ok := acceptance.ReuseOfLevel(lv); !ok {
			return false
		}
	}
	return true
}

// HitRatioCurves returns the curve of every step of a run that swept
// prefix reuse, in the run's step order, from its pooled statistics.
func HitRatioCurves(a Aggregates) []HitRatioCurve {
	var out []HitRatioCurve
	for _, step := range a.Meta.Steps {
		if !IsReuseSweep(step) {
			continue
		}
		out = append(out, hitRatioCurve(a, step))
	}
	return out
}

// HitRatioCurveOf returns the curve of the named step (false when the run
// has no such reuse sweep).
func HitRatioCurveOf(a Aggregates, stepName string) (HitRatioCurve, bool) {
	for _, step := range a.Meta.Steps {
		if step.Name == stepName && IsReuseSweep(step) {
			return hitRatioCurve(a, step), true
		}
	}
	return HitRatioCurve{}, false
}

func hitRatioCurve(a Aggregates, step Step) HitRatioCurve {
	c := HitRatioCurve{Step: step.Name, Points: []HitRatioPoint{}}
	for _, lv := range step.Levels {
		share, _ := acceptance.ReuseOfLevel(lv)
		ratio, okR := a.Stats(acceptance.MetricCacheHitRatio, step.Name, lv)
		ttft, okT := a.Stats(acceptance.MetricTTFT, step.Name, lv)
		p50, ok50 := ttft.Stat("p50")
		p99, ok99 := ttft.Stat("p99")
		switch {
		case !okR || !ratio.Rate:
			c.Left = append(c.Left, fmt.Sprintf("%s: the server's prefix cache counters gave no hit ratio", lv))
			continue
		case !okT || !ok50 || !ok99:
			c.Left = append(c.Left, fmt.Sprintf("%s: no TTFT samples", lv))
			continue
		}
		c.Points = append(c.Points, HitRatioPoint{Level: lv, Share: share, HitRatio: ratio.Mean, PerRepetition: slices.Clone(ratio.PerRepetition),
			P50: p50, P99: p99, N: ttft.N})
	}
	slices.SortStableFunc(c.Points, func(x, y HitRatioPoint) int {
		return cmp.Or(cmp.Compare(x.HitRatio, y.HitRatio), cmp.Compare(x.Share, y.Share))
	})
	return c
}
