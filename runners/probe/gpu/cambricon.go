package gpu

import "strings"

// cnmon info prints one block per MLU: a "Card n" line, then "key : value"
// lines in sections; the memory section ("Physical Memory Usage") holds
// Total and Used, the utilisation section "MLU Average", the power
// section "Usage". (cnmon's JSON option writes a file into the working
// directory rather than to standard output, so the text is read.)
func init() {
	register(Adapter{
		Tool:           "cnmon",
		Vendor:         "Cambricon",
		Facts:          [][]string{{"info"}},
		Telemetry:      [][]string{{"info", "-m", "-u", "-p"}},
		ParseFacts:     func(o [][]byte) ([]Device, error) { d, _, err := parseCnmon(one(o)); return d, err },
		ParseTelemetry: func(o [][]byte) ([]Sample, error) { _, s, err := parseCnmon(one(o)); return s, err },
	})
}

func parseCnmon(b []byte) ([]Device, []Sample, error) {
	var devs []Device
	var samples []Sample
	section := ""
	var pci [4]string
	flush := func() {
		if len(devs) > 0 && pci[1] != "" {
			devs[len(devs)-1].PCIAddress = PCIAddress(pad(pci[0], 4) + ":" + pad(pci[1], 2) + ":" + pad(pci[2], 2) + "." + pci[3])
		}
		pci = [4]string{"0", "", "0", "0"}
	}
	for _, l := range kvLines(b) {
		f := strings.Fields(l.Key)
		if len(f) >= 1 && f[0] == "Card" && (len(f) == 2 || l.HasValue && len(f) == 1) {
			id := l.Value
			if len(f) == 2 {
				id = f[1]
			}
			n := number(id)
			if n == nil {
				continue
			}
			flush()
			devs = append(devs, Device{Index: int(*n)})
			samples = append(samples, Sample{Index: int(*n)})
			section = ""
			continue
		}
		if len(devs) == 0 {
			continue
		}
		if !l.HasValue {
			section = strings.ToLower(l.Key)
			continue
		}
		d, s := &devs[len(devs)-1], &samples[len(samples)-1]
		switch {
		case l.Key == "Product Name":
			d.Name = l.Value
		case l.Key == "UUID":
			d.UUID = l.Value
		case l.Key == "Driver":
			d.Driver = l.Value
		case l.Key == "Firmware":
			d.Firmware = l.Value
		case l.Key == "Domain ID":
			pci[0] = l.Value
		case l.Key == "Bus num":
			pci[1] = l.Value
		case l.Key == "Device" && strings.Contains(section, "pcie"):
			pci[2] = l.Value
		case l.Key == "Function" && strings.Contains(section, "pcie"):
			pci[3] = l.Value
		case l.Key == "Total" && strings.Contains(section, "physical memory"):
			if m := bytesOf(l.Value, 1<<20); m != nil {
				d.MemoryBytes = *m
			}
		case l.Key == "Used" && strings.Contains(section, "physical memory"):
			s.MemUsedBytes = bytesOf(l.Value, 1<<20)
		case l.Key == "MLU Average":
			s.UtilPct = percent(l.Value)
		case l.Key == "Usage" && strings.Contains(section, "power"):
			s.PowerW = number(l.Value)
		}
	}
	flush()
	if len(devs) == 0 {
		return nil, nil, errNoDevices("cnmon")
	}
	return devs, samples, nil
}
