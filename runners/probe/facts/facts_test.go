package facts

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/gpu"
)

// TestCollectOnThisHost runs the real collection. This machine has no NVMe,
// no GPU and no nvme-cli: those facts must come out absent, not failed.
func TestCollectOnThisHost(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Collect(ctx, Options{})
	require.NoError(t, err)

	require.NotEmpty(t, f.Kernel.Release.Value)
	require.Equal(t, []string{"uname", "-r"}, f.Kernel.Release.Command)
	require.True(t, f.CPU.Present)
	require.NotEmpty(t, f.CPU.ModelName)
	require.Positive(t, f.CPU.CPUs)
	require.Positive(t, f.Memory.TotalBytes)
	require.NotEmpty(t, f.NUMA.Nodes)
	require.NotEmpty(t, f.OS.ID)

	if _, err := os.Stat("/sys/class/nvme"); os.IsNotExist(err) {
		require.Empty(t, f.NVMe.Controllers)
		require.True(t, f.NVMe.ClassDir.Absent)
	}
	if _, err := exec.LookPath("nvme"); err != nil {
		require.True(t, f.NVMe.CLIList.Absent)
		require.Equal(t, []string{"nvme", "list", "-o", "json"}, f.NVMe.CLIList.Command)
		require.Empty(t, f.NVMe.Mismatches)
	}
	// This machine has no accelerator and none of the vendor tools: every
	// tool is recorded absent (with the command that was looked for),
	// never failed.
	require.Len(t, f.GPU.Tools, len(gpu.Adapters()))
	for _, tool := range f.GPU.Tools {
		if _, err := exec.LookPath(tool.Tool); err == nil {
			continue
		}
		require.True(t, tool.Absent(), "%s: %+v", tool.Tool, tool)
		require.Empty(t, tool.Error, tool.Tool)
		require.Equal(t, tool.Tool, tool.Sources[0].Command[0])
	}
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		require.True(t, f.GPU.Source.Absent)
		require.Empty(t, f.GPU.GPUs)
		require.NotContains(t, f.Comparable(), "gpu.model")
	}
	require.True(t, f.GDS.Stats.Absent || f.GDS.Stats.OK())
	require.Contains(t, f.Absent(), "nvme")

	// Whatever is absent is flagged absent, and no error hides in a source
	// that is neither absent nor OK, for the sections that must work here.
	for name, s := range map[string]Source{"cpu": f.CPU.Source, "meminfo": f.Memory.Source, "ip link": f.Network.IPLink} {
		require.True(t, s.OK(), "%s: %+v", name, s)
	}
	require.Equal(t, f.Kernel.Release.Value, f.Comparable()["kernel"])

	// It round-trips as JSON, as the server reads it.
	b, err := json.Marshal(f)
	require.NoError(t, err)
	var back Facts
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, f.Comparable(), back.Comparable())
}

func write(t *testing.T, root, path, content string) {
	t.Helper()
	p := filepath.Join(root, path)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// fakeHost builds a sysfs tree of a host with a two-path NVMe-oF (RDMA)
// subsystem and a local PCIe drive.
func fakeHost(t *testing.T) string {
	root := t.TempDir()
	ctrl := func(name, transport, addr, nqn, model, fw string, numa string) {
		d := "/sys/class/nvme/" + name + "/"
		write(t, root, d+"transport", transport+"\n")
		write(t, root, d+"address", addr+"\n")
		write(t, root, d+"subsysnqn", nqn+"\n")
		write(t, root, d+"state", "live\n")
		write(t, root, d+"model", model+"   \n")
		write(t, root, d+"serial", "S123\n")
		write(t, root, d+"firmware_rev", fw+"\n")
		write(t, root, d+"queue_count", "33\n")
		write(t, root, d+"numa_node", numa+"\n")
	}
	ctrl("nvme0", "pcie", "0000:3b:00.0", "nqn.local", "Local SSD", "1.0", "0")
	ctrl("nvme1", "rdma", "traddr=192.0.2.10,trsvcid=4420", "nqn.array", "Array X", "7.2", "1")
	ctrl("nvme2", "rdma", "traddr=192.0.2.11,trsvcid=4420", "nqn.array", "Array X", "7.2", "1")
	write(t, root, "/sys/class/nvme-subsystem/nvme-subsys1/subsysnqn", "nqn.array\n")
	write(t, root, "/sys/class/nvme-subsystem/nvme-subsys1/iopolicy", "round-robin\n")
	write(t, root, "/sys/class/nvme-subsystem/nvme-subsys1/nvme1/x", "")
	write(t, root, "/sys/class/nvme-subsystem/nvme-subsys1/nvme2/x", "")
	write(t, root, "/sys/module/nvme_core/parameters/multipath", "Y\n")
	for _, ns := range []string{"nvme0n1", "nvme1n1"} {
		write(t, root, "/sys/block/"+ns+"/queue/scheduler", "[none] mq-deadline\n")
		write(t, root, "/sys/block/"+ns+"/queue/nr_requests", "1023\n")
		write(t, root, "/sys/block/"+ns+"/queue/read_ahead_kb", "128\n")
		write(t, root, "/sys/block/"+ns+"/queue/rotational", "0\n")
	}
	write(t, root, "/sys/block/nvme1c1n1/ana_state", "optimized\n")
	write(t, root, "/sys/block/nvme1c1n1/queue/scheduler", "[none] mq-deadline kyber bfq\n")
	write(t, root, "/sys/block/nvme1c2n1/ana_state", "non-optimized\n")
	write(t, root, "/proc/modules", "nvme_rdma 45056 2 - Live 0x0\nnvme_fabrics 32768 1 nvme_rdma, Live 0x0\nother 1 0 - Live 0x0\n")
	write(t, root, "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "performance\n")
	write(t, root, "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "powersave\n")
	write(t, root, "/proc/driver/nvidia-fs/stats", "GDS Version: 1.9\n")
	return root
}

func TestCollectFromSysfs(t *testing.T) {
	t.Parallel()
	root := fakeHost(t)
	r := &Runner{Root: root}
	n := collectNVMe(context.Background(), r, false)
	require.Len(t, n.Controllers, 3)
	c1 := n.Controllers[1]
	require.Equal(t, "nvme1", c1.Name)
	require.Equal(t, "rdma", c1.Transport.Value)
	require.Equal(t, "/sys/class/nvme/nvme1/transport", c1.Transport.File)
	require.Equal(t, "Array X", c1.Model.Value)
	require.Equal(t, "7.2", c1.FirmwareRev.Value)
	require.Equal(t, "33", c1.QueueCount.Value)
	require.Equal(t, "1", c1.NUMANode.Value)
	require.Equal(t, "Y", n.Multipath.Value)
	require.Len(t, n.Subsystems, 1)
	require.Equal(t, "round-robin", n.Subsystems[0].IOPolicy.Value)
	require.Equal(t, []string{"nvme1", "nvme2"}, n.Subsystems[0].Controllers)
	require.Len(t, n.Namespaces, 2)
	ns1 := n.Namespaces[1]
	require.Equal(t, "nvme1n1", ns1.Name)
	require.Equal(t, "[none] mq-deadline", ns1.Scheduler.Value)
	require.Equal(t, []NVMePath{
		{Name: "nvme1c1n1", ANAState: Value{Value: "optimized", Source: Source{File: "/sys/block/nvme1c1n1/ana_state"}},
			Scheduler: Value{Value: "[none] mq-deadline kyber bfq", Source: Source{File: "/sys/block/nvme1c1n1/queue/scheduler"}}},
		{Name: "nvme1c2n1", ANAState: Value{Value: "non-optimized", Source: Source{File: "/sys/block/nvme1c2n1/ana_state"}},
			Scheduler: Value{Source: Source{File: "/sys/block/nvme1c2n1/queue/scheduler", Absent: true}}},
	}, ns1.Paths)

	m := collectModules(r)
	require.True(t, m.Loaded["nvme_rdma"])
	require.True(t, m.Loaded["nvme_fabrics"])
	require.False(t, m.Loaded["nvidia_fs"])
	require.NotContains(t, m.Source.Raw, "other")

	g := collectCPUFreq(r)
	require.Equal(t, map[string]int{"performance": 1, "powersave": 1}, g.Governors)
	require.True(t, collectGDS(r).Stats.OK())

	f := &Facts{NVMe: n}
	f.Kernel.Release.Value = "6.8.0"
	f.GPU.GPUs = []GPUDevice{{Name: "NVIDIA H100", DriverVersion: "550.54"}, {Name: "NVIDIA H100", DriverVersion: "550.54"}}
	f.Network.Interfaces = []NIC{
		{Name: "ens1f0", Physical: true, Driver: Value{Value: "mlx5_core"}, PCIID: Value{Value: "15b3:101d"}, SpeedMbs: Value{Value: "200000"}},
		{Name: "lo"},
	}
	require.Equal(t, map[string]string{
		"kernel":                "6.8.0",
		"gpu.model":             "2x NVIDIA H100",
		"gpu.driver":            "550.54",
		"gpu.count":             "2",
		"nvme.nvme0.model":      "Local SSD",
		"nvme.nvme0.firmware":   "1.0",
		"nvme.nvme0.transport":  "pcie",
		"nvme.nvme1.model":      "Array X",
		"nvme.nvme1.firmware":   "7.2",
		"nvme.nvme1.transport":  "rdma",
		"nvme.nvme2.model":      "Array X",
		"nvme.nvme2.firmware":   "7.2",
		"nvme.nvme2.transport":  "rdma",
		"fabric.transport":      "pcie,rdma",
		"nic.ens1f0.model":      "mlx5_core 15b3:101d",
		"nic.ens1f0.speed_mbps": "200000",
	}, f.Comparable())
}

func TestRunMissingToolIsAbsent(t *testing.T) {
	t.Parallel()
	r := &Runner{}
	s := r.Run(context.Background(), "accord-no-such-tool", "--version")
	require.True(t, s.Absent)
	require.Equal(t, []string{"accord-no-such-tool", "--version"}, s.Command)
	s = r.Run(context.Background(), "sh", "-c", "echo out; echo err >&2; exit 3")
	require.False(t, s.Absent)
	require.Equal(t, "out\n", s.Raw)
	require.Equal(t, 3, s.ExitCode)
	require.Contains(t, s.Error, "err")
	r.Timeout = 100 * time.Millisecond
	s = r.Run(context.Background(), "sleep", "5")
	require.Contains(t, s.Error, "timed out")
}

func TestParsers(t *testing.T) {
	t.Parallel()
	require.Equal(t, "0000:5e:00.0", SysfsPCIAddress("00000000:5E:00.0"))

	var s SmartLog
	require.NoError(t, ParseSmartLog([]byte(`{"critical_warning":0,"temperature":310,"percent_used":3,"media_errors":0}`), &s))
	require.Equal(t, int64(310), *s.TemperatureK)
	require.Equal(t, int64(3), *s.PercentUsed)
	// Some nvme-cli 2.x releases print "Temperature", nest critical_warning
	// as {"Value": n} in verbose mode and quote 128-bit counters.
	s = SmartLog{}
	require.NoError(t, ParseSmartLog([]byte(`{"critical_warning":{"Value":4,"reliability_degraded":1},"Temperature":345,"percent_used":97,"media_errors":"37"}`), &s))
	require.Equal(t, int64(4), *s.CriticalWarning)
	require.Equal(t, int64(345), *s.TemperatureK)
	require.Equal(t, int64(37), *s.MediaErrors)

	// nvme-cli 1.x and 2.x lay out their lists differently.
	v1 := NVMeCLIDevices([]byte(`{"Devices":[{"DevicePath":"/dev/nvme0n1"},{"DevicePath":"/dev/nvme1n1"}]}`))
	require.Equal(t, []string{"nvme0n1", "nvme1n1"}, v1)
	v2 := NVMeCLIDevices([]byte(`[{"Subsystems":[{"Name":"nvme-subsys1","Paths":[{"Name":"nvme1","Transport":"rdma"},{"Name":"nvme2"}]}]}]`))
	require.Equal(t, []string{"nvme1", "nvme2"}, v2)

	// Cross-check against the fake host: nvme0n1 and nvme1n1 exist, nvme2n1 does not.
	n := collectNVMe(context.Background(), &Runner{Root: fakeHost(t)}, false)
	seen := map[string]bool{"nvme0n1": true, "nvme2n1": true}
	require.Equal(t, []string{
		"namespace nvme1n1 is in sysfs but nvme-cli does not list it",
		"nvme-cli lists nvme2n1 but sysfs has no such device",
	}, crossCheck(n, seen), "only namespaces compared when nvme-cli lists only namespaces")

	fields, err := ParseLscpuJSON([]byte(`{"lscpu":[{"field":"Architecture:","data":"x86_64","children":[{"field":"CPU(s):","data":"64"}]},{"field":"Model name:","data":"EPYC"}]}`))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"Architecture": "x86_64", "CPU(s)": "64", "Model name": "EPYC"}, fields)

	mem := ParseMeminfo("MemTotal:       24681664 kB\nHugePages_Total:       0\nbad\n")
	require.Equal(t, int64(24681664*1024), mem["MemTotal"])
	require.Equal(t, int64(0), mem["HugePages_Total"])

	osr := ParseOSRelease("ID=debian\nVERSION_ID=\"12\"\n# c\nPRETTY_NAME='Debian 12'\n")
	require.Equal(t, map[string]string{"ID": "debian", "VERSION_ID": "12", "PRETTY_NAME": "Debian 12"}, osr)
}

func FuzzParsers(f *testing.F) {
	f.Add([]byte(`{"lscpu":[{"field":"Architecture:","data":"x86_64"}]}`))
	f.Add([]byte("MemTotal: 1 kB\n"))
	f.Add([]byte(`{"Devices":[{"DevicePath":"/dev/nvme0c1n1"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseLscpuJSON(b)
		_ = ParseMeminfo(string(b))
		_ = ParseOSRelease(string(b))
		_ = ParseProcModules(string(b))
		for _, d := range NVMeCLIDevices(b) {
			if !devRef.MatchString(d) || devRef.FindString(d) != d {
				t.Fatalf("%q is not a device name", d)
			}
		}
		var s SmartLog
		_ = ParseSmartLog(b, &s)
		_ = SysfsPCIAddress(string(b))
	})
}

// TestRDMAClassDir tells "no RDMA device" from "rdma(8) missing".
func TestRDMAClassDir(t *testing.T) {
	t.Parallel()
	noTool := func(string) (string, error) { return "", exec.ErrNotFound }
	root := t.TempDir()
	d := collectRDMA(context.Background(), &Runner{Root: root, LookPath: noTool})
	require.True(t, d.ClassDir.Absent)
	require.Equal(t, "/sys/class/infiniband", d.ClassDir.File)

	write(t, root, "/sys/class/infiniband/mlx5_0/node_type", "1: CA\n")
	d = collectRDMA(context.Background(), &Runner{Root: root, LookPath: noTool})
	require.False(t, d.ClassDir.Absent)
	require.True(t, d.Source.Absent, "the tool is missing, the devices are not")
	require.Empty(t, d.Links)
}

// The drive wear counters of nvme-cli 2.x and 1.x are read exactly, past
// what a float64 holds too.
func TestParseSmartLogCounters(t *testing.T) {
	t.Parallel()
	read := func(name string) *SmartLog {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		var s SmartLog
		require.NoError(t, ParseSmartLog(b, &s))
		return &s
	}
	s := read("nvme-smart-log-2x-before.json")
	require.Equal(t, uint64(1474968593), *s.DataUnitsWritten)
	require.Equal(t, uint64(499296134), *s.DataUnitsRead)
	require.Equal(t, int64(15), *s.PercentUsed)
	require.Equal(t, int64(38313), *s.PowerOnHours)
	after := read("nvme-smart-log-2x-after.json")
	require.Equal(t, uint64(39063), *after.DataUnitsWritten-*s.DataUnitsWritten)

	big := read("nvme-smart-log-2x-beyond-2p53.json")
	require.Equal(t, uint64(18446744073709551000), *big.DataUnitsWritten)
	require.Equal(t, uint64(9007199254740993), *big.DataUnitsRead, "2^53 + 1 is not rounded")

	one := read("nvme-smart-log-1x.json")
	require.Equal(t, uint64(1474968593), *one.DataUnitsWritten)
	require.Equal(t, int64(301), *one.TemperatureK)

	var q SmartLog
	require.NoError(t, ParseSmartLog([]byte(`{"data_units_written":"123","percentage_used":"7%","critical_warning":{"value":4}}`), &q))
	require.Equal(t, uint64(123), *q.DataUnitsWritten)
	require.Equal(t, int64(7), *q.PercentUsed)
	require.Equal(t, int64(4), *q.CriticalWarning)
	require.NoError(t, ParseSmartLog([]byte(`{"data_units_written":-5}`), &q))
	require.Nil(t, q.DataUnitsWritten, "a negative counter is no counter")
}

func FuzzParseSmartLog(f *testing.F) {
	for _, name := range []string{"nvme-smart-log-2x-before.json", "nvme-smart-log-1x.json", "nvme-smart-log-2x-beyond-2p53.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s SmartLog
		_ = ParseSmartLog(b, &s)
	})
}
