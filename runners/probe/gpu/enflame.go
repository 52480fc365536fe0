package gpu

import "strings"

// efsmi -q prints one "DEV ID n" block per GCU of "key : value" lines in
// sections (Driver Info, Device Info, PCIe Info, Power Info, Device Mem
// Info, Device Usage Info). Older drivers name the memory "Mem Size" /
// "Mem Usage", newer ones "Total Size" / "Used Size". No section of
// either layout has a firmware version. The telemetry sample asks for
// the memory, usage and power sections.
func init() {
	register(Adapter{
		Tool:           "efsmi",
		Vendor:         "Enflame",
		Facts:          [][]string{{"-q"}},
		Telemetry:      [][]string{{"-q", "-d", "MEMORY,USAGE,POWER"}},
		NotReported:    map[string]string{"firmware_version": "not reported by efsmi -q (no section of its report, old or new driver, has a firmware version)"},
		ParseFacts:     func(o [][]byte) ([]Device, error) { d, _, err := parseEfsmi(one(o)); return d, err },
		ParseTelemetry: func(o [][]byte) ([]Sample, error) { _, s, err := parseEfsmi(one(o)); return s, err },
	})
}

func parseEfsmi(b []byte) ([]Device, []Sample, error) {
	var devs []Device
	var samples []Sample
	var pci [4]string // domain, bus, dev, func
	flush := func() {
		if len(devs) == 0 {
			return
		}
		if pci[1] != "" && pci[2] != "" && pci[3] != "" {
			dom := pci[0]
			if dom == "" {
				dom = "0000"
			}
			devs[len(devs)-1].PCIAddress = PCIAddress(pad(dom, 4) + ":" + pad(pci[1], 2) + ":" + pad(pci[2], 2) + "." + pci[3])
		}
		pci = [4]string{}
	}
	for _, l := range kvLines(b) {
		if f := strings.Fields(l.Key); len(f) == 3 && f[0] == "DEV" && f[1] == "ID" && !l.HasValue {
			flush()
			n := number(f[2])
			if n == nil {
				continue
			}
			devs = append(devs, Device{Index: int(*n)})
			samples = append(samples, Sample{Index: int(*n)})
			continue
		}
		if len(devs) == 0 || !l.HasValue {
			continue
		}
		d, s := &devs[len(devs)-1], &samples[len(samples)-1]
		switch l.Key {
		case "Ver":
			d.Driver = l.Value
		case "Dev Name":
			d.Name = l.Value
		case "Dev UUID":
			d.UUID = l.Value
		case "Domain":
			pci[0] = l.Value
		case "Bus":
			pci[1] = l.Value
		case "Dev":
			pci[2] = l.Value
		case "Func":
			pci[3] = l.Value
		case "Mem Size", "Total Size":
			if m := bytesOf(l.Value, 1<<20); m != nil {
				d.MemoryBytes = *m
			}
		case "Mem Usage", "Used Size":
			s.MemUsedBytes = bytesOf(l.Value, 1<<20)
		case "GCU Usage":
			s.UtilPct = percent(l.Value)
		case "Cur Power":
			s.PowerW = number(l.Value)
		}
	}
	flush()
	if len(devs) == 0 {
		return nil, nil, errNoDevices("efsmi")
	}
	return devs, samples, nil
}
