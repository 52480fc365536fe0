package facts

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/gpu"
	"github.com/accordlab/accord/runners/probe/gpu/gputest"
)

// TestCollectGPUFromRecordedTools: a host with every vendor's tool
// reports every vendor's devices, with the NUMA node from sysfs.
func TestCollectGPUFromRecordedTools(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, "/sys/bus/pci/devices/0000:17:00.0/numa_node", "1\n") // the Enflame S60
	r := &Runner{Root: root, LookPath: gputest.FakeTools(t, gputest.Recorded)}
	g := collectGPU(context.Background(), r)

	require.Len(t, g.Tools, len(gpu.Adapters()))
	counts := map[string]int{}
	for _, tool := range g.Tools {
		require.False(t, tool.Absent(), tool.Tool)
		require.Empty(t, tool.Error, tool.Tool)
		for _, s := range tool.Sources {
			if tool.Tool == "npu-smi" && len(s.Command) == 6 && s.Command[3] == "board" && s.Command[5] != "0" {
				// The fake npu-smi answers the board query of NPU 0 only.
				require.Contains(t, s.Error, "exit status 1", "%+v", s)
				continue
			}
			require.True(t, s.OK(), "%s: %+v", tool.Tool, s)
			require.NotEmpty(t, s.Raw)
		}
		counts[tool.Tool] = tool.Devices
	}
	require.Equal(t, map[string]int{"nvidia-smi": 1, "amd-smi": 1, "rocm-smi": 4, "hy-smi": 1, "npu-smi": 8, "cnmon": 2, "xpu-smi": 2,
		"mthreads-gmi": 2, "mx-smi": 2, "ixsmi": 2, "efsmi": 1, "brsmi": 2}, counts)
	require.True(t, g.Source.OK(), "nvidia-smi's source is kept on its own")

	// amd-smi and rocm-smi both installed: amd-smi's devices, rocm-smi's
	// output kept as evidence only.
	perTool := map[string]int{}
	for _, d := range g.GPUs {
		perTool[d.Tool]++
	}
	require.Equal(t, 1, perTool["amd-smi"])
	require.Zero(t, perTool["rocm-smi"])
	for _, tool := range g.Tools {
		if tool.Tool == "rocm-smi" {
			require.Equal(t, "amd-smi", tool.SupersededBy)
		}
	}

	// nvidia-smi topo -m is taken beside the devices.
	require.NotNil(t, g.TopologySource)
	require.True(t, g.TopologySource.OK(), "%+v", g.TopologySource)
	require.Equal(t, []string{"nvidia-smi", "topo", "-m"}, g.TopologySource.Command)
	require.NotNil(t, g.Topology)
	require.Equal(t, "NODE", g.Topology.Link("GPU0", "mlx5_0"))

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
	mi210 := byTool["amd-smi"]
	require.Equal(t, "1", mi210.NUMANode.Value, "no sysfs entry: amd-smi's own NUMA node")
	require.Equal(t, "AMD Instinct MI210", mi210.Model())

	// Every blank driver, firmware or PCIe address says why; where a
	// second command gives a fact (ixsmi's ids, hy-smi's bus and driver,
	// npu-smi's board), it is read.
	for _, d := range g.GPUs {
		for field, v := range map[string]string{"driver_version": d.DriverVersion, "firmware_version": d.Firmware, "pci_address": d.PCIBusID} {
			if v == "" {
				require.NotEmpty(t, d.NotReported[field], "%s %s: %s is blank without a reason", d.Tool, d.Name, field)
			} else {
				require.NotContains(t, d.NotReported, field)
			}
		}
	}
	require.Equal(t, "0000:3b:00.0", byTool["ixsmi"].PCIBusID)
	require.Contains(t, byTool["ixsmi"].NotReported["driver_version"], "ixsmi's query interface")
	require.Equal(t, "6.3.27-V1.2.5", byTool["hy-smi"].DriverVersion)
	require.Equal(t, "0000:05:00.0", byTool["hy-smi"].PCIBusID)
	require.Equal(t, "7.1.0.4.218", byTool["npu-smi"].Firmware, "NPU 0's board query")
	require.Equal(t, "0000:03:00.0", byTool["xpu-smi"].PCIBusID)
	require.Contains(t, byTool["efsmi"].NotReported["firmware_version"], "not reported by efsmi")
	require.Contains(t, byTool["brsmi"].NotReported["firmware_version"], "not reported by brsmi")
	require.Equal(t, "not reported by amd-smi", byTool["amd-smi"].NotReported["pci_address"])

	f := &Facts{GPU: g}
	cmp := f.Comparable()
	require.Contains(t, cmp["gpu.model"], "AMD Instinct MI210")
	require.NotContains(t, cmp["gpu.model"], "MI100", "rocm-smi's devices are not counted twice")
	require.Contains(t, cmp["gpu.driver"], "515.105.01")
	require.Contains(t, cmp["gpu.driver"], "24.1.RC2")
}

// A tool that runs but prints something else is an error with its raw
// output kept, not an absence, and lists no devices.
func TestCollectGPUBadOutput(t *testing.T) {
	t.Parallel()
	r := &Runner{Root: t.TempDir(), LookPath: gputest.FakeTools(t, map[string]map[string]string{"nvidia-smi": {"*": "ixsmi-query-gpu.csv"}})}
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
	require.Nil(t, g.Topology)
	require.Contains(t, g.TopologySource.Error, "parse: nvidia-smi topo")
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
