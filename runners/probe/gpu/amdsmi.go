package gpu

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// amd-smi is AMD's successor to rocm-smi (ROCm 6 and later ship both);
// where it is installed it is used instead. Its --json output is a list
// of one object per GPU ({"gpu": N, ...}); releases from ROCm 6.4 wrap
// the list as {"gpu_data": [...]}. A reading is {"value": v, "unit": u}
// or "N/A" (the whole section is "N/A" when the library call failed);
// memory is in "MB", which amd-smi computes as bytes / 2^20, so MiB.
//
// static gives the facts (asic.market_name, bus.bdf, vbios.version,
// driver.version, vram.size, numa.node); metric --usage --mem-usage
// --power gives one sample (usage.gfx_activity, usage.umc_activity: the
// memory controller's busy share, mem_usage.used_vram,
// power.socket_power).
func init() {
	register(Adapter{
		Tool:           "amd-smi",
		Vendor:         "AMD",
		Supersedes:     "rocm-smi",
		Facts:          [][]string{{"static", "--json"}},
		Telemetry:      [][]string{{"metric", "--usage", "--mem-usage", "--power", "--json"}},
		ParseFacts:     func(o [][]byte) ([]Device, error) { return parseAMDSMIStatic(one(o)) },
		ParseTelemetry: func(o [][]byte) ([]Sample, error) { return parseAMDSMIMetric(one(o)) },
	})
}

// amdEntry is one GPU's object of an amd-smi JSON report.
type amdEntry struct {
	index  int
	fields map[string]any
}

func decodeAMDSMI(b []byte) ([]amdEntry, error) {
	var list []map[string]any
	trimmed := strings.TrimSpace(string(b))
	if strings.HasPrefix(trimmed, "{") {
		var doc struct {
			GPUData []map[string]any `json:"gpu_data"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("amd-smi: JSON: %w", err)
		}
		list = doc.GPUData
	} else if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("amd-smi: JSON: %w", err)
	}
	var out []amdEntry
	for _, e := range list {
		idx, ok := e["gpu"].(float64)
		if !ok || idx < 0 || idx > 1<<16 || idx != float64(int(idx)) {
			continue
		}
		out = append(out, amdEntry{index: int(idx), fields: e})
	}
	if len(out) == 0 {
		return nil, errNoDevices("amd-smi")
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].index < out[j].index })
	return out, nil
}

// at walks nested objects by key; nil when a level is missing or "N/A".
func (e amdEntry) at(keys ...string) any {
	var cur any = e.fields
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// text reads a string (or number) field; "" for N/A.
func (e amdEntry) text(keys ...string) string {
	switch v := e.at(keys...).(type) {
	case string:
		if strings.EqualFold(strings.TrimSpace(v), "N/A") {
			return ""
		}
		return strings.TrimSpace(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

// reading renders a {"value", "unit"} reading (or a bare number or
// "12 %" string) as "value unit" for the shared number parsers; "" for
// N/A.
func (e amdEntry) reading(keys ...string) string {
	switch v := e.at(keys...).(type) {
	case map[string]any:
		val, unit := "", ""
		switch x := v["value"].(type) {
		case float64:
			val = strconv.FormatFloat(x, 'f', -1, 64)
		case string:
			val = x
		}
		if u, ok := v["unit"].(string); ok {
			unit = u
		}
		if val == "" || strings.EqualFold(val, "N/A") {
			return ""
		}
		return strings.TrimSpace(val + " " + unit)
	case float64, string:
		return e.text(keys...)
	}
	return ""
}

func parseAMDSMIStatic(b []byte) ([]Device, error) {
	entries, err := decodeAMDSMI(b)
	if err != nil {
		return nil, err
	}
	out := make([]Device, 0, len(entries))
	for _, e := range entries {
		d := Device{Index: e.index, Name: e.text("asic", "market_name"), UUID: e.text("asic", "asic_serial"),
			Driver: e.text("driver", "version"), PCIAddress: PCIAddress(e.text("bus", "bdf")), NUMANode: e.text("numa", "node")}
		if u := e.text("uuid"); u != "" {
			d.UUID = u
		}
		for _, k := range []string{"version", "part_number"} {
			if d.Firmware = e.text("vbios", k); d.Firmware != "" {
				break
			}
		}
		if m := bytesOf(e.reading("vram", "size"), 1<<20); m != nil {
			d.MemoryBytes = *m
		}
		out = append(out, d)
	}
	return out, nil
}

func parseAMDSMIMetric(b []byte) ([]Sample, error) {
	entries, err := decodeAMDSMI(b)
	if err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(entries))
	for _, e := range entries {
		out = append(out, Sample{Index: e.index,
			UtilPct:      percent(e.reading("usage", "gfx_activity")),
			MemBWPct:     percent(e.reading("usage", "umc_activity")),
			MemUsedBytes: bytesOf(e.reading("mem_usage", "used_vram"), 1<<20),
			PowerW:       number(e.reading("power", "socket_power"))})
	}
	return out, nil
}
