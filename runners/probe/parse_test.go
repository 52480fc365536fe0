package probe

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
)

const promBefore = `# HELP vllm:prefix_cache_queries_total Prefix cache queries.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 250
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="0.5"} 10
vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 12
vllm:e2e_request_latency_seconds_sum 4.5
vllm:e2e_request_latency_seconds_count 12
untyped_things_total 7 1712345678000
restarted_total{path="a\\b \"q\"\n"} 100
`

const promAfter = `# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{model_name="m",engine="0"} 1600
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 700
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 9
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="0.5"} 20
vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 30
vllm:e2e_request_latency_seconds_sum 9
vllm:e2e_request_latency_seconds_count 30
untyped_things_total 10
restarted_total{path="a\\b \"q\"\n"} 5
new_total 2
`

func TestPromDelta(t *testing.T) {
	t.Parallel()
	d, err := promDeltaText(promBefore, promAfter)
	require.NoError(t, err)
	require.Equal(t, map[string]float64{
		`vllm:prefix_cache_queries_total{engine="0",model_name="m"}`: 600,
		`vllm:prefix_cache_hits_total{engine="0",model_name="m"}`:    450,
		`vllm:e2e_request_latency_seconds_sum`:                       4.5,
		`vllm:e2e_request_latency_seconds_count`:                     18,
		`untyped_things_total`:                                       3,
		`restarted_total{path="a\\b \"q\"\n"}`:                       5, // reset: counted from zero
		`new_total`:                                                  2,
	}, d)
}

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	st, err := parseProcStat([]byte("1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615"))
	require.NoError(t, err)
	require.Equal(t, procStat{PID: 1234, Comm: "a (weird) name", State: 'S', PPID: 1, PGID: 1234, SID: 1234, StartTime: 987654}, st)
	self, err := readProcStat(os.Getpid())
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), self.PID)
	require.Equal(t, os.Getppid(), self.PPID)
}

func FuzzProcStat(f *testing.F) {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("1 (init) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0"))
	f.Add([]byte("2 ()) Z 0 1 1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseProcStat(b)
		if err == nil && st.State == 0 {
			t.Fatalf("parsed %q without a state", b)
		}
	})
}

func TestTelemetryParsers(t *testing.T) {
	t.Parallel()
	cpu, err := parseCPUStat([]byte("cpu  100 5 50 800 20 1 2 3 4 5\ncpu0 1 2 3 4 5 6 7 8\n"))
	require.NoError(t, err)
	require.Equal(t, cpuTimes{Busy: 100 + 5 + 50 + 1 + 2 + 3, Total: 100 + 5 + 50 + 800 + 20 + 1 + 2 + 3}, cpu)

	disks := parseDiskstats([]byte("   7       0 loop0 10 0 80 5 0 0 0 0 0 6 5 0 0 0 0\n 253       0 vda 500 20 4000 100 60 7 960 30 0 120 130 0 0 0 0 0 0\n"))
	require.Equal(t, diskCounters{ReadSectors: 4000, WriteSectors: 960, IOTicksMs: 120}, disks["vda"])
	require.Equal(t, diskCounters{ReadSectors: 80, IOTicksMs: 6}, disks["loop0"])

	nets := parseNetDev([]byte("Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes\n    lo: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n  eth0: 5 1 0 0 0 0 0 0 7 1 0 0 0 0 0 0\n"))
	require.Equal(t, netCounters{Rx: 1000, Tx: 2000}, nets["lo"])
	require.Equal(t, netCounters{Rx: 5, Tx: 7}, nets["eth0"])

	for _, path := range []string{"/proc/stat", "/proc/diskstats", "/proc/net/dev"} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		switch path {
		case "/proc/stat":
			c, err := parseCPUStat(b)
			require.NoError(t, err)
			require.Positive(t, c.Total)
		case "/proc/diskstats":
			require.NotEmpty(t, parseDiskstats(b))
		default:
			require.Contains(t, parseNetDev(b), "lo")
		}
	}
}

func FuzzTelemetryParsers(f *testing.F) {
	for _, p := range []string{"/proc/stat", "/proc/diskstats", "/proc/net/dev"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := parseCPUStat(b); err == nil && c.Busy > c.Total {
			t.Fatalf("busy %d > total %d", c.Busy, c.Total)
		}
		_ = parseDiskstats(b)
		_ = parseNetDev(b)
	})
}

// fio status documents as fio 3.33 writes them (trimmed): one taken during
// ramp_time (I/Os counted, no latency samples), then two after the reset.
const (
	fioRamp   = `{"timestamp_ms":1,"jobs":[{"jobname":"j","error":0,"read":{"total_ios":9779,"io_bytes":40046592,"runtime":841,"clat_ns":{"N":0}},"write":{"total_ios":0,"io_bytes":0,"runtime":0,"clat_ns":{"N":0}}}]}`
	fioFirst  = `{"timestamp_ms":2,"jobs":[{"jobname":"j","error":0,"read":{"total_ios":1000,"io_bytes":4096000,"runtime":1000,"clat_ns":{"N":1000,"bins":{"10000":900,"20000":90,"100000":10}}},"write":{"total_ios":0,"io_bytes":0,"runtime":0,"clat_ns":{"N":0}}}]}`
	fioSecond = `{"timestamp_ms":3,"jobs":[{"jobname":"j","error":0,"read":{"total_ios":3000,"io_bytes":12288000,"runtime":2000,"clat_ns":{"N":3000,"bins":{"10000":1000,"20000":1990,"100000":10}}},"write":{"total_ios":0,"io_bytes":0,"runtime":0,"clat_ns":{"N":0}}}]}`
)

func TestFioInterimWindows(t *testing.T) {
	t.Parallel()
	var s fioStream
	pretty := func(doc string) string {
		var v any
		require.NoError(t, json.Unmarshal([]byte(doc), &v))
		b, err := json.MarshalIndent(v, "", "  ")
		require.NoError(t, err)
		return string(b) + "\n"
	}
	first := pretty(fioFirst)
	docs := s.feed([]byte("note: capped\n" + pretty(fioRamp) + first[:40]))
	require.Len(t, docs, 1, "the incomplete document waits")
	docs = append(docs, s.feed([]byte(first[40:]+"{\nnot json\n}\n"+pretty(fioSecond)))...)
	require.Len(t, docs, 3)
	require.Len(t, s.docs, 3)

	snaps := make([]fioSnapshot, 3)
	for i, d := range docs {
		var err error
		snaps[i], err = parseFioSnapshot(d)
		require.NoError(t, err)
	}
	// After the ramp document, the window starts from zero.
	m, window := fioInterim(snaps[0], snaps[1])
	require.InDelta(t, 1.0, window, 1e-9)
	require.InDelta(t, 1000, *m[acceptance.MetricReadIOPS].Rate, 1e-9)
	require.InDelta(t, 4096000, *m[acceptance.MetricReadBW].Rate, 1e-9)
	clat := m[acceptance.MetricReadCLat]
	require.Equal(t, int64(1000), clat.N)
	require.InDelta(t, 10, clat.P50, 1e-9) // µs
	require.InDelta(t, 20, clat.P95, 1e-9)
	require.InDelta(t, 20, clat.P99, 1e-9)
	require.InDelta(t, 100, clat.Max, 1e-9)
	require.NotContains(t, m, acceptance.MetricWriteIOPS)

	// The next window is the difference.
	m, window = fioInterim(snaps[1], snaps[2])
	require.InDelta(t, 1.0, window, 1e-9)
	require.InDelta(t, 2000, *m[acceptance.MetricReadIOPS].Rate, 1e-9)
	clat = m[acceptance.MetricReadCLat]
	require.Equal(t, int64(2000), clat.N)
	require.InDelta(t, 20, clat.P50, 1e-9) // 100 at 10µs, 1900 at 20µs
	require.InDelta(t, 20, clat.Max, 1e-9)
}

func FuzzFioStream(f *testing.F) {
	f.Add([]byte("{\n" + fioRamp[1:len(fioRamp)-1] + "\n}\njunk {\n{\n\"a\":1\n}"))
	f.Add([]byte(strings.Repeat("{\n\"a\":", 2000)))
	f.Add([]byte("{{{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s fioStream
		mid := len(b) / 2
		n := len(s.feed(b[:mid])) + len(s.feed(b[mid:])) + len(s.finish())
		var whole fioStream
		if m := len(whole.feed(b)) + len(whole.finish()); m != n {
			// Splitting the input must not change what is found.
			t.Fatalf("split feed found %d documents, whole feed %d", n, m)
		}
		for _, d := range s.docs {
			if !json.Valid(d) {
				t.Fatalf("invalid document %q", d)
			}
			if snap, err := parseFioSnapshot(d); err == nil {
				_, _ = fioInterim(snap, snap)
			}
		}
	})
}

func TestFioJobFile(t *testing.T) {
	t.Parallel()
	f := &acceptance.FioStep{RW: "randrw", BlockSize: 4096, IODepth: 32, NumJobs: 4, Size: 1 << 30,
		Runtime: acceptance.Duration(60e9), IOEngine: "io_uring", Direct: true, Target: "/mnt/a:b/file"}
	require.NoError(t, validateFio(f))
	job := fioJobFile("kv", f, 5e9)
	for _, line := range []string{"ioengine=io_uring", "rw=randrw", "bs=4096", "iodepth=32", "numjobs=4", "size=1073741824",
		"time_based=1", "runtime=60000ms", "ramp_time=5000ms", "direct=1", "rwmixread=50", `filename=/mnt/a\:b/file`, "thread=1", "[kv]"} {
		require.Contains(t, strings.Split(job, "\n"), line)
	}
	for _, bad := range []acceptance.FioStep{
		{RW: "randread\nexec_prerun=x", BlockSize: 4096, IODepth: 1, NumJobs: 1, Size: 8192, Runtime: 1e9, IOEngine: "psync", Target: "/x"},
		{RW: "randread", BlockSize: 4096, IODepth: 1, NumJobs: 1, Size: 8192, Runtime: 1e9, IOEngine: "psync", Target: "/x\nexec_prerun=rm"},
		{RW: "randread", BlockSize: 4096, IODepth: 1, NumJobs: 1, Size: 8192, Runtime: 1e9, IOEngine: "exec", Target: "/x"},
		{RW: "randread", BlockSize: 0, IODepth: 1, NumJobs: 1, Size: 8192, Runtime: 1e9, IOEngine: "psync", Target: "/x"},
	} {
		require.Error(t, validateFio(&bad), "%+v", bad)
	}
}
