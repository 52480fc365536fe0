package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/gpu"
	"github.com/accordlab/accord/runners/probe/gpu/gputest"
	"github.com/accordlab/accord/runners/probe/wire"
)

// TestRunWithRecordedVendorTools: a whole run, in-process, on a host
// whose PATH has every vendor's tool (scripts printing the recorded
// outputs of runners/probe/gpu/testdata) and a gdsio. facts.json lists
// every vendor's devices; telemetry.jsonl samples every tool the run
// uses (rocm-smi, superseded by amd-smi, is not sampled); the command
// step running gdsio keeps its output and its CPU time for the importer.
func TestRunWithRecordedVendorTools(t *testing.T) {
	t.Parallel()
	tools := map[string]map[string]string{"gdsio": {"*": "gdsio-x0-read-forum-cuda12.2.txt"}}
	for k, v := range gputest.Recorded {
		tools[k] = v
	}
	host := Host{LookPath: gputest.InFrontOfPath(gputest.Dir(t, tools))}
	plan := planOf(
		// Long enough for a few telemetry samples: a tool that misses the
		// one-second limit of one sample on a loaded machine has others.
		acceptance.StepSpec{Name: "settle", Kind: acceptance.StepCommand, Command: &acceptance.CommandStep{Program: "sleep", Args: []string{"3"}, Format: acceptance.FormatText}},
		acceptance.StepSpec{Name: "gds", Kind: acceptance.StepCommand, Command: &acceptance.CommandStep{Program: "gdsio",
			Args: []string{"-f", "/mnt/dd.txt", "-d", "0", "-w", "4", "-s", "100G", "-i", "1M", "-I", "0", "-x", "0"}, Format: acceptance.FormatGdsioText}},
	)
	dir := runDir(t, plan)
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.Equal(t, ExitOK, RunIn(ctx, dir, host, &stderr), stderr.String())

	// The host facts: every vendor's devices, each from its own tool.
	raw, err := os.ReadFile(filepath.Join(dir, wire.FactsFile))
	require.NoError(t, err)
	var f facts.Facts
	require.NoError(t, json.Unmarshal(raw, &f))
	perTool := map[string]int{}
	for _, d := range f.GPU.GPUs {
		perTool[d.Tool]++
	}
	require.Equal(t, map[string]int{"nvidia-smi": 1, "amd-smi": 1, "hy-smi": 1, "npu-smi": 8, "cnmon": 2, "xpu-smi": 2,
		"mthreads-gmi": 2, "mx-smi": 2, "ixsmi": 2, "efsmi": 1, "brsmi": 2}, perTool, "rocm-smi's devices are amd-smi's")
	models := map[string]bool{}
	for _, d := range f.GPU.GPUs {
		models[d.Model()] = true
	}
	for _, m := range []string{"Tesla T4", "AMD Instinct MI210", "Huawei Ascend xxx", "Cambricon MLU370-X8", "Enflame S60", "MetaX C500", "Moore Threads MTT S4000"} {
		require.True(t, models[m], "%s in %v", m, models)
	}
	require.Len(t, f.GPU.Tools, len(gpu.Adapters()))
	for _, tool := range f.GPU.Tools {
		require.False(t, tool.Absent(), tool.Tool)
		require.Empty(t, tool.Error, tool.Tool)
	}
	require.NotNil(t, f.GPU.Topology, "nvidia-smi topo -m")

	// The telemetry of the first step: every tool in use, with the
	// recorded readings.
	samples := telemetryOf(t, filepath.Join(dir, wire.OutputDir, "01-settle", "rep-1", wire.TelemetryFile))
	require.NotEmpty(t, samples)
	seen := map[string]map[int]wire.GPUSample{}
	withUtil := 0
	for _, s := range samples {
		// A sample whose tools all missed the one-second limit (a loaded
		// machine) has no host figure; the others have it.
		if s.GPUUtilPct != nil {
			withUtil++
		}
		for _, g := range s.GPUs {
			if seen[g.Tool] == nil {
				seen[g.Tool] = map[int]wire.GPUSample{}
			}
			// A tool's sub-command can miss the limit too (npu-smi's
			// power or usages): keep each device's fullest reading.
			if prev, ok := seen[g.Tool][g.Index]; !ok || readings(g) >= readings(prev) {
				seen[g.Tool][g.Index] = g
			}
		}
	}
	require.Positive(t, withUtil, "the host's GPU utilisation in some sample")
	counts := map[string]int{}
	for tool, devs := range seen {
		counts[tool] = len(devs)
	}
	require.Equal(t, map[string]int{"nvidia-smi": 1, "amd-smi": 2, "hy-smi": 1, "npu-smi": 8, "cnmon": 2, "xpu-smi": 2,
		"mthreads-gmi": 2, "mx-smi": 2, "ixsmi": 2, "efsmi": 1, "brsmi": 2}, counts)
	mi300 := seen["amd-smi"][0]
	require.Equal(t, 94.0, *mi300.UtilPct)
	require.Equal(t, 61.0, *mi300.MemBWPct)
	require.Equal(t, 612.0, *mi300.PowerW)
	require.Equal(t, int64(17153<<20), *mi300.MemUsedBytes)
	require.Equal(t, 206.9, *seen["npu-smi"][3].PowerW)
	require.Equal(t, 51.0, *seen["npu-smi"][1].MemBWPct, "npu-smi info -t usages -i 1: the DDR bandwidth")
	require.Nil(t, seen["npu-smi"][2].MemBWPct, "no usages output for NPU 2: absent, not zero")

	// The command step ran gdsio, kept what it printed, and said what
	// the command cost the CPU.
	stepDir := filepath.Join(dir, wire.OutputDir, "02-gds", "rep-1")
	out, err := os.ReadFile(filepath.Join(stepDir, "output.txt"))
	require.NoError(t, err)
	require.Contains(t, string(out), "XferType: GPUD")
	var res wire.StepResult
	b, err := os.ReadFile(filepath.Join(stepDir, wire.StepResultFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &res))
	require.Equal(t, acceptance.FormatGdsioText, res.Format)
	require.NotNil(t, res.Command)
	require.GreaterOrEqual(t, res.Command.CPUSeconds, 0.0)
	require.Positive(t, res.Command.WallSeconds)
}

func telemetryOf(t *testing.T, name string) []wire.TelemetrySample {
	t.Helper()
	raw, err := os.ReadFile(name)
	require.NoError(t, err)
	var out []wire.TelemetrySample
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s wire.TelemetrySample
		require.NoError(t, json.Unmarshal(sc.Bytes(), &s))
		out = append(out, s)
	}
	require.NoError(t, sc.Err())
	return out
}

// readings counts the figures a GPU sample holds.
func readings(g wire.GPUSample) int {
	n := 0
	for _, set := range []bool{g.UtilPct != nil, g.MemUsedBytes != nil, g.MemBWPct != nil, g.PowerW != nil} {
		if set {
			n++
		}
	}
	return n
}
