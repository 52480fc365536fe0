package gpu

// Hygon's DTK ships hy-smi, a rebranded rocm-smi: the same flags and the
// same JSON report, with DCU in place of GPU in some labels and VRAM in
// MiB ("vram Total Memory (MiB)").
func init() {
	register(Adapter{
		Tool:           "hy-smi",
		Vendor:         "Hygon",
		Facts:          [][]string{{"--showproductname", "--showbus", "--showuniqueid", "--showmeminfo", "vram", "--showdriverversion", "--json"}},
		Telemetry:      [][]string{{"--showuse", "--showmemuse", "--showmeminfo", "vram", "--showpower", "--json"}},
		ParseFacts:     func(o [][]byte) ([]Device, error) { return parseROCmJSON("hy-smi", hygonKeys, one(o)) },
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
