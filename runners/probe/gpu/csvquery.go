package gpu

import (
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"
)

// Several vendors copied nvidia-smi's query interface
// (--query-gpu=a,b,c --format=csv,noheader): ixsmi, brsmi. csvQuery reads
// such output by the field names of the query, with or without units
// ("16384 MiB", "0 %").

// queryArg renders the --query-gpu argument of fields.
func queryArg(fields []string) string { return "--query-gpu=" + strings.Join(fields, ",") }

func csvQuery(tool string, fields []string, b []byte) ([]map[string]string, error) {
	r := csv.NewReader(strings.NewReader(string(b)))
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: CSV: %w", tool, err)
	}
	var out []map[string]string
	for i, row := range rows {
		if len(row) == 1 && strings.TrimSpace(row[0]) == "" {
			continue
		}
		if len(row) != len(fields) {
			return nil, fmt.Errorf("%s: line %d: %d fields, the query has %d", tool, i+1, len(row), len(fields))
		}
		m := make(map[string]string, len(fields))
		for j, f := range fields {
			m[f] = strings.TrimSpace(row[j])
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, errNoDevices(tool)
	}
	return out, nil
}

func csvDevices(tool string, fields []string, b []byte) ([]Device, error) {
	rows, err := csvQuery(tool, fields, b)
	if err != nil {
		return nil, err
	}
	out := make([]Device, 0, len(rows))
	for i, m := range rows {
		idx, err := strconv.Atoi(m["index"])
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: index %q is not a number", tool, i+1, m["index"])
		}
		d := Device{Index: idx, Name: m["name"], UUID: m["uuid"], Driver: m["driver_version"], Firmware: m["vbios_version"], PCIAddress: PCIAddress(m["pci.bus_id"])}
		if mem := bytesOf(m["memory.total"], 1<<20); mem != nil {
			d.MemoryBytes = *mem
		}
		out = append(out, d)
	}
	return out, nil
}

func csvSamples(tool string, fields []string, b []byte) ([]Sample, error) {
	rows, err := csvQuery(tool, fields, b)
	if err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(rows))
	for i, m := range rows {
		idx, err := strconv.Atoi(m["index"])
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: index %q is not a number", tool, i+1, m["index"])
		}
		out = append(out, Sample{Index: idx, UtilPct: percent(m["utilization.gpu"]), MemBWPct: percent(m["utilization.memory"]),
			MemUsedBytes: bytesOf(m["memory.used"], 1<<20), PowerW: number(m["power.draw"])})
	}
	return out, nil
}
