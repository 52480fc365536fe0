package facts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/gpu"
)

// recordedTools are shell scripts named like the vendor tools that print
// the recorded outputs of runners/probe/gpu/testdata for the argument
// vectors the adapters run (keyed by their first argument where a tool
// runs several commands).
var recordedTools = map[string]map[string]string{
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
	"brsmi":        {"": "brsmi-query-facts.csv"},
}

// fakeTools writes the scripts into a folder and returns a LookPath that
// finds tools there only. The scripts run for real (the Runner starts
// them as it starts any tool).
func fakeTools(t testing.TB, tools map[string]map[string]string) func(string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	data, err := filepath.Abs("../gpu/testdata")
	require.NoError(t, err)
	for tool, byArg := range tools {
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
		require.NoError(t, os.WriteFile(filepath.Join(dir, tool), []byte(sh.String()), 0o755))
	}
	return func(name string) (string, error) {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s: not found", name)
		}
		return p, nil
	}
}

// TestCollectGPUFromRecordedTools: a host with every vendor's tool
// reports every vendor's devices, with the NUMA node from sysfs.
func TestCollectGPUFromRecordedTools(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, "/sys/bus/pci/devices/0000:17:00.0/numa_node", "1\n") // the Enflame S60
	r := &Runner{Root: root, LookPath: fakeTools(t, recordedTools)}
	g := collectGPU(context.Background(), r)

	require.Len(t, g.Tools, len(gpu.Adapters()))
	counts := map[string]int{}
	for _, tool := range g.Tools {
		require.False(t, tool.Absent(), tool.Tool)
		require.Empty(t, tool.Error, tool.Tool)
		for _, s := range tool.Sources {
			require.True(t, s.OK(), "%s: %+v", tool.Tool, s)
			require.NotEmpty(t, s.Raw)
		}
		counts[tool.Tool] = tool.Devices
	}
	require.Equal(t, map[string]int{"nvidia-smi": 1, "rocm-smi": 4, "hy-smi": 1, "npu-smi": 8, "cnmon": 2, "xpu-smi": 2,
		"mthreads-gmi": 2, "mx-smi": 2, "ixsmi": 2, "efsmi": 1, "brsmi": 2}, counts)
	require.True(t, g.Source.OK(), "nvidia-smi's source is kept on its own")

	byTool := map[string]GPUDevice{}
	for _, d := range g.GPUs {
		if _, ok := byTool[d.Tool]; !ok {
			byTool[d.Tool] = d
		}
	}
	s60 := byTool["efsmi"]
	require.Equal(t, "Enflame", s60.Vendor)
	require.Equal(t, "1", s60.NUMANode.Value)
	require.Equal(t, "/sys/bus/pci/devices/0000:17:00.0/numa_node", s60.NUMANode.File)
	require.Equal(t, "Enflame S60", s60.Model())
	require.Equal(t, "Huawei Ascend xxx", byTool["npu-smi"].Model())
	require.Equal(t, "Tesla T4", byTool["nvidia-smi"].Model(), "NVIDIA names stay as they were before the other vendors")
	mi100 := byTool["rocm-smi"]
	require.Equal(t, "1", mi100.NUMANode.Value, "no sysfs entry: rocm-smi's own NUMA node")

	f := &Facts{GPU: g}
	cmp := f.Comparable()
	require.Contains(t, cmp["gpu.model"], "4x AMD Arcturus GL-XL [Instinct MI100]")
	require.Contains(t, cmp["gpu.driver"], "515.105.01")
	require.Contains(t, cmp["gpu.driver"], "24.1.RC2")
}

// A tool that runs but prints something else is an error with its raw
// output kept, not an absence, and lists no devices.
func TestCollectGPUBadOutput(t *testing.T) {
	t.Parallel()
	r := &Runner{Root: t.TempDir(), LookPath: fakeTools(t, map[string]map[string]string{"nvidia-smi": {"": "ixsmi-query-gpu.csv"}})}
	g := collectGPU(context.Background(), r)
	for _, tool := range g.Tools {
		if tool.Tool != "nvidia-smi" {
			require.True(t, tool.Absent(), tool.Tool)
			continue
		}
		require.False(t, tool.Absent())
		require.Contains(t, tool.Error, "parse: nvidia-smi: XML")
		require.Contains(t, tool.Sources[0].Raw, "Iluvatar")
	}
	require.Empty(t, g.GPUs)
	require.Contains(t, g.Source.Error, "parse:")
}

// TestPCILinks: a GPU behind a PCIe switch whose link trained at Gen3 x8
// instead of Gen4 x16, and a NIC on a root port at full speed.
func TestPCILinks(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dev := func(addr, cur, max, cw, mw, node string) {
		d := "/sys/devices/pci0000:00/" + addr
		write(t, root, d+"/current_link_speed", cur+"\n")
		write(t, root, d+"/max_link_speed", max+"\n")
		write(t, root, d+"/current_link_width", cw+"\n")
		write(t, root, d+"/max_link_width", mw+"\n")
		write(t, root, d+"/numa_node", node+"\n")
	}
	dev("0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "8", "16", "1")
	dev("0000:00:02.0/0000:04:00.0", "16.0 GT/s PCIe", "16.0 GT/s PCIe", "16", "16", "0")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "/sys/bus/pci/devices"), 0o755))
	require.NoError(t, os.Symlink("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0", filepath.Join(root, "/sys/bus/pci/devices/0000:03:00.0")))
	require.NoError(t, os.Symlink("../../../devices/pci0000:00/0000:00:02.0/0000:04:00.0", filepath.Join(root, "/sys/bus/pci/devices/0000:04:00.0")))
	f := &Facts{}
	f.GPU.GPUs = []GPUDevice{{Name: "NVIDIA H100", PCIBusID: "00000000:03:00.0"}}
	f.Network.Interfaces = []NIC{{Name: "ens1f0", Physical: true, BusInfo: Value{Value: "0000:04:00.0"}}}
	links := collectPCI(&Runner{Root: root}, f)
	require.Len(t, links, 2)
	g := links[0]
	require.Equal(t, "gpu", g.Role)
	require.Equal(t, []string{"0000:00:01.0", "0000:01:00.0", "0000:02:08.0"}, g.Upstream)
	require.Equal(t, "0000:01:00.0", g.Switch)
	require.Equal(t, "1", g.NUMANode.Value)
	how, bad := g.Degraded()
	require.True(t, bad)
	require.Equal(t, "speed 8.0 GT/s PCIe of 16.0 GT/s PCIe, width x8 of x16", how)
	_, bad = links[1].Degraded()
	require.False(t, bad)
	require.Empty(t, links[1].Switch, "on a root port")
}
