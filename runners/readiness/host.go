package readiness

import (
	"fmt"
	"sort"
	"strings"

	"github.com/accordlab/accord/runners/probe/facts"
)

// checkKernel: the running kernel is at least the minimum release.
func checkKernel(e *env) result {
	rel := e.f.Kernel.Release
	ev := []Evidence{valueEv("kernel.release", rel)}
	if !rel.OK() || rel.Value == "" {
		return result{UNKNOWN, "The kernel release could not be read.", ev, "Refresh the facts (uname -r reports it)."}
	}
	major, minor, ok := parseKernel(rel.Value)
	wantMajor, wantMinor, wok := parseKernel(e.o.MinKernel)
	if !ok || !wok {
		return result{UNKNOWN, fmt.Sprintf("Kernel release %q is not in a form this check understands.", rel.Value), ev, "Compare the kernel with the array vendor's support matrix by hand."}
	}
	if major > wantMajor || (major == wantMajor && minor >= wantMinor) {
		return result{PASS, fmt.Sprintf("Kernel %s (based on %d.%d, at least %s).", rel.Value, major, minor, e.o.MinKernel), ev, ""}
	}
	s := fmt.Sprintf("Kernel %s is based on %d.%d, older than %s: it lacks upstream NVMe-oF work since then (TCP and RDMA initiator performance, the queue-depth I/O policy from 6.11, multipath fixes).", rel.Value, major, minor, e.o.MinKernel)
	if strings.Contains(rel.Value, ".el") || strings.Contains(rel.Value, "uek") {
		s += " Enterprise kernels backport much of that, so the base version understates this one: the array vendor's support matrix is the authority."
	}
	return result{WARN, s, ev, "Use a kernel from " + e.o.MinKernel + " on (the distribution's newer or hardware-enablement kernel), or record that the array vendor supports this one."}
}

// initiatorModules lists the modules the expected transport needs, or
// those the controllers' transports need when there is no expectation.
func (e *env) initiatorModules() []string {
	need := map[string]bool{}
	add := func(t string) {
		switch t {
		case "rdma":
			need["nvme_fabrics"], need["nvme_rdma"] = true, true
		case "tcp":
			need["nvme_fabrics"], need["nvme_tcp"] = true, true
		case "pcie":
			need["nvme"] = true
		}
	}
	if e.want != "" {
		add(e.want)
	} else {
		for _, c := range e.ctrls {
			add(c.Transport.Value)
		}
	}
	return sortedKeys(need)
}

// checkModules: the initiator modules are loaded or built in. A controller
// over the transport proves its module is there; the transport module
// proves nvme_fabrics (its dependency).
func checkModules(e *env) result {
	need := e.initiatorModules()
	if len(need) == 0 {
		return result{UNKNOWN, "No NVMe transport is expected and no controller shows which one is used.", nil, "Set the profile's storage transport."}
	}
	m := e.f.Modules
	present := map[string]string{} // module → how we know
	var ev []Evidence
	for _, name := range need {
		switch {
		case m.Source.OK() && m.Loaded[name]:
			present[name] = "loaded"
			ev = append(ev, moduleEv(e, name))
		case m.Builtin[name]:
			present[name] = "built in"
			ev = append(ev, Evidence{Fact: "modules.builtin[" + name + "]", Value: "true", File: "/sys/module/" + name})
		}
	}
	transportOf := map[string]string{"nvme_rdma": "rdma", "nvme_tcp": "tcp", "nvme": "pcie"}
	for _, name := range need {
		if present[name] != "" || transportOf[name] == "" {
			continue
		}
		for _, c := range e.f.NVMe.Controllers {
			if c.Transport.Value == transportOf[name] {
				present[name] = "in use by " + c.Name
				ev = append(ev, valueEv(ctrlFact(c, "transport"), c.Transport))
				break
			}
		}
	}
	if present["nvme_fabrics"] == "" {
		for _, dep := range []string{"nvme_rdma", "nvme_tcp"} {
			if present[dep] != "" {
				present["nvme_fabrics"] = "required by " + dep
				break
			}
		}
	}
	var have, missing, unknown []string
	for _, name := range need {
		switch {
		case present[name] != "":
			have = append(have, name+" ("+present[name]+")")
		case m.Source.OK():
			missing = append(missing, name)
			ev = append(ev, moduleEv(e, name))
		default:
			unknown = append(unknown, name)
			ev = append(ev, moduleEv(e, name))
		}
	}
	switch {
	case len(missing) > 0:
		s := "Missing: " + strings.Join(missing, ", ") + "."
		if len(have) > 0 {
			s += " Present: " + strings.Join(have, ", ") + "."
		}
		load := missing[len(missing)-1]
		return result{FAIL, s, ev, fmt.Sprintf("modprobe %s (it pulls in its dependencies) and list it in /etc/modules-load.d/ so it loads at boot.", load)}
	case len(unknown) > 0:
		s := "Whether " + strings.Join(unknown, ", ") + " " + plural(len(unknown), "is", "are") + " loaded is unknown: /proc/modules could not be read and sysfs does not show " + plural(len(unknown), "it", "them") + "."
		if len(have) > 0 {
			s += " Present: " + strings.Join(have, ", ") + "."
		}
		return result{UNKNOWN, s, ev, "Run the probe where /proc/modules is readable, then refresh the facts."}
	}
	return result{PASS, "Present: " + strings.Join(have, ", ") + ".", ev, ""}
}

// checkCPUFreq: every CPU runs the performance governor.
func checkCPUFreq(e *env) result {
	c := e.f.CPUFreq
	pattern := "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"
	if c.Absent || len(c.Files) == 0 {
		return result{UNKNOWN, "No cpufreq interface: the kernel has no frequency-scaling driver here (a VM, or firmware owns power management), so the governor is unknown.", []Evidence{{Fact: "cpufreq.governors", File: pattern, Absent: true}},
			"On bare metal, set the BIOS power profile to maximum performance (or OS-controlled, then the performance governor) and refresh the facts."}
	}
	// One evidence per governor, from the first CPU that uses it.
	var ev []Evidence
	firstOf := map[string]bool{}
	unreadable := 0
	for _, v := range c.Files {
		if !v.OK() || v.Value == "" {
			unreadable++
			if unreadable == 1 {
				ev = append(ev, valueEv("cpufreq.files", v))
			}
			continue
		}
		if !firstOf[v.Value] {
			firstOf[v.Value] = true
			ev = append(ev, valueEv("cpufreq.governors["+v.Value+"]", v))
		}
	}
	names := sortedKeys(c.Governors)
	var counts []string
	total, perf := 0, c.Governors["performance"]
	for _, g := range names {
		counts = append(counts, fmt.Sprintf("%s on %d %s", g, c.Governors[g], plural(c.Governors[g], "CPU", "CPUs")))
		total += c.Governors[g]
	}
	switch {
	case total > 0 && perf < total:
		return result{WARN, "Governors: " + strings.Join(counts, ", ") + ". Power-saving governors lower the clock between bursts, adding wake-up latency and run-to-run variation to latency percentiles.", ev,
			"cpupower frequency-set -g performance (or tuned-adm profile latency-performance) and make it persistent; with intel_pstate, powersave is its dynamic mode, still slower to ramp than performance."}
	case unreadable > 0 || total == 0:
		return result{UNKNOWN, fmt.Sprintf("The governor of %d %s could not be read.", unreadable, plural(unreadable, "CPU", "CPUs")), ev, "Run the probe as root and refresh the facts."}
	}
	return result{PASS, fmt.Sprintf("All %d CPUs use the performance governor.", perf), ev, ""}
}

// checkNUMA: every GPU has a storage device (storage NIC or NVMe
// controller) on its NUMA node. NVMe/TCP controllers have no device node
// (their I/O follows the NIC), so they are left out. A GPU whose sysfs
// node is not reported takes nvidia-smi topo -m's NUMA affinity, and the
// matrix's PCIe path from each GPU to each storage NIC's RDMA device is
// given beside the verdict (PIX or PXB: behind one PCIe switch, the path
// GPU-direct wants; SYS: across the sockets).
func checkNUMA(e *env) result {
	f := e.f
	nodesEv := sourceEv("numa.online", f.NUMA.Source, f.NUMA.Source.Raw)
	nodesEv.Value = f.NUMA.Source.Raw
	if len(f.NUMA.Nodes) == 0 {
		return result{UNKNOWN, "The NUMA layout is unknown: /sys/devices/system/node could not be read.", []Evidence{nodesEv}, "Run the probe where sysfs is mounted, then refresh the facts."}
	}
	if len(f.NUMA.Nodes) == 1 {
		return result{PASS, "One NUMA node: every device is local to every CPU.", []Evidence{nodesEv}, ""}
	}
	ev := []Evidence{nodesEv}
	type dev struct {
		label string
		node  int
		known bool
	}
	var storage, gpus []dev
	var unknown []string
	add := func(list *[]dev, label, fact string, v facts.Value) {
		ev = append(ev, valueEv(fact, v))
		n, ok := parseNode(v.Value)
		if !v.OK() {
			ok = false
		}
		if !ok {
			unknown = append(unknown, label)
		}
		*list = append(*list, dev{label, n, ok})
	}
	nics, _ := e.storageNICs()
	for _, n := range nics {
		add(&storage, "NIC "+n.Name, nicFact(n.Name, "numa_node"), n.NUMANode)
	}
	for _, c := range e.ctrls {
		if c.Transport.Value == "tcp" {
			continue
		}
		add(&storage, c.Name, ctrlFact(c, "numa_node"), c.NUMANode)
	}
	for _, g := range f.GPU.GPUs {
		node, fact := g.NUMANode, fmt.Sprintf("gpu.gpus[%d].numa_node", g.Index)
		if _, ok := parseNode(node.Value); (!ok || !node.OK()) && g.Tool == "nvidia-smi" {
			if v, ok := topologyNode(f, g.Index); ok {
				node, fact = v, fmt.Sprintf("gpu.topology.rows[GPU%d].numa_affinity", g.Index)
			}
		}
		add(&gpus, fmt.Sprintf("GPU %d", g.Index), fact, node)
	}
	paths, pathEv := gpuNICPaths(f, nics)
	ev = append(ev, pathEv...)
	if len(storage)+len(gpus) == 0 {
		return result{UNKNOWN, fmt.Sprintf("%d NUMA nodes, but no storage NIC, NVMe controller or GPU to place.", len(f.NUMA.Nodes)), ev,
			"Connect the storage under test (or name the storage interfaces), then refresh the facts."}
	}
	if len(unknown) > 0 {
		return result{UNKNOWN, "The NUMA node of " + strings.Join(unknown, ", ") + " is not reported (numa_node -1 or absent), so locality cannot be judged.", ev,
			"Enable NUMA reporting in the BIOS (SRAT / \"NUMA nodes per socket\"; ACPI _PXM for the PCIe slots), then refresh the facts."}
	}
	where := func(ds []dev) string {
		var parts []string
		for _, d := range ds {
			parts = append(parts, fmt.Sprintf("%s node %d", d.label, d.node))
		}
		return strings.Join(parts, ", ")
	}
	storageNodes := map[int]bool{}
	for _, d := range storage {
		storageNodes[d.node] = true
	}
	if len(gpus) == 0 {
		return result{PASS, "No GPU to align with; storage devices: " + where(storage) + ".", ev, ""}
	}
	if len(storage) == 0 {
		return result{UNKNOWN, "GPUs: " + where(gpus) + "; no storage device under test to compare with.", ev,
			"Connect the storage under test (or name the storage interfaces), then refresh the facts."}
	}
	var far []string
	for _, g := range gpus {
		if !storageNodes[g.node] {
			far = append(far, fmt.Sprintf("%s (node %d)", g.label, g.node))
		}
	}
	var sn []int
	for n := range storageNodes {
		sn = append(sn, n)
	}
	sort.Ints(sn)
	if len(far) > 0 {
		return result{WARN, fmt.Sprintf("%s %s no storage device on its node (storage on node %s): reads for %s cross the inter-socket link. Devices: %s; %s.%s",
			strings.Join(far, ", "), plural(len(far), "has", "have"), joinInts(sn), plural(len(far), "it", "them"), where(storage), where(gpus), paths), ev,
			"Run the inference server on the GPUs that share a node with the storage NIC or drive (CUDA_VISIBLE_DEVICES), or add a storage NIC on the other node; pin the load with numactl --cpunodebind to that node."}
	}
	return result{PASS, "Every GPU has a storage device on its node. " + where(storage) + "; " + where(gpus) + "." + paths, ev, ""}
}

// topologyNode is nvidia-smi topo -m's NUMA affinity of GPU i, as a fact.
func topologyNode(f *facts.Facts, i int) (facts.Value, bool) {
	t := f.GPU.Topology
	if t == nil || f.GPU.TopologySource == nil {
		return facts.Value{}, false
	}
	for _, r := range t.Rows {
		if r.Device == fmt.Sprintf("GPU%d", i) {
			if _, ok := parseNode(r.NUMAAffinity); ok {
				src := *f.GPU.TopologySource
				src.Raw = strings.Join(append([]string{r.Device}, r.Links...), "\t") + "\t" + r.CPUAffinity + "\t" + r.NUMAAffinity
				return facts.Value{Value: r.NUMAAffinity, Source: src}, true
			}
		}
	}
	return facts.Value{}, false
}

// gpuNICPaths describes, from nvidia-smi topo -m, how each GPU reaches
// each storage NIC's RDMA device (" PCIe paths: GPU0–mlx5_0 (ens1f0np0)
// PXB, …."), with the matrix as evidence; "" without a matrix.
func gpuNICPaths(f *facts.Facts, nics []facts.NIC) (string, []Evidence) {
	t := f.GPU.Topology
	if t == nil || f.GPU.TopologySource == nil || len(nics) == 0 {
		return "", nil
	}
	rdmaOf := map[string]string{} // netdev → RDMA device
	for _, l := range f.RDMA.Links {
		if l.NetDev != "" {
			rdmaOf[l.NetDev] = l.Device
		}
	}
	var parts []string
	for _, r := range t.Rows {
		if !strings.HasPrefix(r.Device, "GPU") {
			continue
		}
		for _, n := range nics {
			if link := t.Link(r.Device, rdmaOf[n.Name]); link != "" && rdmaOf[n.Name] != "" {
				parts = append(parts, fmt.Sprintf("%s–%s (%s) %s", r.Device, rdmaOf[n.Name], n.Name, link))
			}
		}
	}
	if len(parts) == 0 {
		return "", nil
	}
	ev := sourceEv("gpu.topology", *f.GPU.TopologySource, f.GPU.TopologySource.Raw)
	return " PCIe paths (nvidia-smi topo -m; PIX/PXB share a PCIe switch, NODE crosses host bridges, SYS the sockets): " + strings.Join(parts, ", ") + ".", []Evidence{ev}
}

// checkPCIeLinks: every GPU, physical NIC and NVMe PCIe controller runs
// its link at the maximum speed and width it and its slot support.
func checkPCIeLinks(e *env) result {
	var ev []Evidence
	var slow, unknown []string
	for _, l := range e.f.PCI {
		fact := "pci[" + l.Address + "]"
		ev = append(ev, valueEv(fact+".current_link_speed", l.CurrentLinkSpeed), valueEv(fact+".max_link_speed", l.MaxLinkSpeed),
			valueEv(fact+".current_link_width", l.CurrentLinkWidth), valueEv(fact+".max_link_width", l.MaxLinkWidth))
		if !l.CurrentLinkSpeed.OK() || !l.MaxLinkSpeed.OK() || !l.CurrentLinkWidth.OK() || !l.MaxLinkWidth.OK() {
			unknown = append(unknown, l.Role+" "+l.Name)
			continue
		}
		if how, bad := l.Degraded(); bad {
			slow = append(slow, fmt.Sprintf("%s %s (%s): %s", l.Role, l.Name, l.Address, how))
		}
	}
	switch {
	case len(slow) > 0:
		return result{WARN, "Trained below maximum: " + strings.Join(slow, "; ") + ".", ev,
			"Reseat the card or move it to a slot wired for its full width, check risers and the BIOS link speed and bifurcation settings, then refresh the facts."}
	case len(unknown) > 0:
		return result{UNKNOWN, "The link of " + strings.Join(unknown, ", ") + " is not reported in sysfs.", ev, "Run the probe where /sys/bus/pci is readable, then refresh the facts."}
	}
	return result{PASS, fmt.Sprintf("All %d links run at their maximum speed and width.", len(e.f.PCI)), ev, ""}
}

// pcieLinksKnown: the check applies where sysfs reports link speeds at
// all (it does not in some VMs and containers).
func pcieLinksKnown(e *env) bool {
	for _, l := range e.f.PCI {
		if l.MaxLinkSpeed.OK() && l.MaxLinkSpeed.Value != "" {
			return true
		}
	}
	return false
}
