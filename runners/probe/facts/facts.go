// Package facts collects a lab host's facts: OS, kernel, CPU, memory, NUMA,
// NVMe controllers and namespaces, NICs, RDMA, kernel modules, GPUs,
// GPUDirect Storage and tool versions. The probe writes them at the start of
// every run; the server imports this package to evaluate readiness checks and
// to decide whether a baseline and a candidate are comparable.
//
// Every fact keeps the command or file it came from and the raw output. A
// missing tool, file or device is recorded as absent, never as a failure:
// the collection itself only fails when it cannot run at all.
package facts

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/accordlab/accord/runners/probe/gpu"
)

// SchemaVersion is the facts format this build writes.
const SchemaVersion = 1

// Facts is everything known about a host at one moment.
type Facts struct {
	SchemaVersion int    `json:"schema_version"`
	CollectedAt   string `json:"collected_at"` // RFC 3339
	Hostname      Value  `json:"hostname"`

	OS      OS      `json:"os"`
	Kernel  Kernel  `json:"kernel"`
	CPU     CPU     `json:"cpu"`
	Memory  Memory  `json:"memory"`
	NUMA    NUMA    `json:"numa"`
	NVMe    NVMe    `json:"nvme"`
	Network Network `json:"network"`
	RDMA    RDMA    `json:"rdma"`
	Modules Modules `json:"modules"`
	CPUFreq CPUFreq `json:"cpufreq"`
	GPU     GPU     `json:"gpu"`
	GDS     GDS     `json:"gds"`
	// PCI is the PCIe placement and link of the GPUs, physical NICs and
	// NVMe PCIe controllers.
	PCI   []PCILink `json:"pci,omitempty"`
	Tools []Tool    `json:"tools"`
}

// OS is /etc/os-release.
type OS struct {
	ID        string `json:"id,omitempty"`
	VersionID string `json:"version_id,omitempty"`
	Pretty    string `json:"pretty_name,omitempty"`
	Source    Source `json:"source"`
}

// Kernel is uname's view of the running kernel.
type Kernel struct {
	Release Value `json:"release"` // uname -r
	Version Value `json:"version"` // uname -v
	Machine Value `json:"machine"` // uname -m
}

// CPU is lscpu's summary (with /proc/cpuinfo as a fallback for the model).
type CPU struct {
	Architecture   string `json:"architecture,omitempty"`
	ModelName      string `json:"model_name,omitempty"`
	Vendor         string `json:"vendor,omitempty"`
	CPUs           int    `json:"cpus,omitempty"`
	Sockets        int    `json:"sockets,omitempty"`
	CoresPerSocket int    `json:"cores_per_socket,omitempty"`
	ThreadsPerCore int    `json:"threads_per_core,omitempty"`
	NUMANodes      int    `json:"numa_nodes,omitempty"`
	// Fields holds every lscpu field as printed.
	Fields  map[string]string `json:"fields,omitempty"`
	Source  Source            `json:"source"`
	CPUInfo Source            `json:"cpuinfo"`
	Present bool              `json:"present"`
}

// Memory is /proc/meminfo, in bytes.
type Memory struct {
	TotalBytes      int64  `json:"total_bytes"`
	AvailableBytes  int64  `json:"available_bytes"`
	HugePagesTotal  int64  `json:"hugepages_total"`
	HugePageSizeKiB int64  `json:"hugepage_size_kib"`
	Source          Source `json:"source"`
}

// NUMA lists /sys/devices/system/node/node*.
type NUMA struct {
	Nodes  []NUMANode `json:"nodes,omitempty"`
	Source Source     `json:"source"` // the "online" list
}

// NUMANode is one NUMA node.
type NUMANode struct {
	ID      int   `json:"id"`
	CPUList Value `json:"cpulist"`
}

// NVMe is the host's NVMe view from sysfs, cross-checked with nvme-cli.
type NVMe struct {
	// Multipath is /sys/module/nvme_core/parameters/multipath (Y or N).
	Multipath   Value            `json:"multipath"`
	Controllers []NVMeController `json:"controllers,omitempty"`
	Subsystems  []NVMeSubsystem  `json:"subsystems,omitempty"`
	Namespaces  []BlockDevice    `json:"namespaces,omitempty"`
	CLIList     Source           `json:"cli_list"`        // nvme list -o json
	CLISubsys   Source           `json:"cli_list_subsys"` // nvme list-subsys -o json
	CLISeen     []string         `json:"cli_seen,omitempty"`
	Mismatches  []string         `json:"mismatches,omitempty"` // sysfs vs nvme-cli
	ClassDir    Source           `json:"class_dir"`            // /sys/class/nvme
}

// NVMeController is /sys/class/nvme/nvmeX.
type NVMeController struct {
	Name        string    `json:"name"`
	Transport   Value     `json:"transport"` // pcie, rdma, tcp, fc, loop
	Address     Value     `json:"address"`
	SubsysNQN   Value     `json:"subsysnqn"`
	State       Value     `json:"state"`
	Model       Value     `json:"model"`
	Serial      Value     `json:"serial"`
	FirmwareRev Value     `json:"firmware_rev"`
	QueueCount  Value     `json:"queue_count"`
	SQSize      Value     `json:"sqsize"` // I/O submission queue size, 0's based (entries − 1)
	NUMANode    Value     `json:"numa_node"`
	SmartLog    *SmartLog `json:"smart_log,omitempty"`
}

// SmartLog is the subset of `nvme smart-log -o json` readiness checks and
// the drive wear of a run use.
type SmartLog struct {
	CriticalWarning *int64 `json:"critical_warning,omitempty"`
	MediaErrors     *int64 `json:"media_errors,omitempty"`
	PercentUsed     *int64 `json:"percent_used,omitempty"`
	TemperatureK    *int64 `json:"temperature_k,omitempty"` // nvme-cli reports Kelvin
	// DataUnitsRead and DataUnitsWritten count thousands of 512-byte
	// units (NVMe's SMART log; 128-bit counters, exact here up to 2^64).
	DataUnitsRead    *uint64  `json:"data_units_read,omitempty"`
	DataUnitsWritten *uint64  `json:"data_units_written,omitempty"`
	PowerOnHours     *int64   `json:"power_on_hours,omitempty"`
	Source           Source   `json:"source"`
	Problems         []string `json:"problems,omitempty"`
}

// NVMeSubsystem is /sys/class/nvme-subsystem/nvme-subsysN.
type NVMeSubsystem struct {
	Name        string   `json:"name"`
	NQN         Value    `json:"subsysnqn"`
	IOPolicy    Value    `json:"iopolicy"`
	Model       Value    `json:"model"`
	Controllers []string `json:"controllers,omitempty"`
}

// BlockDevice is a namespace's block device and its queue settings. Paths
// lists the per-controller paths (nvmeXcYnZ) with their ANA state when the
// kernel exposes them.
type BlockDevice struct {
	Name        string     `json:"name"`
	Scheduler   Value      `json:"scheduler"`
	NRRequests  Value      `json:"nr_requests"`
	ReadAheadKB Value      `json:"read_ahead_kb"`
	Rotational  Value      `json:"rotational"`
	Paths       []NVMePath `json:"paths,omitempty"`
}

// NVMePath is one path of a multipath namespace. The namespace's own block
// device is bio-based and always reports the scheduler "none"; the I/O
// scheduler that acts on the requests is the path's.
type NVMePath struct {
	Name      string `json:"name"`
	ANAState  Value  `json:"ana_state"`
	Scheduler Value  `json:"scheduler"`
}

// Network is the host's interfaces.
type Network struct {
	Interfaces []NIC   `json:"interfaces,omitempty"`
	IPLink     Source  `json:"ip_link"` // ip -j link
	IPAddr     Source  `json:"ip_addr"` // ip -j addr
	DCB        []Value `json:"dcb,omitempty"`
}

// NIC is one network interface.
type NIC struct {
	Name      string   `json:"name"`
	MTU       int      `json:"mtu"`
	OperState string   `json:"operstate,omitempty"`
	LinkType  string   `json:"link_type,omitempty"`
	MAC       string   `json:"mac,omitempty"`
	Addresses []string `json:"addresses,omitempty"`
	// Physical is true when the interface has a device behind it.
	Physical bool  `json:"physical"`
	SpeedMbs Value `json:"speed_mbps"` // /sys/class/net/X/speed
	NUMANode Value `json:"numa_node"`
	Driver   Value `json:"driver"`    // basename of device/driver
	PCIID    Value `json:"pci_id"`    // vendor:device from device/uevent
	ECN      Value `json:"ecn"`       // where the driver exposes it
	PFC      Value `json:"pfc"`       // dcb -j pfc show dev X
	BusInfo  Value `json:"bus_info"`  // device symlink target
	Vendor   Value `json:"vendor_id"` // device/vendor
	Device   Value `json:"device_id"` // device/device
}

// RDMA is `rdma -j link`. ClassDir tells "no RDMA device in the kernel"
// (/sys/class/infiniband absent) apart from "rdma(8) is not installed".
type RDMA struct {
	Links    []RDMALink `json:"links,omitempty"`
	Source   Source     `json:"source"`
	ClassDir Source     `json:"class_dir"`
}

// RDMALink is one RDMA port.
type RDMALink struct {
	Device  string `json:"ifname"`
	Port    int    `json:"port"`
	State   string `json:"state,omitempty"`
	Physics string `json:"physical_state,omitempty"`
	NetDev  string `json:"netdev,omitempty"`
}

// Modules says which kernel modules of interest are loaded (or built in).
type Modules struct {
	Loaded  map[string]bool `json:"loaded"`
	Builtin map[string]bool `json:"builtin,omitempty"` // present in /sys/module without /proc/modules
	Source  Source          `json:"source"`            // /proc/modules
}

// InterestingModules are the kernel modules whose presence is recorded.
var InterestingModules = []string{"nvme", "nvme_core", "nvme_fabrics", "nvme_rdma", "nvme_tcp", "nvidia", "nvidia_fs", "sch_netem", "mlx5_core", "mlx5_ib"}

// CPUFreq is the frequency governor of every CPU.
type CPUFreq struct {
	// Governors counts CPUs per governor ("performance": 64).
	Governors map[string]int `json:"governors,omitempty"`
	Files     []Value        `json:"files,omitempty"`
	Absent    bool           `json:"absent,omitempty"`
}

// GPU is the accelerators every vendor tool on the host reports (see
// package gpu for the adapters). Source is nvidia-smi's, kept on its own
// because older facts documents have only it.
type GPU struct {
	GPUs   []GPUDevice `json:"gpus,omitempty"`
	Source Source      `json:"source"`
	// Tools has one entry per vendor tool probed, present or absent.
	Tools []GPUTool `json:"tools,omitempty"`
	// Topology is `nvidia-smi topo -m` where nvidia-smi is installed: how
	// the GPUs reach each other and the NICs, and their NUMA affinity.
	Topology       *gpu.Topology `json:"topology,omitempty"`
	TopologySource *Source       `json:"topology_source,omitempty"`
}

// GPUTool is one vendor tool's account: the commands it ran with their
// raw outputs, absent when the tool is not installed.
type GPUTool struct {
	Tool    string   `json:"tool"`
	Vendor  string   `json:"vendor"`
	Sources []Source `json:"sources"`
	Devices int      `json:"devices"`
	// Error is set when the tool ran but its output did not parse.
	Error string `json:"error,omitempty"`
	// SupersededBy names the installed tool whose devices are used instead
	// (amd-smi over rocm-smi); this tool's own devices are not listed.
	SupersededBy string `json:"superseded_by,omitempty"`
}

// Absent reports whether the tool is not installed.
func (t GPUTool) Absent() bool { return len(t.Sources) > 0 && t.Sources[0].Absent }

// GPUDevice is one accelerator.
type GPUDevice struct {
	Index         int    `json:"index"`
	Vendor        string `json:"vendor,omitempty"`
	Tool          string `json:"tool,omitempty"`
	Name          string `json:"name"`
	UUID          string `json:"uuid"`
	DriverVersion string `json:"driver_version"`
	Firmware      string `json:"firmware_version,omitempty"`
	PCIBusID      string `json:"pci_bus_id"`
	MemoryMiB     int64  `json:"memory_total_mib"`
	NUMANode      Value  `json:"numa_node"`
	// NotReported says why a blank driver_version, firmware_version or
	// pci_address is blank (package gpu's Explain): the tool has no such
	// field, printed N/A, or the command that gives it failed.
	NotReported map[string]string `json:"not_reported,omitempty"`
}

// Model is the device's model as comparisons use it: the tool's name,
// prefixed with the vendor where the name does not say it (npu-smi says
// "910B3", not "Ascend 910B3"). NVIDIA names stay as nvidia-smi prints
// them: facts from before the other vendors' tools have those names
// without a vendor, and a baseline taken then must stay comparable.
func (d GPUDevice) Model() string {
	if d.Vendor == "" || d.Vendor == "NVIDIA" || strings.Contains(strings.ToLower(d.Name), strings.ToLower(strings.Fields(d.Vendor + " x")[0])) {
		return d.Name
	}
	return d.Vendor + " " + d.Name
}

// GDS is GPUDirect Storage: the nvidia-fs driver's statistics and cuFile's
// configuration.
type GDS struct {
	Stats      Source `json:"stats"` // /proc/driver/nvidia-fs/stats
	CuFileJSON Source `json:"cufile_json"`
}

// Tool is one tool's version.
type Tool struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Source  Source `json:"source"`
}

// Options tune a collection.
type Options struct {
	Runner *Runner
	// SkipSmartLog skips `nvme smart-log` (it wakes idle drives).
	SkipSmartLog bool
}

// Collect gathers the host's facts. It does not fail for missing tools or
// devices; it only stops early when ctx ends.
func Collect(ctx context.Context, opts Options) (*Facts, error) {
	r := opts.Runner
	if r == nil {
		r = &Runner{}
	}
	f := &Facts{SchemaVersion: SchemaVersion, CollectedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	host, err := os.Hostname()
	f.Hostname = Value{Value: host, Source: Source{Command: []string{"hostname"}}}
	if err != nil {
		f.Hostname.Error = err.Error()
	}
	steps := []func(){
		func() { f.OS = collectOS(r) },
		func() { f.Kernel = collectKernel(ctx, r) },
		func() { f.CPU = collectCPU(ctx, r) },
		func() { f.Memory = collectMemory(r) },
		func() { f.NUMA = collectNUMA(r) },
		func() { f.NVMe = collectNVMe(ctx, r, !opts.SkipSmartLog) },
		func() { f.Network = collectNetwork(ctx, r) },
		func() { f.RDMA = collectRDMA(ctx, r) },
		func() { f.Modules = collectModules(r) },
		func() { f.CPUFreq = collectCPUFreq(r) },
		func() { f.GPU = collectGPU(ctx, r) },
		func() { f.GDS = collectGDS(r) },
		func() { f.Tools = collectTools(ctx, r) },
	}
	// The sections are independent and mostly wait for processes to start,
	// so they run side by side.
	var wg sync.WaitGroup
	for _, step := range steps {
		wg.Go(step)
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The PCIe section places the devices the other sections found.
	f.PCI = collectPCI(r, f)
	return f, nil
}

// Comparable returns the facts that must match between a baseline and a
// candidate run for a comparison to be meaningful: the kernel, the GPU model
// and driver, each NVMe controller's model and firmware, the fabric
// transport and each physical NIC's model and speed. Keys are stable and
// values are plain strings, so two maps can be diffed key by key.
func (f *Facts) Comparable() map[string]string {
	m := map[string]string{}
	if f == nil {
		return m
	}
	if v := f.Kernel.Release.Value; v != "" {
		m["kernel"] = v
	}
	var gpuNames, drivers []string
	for _, g := range f.GPU.GPUs {
		gpuNames = append(gpuNames, g.Model())
		drivers = append(drivers, g.DriverVersion)
	}
	if len(gpuNames) > 0 {
		m["gpu.model"] = joinCounted(gpuNames)
		m["gpu.driver"] = strings.Join(uniqueSorted(drivers), ",")
		m["gpu.count"] = itoa(len(gpuNames))
	}
	var transports []string
	for _, c := range f.NVMe.Controllers {
		if v := c.Model.Value; v != "" {
			m["nvme."+c.Name+".model"] = v
		}
		if v := c.FirmwareRev.Value; v != "" {
			m["nvme."+c.Name+".firmware"] = v
		}
		if v := c.Transport.Value; v != "" {
			m["nvme."+c.Name+".transport"] = v
			transports = append(transports, v)
		}
	}
	if len(transports) > 0 {
		m["fabric.transport"] = strings.Join(uniqueSorted(transports), ",")
	}
	for _, n := range f.Network.Interfaces {
		if !n.Physical {
			continue
		}
		model := n.Driver.Value
		if n.PCIID.Value != "" {
			model = strings.TrimPrefix(model+" "+n.PCIID.Value, " ")
		}
		if model != "" {
			m["nic."+n.Name+".model"] = model
		}
		if s := n.SpeedMbs.Value; s != "" && s != "-1" {
			m["nic."+n.Name+".speed_mbps"] = s
		}
	}
	return m
}

// Absent lists the facts that are absent on this host (for a summary line).
func (f *Facts) Absent() []string {
	var out []string
	add := func(name string, absent bool) {
		if absent {
			out = append(out, name)
		}
	}
	add("nvme", len(f.NVMe.Controllers) == 0)
	add("nvme-cli", f.NVMe.CLIList.Absent)
	add("gpu", len(f.GPU.GPUs) == 0)
	add("nvidia-smi", f.GPU.Source.Absent)
	add("rdma", len(f.RDMA.Links) == 0)
	add("gds", f.GDS.Stats.Absent)
	add("cpufreq", f.CPUFreq.Absent)
	add("/proc/modules", f.Modules.Source.Absent)
	return out
}

func joinCounted(names []string) string {
	counts := map[string]int{}
	for _, n := range names {
		counts[n]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k
		if counts[k] > 1 {
			parts[i] = itoa(counts[k]) + "x " + k
		}
	}
	return strings.Join(parts, ",")
}

func uniqueSorted(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func globSorted(pattern string) ([]string, error) {
	m, err := filepath.Glob(pattern)
	sort.Strings(m)
	return m, err
}
