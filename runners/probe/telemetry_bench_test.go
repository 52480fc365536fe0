package probe

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/counters"
)

// recordedGPUTools are fake vendor tools that print the recorded outputs
// in runners/probe/gpu/testdata, keyed by their first argument.
var recordedGPUTools = map[string]map[string]string{
	"nvidia-smi":   {"": "nvidia-smi-q-x-tesla-t4.xml"},
	"rocm-smi":     {"": "rocm-smi-mi100-rocm602.json"},
	"hy-smi":       {"": "hy-smi-dcu-dtk24.04.3.json"},
	"npu-smi":      {"": "npu-smi-info-atlas800-9010-24.1.RC2.txt"},
	"cnmon":        {"": "cnmon-info-mlu370.txt"},
	"xpu-smi":      {"-m": "xpu-smi-m-p800.txt", "-q": "xpu-smi-q-p800.txt"},
	"mthreads-gmi": {"": "mthreads-gmi-q-json-s4000.json"},
	"mx-smi":       {"": "mx-smi-c500.txt", "--show-usage": "mx-smi-show-usage.txt", "--show-memory": "mx-smi-show-memory.txt", "--show-board-power": "mx-smi-show-board-power.txt"},
	"ixsmi":        {"": "ixsmi-query-gpu.csv"},
	"efsmi":        {"": "efsmi-q-s60.txt"},
	"brsmi":        {"": "brsmi-query-telemetry.csv"},
}

func fakeGPUTools(tb testing.TB) func(string) (string, error) {
	tb.Helper()
	dir := tb.TempDir()
	data, err := filepath.Abs("gpu/testdata")
	require.NoError(tb, err)
	for tool, byArg := range recordedGPUTools {
		var sh strings.Builder
		sh.WriteString("#!/bin/sh\ncase \"$1\" in\n")
		for arg, file := range byArg {
			if arg != "" {
				fmt.Fprintf(&sh, "%s) exec cat %q ;;\n", arg, filepath.Join(data, file))
			}
		}
		if file, ok := byArg[""]; ok {
			fmt.Fprintf(&sh, "*) exec cat %q ;;\n", filepath.Join(data, file))
		}
		sh.WriteString("esac\n")
		require.NoError(tb, os.WriteFile(filepath.Join(dir, tool), []byte(sh.String()), 0o755))
	}
	return func(name string) (string, error) {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
}

// TestTelemetrySamplesEveryVendor: one sample on a host with every
// vendor's tool reads every vendor's devices.
func TestTelemetrySamplesEveryVendor(t *testing.T) {
	t.Parallel()
	tools := presentTools(fakeGPUTools(t))
	require.Len(t, tools, len(recordedGPUTools))
	gs := sampleGPUs(context.Background(), tools)
	per := map[string]int{}
	for _, g := range gs {
		per[g.Tool]++
	}
	require.Equal(t, map[string]int{"nvidia-smi": 1, "rocm-smi": 4, "hy-smi": 1, "npu-smi": 8, "cnmon": 2, "xpu-smi": 2,
		"mthreads-gmi": 2, "mx-smi": 2, "ixsmi": 2, "efsmi": 1, "brsmi": 2}, per)
	require.NotNil(t, meanUtil(gs))
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
