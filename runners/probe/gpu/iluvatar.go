package gpu

import "strconv"

// Iluvatar CoreX's ixsmi keeps nvidia-smi's query interface. The fields
// are the ones Iluvatar's documented example queries; ixsmi reports them
// with units ("16384 MiB", "0 %"). The device ids (uuid, pci.bus_id)
// come from a second query, as public tooling runs it against ixsmi
// (index,uuid and pci.bus_id queries); a release without those fields
// leaves the devices listed and their PCIe address explained. No public
// use of ixsmi queries a driver or firmware field: ixsmi prints the
// driver only in its human table, so both are said to be not reported.
var ixsmiFields = []string{"index", "name", "memory.total", "memory.used", "utilization.gpu", "temperature.gpu"}
var ixsmiIDFields = []string{"index", "uuid", "pci.bus_id"}

func init() {
	args := []string{"--format=csv,noheader", queryArg(ixsmiFields)}
	ids := []string{"--format=csv,noheader", queryArg(ixsmiIDFields)}
	register(Adapter{
		Tool:          "ixsmi",
		Vendor:        "Iluvatar CoreX",
		Facts:         [][]string{args},
		OptionalFacts: [][]string{ids},
		Telemetry:     [][]string{args},
		NotReported: map[string]string{
			"driver_version":   "not reported by ixsmi's query interface (ixsmi prints the driver only in its table)",
			"firmware_version": "not reported by ixsmi's query interface (no firmware field is queried by any public use of ixsmi)",
		},
		ParseFacts: func(o [][]byte) ([]Device, error) {
			devs, err := csvDevices("ixsmi", ixsmiFields, one(o))
			if err != nil {
				return nil, err
			}
			if output(o, 1) == nil {
				for i := range devs {
					devs[i].note("pci_address", "not reported: ixsmi "+ids[1]+" failed (its output is kept with the facts)")
				}
				return devs, nil
			}
			rows, err := csvQuery("ixsmi", ixsmiIDFields, output(o, 1))
			if err != nil {
				for i := range devs {
					devs[i].note("pci_address", "not reported: ixsmi's id query did not parse ("+err.Error()+")")
				}
				return devs, nil
			}
			byIndex := map[string]map[string]string{}
			for _, r := range rows {
				byIndex[r["index"]] = r
			}
			for i := range devs {
				if r, ok := byIndex[strconv.Itoa(devs[i].Index)]; ok {
					devs[i].UUID, devs[i].PCIAddress = r["uuid"], PCIAddress(r["pci.bus_id"])
				}
			}
			return devs, nil
		},
		ParseTelemetry: func(o [][]byte) ([]Sample, error) { return csvSamples("ixsmi", ixsmiFields, one(o)) },
	})
}
