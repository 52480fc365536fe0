package readiness

import (
	"encoding/json"
	"net/netip"
	"regexp"
	"sort"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
)

// env is one evaluation: the facts, the options and what follows from them
// (the expected kernel transport, the controllers under test, the storage
// interfaces).
type env struct {
	f *facts.Facts
	o Options
	// want is the kernel's transport name the profile expects (rdma, tcp,
	// pcie), or "" when the profile names none.
	want string
	// ctrls are the controllers under test: those over the expected
	// transport, or every controller when there is no expectation.
	ctrls   []facts.NVMeController
	ctrlSet map[string]bool

	nics map[string]facts.NIC
	// ifaces are the storage interfaces, ifaceHow says how they were found
	// and ifaceEv is the evidence of that.
	ifaces   []string
	ifaceHow string
	ifaceEv  []Evidence

	ipLinks map[string]string // ifname → its object in `ip -j link`
}

func newEnv(f *facts.Facts, o Options) *env {
	e := &env{f: f, o: o, want: kernelTransport(o.Transport), ctrlSet: map[string]bool{}, nics: map[string]facts.NIC{}}
	for _, c := range f.NVMe.Controllers {
		if e.want == "" || c.Transport.Value == e.want {
			e.ctrls = append(e.ctrls, c)
			e.ctrlSet[c.Name] = true
		}
	}
	for _, n := range f.Network.Interfaces {
		if n.Name != "" {
			e.nics[n.Name] = n
		}
	}
	e.ipLinks = splitIPJSON(f.Network.IPLink.Raw)
	e.findInterfaces()
	return e
}

// kernelTransport maps a profile's transport to the name in
// /sys/class/nvme/nvmeX/transport.
func kernelTransport(t acceptance.Transport) string {
	switch t {
	case acceptance.TransportNVMeoFRDMA:
		return "rdma"
	case acceptance.TransportNVMeoFTCP:
		return "tcp"
	case acceptance.TransportLocalNVMe:
		return "pcie"
	}
	return ""
}

func isFabric(transport string) bool {
	switch transport {
	case "rdma", "tcp", "fc":
		return true
	}
	return false
}

// Applicability of the checks.

func always(*env) bool { return true }

func nvmeRelevant(e *env) bool { return e.want != "" || len(e.f.NVMe.Controllers) > 0 }

func fabricRelevant(e *env) bool {
	if e.want != "" {
		return isFabric(e.want)
	}
	for _, c := range e.ctrls {
		if isFabric(c.Transport.Value) {
			return true
		}
	}
	return false
}

func networkRelevant(e *env) bool { return fabricRelevant(e) || len(e.o.StorageInterfaces) > 0 }

func rdmaExpected(e *env) bool {
	if e.want != "" {
		return e.want == "rdma"
	}
	for _, c := range e.ctrls {
		if c.Transport.Value == "rdma" {
			return true
		}
	}
	return false
}

// roceRelevant: RDMA over Ethernet. InfiniBand has link-level credit flow
// control, so PFC and ECN do not apply when every storage interface is IB.
func roceRelevant(e *env) bool {
	if !rdmaExpected(e) {
		return false
	}
	if len(e.ifaces) == 0 {
		return true
	}
	for _, name := range e.ifaces {
		if n, ok := e.nics[name]; !ok || n.LinkType != "infiniband" {
			return true
		}
	}
	return false
}

func modulesRelevant(e *env) bool { return nvmeRelevant(e) }

// gpuRelevant: accelerators are expected, found, or a vendor's tool or
// the nvidia module says they should be.
func gpuRelevant(e *env) bool {
	if e.o.GPUExpected || len(e.f.GPU.GPUs) > 0 || e.f.Modules.Loaded["nvidia"] {
		return true
	}
	for _, t := range e.f.GPU.Tools {
		if !t.Absent() && len(t.Sources) > 0 {
			return true
		}
	}
	return false
}

// gdsRelevant: GPUDirect Storage is NVIDIA's, so it is judged where
// NVIDIA GPUs are (or may be), not on a host whose accelerators are all
// another vendor's.
func gdsRelevant(e *env) bool {
	if !gpuRelevant(e) {
		return false
	}
	legacy := len(e.f.GPU.Tools) == 0 && !e.f.GPU.Source.Absent // facts from before the vendor tools: nvidia-smi's
	if e.f.Modules.Loaded["nvidia"] || legacy || toolPresent(e.f.GPU, "nvidia-smi") {
		return true
	}
	for _, d := range e.f.GPU.GPUs {
		if d.Tool == "" || d.Tool == "nvidia-smi" {
			return true
		}
	}
	// Accelerators of other vendors only: GDS does not apply. None at all
	// (expected, not found): the NVIDIA path is still the likely one.
	return len(e.f.GPU.GPUs) == 0 && !anyToolPresent(e.f.GPU)
}

func toolPresent(g facts.GPU, tool string) bool {
	for _, t := range g.Tools {
		if t.Tool == tool {
			return !t.Absent()
		}
	}
	return false
}

func anyToolPresent(g facts.GPU) bool {
	for _, t := range g.Tools {
		if !t.Absent() {
			return true
		}
	}
	return false
}

// Controllers and namespaces.

var nsInstance = regexp.MustCompile(`^nvme([0-9]+)n[0-9]+$`)
var pathCtrl = regexp.MustCompile(`^nvme[0-9]+c([0-9]+)n[0-9]+$`)

// pathController names the controller behind a path: nvme1c2n1 → nvme2.
func pathController(path string) string {
	if m := pathCtrl.FindStringSubmatch(path); m != nil {
		return "nvme" + m[1]
	}
	return ""
}

// nsControllers names the controllers behind a namespace: its paths'
// controllers when the kernel exposes paths; else the subsystem's
// controllers (namespaces are named after the subsystem instance); else
// the controller of the same number (older kernels without multipath).
func (e *env) nsControllers(ns facts.BlockDevice) []string {
	var out []string
	for _, p := range ns.Paths {
		if c := pathController(p.Name); c != "" {
			out = append(out, c)
		}
	}
	if len(out) > 0 {
		return out
	}
	m := nsInstance.FindStringSubmatch(ns.Name)
	if m == nil {
		return nil
	}
	for _, s := range e.f.NVMe.Subsystems {
		if s.Name == "nvme-subsys"+m[1] {
			return s.Controllers
		}
	}
	return []string{"nvme" + m[1]}
}

// namespaces are the namespaces behind the controllers under test.
func (e *env) namespaces() []facts.BlockDevice {
	var out []facts.BlockDevice
	for _, ns := range e.f.NVMe.Namespaces {
		for _, c := range e.nsControllers(ns) {
			if e.ctrlSet[c] {
				out = append(out, ns)
				break
			}
		}
	}
	return out
}

// paths are a namespace's paths through controllers under test.
func (e *env) paths(ns facts.BlockDevice) []facts.NVMePath {
	var out []facts.NVMePath
	for _, p := range ns.Paths {
		if e.ctrlSet[pathController(p.Name)] {
			out = append(out, p)
		}
	}
	return out
}

// subsystems are those holding a controller under test.
func (e *env) subsystems() []facts.NVMeSubsystem {
	var out []facts.NVMeSubsystem
	for _, s := range e.f.NVMe.Subsystems {
		for _, c := range s.Controllers {
			if e.ctrlSet[c] {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// Storage interfaces.

// findInterfaces decides which interfaces carry storage traffic: those
// named in the options; else those the fabric controllers' addresses point
// at (host_iface, host_traddr or src_addr, else the interface whose subnet
// holds traddr); else, for RDMA, the RDMA ports' network devices.
func (e *env) findInterfaces() {
	if len(e.o.StorageInterfaces) > 0 {
		e.ifaces = uniqueSorted(e.o.StorageInterfaces)
		e.ifaceHow = "named in the host's settings"
		e.ifaceEv = []Evidence{{Fact: "options.storage_interfaces", Value: strings.Join(e.ifaces, ",")}}
		return
	}
	found := map[string]bool{}
	for _, c := range e.ctrls {
		if !isFabric(c.Transport.Value) {
			continue
		}
		if name := e.interfaceFor(parseAddress(c.Address.Value)); name != "" {
			if !found[name] {
				e.ifaceEv = append(e.ifaceEv, valueEv("nvme.controllers["+c.Name+"].address", c.Address))
			}
			found[name] = true
		}
	}
	if len(found) > 0 {
		for n := range found {
			e.ifaces = append(e.ifaces, n)
		}
		sort.Strings(e.ifaces)
		e.ifaceHow = "found from the controllers' addresses"
		return
	}
	if rdmaExpected(e) {
		for _, l := range e.f.RDMA.Links {
			if _, ok := e.nics[l.NetDev]; ok && !found[l.NetDev] {
				found[l.NetDev] = true
				e.ifaces = append(e.ifaces, l.NetDev)
				e.ifaceEv = append(e.ifaceEv, rdmaLinkEv(e, l, "netdev", l.NetDev))
			}
		}
		sort.Strings(e.ifaces)
		if len(e.ifaces) > 0 {
			e.ifaceHow = "taken from the RDMA ports' network devices"
		}
	}
}

// interfaceFor finds the local interface a fabric address uses.
func (e *env) interfaceFor(kv map[string]string) string {
	if n := kv["host_iface"]; n != "" {
		if _, ok := e.nics[n]; ok {
			return n
		}
	}
	for _, key := range []string{"host_traddr", "src_addr"} {
		ip, err := netip.ParseAddr(kv[key])
		if err != nil {
			continue
		}
		for _, name := range sortedKeys(e.nics) {
			for _, a := range e.nics[name].Addresses {
				if p, err := netip.ParsePrefix(a); err == nil && p.Addr() == ip {
					return name
				}
			}
		}
	}
	ip, err := netip.ParseAddr(kv["traddr"])
	if err != nil {
		return ""
	}
	for _, name := range sortedKeys(e.nics) {
		n := e.nics[name]
		if n.LinkType == "loopback" {
			continue
		}
		for _, a := range n.Addresses {
			if p, err := netip.ParsePrefix(a); err == nil && p.Masked().Contains(ip) {
				return name
			}
		}
	}
	return ""
}

// parseAddress splits a controller's address attribute
// ("traddr=192.0.2.10,trsvcid=4420,src_addr=192.0.2.2").
func parseAddress(s string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok {
			out[k] = v
		}
	}
	return out
}

// splitIPJSON maps each interface of `ip -j link` to its JSON object.
func splitIPJSON(raw string) map[string]string {
	out := map[string]string{}
	var items []json.RawMessage
	if json.Unmarshal([]byte(raw), &items) != nil {
		return out
	}
	for _, it := range items {
		var l struct {
			IfName string `json:"ifname"`
		}
		if json.Unmarshal(it, &l) == nil && l.IfName != "" {
			out[l.IfName] = string(it)
		}
	}
	return out
}

func uniqueSorted(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
