package gpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

func f(v float64) *float64 { return &v }
func i(v int64) *int64     { return &v }

const MiB = 1 << 20

func TestEveryVendorHasAnAdapter(t *testing.T) {
	t.Parallel()
	var tools []string
	for _, a := range Adapters() {
		tools = append(tools, a.Tool)
		require.NotEmpty(t, a.Vendor)
	}
	require.Equal(t, []string{"amd-smi", "brsmi", "cnmon", "efsmi", "hy-smi", "ixsmi", "mthreads-gmi", "mx-smi", "npu-smi", "nvidia-smi", "rocm-smi", "xpu-smi"}, tools)
}

// facts runs an adapter's facts parser on recorded outputs; an empty
// file name is a command that failed (a nil output).
func facts(t *testing.T, tool string, files ...string) []Device {
	t.Helper()
	a, ok := Lookup(tool)
	require.True(t, ok)
	var outs [][]byte
	for _, f := range files {
		if f == "" {
			outs = append(outs, nil)
			continue
		}
		outs = append(outs, read(t, f))
	}
	d, err := a.ParseFacts(outs)
	require.NoError(t, err)
	return d
}

func telemetry(t *testing.T, tool string, files ...string) []Sample {
	t.Helper()
	a, _ := Lookup(tool)
	var outs [][]byte
	for _, f := range files {
		outs = append(outs, read(t, f))
	}
	s, err := a.ParseTelemetry(outs)
	require.NoError(t, err)
	return s
}

func TestNvidiaSMI(t *testing.T) {
	t.Parallel()
	d := facts(t, "nvidia-smi", "nvidia-smi-q-x-a100-sxm4-v12.xml")
	require.Equal(t, []Device{{Index: 0, Name: "NVIDIA A100-SXM4-80GB", UUID: "GPU-513536b6-7d19-9063-b049-1e69664bb298",
		Driver: "535.54.03", Firmware: "92.00.36.00.02", MemoryBytes: 81920 * MiB, PCIAddress: "0000:01:00.0"}}, d)
	// With MIG on, whole-GPU utilisation is N/A: absent, not zero.
	s := telemetry(t, "nvidia-smi", "nvidia-smi-q-x-a100-sxm4-v12.xml")
	require.Equal(t, []Sample{{Index: 0, MemUsedBytes: i(50 * MiB), PowerW: f(67.03)}}, s)

	// Drivers before 530 put power_draw under power_readings.
	s = telemetry(t, "nvidia-smi", "nvidia-smi-q-x-tesla-t4.xml")
	require.Equal(t, []Sample{{Index: 0, UtilPct: f(0), MemBWPct: f(0), MemUsedBytes: i(1032 * MiB), PowerW: f(26.78)}}, s)
	d = facts(t, "nvidia-smi", "nvidia-smi-q-x-tesla-t4.xml")
	require.Equal(t, "Tesla T4", d[0].Name)
	require.Equal(t, "515.105.01", d[0].Driver)

	d = facts(t, "nvidia-smi", "nvidia-smi-q-x-rtx-4000-sff-ada-v13.xml")
	require.Len(t, d, 1)
	require.NotEmpty(t, d[0].PCIAddress)
	require.Positive(t, d[0].MemoryBytes)
}

func TestROCmSMI(t *testing.T) {
	t.Parallel()
	d := facts(t, "rocm-smi", "rocm-smi-mi100-rocm602.json")
	require.Len(t, d, 4)
	require.Equal(t, Device{Index: 1, Name: "Arcturus GL-XL [Instinct MI100]", UUID: "0x4edfb117a17a07d", Driver: "6.3.6",
		Firmware: "113-D3431401-101", MemoryBytes: 34342961152, PCIAddress: "0000:a3:00.0", NUMANode: "1"}, d[1])
	s := telemetry(t, "rocm-smi", "rocm-smi-mi100-rocm602.json")
	require.Equal(t, Sample{Index: 3, UtilPct: f(0), MemBWPct: f(0), MemUsedBytes: i(6750208), PowerW: f(39)}, s[3])

	d = facts(t, "rocm-smi", "rocm-smi-rx6700xt-rocm612.json")
	require.Equal(t, "Navi 22 [Radeon RX 6700/6700 XT / 6800M]", d[0].Name)
	require.Equal(t, "55069", d[0].UUID, "Unique ID is N/A: the GUID stands in")
}

func TestAMDSMI(t *testing.T) {
	t.Parallel()
	// ROCm 6.4+ wraps the list in gpu_data; this MI210 has no bdf in its
	// bus section and a driver version that is the kernel's banner.
	d := facts(t, "amd-smi", "amd-smi-static-json-mi210.json")
	require.Len(t, d, 1)
	require.Equal(t, "AMD Instinct MI210", d[0].Name)
	require.Equal(t, int64(65520*MiB), d[0].MemoryBytes)
	require.Equal(t, "1", d[0].NUMANode)
	require.Empty(t, d[0].PCIAddress)
	require.Empty(t, d[0].Firmware, "vbios has only a name")
	require.True(t, strings.HasPrefix(d[0].Driver, "Linuxversion6.14.0-24-generic"), d[0].Driver)
	a, _ := Lookup("amd-smi")
	a.Explain(d)
	require.Equal(t, map[string]string{"firmware_version": "not reported by amd-smi", "pci_address": "not reported by amd-smi"}, d[0].NotReported,
		"the blanks are said, not silent")

	// The MI300A of AMD's own README: bus.bdf is there, the VBIOS N/A.
	d = facts(t, "amd-smi", "amd-smi-static-json-mi300a-readme.json")
	require.Equal(t, []Device{{Index: 0, Name: "MI300A", UUID: "0x7E8F7E20764E2714", Driver: "6.9.0-rc5+", MemoryBytes: 64289 * MiB,
		PCIAddress: "0000:01:00.0", NUMANode: "0"}}, d)

	s := telemetry(t, "amd-smi", "amd-smi-metric-json-gpu-data.json")
	require.Equal(t, []Sample{
		{Index: 0, UtilPct: f(94), MemBWPct: f(61), MemUsedBytes: i(17153 * MiB), PowerW: f(612)},
		{Index: 1, UtilPct: f(0), MemUsedBytes: i(284 * MiB)},
	}, s, "N/A readings are absent, not zero")

	// Releases before 6.4 print the bare list; -p alone gives only power.
	s = telemetry(t, "amd-smi", "amd-smi-metric-p-json-list.json")
	require.Equal(t, []Sample{{Index: 0, PowerW: f(10)}}, s)
}

func TestAMDSMISupersedesROCmSMI(t *testing.T) {
	t.Parallel()
	installed := map[string]bool{"amd-smi": true, "rocm-smi": true, "nvidia-smi": true}
	require.Equal(t, map[string]bool{"rocm-smi": true}, Superseded(func(tool string) bool { return installed[tool] }))
	require.Empty(t, Superseded(func(tool string) bool { return tool == "rocm-smi" }), "rocm-smi alone is used")
}

func TestHySMI(t *testing.T) {
	t.Parallel()
	// The JSON (DTK's SMI) has neither the bus nor the driver: the text of
	// --showbus and --showdriverversion gives them.
	d := facts(t, "hy-smi", "hy-smi-dcu-dtk24.04.3.json", "hy-smi-showbus-8hcu.txt", "hy-smi-showdriverversion.txt")
	require.Equal(t, []Device{{Index: 0, Name: "DCU xxxx", UUID: "7100fa8866904061", MemoryBytes: 65520 * MiB, Driver: "6.3.27-V1.2.5", PCIAddress: "0000:05:00.0"}}, d)
	// A release that refuses them: the devices stay, the blanks are said.
	d = facts(t, "hy-smi", "hy-smi-dcu-dtk24.04.3.json", "", "")
	require.Equal(t, "DCU xxxx", d[0].Name)
	require.Contains(t, d[0].NotReported["pci_address"], "hy-smi --showbus failed")
	require.Contains(t, d[0].NotReported["driver_version"], "hy-smi --showdriverversion failed")
	// A JSON that has the bus, as newer HyHAL prints it (address, serial, OAM id).
	withBus := strings.Replace(string(read(t, "hy-smi-dcu-dtk24.04.3.json")), `"Device ID": "0x6210",`, `"Device ID": "0x6210", "PCI Bus": "0000:9f:00.0 --> SN: TPXxxxx --> OAM ID: 1",`, 1)
	a, _ := Lookup("hy-smi")
	d, err := a.ParseFacts([][]byte{[]byte(withBus), nil, nil})
	require.NoError(t, err)
	require.Equal(t, "0000:9f:00.0", d[0].PCIAddress)
	s := telemetry(t, "hy-smi", "hy-smi-dcu-dtk24.04.3.json")
	require.Equal(t, []Sample{{Index: 0, UtilPct: f(0), MemUsedBytes: i(2 * MiB), PowerW: f(80)}}, s)
}

func TestNPUSMI(t *testing.T) {
	t.Parallel()
	// The table, then each NPU's board query: NPU 0's gives the firmware
	// (Huawei's documented board output), NPU 1's is NA (not readable by
	// the user), the others failed.
	board := read(t, "npu-smi-info-t-board-200i-a2-24.1.RC2.txt")
	na := []byte(strings.Replace(string(board), "7.1.0.4.218", "NA", 1))
	a, _ := Lookup("npu-smi")
	table := read(t, "npu-smi-info-atlas800-9010-24.1.RC2.txt")
	require.Equal(t, [][]string{{"info", "-t", "board", "-i", "0"}, {"info", "-t", "board", "-i", "1"}}, a.MoreFacts([][]byte{table})[:2])
	d, err := a.ParseFacts([][]byte{table, board, na, nil, nil, nil, nil, nil, nil})
	require.NoError(t, err)
	require.Len(t, d, 8, "the process table is not read as devices")
	require.Equal(t, "7.1.0.4.218", d[0].Firmware)
	require.Contains(t, d[1].NotReported["firmware_version"], "npu-smi printed NA")
	require.Equal(t, Device{Index: 3, Name: "xxx", UUID: "npu3-chip0", Driver: "24.1.RC2", MemoryBytes: 32768 * MiB, PCIAddress: "0000:01:00.0",
		NotReported: map[string]string{"firmware_version": "not reported: npu-smi info -t board -i 3 failed (its output is kept with the facts)"}}, d[3])
	s := telemetry(t, "npu-smi", "npu-smi-info-atlas800-9010-24.1.RC2.txt")
	require.Equal(t, Sample{Index: 3, UtilPct: f(0), MemUsedBytes: i(0), PowerW: f(206.9)}, s[3])

	// Inference parts have DDR only: its Memory-Usage is the memory.
	d = facts(t, "npu-smi", "npu-smi-info-atlas800-3000-21.0.4.txt")
	require.Len(t, d, 4)
	require.Equal(t, Device{Index: 1, Name: "310", UUID: "npu6-chip1", Driver: "21.0.4.B030", MemoryBytes: 8192 * MiB, PCIAddress: "0000:8a:00.0",
		NotReported: map[string]string{"firmware_version": "not reported: npu-smi info -t board -i 6 failed (its output is kept with the facts)"}}, d[1])
	s = telemetry(t, "npu-smi", "npu-smi-info-atlas800-3000-21.0.4.txt")
	require.Equal(t, Sample{Index: 0, UtilPct: f(0), MemUsedBytes: i(2703 * MiB), PowerW: f(12.8)}, s[0])
}

// TestNPUSMIUsages: memory bandwidth comes from `info -t usages` per NPU,
// joined to the table's chips; an NPU whose usages command failed has
// none (absent, not zero).
func TestNPUSMIUsages(t *testing.T) {
	t.Parallel()
	a, _ := Lookup("npu-smi")
	table := read(t, "npu-smi-info-atlas800-9010-24.1.RC2.txt")
	more := a.MoreTelemetry([][]byte{table})
	require.Len(t, more, 8)
	require.Equal(t, []string{"info", "-t", "usages", "-i", "3"}, more[3])

	outs := [][]byte{table, read(t, "npu-smi-info-t-usages-910-hbm.txt"), read(t, "npu-smi-info-t-usages-310p-ddr.txt")}
	for range 6 {
		outs = append(outs, nil)
	}
	s, err := a.ParseTelemetry(outs)
	require.NoError(t, err)
	require.Equal(t, f(0), s[0].MemBWPct, "HBM bandwidth of NPU 0")
	require.Equal(t, f(51), s[1].MemBWPct, "a part without HBM: its DDR bandwidth")
	require.Nil(t, s[2].MemBWPct)
	require.Equal(t, f(206.9), s[3].PowerW, "the table's readings stay")

	require.Equal(t, map[string]float64{"npu1-chip0": 51}, parseNPUUsages(read(t, "npu-smi-info-t-usages-310p-ddr.txt")))
}

func TestTopology(t *testing.T) {
	t.Parallel()
	// Older drivers name the NICs in the header.
	topo, err := ParseTopology(read(t, "nvidia-smi-topo-m-della-a100.txt"))
	require.NoError(t, err)
	require.Equal(t, []string{"GPU0", "GPU1", "mlx5_0", "mlx5_1"}, topo.Devices)
	require.Len(t, topo.Rows, 4)
	require.Equal(t, TopologyRow{Device: "GPU1", Links: []string{"SYS", "X", "SYS", "NODE"}, CPUAffinity: "64-127", NUMAAffinity: "1"}, topo.Rows[1])
	require.Equal(t, "NODE", topo.Link("GPU0", "mlx5_0"))
	require.Equal(t, "SYS", topo.Link("GPU0", "mlx5_1"))

	// Newer ones number them and print a NIC legend; GPU NUMA ID follows.
	topo, err = ParseTopology(read(t, "nvidia-smi-topo-m-della-h100.txt"))
	require.NoError(t, err)
	require.Len(t, topo.Devices, 14)
	require.Equal(t, "mlx5_3", topo.Devices[11])
	require.Equal(t, "PIX", topo.Link("GPU4", "mlx5_3"))
	require.Equal(t, "NV18", topo.Link("GPU4", "GPU7"))
	require.Equal(t, "1", topo.Rows[4].NUMAAffinity)
	require.Equal(t, "0", topo.Rows[0].NUMAAffinity)
	require.Empty(t, topo.Rows[0].CPUAffinity)
	require.Equal(t, "mlx5_5", topo.Rows[13].Device)

	topo, err = ParseTopology(read(t, "nvidia-smi-topo-m-traverse-v100.txt"))
	require.NoError(t, err)
	require.Equal(t, "8", topo.Rows[2].NUMAAffinity)
	require.Equal(t, "NV3", topo.Link("GPU2", "GPU3"))

	_, err = ParseTopology([]byte("No devices were found\n"))
	require.Error(t, err)
	// The header is underlined with terminal escapes on some drivers.
	topo, err = ParseTopology([]byte("\t\x1b[4mGPU0\tCPU Affinity\tNUMA Affinity\x1b[0m\nGPU0\t X \t0-7\t0\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"GPU0"}, topo.Devices)
}

func TestEfsmi(t *testing.T) {
	t.Parallel()
	d := facts(t, "efsmi", "efsmi-q-s60.txt")
	require.Equal(t, []Device{{Index: 0, Name: "S60", UUID: "TR6Y46010302", Driver: "1.4.3.4", MemoryBytes: 42976 * MiB, PCIAddress: "0000:17:00.0"}}, d)
	s := telemetry(t, "efsmi", "efsmi-q-s60.txt")
	require.Equal(t, []Sample{{Index: 0, UtilPct: f(0), MemUsedBytes: i(0), PowerW: f(96)}}, s)
	s = telemetry(t, "efsmi", "efsmi-q-d-memory-usage-old-driver.txt")
	require.Equal(t, []Sample{{Index: 0, UtilPct: f(0), MemUsedBytes: i(1129 * MiB)}, {Index: 1, UtilPct: f(0), MemUsedBytes: i(1129 * MiB)}}, s)
}

func TestIxsmi(t *testing.T) {
	t.Parallel()
	d := facts(t, "ixsmi", "ixsmi-query-gpu.csv", "ixsmi-query-gpu-ids.csv")
	require.Equal(t, []Device{{Index: 0, Name: "Iluvatar MR-V50", MemoryBytes: 16384 * MiB, UUID: "GPU-00000000-0000-0000-0000-000000000000", PCIAddress: "0000:3b:00.0"},
		{Index: 1, Name: "Iluvatar MR-V100", MemoryBytes: 32768 * MiB, UUID: "GPU-00000000-0000-0000-0000-000000000001", PCIAddress: "0000:86:00.0"}}, d)
	a, _ := Lookup("ixsmi")
	a.Explain(d)
	require.Contains(t, d[0].NotReported["driver_version"], "not reported by ixsmi's query interface")
	require.Contains(t, d[0].NotReported["firmware_version"], "not reported by ixsmi's query interface")
	require.NotContains(t, d[0].NotReported, "pci_address")
	// A release whose query has no uuid or pci.bus_id: devices stay.
	d = facts(t, "ixsmi", "ixsmi-query-gpu.csv", "")
	require.Len(t, d, 2)
	require.Contains(t, d[1].NotReported["pci_address"], "failed")
	s := telemetry(t, "ixsmi", "ixsmi-query-gpu.csv")
	require.Equal(t, Sample{Index: 1, UtilPct: f(0), MemUsedBytes: i(27996 * MiB)}, s[1])
}

func TestCnmon(t *testing.T) {
	t.Parallel()
	d := facts(t, "cnmon", "cnmon-info-mlu370.txt")
	require.Equal(t, Device{Index: 0, Name: "MLU370-X8", UUID: "2c7c1b1e-4f4e-4f4b-9d2a-000000000000", Driver: "v5.10.22", Firmware: "v1.1.6",
		MemoryBytes: 24576 * MiB, PCIAddress: "0000:3b:00.0"}, d[0])
	s := telemetry(t, "cnmon", "cnmon-info-mlu370.txt")
	require.Equal(t, []Sample{{Index: 0, UtilPct: f(37), MemUsedBytes: i(420 * MiB), PowerW: f(72)}, {Index: 1, UtilPct: f(0), MemUsedBytes: i(0)}}, s)
}

func TestXPUSMI(t *testing.T) {
	t.Parallel()
	d := facts(t, "xpu-smi", "xpu-smi-m-p800.txt", "xpu-smi-q-p800.txt")
	require.Equal(t, []Device{{Index: 0, Name: "P800 OAM", Driver: "5.0.21.16", MemoryBytes: 98304 * MiB, PCIAddress: "0000:03:00.0"},
		{Index: 1, Name: "P800 OAM", Driver: "5.0.21.16", MemoryBytes: 98304 * MiB, PCIAddress: "0000:23:00.0"}}, d)
	s := telemetry(t, "xpu-smi", "xpu-smi-m-p800.txt")
	require.Equal(t, Sample{Index: 0, UtilPct: f(12), MemUsedBytes: i(2048 * MiB), PowerW: f(85)}, s[0])
}

func TestMthreadsGMI(t *testing.T) {
	t.Parallel()
	d := facts(t, "mthreads-gmi", "mthreads-gmi-q-json-s4000.json")
	require.Equal(t, Device{Index: 0, Name: "MTT S4000", UUID: "7de4d75b-7522-1fdc-8dc4-db9a169a5e88", Driver: "2.7.0", MemoryBytes: 49152 * MiB, PCIAddress: "0000:4f:00.0"}, d[0])
	s := telemetry(t, "mthreads-gmi", "mthreads-gmi-q-json-s4000.json")
	require.Equal(t, []Sample{{Index: 0, UtilPct: f(63), MemBWPct: f(20), MemUsedBytes: i(1024 * MiB), PowerW: f(210)}, {Index: 1, UtilPct: f(0), MemBWPct: f(0), MemUsedBytes: i(0)}}, s)
}

func TestMxSMI(t *testing.T) {
	t.Parallel()
	d := facts(t, "mx-smi", "mx-smi-c500.txt")
	require.Equal(t, []Device{{Index: 0, Name: "MetaX C500", Driver: "2.1.12", MemoryBytes: 65536 * MiB, PCIAddress: "0000:0f:00.0"},
		{Index: 1, Name: "MetaX C500", Driver: "2.1.12", MemoryBytes: 65536 * MiB, PCIAddress: "0000:34:00.0"}}, d)
	s := telemetry(t, "mx-smi", "mx-smi-show-usage.txt", "mx-smi-show-memory.txt", "mx-smi-show-board-power.txt")
	require.Equal(t, []Sample{{Index: 0, UtilPct: f(41), MemUsedBytes: i(878592 * 1024), PowerW: f(56)}, {Index: 1, UtilPct: f(0), MemUsedBytes: i(878592 * 1024), PowerW: f(55)}}, s)
}

func TestBrsmi(t *testing.T) {
	t.Parallel()
	d := facts(t, "brsmi", "brsmi-query-facts.csv")
	require.Equal(t, Device{Index: 1, Name: "Biren BR104P", UUID: "BR-8c4e6a1f-0002", Driver: "1.3.0", MemoryBytes: 32768 * MiB, PCIAddress: "0000:1b:00.0"}, d[1])
	s := telemetry(t, "brsmi", "brsmi-query-telemetry.csv")
	require.Equal(t, []Sample{{Index: 0, UtilPct: f(55), MemUsedBytes: i(12288 * MiB), PowerW: f(180.5)}, {Index: 1, UtilPct: f(0), MemUsedBytes: i(0)}}, s)
}

func TestBadOutputsFail(t *testing.T) {
	t.Parallel()
	for _, a := range Adapters() {
		_, err := a.ParseFacts([][]byte{[]byte("")})
		require.Error(t, err, a.Tool)
		_, err = a.ParseTelemetry([][]byte{[]byte("garbage\n")})
		require.Error(t, err, a.Tool)
	}
}

func TestPCIAddress(t *testing.T) {
	t.Parallel()
	require.Equal(t, "0000:3b:00.0", PCIAddress("00000000:3B:00.0"))
	require.Equal(t, "0000:2d:00.0", PCIAddress("00:2d:00.0"))
	require.Equal(t, "0000:3b:00.0", PCIAddress("3b:00.0"))
	require.Equal(t, "", PCIAddress("N/A"))
}

func FuzzParsers(f *testing.F) {
	entries, _ := os.ReadDir("testdata")
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join("testdata", e.Name())); err == nil && len(b) < 32<<10 && !strings.HasSuffix(e.Name(), ".md") {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, a := range Adapters() {
			outs := [][]byte{b, b, b}
			if d, err := a.ParseFacts(outs); err == nil {
				for _, x := range d {
					if x.MemoryBytes < 0 {
						t.Fatalf("%s: negative memory", a.Tool)
					}
				}
			}
			if a.MoreTelemetry != nil {
				_ = a.MoreTelemetry(outs)
			}
			if s, err := a.ParseTelemetry(outs); err == nil {
				for _, x := range s {
					if x.UtilPct != nil && (*x.UtilPct < 0 || *x.UtilPct > 105) {
						t.Fatalf("%s: utilisation %v", a.Tool, *x.UtilPct)
					}
					if x.MemUsedBytes != nil && *x.MemUsedBytes < 0 {
						t.Fatalf("%s: negative memory used", a.Tool)
					}
					if x.MemBWPct != nil && (*x.MemBWPct < 0 || *x.MemBWPct > 105) {
						t.Fatalf("%s: memory busy %v", a.Tool, *x.MemBWPct)
					}
				}
			}
		}
		if topo, err := ParseTopology(b); err == nil {
			for _, r := range topo.Rows {
				if len(r.Links) != len(topo.Devices) {
					t.Fatalf("topology row %s has %d links for %d columns", r.Device, len(r.Links), len(topo.Devices))
				}
			}
		}
		for _, v := range parseNPUUsages(b) {
			if v < 0 || v > 105 {
				t.Fatalf("npu usages: %v", v)
			}
		}
	})
}
