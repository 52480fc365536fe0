package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/parse/parsetest"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// BenchmarkImportAndEvaluateTenMillion is what the server does after a run
// of ten million requests (ACCORD_BENCH_REQUESTS to change it) judged
// against a baseline of the same size: read the run's records from the
// artifact store and import them (ReadFolder over StoredFiles), store the
// measurements, then load both runs' measurements as evaluate_run does
// and apply a gate set of absolute and relative criteria (10,000 bootstrap
// resamples). The baseline was imported and stored before, outside the
// timing. Reported: wall and CPU seconds of the whole, and this process's
// peak resident memory during it (PostgreSQL's is its own). Targets: under
// 20 s and 300 MiB.
func BenchmarkImportAndEvaluateTenMillion(b *testing.B) {
	n := 10_000_000
	if v, err := strconv.Atoi(os.Getenv("ACCORD_BENCH_REQUESTS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	st := store.New(storetest.NewPool(b))
	program, profile := newProgram(b, st)
	base := recordsRun(b, st, program, profile, n, 1)
	ms := readStored(b, st, base)
	if err := st.SaveMeasurements(ctx, base, ms); err != nil {
		b.Fatal(err)
	}
	ms = nil
	cand := recordsRun(b, st, program, profile, n, 2)
	gates := acceptance.GateSetSpec{Name: "ten million", Criteria: []acceptance.Criterion{
		{Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute, Comparator: acceptance.LessOrEqual, Threshold: 2000, Unit: "ms", Severity: acceptance.Blocking},
		{Name: "tpot-p99", Metric: acceptance.MetricTPOT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute, Comparator: acceptance.LessOrEqual, Threshold: 200, Unit: "ms", Severity: acceptance.Blocking},
		{Name: "ttft-p99-delta", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Relative, Comparator: acceptance.LessOrEqual, Threshold: 5, Unit: "%", Severity: acceptance.Blocking},
		{Name: "e2el-mean-delta", Metric: acceptance.MetricE2EL, Statistic: acceptance.StatMean, Mode: acceptance.Relative, Comparator: acceptance.LessOrEqual, Threshold: 5, Unit: "%", Severity: acceptance.Blocking},
	}}.Normalized()
	var wall, cpu time.Duration
	var peak int64
	for range b.N {
		runtime.GC()
		debug.FreeOSMemory()
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			b.Fatal(err)
		}
		cpu0, start := processCPU(), time.Now()
		phase := newPhases()
		ms := readStored(b, st, cand)
		phase("import")
		if err := st.SaveMeasurements(ctx, cand, ms); err != nil {
			b.Fatal(err)
		}
		phase("save")
		ms = nil
		in := acceptance.EvaluationInput{Gates: gates, CandidateFacts: map[string]string{}, BaselineFacts: map[string]string{}}
		var err error
		if in.Candidate, err = st.RunMeasurements(ctx, cand); err != nil {
			b.Fatal(err)
		}
		if in.Baseline, err = st.RunMeasurements(ctx, base); err != nil {
			b.Fatal(err)
		}
		phase("load")
		ev, err := acceptance.Evaluate(in)
		if err != nil {
			b.Fatal(err)
		}
		phase("evaluate")
		b.Logf("phases (wall, CPU): %s", phase(""))
		wall += time.Since(start)
		cpu += processCPU() - cpu0
		peak = max(peak, peakRSS(b))
		if !ev.Verdict.Valid() {
			b.Fatalf("verdict %q", ev.Verdict)
		}
	}
	b.ReportMetric(wall.Seconds()/float64(b.N), "wall-s")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(n), "requests")
}

// recordsRun stores a run whose folder is one open-loop level of n request
// records (parsetest.WriteRecords), written straight into the artifact
// store.
func recordsRun(b *testing.B, st *store.Store, program, profile int64, n int, seed uint64) int64 {
	b.Helper()
	ctx := context.Background()
	runID, err := st.CreateRun(ctx, store.NewRun{ProgramID: program, Kind: "imported", ProfileVersionID: profile})
	if err != nil {
		b.Fatal(err)
	}
	pr, pw := io.Pipe()
	window := make(chan float64, 1)
	go func() {
		w, err := parsetest.WriteRecords(pw, n, seed)
		window <- w
		pw.CloseWithError(err)
	}()
	blob, err := st.Artifacts().Put(ctx, pr)
	if err != nil {
		b.Fatal(err)
	}
	dir := wire.OutputDir + "/01-chat/rep-1/r=1000/"
	if err := st.AddRunArtifact(ctx, store.RunArtifact{RunID: runID, Path: dir + wire.RequestsFile, SHA256: blob.SHA256, Size: blob.Size}); err != nil {
		b.Fatal(err)
	}
	res, err := json.Marshal(wire.StepResult{Step: "chat", Kind: acceptance.StepInference, Repetition: 1, Level: "r=1000", Format: "probe-requests",
		Inference: &wire.InferenceSummary{Requests: int64(n), WindowSec: <-window, OfferedRate: parsetest.RecordRate,
			ITL: []wire.HistogramBucket{{Value: 14, Count: 1000}, {Value: 15, Count: 5000}, {Value: 16, Count: 1000}}}})
	if err != nil {
		b.Fatal(err)
	}
	blob, err = st.Artifacts().Put(ctx, bytes.NewReader(res))
	if err != nil {
		b.Fatal(err)
	}
	if err := st.AddRunArtifact(ctx, store.RunArtifact{RunID: runID, Path: dir + wire.StepResultFile, SHA256: blob.SHA256, Size: blob.Size}); err != nil {
		b.Fatal(err)
	}
	return runID
}

func readStored(b *testing.B, st *store.Store, runID int64) []acceptance.Measurement {
	b.Helper()
	files, err := StoredFiles(context.Background(), st, runID)
	if err != nil {
		b.Fatal(err)
	}
	ms, _, err := ReadFolder(files, acceptance.ProfileSpec{}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	return ms
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is the process's peak resident set (VmHWM) in bytes.
func peakRSS(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB`).FindSubmatch(data)
	if m == nil {
		b.Fatal("no VmHWM in /proc/self/status")
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// newPhases returns a function that ends a phase of the benchmark under a
// name and, called with "", lists each phase's wall and CPU time.
func newPhases() func(name string) string {
	var out []string
	t, c := time.Now(), processCPU()
	return func(name string) string {
		if name == "" {
			return strings.Join(out, ", ")
		}
		now, cpu := time.Now(), processCPU()
		out = append(out, fmt.Sprintf("%s %.2f s / %.2f s", name, now.Sub(t).Seconds(), (cpu-c).Seconds()))
		t, c = now, cpu
		return ""
	}
}
