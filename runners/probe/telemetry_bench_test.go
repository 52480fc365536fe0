package probe

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/counters"
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
// telemetry with all eleven vendor adapters probed (fake tools printing
// recorded outputs, one process per telemetry command) plus this host's
// own counters (/proc, /sys/class/net, /sys/block, and RDMA where there
// is any). It prints the wall time and the CPU time (probe and children)
// per sample: the share of one CPU the sampling takes is cpu-ms/1000.
func BenchmarkTelemetryOverhead(b *testing.B) {
	lookPath := fakeGPUTools(b)
	for _, withGPU := range []bool{false, true} {
		name := "counters-only"
		if withGPU {
			name = "all-11-gpu-adapters"
		}
		b.Run(name, func(b *testing.B) {
			t := &telemetry{start: time.Now(), counter: counters.NewReader()}
			if withGPU {
				t.gpus = presentTools(lookPath)
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
