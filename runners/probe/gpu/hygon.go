package gpu

import (
	"regexp"
	"strconv"
	"strings"
)

// Hygon's DTK ships hy-smi, a rebranded rocm-smi: the same flags and the
// same JSON report, with DCU (or HCU) in place of GPU in some labels and
// VRAM in MiB ("vram Total Memory (MiB)"). Two facts are not always in
// its JSON: --showdriverversion does not support --json (its text says
// "Driver Version: X"), and releases differ in whether --showbus reaches
// the JSON ("PCI Bus": "0000:05:00.0 --> SN: … --> OAM ID: 1"). So the
// text of both is read as well; a release that refuses either leaves the
// devices listed and the fact explained.
func init() {
	register(Adapter{
		Tool:           "hy-smi",
		Vendor:         "Hygon",
		Facts:          [][]string{{"--showproductname", "--showbus", "--showuniqueid", "--showmeminfo", "vram", "--showdriverversion", "--json"}},
		OptionalFacts:  [][]string{{"--showbus"}, {"--showdriverversion"}},
		Telemetry:      [][]string{{"--showuse", "--showmemuse", "--showmeminfo", "vram", "--showpower", "--json"}},
		ParseFacts:     parseHySMIFacts,
		ParseTelemetry: func(o [][]byte) ([]Sample, error) { return sampleROCmJSON("hy-smi", hygonKeys, one(o)) },
	})
}

var hygonKeys = rocmKeys{
	name:     []string{"Card Series", "Card series", "Device Name"},
	uuid:     []string{"Unique ID"},
	firmware: []string{"VBIOS version"},
	bus:      []string{"PCI Bus"},
	numa:     []string{"(Topology) Numa Node"},
	memTotal: []string{"vram Total Memory (MiB)", "VRAM Total Memory (MiB)", "VRAM Total Memory (B)"},
	memUsed:  []string{"vram Total Used Memory (MiB)", "VRAM Total Used Memory (MiB)", "VRAM Total Used Memory (B)"},
	util:     []string{"DCU use (%)", "HCU use (%)", "GPU use (%)"},
	memBusy:  []string{"DCU memory use (%)", "GPU memory use (%)"},
	power:    []string{"Average Graphics Package Power (W)"},
}

// hyBusLine is a line of `hy-smi --showbus`: "HCU[0]  : PCI Bus: 0000:05:00.0 --> SN: 2500…".
var hyBusLine = regexp.MustCompile(`^\s*(?:HCU|DCU|GPU)\[(\d+)\]\s*:\s*PCI Bus:\s*([0-9A-Fa-f:.]+)`)

// hyDriverLine is `hy-smi --showdriverversion`'s "Driver Version: 6.3.27-V1.2.5".
var hyDriverLine = regexp.MustCompile(`Driver [Vv]ersion:\s*(\S+)`)

func parseHySMIFacts(o [][]byte) ([]Device, error) {
	devs, err := parseROCmJSON("hy-smi", hygonKeys, one(o))
	if err != nil {
		return nil, err
	}
	if output(o, 1) != nil {
		bus := map[int]string{}
		for _, line := range strings.Split(string(o[1]), "\n") {
			if m := hyBusLine.FindStringSubmatch(line); m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil {
					bus[n] = PCIAddress(m[2])
				}
			}
		}
		for i := range devs {
			if devs[i].PCIAddress == "" {
				devs[i].PCIAddress = bus[devs[i].Index]
			}
		}
	} else {
		for i := range devs {
			if devs[i].PCIAddress == "" {
				devs[i].note("pci_address", "not reported: hy-smi's JSON has no PCI Bus and hy-smi --showbus failed (its output is kept with the facts)")
			}
		}
	}
	driver := ""
	if m := hyDriverLine.FindSubmatch(output(o, 2)); m != nil {
		driver = string(m[1])
	}
	for i := range devs {
		switch {
		case devs[i].Driver != "":
		case driver != "":
			devs[i].Driver = driver
		case output(o, 2) == nil:
			devs[i].note("driver_version", "not reported: hy-smi --showdriverversion failed (its output is kept with the facts)")
		default:
			devs[i].note("driver_version", "not reported: hy-smi --showdriverversion printed no Driver Version line")
		}
	}
	return devs, nil
}
