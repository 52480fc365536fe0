package gpu

import (
	"bytes"
	"encoding/xml"
	"fmt"
)

// nvidia-smi's XML report (-q -x) is its machine-readable form: every
// field of the text report, stable across driver versions (the DTD
// version changes, the element names kept). The telemetry sample asks for
// the memory, utilisation and power sections only.
func init() {
	register(Adapter{
		Tool:           "nvidia-smi",
		Vendor:         "NVIDIA",
		Facts:          [][]string{{"-q", "-x"}},
		Telemetry:      [][]string{{"-q", "-x", "-d", "MEMORY,UTILIZATION,POWER"}},
		ParseFacts:     func(o [][]byte) ([]Device, error) { return parseNvidiaXML(one(o)) },
		ParseTelemetry: func(o [][]byte) ([]Sample, error) { return sampleNvidiaXML(one(o)) },
	})
}

type nvidiaLog struct {
	Driver string      `xml:"driver_version"`
	GPUs   []nvidiaGPU `xml:"gpu"`
}

type nvidiaGPU struct {
	ID      string `xml:"id,attr"`
	Product string `xml:"product_name"`
	UUID    string `xml:"uuid"`
	VBIOS   string `xml:"vbios_version"`
	PCI     struct {
		BusID string `xml:"pci_bus_id"`
	} `xml:"pci"`
	FB struct {
		Total string `xml:"total"`
		Used  string `xml:"used"`
	} `xml:"fb_memory_usage"`
	Util struct {
		GPU    string `xml:"gpu_util"`
		Memory string `xml:"memory_util"`
	} `xml:"utilization"`
	// Drivers before 530 name the section power_readings.
	Power struct {
		Draw string `xml:"power_draw"`
	} `xml:"power_readings"`
	GPUPower struct {
		Draw string `xml:"power_draw"`
	} `xml:"gpu_power_readings"`
}

func decodeNvidia(b []byte) (*nvidiaLog, error) {
	var l nvidiaLog
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Strict = true
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("nvidia-smi: XML: %w", err)
	}
	if len(l.GPUs) == 0 {
		return nil, errNoDevices("nvidia-smi")
	}
	return &l, nil
}

func parseNvidiaXML(b []byte) ([]Device, error) {
	l, err := decodeNvidia(b)
	if err != nil {
		return nil, err
	}
	out := make([]Device, 0, len(l.GPUs))
	for i, g := range l.GPUs {
		d := Device{Index: i, Name: g.Product, UUID: g.UUID, Driver: l.Driver, Firmware: g.VBIOS}
		bus := g.PCI.BusID
		if bus == "" {
			bus = g.ID
		}
		d.PCIAddress = PCIAddress(bus)
		if m := bytesOf(g.FB.Total, 1<<20); m != nil {
			d.MemoryBytes = *m
		}
		out = append(out, d)
	}
	return out, nil
}

func sampleNvidiaXML(b []byte) ([]Sample, error) {
	l, err := decodeNvidia(b)
	if err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(l.GPUs))
	for i, g := range l.GPUs {
		s := Sample{Index: i, UtilPct: percent(g.Util.GPU), MemBWPct: percent(g.Util.Memory), MemUsedBytes: bytesOf(g.FB.Used, 1<<20)}
		s.PowerW = number(g.GPUPower.Draw)
		if s.PowerW == nil {
			s.PowerW = number(g.Power.Draw)
		}
		out = append(out, s)
	}
	return out, nil
}
