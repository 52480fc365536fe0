package probe

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/counters"
	"github.com/accordlab/accord/runners/probe/exporter"
	"github.com/accordlab/accord/runners/probe/gpu/gputest"
)

func fakeGPUTools(tb testing.TB) func(string) (string, error) {
	return gputest.FakeTools(tb, gputest.Recorded)
}

// TestTelemetrySamplesEveryVendor: one sample on a host with every
// vendor's tool reads every vendor's devices.
func TestTelemetrySamplesEveryVendor(t *testing.T) {
	t.Parallel()
	tools := presentTools(fakeGPUTools(t))
	require.Len(t, tools, len(gputest.Recorded)-1, "rocm-smi is superseded by amd-smi")
	gs := sampleGPUs(context.Background(), tools)
	per := map[string]int{}
	npuBW := map[int]*float64{}
	for _, g := range gs {
		per[g.Tool]++
		if g.Tool == "npu-smi" {
			npuBW[g.Index] = g.MemBWPct
		}
	}
	require.Equal(t, map[string]int{"nvidia-smi": 1, "amd-smi": 2, "hy-smi": 1, "npu-smi": 8, "cnmon": 2, "xpu-smi": 2,
		"mthreads-gmi": 2, "mx-smi": 2, "ixsmi": 2, "efsmi": 1, "brsmi": 2}, per)
	require.NotNil(t, meanUtil(gs))
	// npu-smi's bandwidth comes from its per-NPU usages commands: NPUs 0
	// and 1 answered, the others failed and have none.
	require.NotNil(t, npuBW[0])
	require.InDelta(t, 51, *npuBW[1], 0)
	require.Nil(t, npuBW[2])
}

// TestTelemetryOnThisHostHasNoGPUTool: this machine has none of the tools.
func TestTelemetryOnThisHostHasNoGPUTool(t *testing.T) {
	t.Parallel()
	for _, pt := range presentTools(lookPathReal) {
		t.Logf("%s is installed here", pt.adapter.Tool)
	}
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		require.Empty(t, sampleGPUs(context.Background(), presentTools(lookPathReal)), "no tool: no sample, no failure")
	}
}

func cpuTime() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	d := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return d(self.Utime) + d(self.Stime) + d(children.Utime) + d(children.Stime)
}

// BenchmarkTelemetryOverhead is the probe's cost of one second of
// telemetry: this host's own counters (/proc, /sys/class/net, /sys/block,
// and RDMA where there is any); plus every vendor adapter probed (fake
// tools printing recorded outputs, one process per telemetry command,
// npu-smi's per-NPU usages included); plus the three built-in exporters
// scraped from real HTTP servers on loopback. It prints the wall time and
// the CPU time (probe and children) per sample: the share of one CPU the
// sampling takes is cpu-ms/1000.
func BenchmarkTelemetryOverhead(b *testing.B) {
	lookPath := fakeGPUTools(b)
	var exporters []*exporterSource
	for _, e := range []struct{ file, kind string }{
		{"dcgm-exporter-tesla-t4.prom", acceptance.ExporterDCGM},
		{"amd-device-metrics-exporter-mi300x.prom", acceptance.ExporterAMD},
		{"ascend-npu-exporter-910.prom", acceptance.ExporterAscendNPU},
	} {
		m, _ := exporter.Builtin(e.kind)
		exporters = append(exporters, &exporterSource{name: e.kind, url: serveExposition(b, e.file), mapping: m})
	}
	for _, c := range []struct {
		name            string
		tools, scrapers bool
	}{{"counters-only", false, false}, {"all-gpu-adapters", true, false}, {"all-gpu-adapters-and-3-exporters", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			t := &telemetry{start: time.Now(), counter: counters.NewReader(), warn: func(string, ...any) {}}
			if c.tools {
				t.gpus = presentTools(lookPath)
			}
			if c.scrapers {
				t.exporters = exporters
			}
			ctx := context.Background()
			prev := t.readState(ctx)
			cpu0 := cpuTime()
			start := time.Now()
			n := 0
			for b.Loop() {
				cur := t.readState(ctx)
				_ = t.sample(ctx, prev, cur)
				prev = cur
				n++
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(n), "wall-ms/sample")
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(n), "cpu-ms/sample")
		})
	}
}

func lookPathReal(name string) (string, error) { return exec.LookPath(name) }
