package facts

import (
	"sort"
	"strconv"
	"strings"
)

// PCILink is one PCIe device's place in the tree and its link: the
// devices that matter to the data path (accelerators, physical NICs,
// NVMe PCIe controllers), read from /sys/bus/pci/devices/ADDR.
type PCILink struct {
	Address  string `json:"address"`
	Role     string `json:"role"` // gpu, nic, nvme
	Name     string `json:"name"` // the GPU's model, the NIC's or controller's name
	NUMANode Value  `json:"numa_node"`
	// Upstream lists the bridges above the device, root port first (from
	// the sysfs device path); Switch is the upstream port of the PCIe
	// switch nearest the device, empty when it hangs off a root port.
	Upstream         []string `json:"upstream,omitempty"`
	Switch           string   `json:"switch,omitempty"`
	CurrentLinkSpeed Value    `json:"current_link_speed"`
	MaxLinkSpeed     Value    `json:"max_link_speed"`
	CurrentLinkWidth Value    `json:"current_link_width"`
	MaxLinkWidth     Value    `json:"max_link_width"`
}

// Degraded says whether the link trained below its maximum speed or
// width (a classic silent fault: a riser, a dirty slot, a bifurcation
// setting), and how.
func (l PCILink) Degraded() (string, bool) {
	var parts []string
	if c, m := l.CurrentLinkSpeed.Value, l.MaxLinkSpeed.Value; c != "" && m != "" && speedGTs(c) > 0 && speedGTs(c) < speedGTs(m) {
		parts = append(parts, "speed "+c+" of "+m)
	}
	if c, m := l.CurrentLinkWidth.Value, l.MaxLinkWidth.Value; c != "" && m != "" && atoiLoose(c) > 0 && atoiLoose(c) < atoiLoose(m) {
		parts = append(parts, "width x"+c+" of x"+m)
	}
	return strings.Join(parts, ", "), len(parts) > 0
}

// speedGTs reads "16.0 GT/s PCIe" or "8 GT/s" as GT/s.
func speedGTs(s string) float64 {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

func collectPCI(r *Runner, f *Facts) []PCILink {
	type dev struct{ addr, role, name string }
	var devs []dev
	for _, g := range f.GPU.GPUs {
		if g.PCIBusID != "" {
			devs = append(devs, dev{SysfsPCIAddress(g.PCIBusID), "gpu", g.Model()})
		}
	}
	for _, n := range f.Network.Interfaces {
		if n.Physical && strings.Count(n.BusInfo.Value, ":") == 2 {
			devs = append(devs, dev{n.BusInfo.Value, "nic", n.Name})
		}
	}
	for _, c := range f.NVMe.Controllers {
		if c.Transport.Value == "pcie" && c.Address.Value != "" {
			devs = append(devs, dev{c.Address.Value, "nvme", c.Name})
		}
	}
	var out []PCILink
	seen := map[string]bool{}
	for _, d := range devs {
		if seen[d.addr] {
			continue
		}
		seen[d.addr] = true
		dir := "/sys/bus/pci/devices/" + d.addr
		l := PCILink{Address: d.addr, Role: d.role, Name: d.name, NUMANode: r.Attr(dir + "/numa_node"),
			CurrentLinkSpeed: r.Attr(dir + "/current_link_speed"), MaxLinkSpeed: r.Attr(dir + "/max_link_speed"),
			CurrentLinkWidth: r.Attr(dir + "/current_link_width"), MaxLinkWidth: r.Attr(dir + "/max_link_width")}
		if target, err := r.Readlink(dir); err == nil {
			// ../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0
			for _, p := range strings.Split(target, "/") {
				if strings.Count(p, ":") == 2 && p != d.addr {
					l.Upstream = append(l.Upstream, p)
				}
			}
			// root port, then (upstream port, downstream port) per switch.
			if n := len(l.Upstream); n >= 3 {
				l.Switch = l.Upstream[n-2]
			}
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out
}
