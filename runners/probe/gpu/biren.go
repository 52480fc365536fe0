package gpu

// Biren's brsmi follows nvidia-smi's query interface (BRML mirrors NVML).
// No recorded brsmi output was found in public material: the fixture is
// made by hand in that interface's form (see testdata/README.md), so this
// adapter is the least proven of all.
var brsmiFacts = []string{"index", "name", "uuid", "driver_version", "pci.bus_id", "memory.total"}
var brsmiTelemetry = []string{"index", "utilization.gpu", "memory.used", "power.draw"}

func init() {
	register(Adapter{
		Tool:           "brsmi",
		Vendor:         "Biren",
		Facts:          [][]string{{queryArg(brsmiFacts), "--format=csv,noheader,nounits"}},
		Telemetry:      [][]string{{queryArg(brsmiTelemetry), "--format=csv,noheader,nounits"}},
		NotReported:    map[string]string{"firmware_version": "not reported by brsmi: no public brsmi output shows a firmware query field, so none is asked for"},
		ParseFacts:     func(o [][]byte) ([]Device, error) { return csvDevices("brsmi", brsmiFacts, one(o)) },
		ParseTelemetry: func(o [][]byte) ([]Sample, error) { return csvSamples("brsmi", brsmiTelemetry, one(o)) },
	})
}
