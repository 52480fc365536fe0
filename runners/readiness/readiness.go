// Package readiness evaluates a lab host's pre-integration checks from the
// facts the probe collected (runners/probe/facts): is the NVMe-oF path live
// over the expected transport, is multipath set up, are the links and RDMA
// ports up, is the host tuned, is the GPU path what the program thinks it
// is, are the tools there.
//
// Every check reports PASS, WARN, FAIL or UNKNOWN with the evidence it
// used (the fact, its value, the command or file that produced it and an
// excerpt of the raw output) and a short fix. A fact the probe could not
// read gives UNKNOWN, never a guess. A few facts are findings by their
// absence: no /sys/class/nvme means the kernel has no NVMe controller, no
// /sys/class/infiniband means it has no RDMA device, fio not on PATH means
// fio cannot run; those checks say so plainly.
//
// An emulated storage path (the host or the profile says so) has no NVMe
// controller, fabric or drive under test: the checks of that path are NA
// there, with a summary saying so, never a FAIL for what the path cannot
// have and never a PASS for what was not there to check.
//
// Blocking checks are the ones whose failure makes a run's numbers
// meaningless or the run impossible (see Definitions); the server asks for
// confirmation before a run on a host with a blocking FAIL.
package readiness

import (
	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
)

// Status is a check's outcome.
type Status string

const (
	PASS    Status = "PASS"
	WARN    Status = "WARN"
	FAIL    Status = "FAIL"
	UNKNOWN Status = "UNKNOWN"
	// NA: the check has nothing to judge on this path. Only a check of the
	// storage path on an emulated path (Options.Emulated) is NA: it is
	// neither a failure nor a pass.
	NA Status = "N/A"
)

// Areas group the checks on the readiness page.
const (
	AreaStorage = "storage"
	AreaNetwork = "network"
	AreaHost    = "host"
	AreaGPU     = "gpu"
	AreaTools   = "tools"
)

// Check is one evaluated check.
type Check struct {
	ID       string     `json:"id"`
	Area     string     `json:"area"`
	Title    string     `json:"title"`
	Blocking bool       `json:"blocking"`
	Status   Status     `json:"status"`
	Summary  string     `json:"summary"`
	Evidence []Evidence `json:"evidence,omitempty"`
	// Fix says how to fix a WARN or FAIL, or how to make an UNKNOWN
	// knowable; empty on PASS.
	Fix string `json:"fix,omitempty"`
}

// String is the check as one line: "Title: summary" (for lists such as
// the blocking failures shown before a run).
func (c Check) String() string { return c.Title + ": " + c.Summary }

// Evidence is one fact a check used.
type Evidence struct {
	// Fact is the fact's path in the facts document, e.g.
	// "nvme.controllers[nvme1].state".
	Fact  string `json:"fact"`
	Value string `json:"value,omitempty"`
	// Command (an argument vector) or File produced the fact.
	Command []string `json:"command,omitempty"`
	File    string   `json:"file,omitempty"`
	// Excerpt is the part of the raw output the value was read from; empty
	// when the value is the whole output (a sysfs attribute).
	Excerpt string `json:"excerpt,omitempty"`
	// Absent: the file, tool or device does not exist on the host.
	Absent bool `json:"absent,omitempty"`
	// Error: the probe could not read it.
	Error string `json:"error,omitempty"`
}

// Options carry what the program expects of the host.
type Options struct {
	// Transport is the storage path the profile measures (its
	// storage.transport). Empty: NVMe checks describe whatever controllers
	// the host has, without an expectation. Emulated: see Emulated.
	Transport acceptance.Transport `json:"transport,omitempty"`
	// StorageInterfaces names the interfaces that carry storage traffic.
	// Empty: inferred from the controllers' addresses (and, for RDMA, from
	// the RDMA ports' network devices).
	StorageInterfaces []string `json:"storage_interfaces,omitempty"`
	// MinMTU on the storage interfaces (default 9000).
	MinMTU int `json:"min_mtu,omitempty"`
	// MinLinkSpeedMbps on the storage interfaces (default: no minimum).
	MinLinkSpeedMbps int `json:"min_link_speed_mbps,omitempty"`
	// MinKernel is the oldest kernel release without a warning (default 5.15).
	MinKernel string `json:"min_kernel,omitempty"`
	// GPUExpected: the host is meant to have accelerators (of any vendor).
	GPUExpected bool `json:"gpu_expected,omitempty"`
	// FioRequired: a fio step will run, so fio missing is a blocking failure.
	FioRequired bool `json:"fio_required,omitempty"`
	// MaxIODepth is the deepest fio iodepth of the profile (0: none): a
	// controller whose I/O queues hold fewer entries makes I/O wait in the
	// host instead of on the device.
	MaxIODepth int `json:"max_iodepth,omitempty"`
	// MaxTemperatureC is the composite temperature above which a controller
	// warns (default 70 °C).
	MaxTemperatureC int `json:"max_temperature_c,omitempty"`
	// Emulated: the storage path under test is emulated (an emulated host,
	// or a profile whose transport is emulated). The checks of the NVMe
	// path and its fabric (StoragePathCheck) are NA.
	Emulated bool `json:"emulated,omitempty"`
}

// Defaults of Options.
const (
	DefaultMinMTU          = 9000
	DefaultMinKernel       = "5.15"
	DefaultMaxTemperatureC = 70
	// PercentUsedWarn is the endurance used (percent) from which a drive warns.
	PercentUsedWarn = 90
)

// OptionsFor derives the options a profile implies: its storage transport
// and whether a fio step will run. GPUExpected and the storage interfaces
// are the host's business and stay for the caller to set.
func OptionsFor(spec acceptance.ProfileSpec) Options {
	o := Options{Transport: spec.Storage.Transport, Emulated: spec.Storage.Transport == acceptance.TransportEmulated}
	for _, s := range spec.Steps {
		if s.Kind == acceptance.StepFio {
			o.FioRequired = true
			if s.Fio != nil {
				o.MaxIODepth = max(o.MaxIODepth, s.Fio.IODepth)
			}
		}
	}
	return o
}

func (o Options) withDefaults() Options {
	if o.MinMTU <= 0 {
		o.MinMTU = DefaultMinMTU
	}
	if o.MinKernel == "" {
		o.MinKernel = DefaultMinKernel
	}
	if o.MaxTemperatureC <= 0 {
		o.MaxTemperatureC = DefaultMaxTemperatureC
	}
	return o
}

// Definition describes a check independent of any host: the columns of the
// program-wide matrix.
type Definition struct {
	ID       string `json:"id"`
	Area     string `json:"area"`
	Title    string `json:"title"`
	Blocking bool   `json:"blocking"`
	// Why says what the check protects (and why it blocks, when it does).
	Why string `json:"why"`
}

type checkDef struct {
	Definition
	// applies says whether the check is relevant under these options on
	// this host; a check that does not apply is left out of Evaluate.
	applies func(*env) bool
	eval    func(*env) result
}

// result is what a check function decides; Evaluate adds the definition.
type result struct {
	status   Status
	summary  string
	evidence []Evidence
	fix      string
}

// Definitions lists every check in evaluation order.
func Definitions() []Definition {
	out := make([]Definition, len(checks))
	for i, c := range checks {
		out[i] = c.Definition
	}
	return out
}

// checks is the catalogue, in the order the page shows them. Blocking
// checks are those whose FAIL means the run cannot measure what the
// program asked for: the NVMe-oF path is not there or not live, its
// initiator module is missing, a namespace has no usable path, a drive
// reports a critical warning, no RDMA port is active for an RDMA profile,
// or fio is missing while a fio step will run.
var checks = []checkDef{
	{Definition{"storage.controllers", AreaStorage, "NVMe controllers live over the expected transport", true,
		"Blocking: without a live controller over the profile's transport the run measures another path or fails."},
		nvmeRelevant, checkControllers},
	{Definition{"storage.multipath", AreaStorage, "Native NVMe multipath and I/O policy", false,
		"The I/O policy decides whether all paths carry I/O; with numa only the nearest path does."},
		fabricRelevant, checkMultipath},
	{Definition{"storage.ana", AreaStorage, "ANA path states", true,
		"Blocking when a namespace has no optimized or non-optimized path: I/O cannot be served."},
		fabricRelevant, checkANA},
	{Definition{"storage.queues", AreaStorage, "I/O queues per controller, and their size", false,
		"Fewer I/O queues than CPUs makes CPUs share queues and caps parallelism at high queue depths; queues that hold fewer entries than the profile's iodepth make I/O wait in the host."},
		nvmeRelevant, checkQueues},
	{Definition{"storage.health", AreaStorage, "Controller health (SMART)", true,
		"Blocking on a critical warning: the drive is degraded, read-only or overheating, so results are not representative."},
		nvmeRelevant, checkHealth},
	{Definition{"storage.scheduler", AreaStorage, "I/O scheduler on the namespaces", false,
		"NVMe devices want none or mq-deadline; bfq and kyber add CPU cost and latency."},
		nvmeRelevant, checkScheduler},
	{Definition{"network.mtu", AreaNetwork, "MTU on the storage interfaces", false,
		"Storage fabrics are sized for jumbo frames; a small MTU costs bandwidth and CPU."},
		networkRelevant, checkMTU},
	{Definition{"network.link", AreaNetwork, "Link state and speed of the storage interfaces", false,
		"A down or slow link caps the fabric's bandwidth below what the array can deliver."},
		networkRelevant, checkLink},
	{Definition{"network.rdma", AreaNetwork, "RDMA ports active", true,
		"Blocking for RDMA profiles when no port is ACTIVE and LINK_UP: NVMe/RDMA cannot connect."},
		rdmaExpected, checkRDMA},
	{Definition{"network.roce-lossless", AreaNetwork, "PFC / ECN for RoCE", false,
		"RoCE without flow control drops packets under congestion and its retransmissions show as tail latency."},
		roceRelevant, checkRoCELossless},
	{Definition{"host.kernel", AreaHost, "Kernel version", false,
		"Older kernels lack NVMe-oF fixes and features (queue-depth I/O policy, TCP and RDMA performance work)."},
		always, checkKernel},
	{Definition{"host.initiator-modules", AreaHost, "NVMe initiator modules", true,
		"Blocking: without nvme_fabrics and the transport's module the host cannot connect to the array."},
		modulesRelevant, checkModules},
	{Definition{"host.cpufreq", AreaHost, "CPU frequency governor", false,
		"Power-saving governors add wake-up latency and make latency percentiles vary between runs."},
		always, checkCPUFreq},
	{Definition{"host.numa-locality", AreaHost, "NUMA locality of NIC, NVMe and GPU", false,
		"Storage I/O that crosses sockets pays the inter-socket link in latency and bandwidth."},
		always, checkNUMA},
	{Definition{"host.pcie-links", AreaHost, "PCIe links at their maximum speed and width", false,
		"A link trained below its maximum (a riser, a dirty slot, a BIOS setting) silently caps a GPU's, NIC's or drive's bandwidth."},
		pcieLinksKnown, checkPCIeLinks},
	{Definition{"gpu.driver", AreaGPU, "Accelerator driver", false,
		"The GPU path needs a working driver; its version is part of what makes runs comparable."},
		gpuRelevant, checkGPUDriver},
	{Definition{"gpu.gds", AreaGPU, "GPUDirect Storage", false,
		"Without GDS reads are copied through host memory, so that is what gets measured."},
		gdsRelevant, checkGDS},
	{Definition{"tools.fio", AreaTools, "fio", true,
		"Blocking when a fio step will run and fio is missing."},
		always, checkFio},
	{Definition{"tools.nvme-cli", AreaTools, "nvme-cli", false,
		"nvme-cli reads SMART health and cross-checks what sysfs shows."},
		nvmeRelevant, checkNVMeCLI},
}

// storagePathChecks are the checks of the NVMe path and its fabric: the
// controllers, paths, queues and drives, the storage network, the
// initiator modules, GPUDirect Storage and nvme-cli. An emulated path has
// none of these to judge.
var storagePathChecks = map[string]bool{
	"storage.controllers": true, "storage.multipath": true, "storage.ana": true, "storage.queues": true,
	"storage.health": true, "storage.scheduler": true,
	"network.mtu": true, "network.link": true, "network.rdma": true, "network.roce-lossless": true,
	"host.initiator-modules": true, "gpu.gds": true, "tools.nvme-cli": true,
}

// StoragePathCheck says whether a check judges the NVMe path and its
// fabric, and so is NA on an emulated path.
func StoragePathCheck(id string) bool { return storagePathChecks[id] }

// EmulatedSummary is what an NA check of an emulated path says.
const EmulatedSummary = "n/a: the storage path is emulated, so there is no NVMe controller, fabric or drive on it for this check to judge."

// Evaluate runs the checks that apply to the options on this host, in the
// order of Definitions. A nil facts document gives no checks. On an
// emulated path the storage path's checks that would apply are NA.
func Evaluate(f *facts.Facts, opts Options) []Check {
	if f == nil {
		return nil
	}
	e := newEnv(f, opts.withDefaults())
	var out []Check
	for _, c := range checks {
		if !c.applies(e) {
			continue
		}
		if opts.Emulated && storagePathChecks[c.ID] {
			out = append(out, Check{ID: c.ID, Area: c.Area, Title: c.Title, Blocking: c.Blocking, Status: NA, Summary: EmulatedSummary})
			continue
		}
		r := c.eval(e)
		if r.status == PASS {
			r.fix = ""
		}
		out = append(out, Check{
			ID: c.ID, Area: c.Area, Title: c.Title, Blocking: c.Blocking,
			Status: r.status, Summary: r.summary, Evidence: r.evidence, Fix: r.fix,
		})
	}
	return out
}

// Summary counts the checks by status; NA checks are counted by
// NotApplicable, not here.
func Summary(checks []Check) (pass, warn, fail, unknown int) {
	for _, c := range checks {
		switch c.Status {
		case PASS:
			pass++
		case WARN:
			warn++
		case FAIL:
			fail++
		case NA:
		default:
			unknown++
		}
	}
	return pass, warn, fail, unknown
}

// NotApplicable counts the NA checks.
func NotApplicable(checks []Check) int {
	n := 0
	for _, c := range checks {
		if c.Status == NA {
			n++
		}
	}
	return n
}

// BlockingUnknown returns the blocking checks whose facts could not tell:
// they hold no run, but a go decision rests on them being fine.
func BlockingUnknown(checks []Check) []Check {
	var out []Check
	for _, c := range checks {
		if c.Blocking && c.Status == UNKNOWN {
			out = append(out, c)
		}
	}
	return out
}

// BlockingFailures returns the blocking checks that FAIL. A blocking check
// that is UNKNOWN is not a failure: the page shows it, the run is not held.
func BlockingFailures(checks []Check) []Check {
	var out []Check
	for _, c := range checks {
		if c.Blocking && c.Status == FAIL {
			out = append(out, c)
		}
	}
	return out
}

// Worst is the most severe status among the checks (FAIL, WARN, UNKNOWN,
// PASS in that order, NA counting as nothing); PASS for none.
func Worst(checks []Check) Status {
	w := PASS
	for _, c := range checks {
		if severity(c.Status) > severity(w) {
			w = c.Status
		}
	}
	return w
}

func severity(s Status) int {
	switch s {
	case NA:
		return -1
	case PASS:
		return 0
	case UNKNOWN:
		return 1
	case WARN:
		return 2
	default:
		return 3
	}
}

// combine folds per-item statuses the way every multi-item check does:
// any FAIL fails, then any WARN warns, then any UNKNOWN leaves the check
// unknown (a PASS must cover everything), else PASS. No items: UNKNOWN.
func combine(ss ...Status) Status {
	if len(ss) == 0 {
		return UNKNOWN
	}
	has := map[Status]bool{}
	for _, s := range ss {
		has[s] = true
	}
	switch {
	case has[FAIL]:
		return FAIL
	case has[WARN]:
		return WARN
	case has[UNKNOWN]:
		return UNKNOWN
	}
	return PASS
}
