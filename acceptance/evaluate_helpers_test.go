package acceptance

import (
	"math"
	"math/rand/v2"
	"strconv"
)

// Helpers shared by the evaluation tests: measurement builders from known
// distributions, and gate sets.

// lognormalMeasurements draws reps repetitions of n samples each of a
// lognormal with median scale and shape sigma, multiplied by shift.
func lognormalMeasurements(r *rand.Rand, metric, step string, reps, n int, scale, sigma, shift float64) []Measurement {
	out := make([]Measurement, reps)
	for i := range out {
		v := make([]float64, n)
		for j := range v {
			v[j] = scale * math.Exp(sigma*r.NormFloat64()) * shift
		}
		out[i] = Measurement{Metric: metric, Step: step, Repetition: i + 1, Values: v, Source: Source{Tool: "accord-probe", ToolVersion: "test"}}
	}
	return out
}

// rateMeasurements draws one normal value per repetition.
func rateMeasurements(r *rand.Rand, metric, step string, reps int, mean, cv float64) []Measurement {
	out := make([]Measurement, reps)
	for i := range out {
		out[i] = Measurement{Metric: metric, Step: step, Repetition: i + 1,
			Values: []float64{mean * (1 + cv*r.NormFloat64())}, Source: Source{Tool: "accord-probe"}}
	}
	return out
}

func gateSet(criteria ...Criterion) GateSetSpec {
	for i := range criteria {
		if criteria[i].Name == "" {
			criteria[i].Name = "c" + strconv.Itoa(i)
		}
		if criteria[i].Severity == "" {
			criteria[i].Severity = Blocking
		}
	}
	return GateSetSpec{SchemaVersion: 1, Name: "test gates", Criteria: criteria}
}

func absoluteCriterion(metric string, st Statistic, cmp Comparator, threshold float64, unit string) Criterion {
	return Criterion{Metric: metric, Statistic: st, Mode: Absolute, Comparator: cmp, Threshold: threshold, Unit: unit}
}

func relativeCriterion(metric string, st Statistic, cmp Comparator, pct float64) Criterion {
	return Criterion{Metric: metric, Statistic: st, Mode: Relative, Comparator: cmp, Threshold: pct, Unit: "%"}
}
