package gpu

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// rocm-smi prints one JSON object per card ("card0", "card1", ...) plus a
// "system" object, every value a string; the keys are the labels of its
// text report, which moved between ROCm releases ("Card series" / "Card
// Series" / "Device Name"), so each field is looked up under every name it
// has had.
func init() {
	register(Adapter{
		Tool:   "rocm-smi",
		Vendor: "AMD",
		Facts: [][]string{{"--showproductname", "--showbus", "--showvbios", "--showuniqueid", "--showmeminfo", "vram",
			"--showdriverversion", "--showtoponuma", "--json"}},
		Telemetry:      [][]string{{"--showuse", "--showmemuse", "--showmeminfo", "vram", "--showpower", "--json"}},
		ParseFacts:     func(o [][]byte) ([]Device, error) { return parseROCmJSON("rocm-smi", amdKeys, one(o)) },
		ParseTelemetry: func(o [][]byte) ([]Sample, error) { return sampleROCmJSON("rocm-smi", amdKeys, one(o)) },
	})
}

// rocmKeys names the fields of a rocm-smi-style JSON report.
type rocmKeys struct {
	name, uuid, firmware, bus, numa []string
	memTotal, memUsed               []string // with the unit in the label: (B) or (MiB)
	util, memBusy, power            []string
}

var amdKeys = rocmKeys{
	name:     []string{"Card Series", "Card series", "Device Name", "Card SKU"},
	uuid:     []string{"Unique ID", "GUID"},
	firmware: []string{"VBIOS version"},
	bus:      []string{"PCI Bus"},
	numa:     []string{"(Topology) Numa Node"},
	memTotal: []string{"VRAM Total Memory (B)"},
	memUsed:  []string{"VRAM Total Used Memory (B)"},
	util:     []string{"GPU use (%)"},
	memBusy:  []string{"GPU memory use (%)", "GPU Memory Allocated (VRAM%)"},
	power:    []string{"Average Graphics Package Power (W)", "Current Socket Graphics Package Power (W)"},
}

type rocmCard struct {
	index  int
	fields map[string]string
}

func decodeROCm(tool string, b []byte) ([]rocmCard, string, error) {
	var doc map[string]map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, "", fmt.Errorf("%s: JSON: %w", tool, err)
	}
	var cards []rocmCard
	for k, v := range doc {
		n, ok := strings.CutPrefix(strings.ToLower(k), "card")
		if !ok {
			continue
		}
		idx, err := strconv.Atoi(n)
		if err != nil || idx < 0 {
			continue
		}
		fields := map[string]string{}
		for fk, fv := range v {
			if s, ok := fv.(string); ok {
				fields[fk] = s
			}
		}
		cards = append(cards, rocmCard{index: idx, fields: fields})
	}
	if len(cards) == 0 {
		return nil, "", errNoDevices(tool)
	}
	sort.Slice(cards, func(i, j int) bool { return cards[i].index < cards[j].index })
	driver := ""
	if sys, ok := doc["system"]; ok {
		if s, ok := sys["Driver version"].(string); ok {
			driver = s
		}
	}
	return cards, driver, nil
}

func (c rocmCard) get(keys []string) string {
	for _, k := range keys {
		if v, ok := c.fields[k]; ok && v != "" && !strings.EqualFold(v, "N/A") {
			return v
		}
	}
	return ""
}

// memory reads a memory field whose unit is in its label.
func (c rocmCard) memory(keys []string) *int64 {
	for _, k := range keys {
		v, ok := c.fields[k]
		if !ok {
			continue
		}
		unit := int64(1)
		if strings.Contains(k, "(MiB)") {
			unit = 1 << 20
		}
		return bytesOf(v, unit)
	}
	return nil
}

func parseROCmJSON(tool string, keys rocmKeys, b []byte) ([]Device, error) {
	cards, driver, err := decodeROCm(tool, b)
	if err != nil {
		return nil, err
	}
	out := make([]Device, 0, len(cards))
	for _, c := range cards {
		d := Device{Index: c.index, Name: c.get(keys.name), UUID: c.get(keys.uuid), Driver: driver,
			Firmware: c.get(keys.firmware), PCIAddress: PCIAddress(firstField(c.get(keys.bus))), NUMANode: c.get(keys.numa)}
		if m := c.memory(keys.memTotal); m != nil {
			d.MemoryBytes = *m
		}
		out = append(out, d)
	}
	return out, nil
}

// firstField is the address at the start of a bus value that carries
// more ("0000:05:00.0 --> SN: … --> OAM ID: 1" on hy-smi).
func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

func sampleROCmJSON(tool string, keys rocmKeys, b []byte) ([]Sample, error) {
	cards, _, err := decodeROCm(tool, b)
	if err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(cards))
	for _, c := range cards {
		out = append(out, Sample{Index: c.index, UtilPct: percent(c.get(keys.util)), MemBWPct: percent(c.get(keys.memBusy)),
			MemUsedBytes: c.memory(keys.memUsed), PowerW: number(c.get(keys.power))})
	}
	return out, nil
}
