package gpu

import (
	"errors"
	"strings"
)

// TopoArgs is nvidia-smi's topology matrix command.
var TopoArgs = []string{"topo", "-m"}

// Topology is `nvidia-smi topo -m`: how each GPU reaches every other GPU
// and NIC (X self, NV# NVLinks, PIX one PCIe bridge, PXB several bridges,
// PHB through a host bridge, NODE across host bridges within a NUMA
// node, SYS across the SMP interconnect between NUMA nodes), and each
// GPU's CPU and NUMA affinity.
type Topology struct {
	// Devices are the matrix's columns in order: GPU0.., then the NICs by
	// their RDMA device names (mlx5_0), as drivers from 2023 print them
	// ("NIC0" with a "NIC Legend") or as older ones did (the name itself).
	Devices []string      `json:"devices"`
	Rows    []TopologyRow `json:"rows"`
}

// TopologyRow is one device's row.
type TopologyRow struct {
	Device string `json:"device"`
	// Links has one entry per column, "X" for the device itself.
	Links        []string `json:"links"`
	CPUAffinity  string   `json:"cpu_affinity,omitempty"`
	NUMAAffinity string   `json:"numa_affinity,omitempty"`
}

// Link returns how device a reaches device b ("" when the matrix does not say).
func (t *Topology) Link(a, b string) string {
	col := -1
	for i, d := range t.Devices {
		if d == b {
			col = i
		}
	}
	for _, r := range t.Rows {
		if r.Device == a && col >= 0 && col < len(r.Links) {
			return r.Links[col]
		}
	}
	return ""
}

// ParseTopology reads the matrix: a tab-separated header row of column
// names ending with "CPU Affinity", "NUMA Affinity" and, on newer
// drivers, "GPU NUMA ID"; one row per device; then the legends.
func ParseTopology(b []byte) (*Topology, error) {
	lines := strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n")
	t := &Topology{}
	header := -1
	for i, l := range lines {
		// The header may carry terminal escapes (the driver underlines it).
		l = stripEscapes(l)
		if strings.Contains(l, "CPU Affinity") && strings.Contains(l, "\t") {
			header = i
			for _, f := range strings.Split(l, "\t") {
				f = strings.TrimSpace(f)
				if f == "CPU Affinity" {
					break
				}
				if f != "" {
					t.Devices = append(t.Devices, f)
				}
			}
			break
		}
	}
	if header < 0 || len(t.Devices) == 0 {
		return nil, errors.New("nvidia-smi topo: no matrix header (… CPU Affinity)")
	}
	n := len(t.Devices)
	legend := map[string]string{}
	for _, l := range lines[header+1:] {
		l = stripEscapes(l)
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && strings.HasPrefix(k, "NIC") && !strings.Contains(k, " ") {
			legend[k] = strings.TrimSpace(v)
			continue
		}
		f := strings.Split(l, "\t")
		if len(f) < n+1 || strings.TrimSpace(f[0]) == "" {
			continue
		}
		r := TopologyRow{Device: strings.TrimSpace(f[0])}
		for _, c := range f[1 : n+1] {
			r.Links = append(r.Links, strings.TrimSpace(c))
		}
		if len(f) > n+1 {
			r.CPUAffinity = strings.TrimSpace(f[n+1])
		}
		if len(f) > n+2 {
			r.NUMAAffinity = strings.TrimSpace(f[n+2])
		}
		t.Rows = append(t.Rows, r)
	}
	if len(t.Rows) == 0 {
		return nil, errors.New("nvidia-smi topo: no rows under the header")
	}
	rename := func(s string) string {
		if v, ok := legend[s]; ok && v != "" {
			return v
		}
		return s
	}
	for i := range t.Devices {
		t.Devices[i] = rename(t.Devices[i])
	}
	for i := range t.Rows {
		t.Rows[i].Device = rename(t.Rows[i].Device)
	}
	return t, nil
}

// stripEscapes removes ANSI escape sequences (ESC [ ... letter).
func stripEscapes(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && !(s[j] >= '@' && s[j] <= '~') {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
