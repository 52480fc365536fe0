package web

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/gpu"
	"github.com/accordlab/accord/store"
)

// SummarizeFacts turns a facts capture into a few lines for the host page.
func SummarizeFacts(hf store.HostFacts) *FactsSummary {
	var f facts.Facts
	if err := json.Unmarshal(hf.Facts, &f); err != nil {
		return &FactsSummary{TakenAt: hf.TakenAt.UTC().Format("2006-01-02 15:04 UTC"), Lines: []SpecLine{{Label: "Facts", Value: "unreadable: " + err.Error()}}}
	}
	lines := []SpecLine{
		{Label: "OS", Value: f.OS.Pretty},
		{Label: "Kernel", Value: f.Kernel.Release.Value + " " + f.Kernel.Machine.Value},
		{Label: "CPU", Value: fmt.Sprintf("%s (%d CPUs, %d NUMA nodes)", f.CPU.ModelName, f.CPU.CPUs, len(f.NUMA.Nodes))},
		{Label: "Memory", Value: fmt.Sprintf("%.1f GiB", float64(f.Memory.TotalBytes)/(1<<30))},
		{Label: "NVMe controllers", Value: fmt.Sprint(len(f.NVMe.Controllers))},
		{Label: "GPUs", Value: fmt.Sprint(len(f.GPU.GPUs))},
	}
	for _, c := range f.NVMe.Controllers {
		lines = append(lines, SpecLine{Label: c.Name, Value: fmt.Sprintf("%s %s fw %s, %s, %s", c.Model.Value, c.Transport.Value, c.FirmwareRev.Value, c.State.Value, c.Address.Value)})
	}
	for i, g := range f.GPU.GPUs {
		v := g.Model()
		if g.DriverVersion != "" {
			v += ", driver " + g.DriverVersion
		}
		if g.Firmware != "" {
			v += ", firmware " + g.Firmware
		}
		if g.MemoryMiB > 0 {
			v += fmt.Sprintf(", %.0f GiB", float64(g.MemoryMiB)/1024)
		}
		if g.PCIBusID != "" {
			v += ", " + g.PCIBusID
		}
		if n := g.NUMANode.Value; n != "" && n != "-1" {
			v += ", NUMA node " + n
		}
		// What the tool left out, and why: never a silent blank.
		for _, fld := range []struct{ key, name string }{{"driver_version", "driver"}, {"firmware_version", "firmware"}, {"pci_address", "PCIe address"}} {
			if why := g.NotReported[fld.key]; why != "" {
				v += "; " + fld.name + " " + why
			}
		}
		label := fmt.Sprintf("GPU %d", i)
		if g.Tool != "" {
			label += " (" + g.Tool + ")"
		}
		lines = append(lines, SpecLine{Label: label, Value: v})
	}
	var present []string
	for _, t := range f.GPU.Tools {
		switch {
		case t.Error != "":
			present = append(present, t.Tool+" (failed: "+t.Error+")")
		case t.SupersededBy != "":
			present = append(present, t.Tool+" (superseded by "+t.SupersededBy+")")
		case !t.Absent():
			present = append(present, t.Tool)
		}
	}
	if len(f.GPU.Tools) > 0 {
		v := "none of " + fmt.Sprint(len(f.GPU.Tools)) + " vendor tools is installed"
		if len(present) > 0 {
			v = strings.Join(present, ", ")
		}
		lines = append(lines, SpecLine{Label: "Accelerator tools", Value: v})
	}
	lines = append(lines, topologyLines(f.GPU.Topology)...)
	lines = append(lines, pcieLines(f.PCI)...)
	for _, t := range f.Tools {
		v := t.Version
		if t.Source.Absent {
			v = "absent"
		}
		lines = append(lines, SpecLine{Label: t.Name, Value: v})
	}
	return &FactsSummary{TakenAt: hf.TakenAt.UTC().Format("2006-01-02 15:04 UTC"), Lines: lines, Absent: f.Absent()}
}

// topologyLines says, per GPU of nvidia-smi's topology matrix, its NUMA
// affinity and how it reaches each NIC (PIX and PXB: behind the same PCIe
// switch; SYS: across the socket interconnect).
func topologyLines(t *gpu.Topology) []SpecLine {
	if t == nil {
		return nil
	}
	var out []SpecLine
	for _, r := range t.Rows {
		if !strings.HasPrefix(r.Device, "GPU") {
			continue
		}
		var parts []string
		if r.NUMAAffinity != "" && r.NUMAAffinity != "N/A" {
			parts = append(parts, "NUMA affinity "+r.NUMAAffinity)
		}
		for i, d := range t.Devices {
			if !strings.HasPrefix(d, "GPU") && i < len(r.Links) {
				parts = append(parts, d+" "+r.Links[i])
			}
		}
		out = append(out, SpecLine{Label: "Topology " + r.Device, Value: strings.Join(parts, ", ")})
	}
	return out
}

// pcieLines says, per GPU, NIC and NVMe controller, its PCIe link now
// against its maximum (and so whether it trained below it) and where it
// sits: behind which PCIe switch, or on a root port, and its NUMA node.
func pcieLines(links []facts.PCILink) []SpecLine {
	var out []SpecLine
	for _, l := range links {
		link := func(speed, width facts.Value) string {
			switch {
			case speed.Value != "" && width.Value != "":
				return speed.Value + " x" + width.Value
			case speed.Value != "":
				return speed.Value
			case width.Value != "":
				return "x" + width.Value
			}
			return ""
		}
		cur, maxLink := link(l.CurrentLinkSpeed, l.CurrentLinkWidth), link(l.MaxLinkSpeed, l.MaxLinkWidth)
		var parts []string
		switch {
		case cur == "" && maxLink == "":
			parts = append(parts, "link speed and width not exposed by sysfs")
		case cur == maxLink:
			parts = append(parts, cur+" (its maximum)")
		default:
			parts = append(parts, cur+" of "+maxLink)
		}
		if how, bad := l.Degraded(); bad {
			parts = append(parts, "trained below its maximum ("+how+")")
		}
		switch {
		case l.Switch != "":
			parts = append(parts, "behind PCIe switch "+l.Switch)
		case len(l.Upstream) > 0:
			parts = append(parts, "on root port "+l.Upstream[0])
		}
		if n := l.NUMANode.Value; n != "" && n != "-1" {
			parts = append(parts, "NUMA node "+n)
		}
		out = append(out, SpecLine{Label: "PCIe " + l.Role + " " + l.Name + " (" + l.Address + ")", Value: strings.Join(parts, ", ")})
	}
	return out
}

// MetricRowFrom describes a stored measurement for the percentile tables.
func MetricRowFrom(m store.MeasurementRow) MetricRow {
	row := MetricRow{Metric: m.Metric, Name: m.Metric, Step: m.Step, Level: m.Level, Repetition: m.Repetition, Summary: m.Summary, Tool: m.ToolSummary,
		Source: m.Source.Tool, SourceField: m.Source.Field}
	if meta, ok := acceptance.LookupMetric(m.Metric); ok {
		row.Name, row.Unit, row.Rate = meta.Name, string(meta.Unit), meta.Kind == acceptance.KindRate
		row.Telemetry = meta.Group == acceptance.GroupSystem
	}
	return row
}

// MetricRowsFrom lays stored measurements out for the percentile tables:
// by step and level (levels as numbers: c=1, c=4, c=16), then in the catalog's order (TTFT before TPOT, reads
// before writes), then by repetition, so a metric's repetitions sit
// together and read top to bottom.
func MetricRowsFrom(ms []store.MeasurementRow) []MetricRow {
	order := map[string]int{}
	for i, m := range acceptance.Metrics() {
		order[m.ID] = i
	}
	rank := func(id string) int {
		if i, ok := order[id]; ok {
			return i
		}
		return len(order) // unknown metrics (from newer importers) last
	}
	rows := make([]MetricRow, 0, len(ms))
	for _, m := range ms {
		rows = append(rows, MetricRowFrom(m))
	}
	slices.SortStableFunc(rows, func(a, b MetricRow) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), acceptance.CompareLevels(a.Level, b.Level), cmp.Compare(rank(a.Metric), rank(b.Metric)),
			cmp.Compare(a.Metric, b.Metric), cmp.Compare(a.Repetition, b.Repetition))
	})
	for i := range rows {
		rows[i].First = i == 0 || rows[i-1].Metric != rows[i].Metric || rows[i-1].Step != rows[i].Step || rows[i-1].Level != rows[i].Level
	}
	return rows
}

// SplitTelemetry separates host telemetry (CPU, GPU) from what the run measured.
func SplitTelemetry(rows []MetricRow) (measured, telemetry []MetricRow) {
	for _, r := range rows {
		if r.Telemetry {
			telemetry = append(telemetry, r)
		} else {
			measured = append(measured, r)
		}
	}
	return measured, telemetry
}

// ClientFlagsFrom judges the load generator's self-check from a run's
// stored summaries, as the gate engine does from its samples: the levels
// where the probe was late or starved.
func ClientFlagsFrom(ms []store.MeasurementRow) []acceptance.ClientFlag {
	var r acceptance.ClientReadings
	for _, m := range ms {
		if m.Metric == acceptance.MetricTTFT && m.Summary.N > 0 {
			r.AddTTFT(m.Step, m.Level, m.Repetition, m.Summary.P50, m.Summary.P99)
			continue
		}
		r.Add(m.Metric, m.Step, m.Level, m.Repetition, m.Summary.P99, m.Summary.N, m.Summary.Mean)
	}
	return r.Flags()
}
