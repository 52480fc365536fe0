package acceptance

import (
	"math"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
)

// millionRun builds a run of one million requests over 3 repetitions:
// TTFT, TPOT and E2EL as raw samples (one per request), ITL as a histogram
// of about 200 million gaps, and the rates, for one side.
func millionRun(r *rand.Rand, shift float64) []Measurement {
	const reps, perRep = 3, 333_334
	var out []Measurement
	for _, d := range []struct {
		metric       string
		scale, sigma float64
	}{{MetricTTFT, 800, 0.35}, {MetricTPOT, 25, 0.2}, {MetricE2EL, 6000, 0.3}} {
		out = append(out, lognormalMeasurements(r, d.metric, "decode", reps, perRep, d.scale, d.sigma, shift)...)
	}
	for rep := 1; rep <= reps; rep++ {
		// ITL histogram: 1 µs buckets between 5 and 80 ms, lognormal counts.
		var vals []float64
		var counts []int64
		for v := 5.0; v < 80; v += 0.001 {
			z := (math.Log(v/(20*shift)) / 0.25)
			c := int64(math.Round(2e8 / 3 * 0.001 / (v * 0.25 * math.Sqrt(2*math.Pi)) * math.Exp(-z*z/2)))
			if c > 0 {
				vals = append(vals, v)
				counts = append(counts, c)
			}
		}
		out = append(out, Measurement{Metric: MetricITL, Step: "decode", Repetition: rep, Values: vals, Counts: counts})
		out = append(out,
			Measurement{Metric: MetricOutputTokenThroughput, Step: "decode", Repetition: rep, Values: []float64{50_000 / shift * (1 + 0.02*r.NormFloat64())}},
			Measurement{Metric: MetricErrorRate, Step: "decode", Repetition: rep, Values: []float64{0.001 * (1 + 0.1*r.NormFloat64())}},
		)
	}
	return out
}

func millionGates() GateSetSpec {
	return gateSet(
		absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 2000, "ms"),
		relativeCriterion(MetricTTFT, StatP99, LessOrEqual, 5),
		relativeCriterion(MetricTPOT, StatP99, LessOrEqual, 5),
		relativeCriterion(MetricTPOT, StatMean, LessOrEqual, 5),
		relativeCriterion(MetricE2EL, StatP50, LessOrEqual, 5),
		relativeCriterion(MetricITL, StatP99, LessOrEqual, 5),
		absoluteCriterion(MetricITL, StatP999, LessOrEqual, 100, "ms"),
		relativeCriterion(MetricOutputTokenThroughput, StatRate, GreaterOrEqual, 10),
		absoluteCriterion(MetricErrorRate, StatRate, LessOrEqual, 1, "%"),
	)
}

// BenchmarkEvaluateMillion evaluates a run of one million requests against
// a baseline of the same size, with the full 10,000 resamples for each
// relative criterion. Run with -benchmem; peak-RSS-MiB is the process's
// high-water mark, which includes the 2 × 1 M-request input itself.
func BenchmarkEvaluateMillion(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	in := EvaluationInput{
		Gates:     millionGates(),
		Candidate: millionRun(r, 1),
		Baseline:  millionRun(r, 1.02),
		Resamples: DefaultResamples,
	}
	runtime.GC()
	for b.Loop() {
		ev, err := Evaluate(in)
		if err != nil {
			b.Fatal(err)
		}
		if ev.Criteria[1].Series[0].Resamples != DefaultResamples {
			b.Fatal("resamples")
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MiB")
	}
}
