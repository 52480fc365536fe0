package gpu

import (
	"encoding/json"
	"fmt"
)

// mthreads-gmi -q --json prints the query report as JSON: "Driver
// Version" and a "GPU" array whose entries carry "Index", "Product Name",
// "FB Memory Usage" {Total, Used}, "Utilization" {Gpu}, "Power Readings"
// {"Power Draw "} (the key has a trailing space in the releases seen) and
// "PCI" {"Bus Id"}; values are strings with units.
func init() {
	register(Adapter{
		Tool:           "mthreads-gmi",
		Vendor:         "Moore Threads",
		Facts:          [][]string{{"-q", "--json"}},
		Telemetry:      [][]string{{"-q", "-d", "MEMORY,UTILIZATION,POWER", "--json"}},
		ParseFacts:     func(o [][]byte) ([]Device, error) { d, _, err := parseMthreads(one(o)); return d, err },
		ParseTelemetry: func(o [][]byte) ([]Sample, error) { _, s, err := parseMthreads(one(o)); return s, err },
	})
}

type mtGPU map[string]any

func (g mtGPU) str(keys ...string) string {
	var cur any = map[string]any(g)
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[k]
	}
	switch v := cur.(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(v)
	}
	return ""
}

func parseMthreads(b []byte) ([]Device, []Sample, error) {
	var doc struct {
		Driver string  `json:"Driver Version"`
		GPU    []mtGPU `json:"GPU"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, nil, fmt.Errorf("mthreads-gmi: JSON: %w", err)
	}
	if len(doc.GPU) == 0 {
		return nil, nil, errNoDevices("mthreads-gmi")
	}
	var devs []Device
	var samples []Sample
	for i, g := range doc.GPU {
		idx := i
		if n := number(g.str("Index")); n != nil && *n >= 0 {
			idx = int(*n)
		}
		d := Device{Index: idx, Name: g.str("Product Name"), UUID: g.str("GPU UUID"), Driver: doc.Driver, PCIAddress: PCIAddress(g.str("PCI", "Bus Id"))}
		if m := bytesOf(g.str("FB Memory Usage", "Total"), 1<<20); m != nil {
			d.MemoryBytes = *m
		}
		power := number(g.str("Power Readings", "Power Draw "))
		if power == nil {
			power = number(g.str("Power Readings", "Power Draw"))
		}
		devs = append(devs, d)
		samples = append(samples, Sample{Index: idx, UtilPct: percent(g.str("Utilization", "Gpu")), MemBWPct: percent(g.str("Utilization", "Memory")),
			MemUsedBytes: bytesOf(g.str("FB Memory Usage", "Used"), 1<<20), PowerW: power})
	}
	return devs, samples, nil
}
