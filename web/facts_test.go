package web

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/gpu/gputest"
	"github.com/accordlab/accord/store"
)

// The host page's facts name every vendor's GPU with its model and
// driver, say why a fact a tool left out is blank, say which tool was
// superseded by which, give each NVIDIA GPU's NUMA affinity and path to
// each NIC from nvidia-smi topo -m, and each device's PCIe link against
// its maximum and its place in the PCIe tree.
func TestSummarizeFactsGPUs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	// The T4 on a root bus at its full link; the NPUs' address behind a
	// PCIe switch, trained at half its speed and width.
	pciDevice(t, root, "pci0000:00/0000:00:1e.0", "8.0 GT/s PCIe", "8.0 GT/s PCIe", "16", "16", "0")
	pciDevice(t, root, "pci0000:00/0000:00:02.0/0000:10:00.0/0000:11:00.0/0000:01:00.0", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "8", "16", "1")
	r := &facts.Runner{Root: root, LookPath: gputest.FakeTools(t, gputest.Recorded)}
	f, err := facts.Collect(context.Background(), facts.Options{Runner: r, SkipSmartLog: true})
	require.NoError(t, err)
	b, err := json.Marshal(f)
	require.NoError(t, err)
	sum := SummarizeFacts(store.HostFacts{TakenAt: time.Now(), Facts: b})
	byLabel := map[string]string{}
	for _, l := range sum.Lines {
		byLabel[l.Label] = l.Value
	}
	require.Equal(t, "Tesla T4, driver 515.105.01, firmware 90.04.84.00.06, 15 GiB, 0000:00:1e.0, NUMA node 0", byLabel["GPU 21 (nvidia-smi)"])
	require.Contains(t, byLabel["GPU 0 (amd-smi)"], "AMD Instinct MI210, driver Linuxversion6.14.0")
	require.Contains(t, byLabel["GPU 0 (amd-smi)"], "NUMA node 1")
	require.Equal(t, "Huawei Ascend xxx, driver 24.1.RC2, firmware 7.1.0.4.218, 32 GiB, 0000:c1:00.0", byLabel["GPU 13 (npu-smi)"], "NPU 0's board query")
	require.Equal(t, "Huawei Ascend xxx, driver 24.1.RC2, 32 GiB, 0000:01:00.0, NUMA node 1; firmware not reported: npu-smi info -t board -i 3 failed (its output is kept with the facts)",
		byLabel["GPU 16 (npu-smi)"])
	require.Contains(t, byLabel["GPU 0 (amd-smi)"], "; firmware not reported by amd-smi; PCIe address not reported by amd-smi")
	ix := ""
	for l, v := range byLabel {
		if strings.HasSuffix(l, "(ixsmi)") && strings.Contains(v, "MR-V50") {
			ix = v
		}
	}
	require.Contains(t, ix, "; driver not reported by ixsmi's query interface")
	require.Equal(t, "8.0 GT/s PCIe x16 (its maximum), NUMA node 0", byLabel["PCIe gpu Tesla T4 (0000:00:1e.0)"], "on the root bus: no bridge above it")
	require.Equal(t, "16.0 GT/s PCIe x8 of 32.0 GT/s PCIe x16, trained below its maximum (speed 16.0 GT/s PCIe of 32.0 GT/s PCIe, width x8 of x16), behind PCIe switch 0000:10:00.0, NUMA node 1",
		byLabel["PCIe gpu Huawei Ascend xxx (0000:01:00.0)"])
	require.Contains(t, byLabel["Accelerator tools"], "rocm-smi (superseded by amd-smi)")
	require.Equal(t, "NUMA affinity 1, mlx5_0 SYS, mlx5_1 NODE", byLabel["Topology GPU1"])
}

// pciDevice writes a PCIe device's sysfs link attributes under root and
// its /sys/bus/pci/devices symlink into the device tree at path.
func pciDevice(t *testing.T, root, path, cur, max, cw, mw, node string) {
	t.Helper()
	dir := filepath.Join(root, "sys/devices", path)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, v := range map[string]string{"current_link_speed": cur, "max_link_speed": max, "current_link_width": cw, "max_link_width": mw, "numa_node": node} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644))
	}
	bus := filepath.Join(root, "sys/bus/pci/devices")
	require.NoError(t, os.MkdirAll(bus, 0o755))
	require.NoError(t, os.Symlink("../../../devices/"+path, filepath.Join(bus, filepath.Base(path))))
}
