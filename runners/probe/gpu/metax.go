package gpu

import "strings"

// mx-smi (MetaX) prints a boxed table like nvidia-smi's: the title line
// ends with the driver version ("mx-smi  version: 2.1.12"), each GPU's
// first row names it ("| 0   MetaX C500 ...") and a later row carries
// "used/total MiB". Telemetry uses its sections: --show-usage ("GPU ...
// : n %"), --show-memory ("vis_vram used : n KB") and --show-board-power
// ("Total ... : n W"), one value per GPU in order.
func init() {
	register(Adapter{
		Tool:   "mx-smi",
		Vendor: "MetaX",
		Facts:  [][]string{{}},
		Telemetry: [][]string{
			{"--show-usage"}, {"--show-memory"}, {"--show-board-power"},
		},
		ParseFacts:     func(o [][]byte) ([]Device, error) { return parseMxSMI(one(o)) },
		ParseTelemetry: sampleMxSMI,
	})
}

func parseMxSMI(b []byte) ([]Device, error) {
	var devs []Device
	driver := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.ReplaceAll(line, "|", " "))
		switch {
		case strings.Contains(line, "mx-smi") && len(f) > 0:
			driver = f[len(f)-1]
		case strings.Contains(line, "MetaX") && !strings.Contains(line, "Management") && len(f) >= 3:
			idx := len(devs)
			if n := number(f[0]); n != nil {
				idx = int(*n)
			}
			name := f[1] + " " + f[2]
			d := Device{Index: idx, Name: name, Driver: driver}
			for _, tok := range f {
				if strings.Count(tok, ":") == 2 && strings.Contains(tok, ".") {
					d.PCIAddress = PCIAddress(tok)
				}
			}
			devs = append(devs, d)
		case strings.Contains(line, "MiB") && len(devs) > 0:
			for _, tok := range f {
				if u, t, ok := strings.Cut(tok, "/"); ok && number(u) != nil {
					if m := bytesOf(t, 1<<20); m != nil {
						devs[len(devs)-1].MemoryBytes = *m
					}
				}
			}
		}
	}
	if len(devs) == 0 {
		return nil, errNoDevices("mx-smi")
	}
	return devs, nil
}

// lastNumber is the number before the unit at the end of "key : n unit".
func lastNumber(line string) *float64 {
	f := strings.Fields(line)
	if len(f) < 2 {
		return nil
	}
	return number(f[len(f)-2])
}

func sampleMxSMI(o [][]byte) ([]Sample, error) {
	var usage, power []*float64
	var mem []*int64
	if len(o) > 0 {
		for _, line := range strings.Split(string(o[0]), "\n") {
			if strings.Contains(line, "GPU") && strings.Contains(line, "%") {
				usage = append(usage, lastNumber(line))
			}
		}
	}
	if len(o) > 1 {
		for _, line := range strings.Split(string(o[1]), "\n") {
			if strings.Contains(line, "vis_vram used") {
				var b *int64
				if v := lastNumber(line); v != nil && *v >= 0 {
					n := int64(*v * 1024) // KB
					b = &n
				}
				mem = append(mem, b)
			}
		}
	}
	if len(o) > 2 {
		for _, line := range strings.Split(string(o[2]), "\n") {
			if strings.Contains(line, "Total") && strings.Contains(line, "W") {
				power = append(power, lastNumber(line))
			}
		}
	}
	n := max(len(usage), len(mem), len(power))
	if n == 0 {
		return nil, errNoDevices("mx-smi")
	}
	out := make([]Sample, n)
	for i := range out {
		out[i].Index = i
		if i < len(usage) && usage[i] != nil && *usage[i] >= 0 && *usage[i] <= 105 {
			out[i].UtilPct = usage[i]
		}
		if i < len(mem) {
			out[i].MemUsedBytes = mem[i]
		}
		if i < len(power) {
			out[i].PowerW = power[i]
		}
	}
	return out, nil
}
