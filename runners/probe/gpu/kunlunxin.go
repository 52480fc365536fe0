package gpu

import (
	"strconv"
	"strings"
)

// Kunlunxin's xpu-smi -m prints one whitespace-separated line per XPU,
// the machine-readable form its tooling parses by position: field 0 the
// PCIe address, 1 the device id, 3 the serial number, 4 the temperature,
// 8 the power (W), 17 and 18 the memory used and total (MiB), 19 the
// utilisation (%), 21 and 22 the board name in parentheses ("(P800"
// "OAM)"). The driver version comes from xpu-smi -q ("Driver Version :
// ..."). Neither gives a firmware version.
func init() {
	register(Adapter{
		Tool:   "xpu-smi",
		Vendor: "Kunlunxin",
		Facts:  [][]string{{"-m"}, {"-q"}},
		NotReported: map[string]string{
			"firmware_version": "not reported by xpu-smi -m or -q (neither has a firmware field)",
		},
		ParseFacts: func(o [][]byte) ([]Device, error) {
			devs, _, err := parseXPUSMI(one(o))
			if err != nil {
				return nil, err
			}
			if len(o) > 1 {
				for _, l := range kvLines(o[1]) {
					if l.Key == "Driver Version" && l.HasValue {
						for i := range devs {
							devs[i].Driver = l.Value
						}
						break
					}
				}
			}
			return devs, nil
		},
		Telemetry:      [][]string{{"-m"}},
		ParseTelemetry: func(o [][]byte) ([]Sample, error) { _, s, err := parseXPUSMI(one(o)); return s, err },
	})
}

func parseXPUSMI(b []byte) ([]Device, []Sample, error) {
	var devs []Device
	var samples []Sample
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 20 {
			continue
		}
		idx, err := strconv.Atoi(f[1])
		if err != nil || idx < 0 {
			continue
		}
		d := Device{Index: idx}
		if strings.Count(f[0], ":") >= 1 && strings.Contains(f[0], ".") {
			d.PCIAddress = PCIAddress(f[0])
		}
		if len(f) > 22 {
			d.Name = strings.TrimSpace(strings.TrimPrefix(f[21], "(") + " " + strings.TrimSuffix(f[22], ")"))
		}
		if m := bytesOf(f[18], 1<<20); m != nil {
			d.MemoryBytes = *m
		}
		devs = append(devs, d)
		samples = append(samples, Sample{Index: idx, UtilPct: percent(f[19]), MemUsedBytes: bytesOf(f[17], 1<<20), PowerW: number(f[8])})
	}
	if len(devs) == 0 {
		return nil, nil, errNoDevices("xpu-smi")
	}
	return devs, samples, nil
}
