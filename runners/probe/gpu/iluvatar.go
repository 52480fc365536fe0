package gpu

// Iluvatar CoreX's ixsmi keeps nvidia-smi's query interface. The fields
// are the ones Iluvatar's documented example queries; ixsmi reports them
// with units ("16384 MiB", "0 %").
var ixsmiFields = []string{"index", "name", "memory.total", "memory.used", "utilization.gpu", "temperature.gpu"}

func init() {
	args := []string{"--format=csv,noheader", queryArg(ixsmiFields)}
	register(Adapter{
		Tool:           "ixsmi",
		Vendor:         "Iluvatar CoreX",
		Facts:          [][]string{args},
		Telemetry:      [][]string{args},
		ParseFacts:     func(o [][]byte) ([]Device, error) { return csvDevices("ixsmi", ixsmiFields, one(o)) },
		ParseTelemetry: func(o [][]byte) ([]Sample, error) { return csvSamples("ixsmi", ixsmiFields, one(o)) },
	})
}
