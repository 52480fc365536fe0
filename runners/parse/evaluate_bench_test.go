package parse

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// BenchmarkImportAndEvaluateMillion is what the server does after a run of
// a million requests: import the candidate's records, then judge them
// against a baseline of the same size with absolute and relative criteria
// (10,000 bootstrap resamples). The baseline is imported once, outside the
// timing, as the server loads it from the database. Reported: wall time per
// import+evaluation, CPU time, and the peak resident set during it.
func BenchmarkImportAndEvaluateMillion(b *testing.B) {
	path := millionFile(b)
	res := stepResult(990, 1000)
	res.Inference.Requests = millionRecords
	res.Inference.ITL = []wire.HistogramBucket{{Value: 14, Count: 1000}, {Value: 15, Count: 5000}, {Value: 16, Count: 1000}}
	opts := Options{Step: "ttft", Level: "r=1000", Repetition: 1, Result: res, SLO: acceptance.SLO{TTFTMs: 200, TPOTMs: 20}}
	baseline, _, err := ImportFile(FormatProbeRequests, path, opts)
	if err != nil {
		b.Fatal(err)
	}
	gates := acceptance.GateSetSpec{Name: "million", Criteria: []acceptance.Criterion{
		{Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute, Comparator: acceptance.LessOrEqual, Threshold: 2000, Unit: "ms", Severity: acceptance.Blocking},
		{Name: "tpot-p99", Metric: acceptance.MetricTPOT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute, Comparator: acceptance.LessOrEqual, Threshold: 200, Unit: "ms", Severity: acceptance.Blocking},
		{Name: "ttft-p99-delta", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Relative, Comparator: acceptance.LessOrEqual, Threshold: 5, Unit: "%", Severity: acceptance.Blocking},
		{Name: "e2el-mean-delta", Metric: acceptance.MetricE2EL, Statistic: acceptance.StatMean, Mode: acceptance.Relative, Comparator: acceptance.LessOrEqual, Threshold: 5, Unit: "%", Severity: acceptance.Blocking},
	}}.Normalized()
	var peak int64
	var cpu time.Duration
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		debug.FreeOSMemory()
		canReset := resetHWM()
		cpu0 := cpuTime()
		b.StartTimer()
		cand, _, err := ImportFile(FormatProbeRequests, path, opts)
		if err != nil {
			b.Fatal(err)
		}
		ev, err := acceptance.Evaluate(acceptance.EvaluationInput{Gates: gates, Candidate: cand, Baseline: baseline,
			CandidateFacts: map[string]string{"kernel": "6.1"}, BaselineFacts: map[string]string{"kernel": "6.1"}})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime() - cpu0
		if canReset {
			peak = max(peak, vmHWM())
		}
		if !ev.Verdict.Valid() {
			b.Fatalf("verdict %q", ev.Verdict)
		}
		b.StartTimer()
	}
	if peak > 0 {
		b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
	}
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}
