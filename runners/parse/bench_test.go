package parse

import (
	"bufio"
	"bytes"
	"math/rand/v2"
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

// writeRecords writes n realistic request records, as the probe's encoder
// would (field order of wire.RequestRecord, omitempty): an open-loop level
// at 1000 requests/s with 1 % warm-up, 1 % failures and 0.5 % requests
// whose usage was counted from chunks.
func writeRecords(w *bufio.Writer, n int, seed uint64) (window float64, err error) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const rate = 1000.0
	var b []byte
	for i := 0; i < n; i++ {
		intended := int64(float64(i) / rate * 1e9)
		sent := intended + int64(rng.ExpFloat64()*50_000) // ~50 µs late
		ttft := int64((80 + rng.ExpFloat64()*40) * 1e6)
		out := 64 + rng.IntN(192)
		tpot := int64((15 + rng.NormFloat64()*2) * 1e6)
		if tpot < 1e6 {
			tpot = 1e6
		}
		firstChunk := sent + ttft - 2e6
		firstToken := sent + ttft
		lastToken := firstToken + int64(out-1)*tpot
		done := lastToken + 300_000
		b = b[:0]
		b = append(b, `{"id":`...)
		b = strconv.AppendInt(b, int64(i+1), 10)
		if i < n/100 {
			b = append(b, `,"warmup":true`...)
		}
		b = append(b, `,"t_intended":`...)
		b = strconv.AppendInt(b, intended, 10)
		b = append(b, `,"t_sent":`...)
		b = strconv.AppendInt(b, sent, 10)
		failed := rng.IntN(100) == 0
		if failed {
			b = append(b, `,"t_first_chunk":0,"t_first_token":0,"t_first_content":0,"t_last_token":0,"t_done":`...)
			b = strconv.AppendInt(b, sent+5e6, 10)
			b = append(b, `,"prompt_tokens":0,"output_tokens":0,"chunks":0,"error_kind":"http","error":"HTTP 503: {\"object\":\"error\",\"message\":\"server overloaded\"}","http_status":503}`...)
		} else {
			for _, f := range []struct {
				k string
				v int64
			}{{`,"t_first_chunk":`, firstChunk}, {`,"t_first_token":`, firstToken}, {`,"t_first_content":`, firstToken},
				{`,"t_last_token":`, lastToken}, {`,"t_done":`, done}, {`,"prompt_tokens":`, int64(480 + rng.IntN(64))},
				{`,"output_tokens":`, int64(out)}} {
				b = append(b, f.k...)
				b = strconv.AppendInt(b, f.v, 10)
			}
			if rng.IntN(200) == 0 {
				b = append(b, `,"usage_counted":true`...)
			}
			b = append(b, `,"chunks":`...)
			b = strconv.AppendInt(b, int64(out), 10)
			b = append(b, '}')
		}
		b = append(b, '\n')
		if _, err := w.Write(b); err != nil {
			return 0, err
		}
	}
	return float64(n) / rate * 0.99, w.Flush()
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
