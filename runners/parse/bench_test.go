package parse

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/parse/parsetest"
	"github.com/accordlab/accord/runners/probe/wire"
)

const millionRecords = 1_000_000

var (
	millionOnce sync.Once
	millionDir  string
	millionPath string
	millionErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if millionDir != "" {
		os.RemoveAll(millionDir)
	}
	os.Exit(code)
}

// writeRecords writes n realistic request records (parsetest.WriteRecords).
func writeRecords(w *bufio.Writer, n int, seed uint64) (window float64, err error) {
	return parsetest.WriteRecords(w, n, seed)
}

func millionFile(b *testing.B) string {
	millionOnce.Do(func() {
		millionDir, millionErr = os.MkdirTemp("", "accord-parse-bench-")
		if millionErr != nil {
			return
		}
		millionPath = filepath.Join(millionDir, wire.RequestsFile)
		f, err := os.Create(millionPath)
		if err != nil {
			millionErr = err
			return
		}
		defer f.Close()
		_, millionErr = writeRecords(bufio.NewWriterSize(f, 1<<20), millionRecords, 1)
	})
	if millionErr != nil {
		b.Fatal(millionErr)
	}
	return millionPath
}

// vmHWM reads the process's peak resident set size in KiB.
func vmHWM() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return -1
}

// resetHWM makes VmHWM start again from the current RSS (Linux ≥ 4.0).
func resetHWM() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// BenchmarkImportMillion imports one level of a million request records
// from a file (about 230 MB), as the server does after a run. It reports
// ns/op, the heap allocated per import, and peak-RSS-MiB: the process's
// peak resident set during the import (VmHWM reset just before it).
func BenchmarkImportMillion(b *testing.B) {
	path := millionFile(b)
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	res := stepResult(990, 1000)
	res.Inference.Requests = millionRecords
	res.Inference.ITL = []wire.HistogramBucket{{Value: 14, Count: 1000}, {Value: 15, Count: 5000}, {Value: 16, Count: 1000}}
	res.PromDelta = map[string]float64{"vllm:prefix_cache_hits_total": 1, "vllm:prefix_cache_queries_total": 2}
	opts := Options{Step: "ttft", Level: "r=1000", Repetition: 1, Result: res, SLO: acceptance.SLO{TTFTMs: 200, TPOTMs: 20}}
	b.SetBytes(st.Size())
	b.ReportAllocs()
	var peak int64
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		debug.FreeOSMemory()
		canReset := resetHWM()
		cpu0 := cpuTime()
		b.StartTimer()
		ms, _, err := ImportFile(FormatProbeRequests, path, opts)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime() - cpu0
		if canReset {
			peak = max(peak, vmHWM())
		}
		if len(ms) == 0 || len(ms[0].Values) < millionRecords*9/10 {
			b.Fatalf("imported %d measurements", len(ms))
		}
		b.StartTimer()
	}
	if peak > 0 {
		b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
	}
	// CPU time (user + system, all threads) says what the import costs when
	// the machine is shared and wall time is not.
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestWriteRecordsIsImportable keeps the benchmark's generator honest.
func TestWriteRecordsIsImportable(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	window, err := writeRecords(w, 2000, 7)
	if err != nil {
		t.Fatal(err)
	}
	res := stepResult(window, 1000)
	ms, _, err := Import(FormatProbeRequests, buf.Bytes(), Options{Result: res})
	if err != nil {
		t.Fatal(err)
	}
	checkMeasurements(t, ms)
	m := byMetric(t, ms)
	if n := len(m[acceptance.MetricTTFT].Values); n < 1900 || n > 1980 {
		t.Fatalf("%d ttft samples from 2000 records (20 warm-up, ~1 %% failed)", n)
	}
}
