package charts

import "testing"

// Benchmarks of a million-point input (run with -benchmem): each builder
// that takes per-request data (acceptance/chartdata has the downsamplers
// alone). Each reports the option's size in bytes as "option-B".

const benchN = 1_000_000

// Sorted samples, as the store gives them.
func BenchmarkLatencyCDF1M(b *testing.B) {
	in := CDFInput{Unit: "ms", Series: []CDFSeries{{Name: "TTFT", Values: lognormal(1, benchN, 400, 0.6, true)}},
		Limits: []Limit{{Value: 2000, Label: "p99 limit 2000 ms"}}}
	b.ResetTimer()
	var size int
	for b.Loop() {
		raw, _, err := LatencyCDF(in)
		if err != nil {
			b.Fatal(err)
		}
		size = len(raw)
	}
	b.ReportMetric(float64(size), "option-B")
}

// Unsorted samples: the copy and sort dominate.
func BenchmarkLatencyCDF1MUnsorted(b *testing.B) {
	in := CDFInput{Unit: "ms", Series: []CDFSeries{{Name: "TTFT", Values: lognormal(1, benchN, 400, 0.6, false)}}}
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := LatencyCDF(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLatencyOverRun1M(b *testing.B) {
	in := OverRunInput{Unit: "ms", Series: []OverRunSeries{{Name: "TTFT", Role: RoleCandidate, Points: requestsOverRun(1, benchN, 3600, 500_000, 9000)}}}
	b.ResetTimer()
	var size int
	for b.Loop() {
		raw, _, err := LatencyOverRun(in)
		if err != nil {
			b.Fatal(err)
		}
		size = len(raw)
	}
	b.ReportMetric(float64(size), "option-B")
}

func BenchmarkOverTime1M(b *testing.B) {
	in := TimeSeriesInput{Series: []TimeSeries{{Name: "tokens/s", Unit: "tok/s", Points: telemetry(1, benchN, 3600, 5000, 800)}}}
	b.ResetTimer()
	var size int
	for b.Loop() {
		raw, _, err := OverTime(in)
		if err != nil {
			b.Fatal(err)
		}
		size = len(raw)
	}
	b.ReportMetric(float64(size), "option-B")
}
