package gpu

import (
	"strconv"
	"strings"
)

// npu-smi has no machine-readable report: `npu-smi info` prints a table
// with two rows per chip,
//
//	| NPU   Name     | Health  | Power(W)  Temp(C)  Hugepages-Usage(page) |
//	| Chip [Device]  | Bus-Id  | AICore(%) Memory-Usage(MB) [HBM-Usage(MB)] |
//
// followed by a process table, which is skipped. The title row carries
// the driver package version ("npu-smi 24.1.RC2   Version: 24.1.RC2").
// Memory is the HBM where the chip has it (training parts), otherwise the
// DDR of the Memory-Usage column. The same table is the telemetry sample;
// memory bandwidth is only in `npu-smi info -t usages -i NPU`, one NPU at
// a time ("HBM Bandwidth Usage Rate(%)" on training parts, "DDR
// Bandwidth Usage Rate(%)" or "Memory Bandwidth Usage Rate(%)" on
// inference parts, per chip), so the sample runs that for every NPU the
// table lists. The firmware is in `npu-smi info -t board -i NPU`
// ("Firmware Version : 7.1.0.4.218", NA where the user may not read it),
// one NPU at a time, so the facts run that for every NPU too.
func init() {
	register(Adapter{
		Tool:          "npu-smi",
		Vendor:        "Huawei Ascend",
		Facts:         [][]string{{"info"}},
		MoreFacts:     npuBoardCommands,
		Telemetry:     [][]string{{"info"}},
		MoreTelemetry: npuUsagesCommands,
		ParseFacts:    parseNPUSMIFacts,
		ParseTelemetry: func(o [][]byte) ([]Sample, error) {
			_, chips, err := parseNPUSMI(one(o))
			if err != nil {
				return nil, err
			}
			bw := map[string]float64{}
			for _, u := range o[1:] {
				for k, v := range parseNPUUsages(u) {
					bw[k] = v
				}
			}
			out := make([]Sample, len(chips))
			for i, c := range chips {
				out[i] = c.Sample
				if v, ok := bw[c.chip]; ok {
					out[i].MemBWPct = &v
				}
			}
			return out, nil
		},
	})
}

// npuUsagesCommands lists `info -t usages -i N` for every NPU of the table.
func npuUsagesCommands(outputs [][]byte) [][]string {
	return perNPU(outputs, "usages")
}

// npuBoardCommands lists `info -t board -i N` for every NPU of the table.
func npuBoardCommands(outputs [][]byte) [][]string {
	return perNPU(outputs, "board")
}

func perNPU(outputs [][]byte, what string) [][]string {
	var out [][]string
	for _, npu := range npuIDs(one(outputs)) {
		out = append(out, []string{"info", "-t", what, "-i", npu})
	}
	return out
}

// npuIDs are the NPU ids of the table, in order, each once.
func npuIDs(table []byte) []string {
	devs, _, err := parseNPUSMI(table)
	if err != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, d := range devs {
		npu := npuOf(d)
		if !seen[npu] {
			seen[npu] = true
			out = append(out, npu)
		}
	}
	return out
}

func npuOf(d Device) string {
	npu, _, _ := strings.Cut(strings.TrimPrefix(d.UUID, "npu"), "-")
	return npu
}

// parseNPUSMIFacts reads the table, then each NPU's board query for its
// firmware (the outputs after the table, in npuIDs order).
func parseNPUSMIFacts(o [][]byte) ([]Device, error) {
	devs, _, err := parseNPUSMI(one(o))
	if err != nil {
		return nil, err
	}
	ids := npuIDs(one(o))
	firmware := map[string]string{}
	why := map[string]string{}
	for k, npu := range ids {
		board := output(o, 1+k)
		if board == nil {
			why[npu] = "not reported: npu-smi info -t board -i " + npu + " failed (its output is kept with the facts)"
			continue
		}
		v, ok := "", false
		for _, l := range kvLines(board) {
			if l.Key == "Firmware Version" {
				v, ok = l.Value, true
			}
		}
		switch {
		case !ok:
			why[npu] = "not reported: npu-smi info -t board -i " + npu + " has no Firmware Version line"
		case v == "" || strings.EqualFold(v, "NA") || strings.EqualFold(v, "N/A"):
			why[npu] = "not reported: npu-smi printed " + v + " (Huawei's documentation: the firmware version is not readable by a non-root user on some products)"
		default:
			firmware[npu] = v
		}
	}
	for i := range devs {
		npu := npuOf(devs[i])
		if v := firmware[npu]; v != "" {
			devs[i].Firmware = v
		} else if w := why[npu]; w != "" {
			devs[i].note("firmware_version", w)
		}
	}
	return devs, nil
}

// npuBandwidthKeys are the memory bandwidth lines of `info -t usages`,
// the first present wins.
var npuBandwidthKeys = []string{"HBM Bandwidth Usage Rate(%)", "DDR Bandwidth Usage Rate(%)", "Memory Bandwidth Usage Rate(%)"}

// parseNPUUsages reads `npu-smi info -t usages -i N`: "NPU ID : N", then
// per chip its "key : value" lines ending with "Chip ID : C". It returns
// the memory bandwidth use by "npuN-chipC".
func parseNPUUsages(b []byte) map[string]float64 {
	out := map[string]float64{}
	npu := ""
	chip := map[string]string{}
	for _, l := range kvLines(b) {
		switch l.Key {
		case "NPU ID":
			npu = l.Value
		case "Chip ID":
			for _, k := range npuBandwidthKeys {
				if v := percent(chip[k]); v != nil && npu != "" {
					out["npu"+npu+"-chip"+l.Value] = *v
					break
				}
			}
			chip = map[string]string{}
		default:
			chip[l.Key] = l.Value
		}
	}
	return out
}

// cells splits a table row "| a | b | c |" into its trimmed cells.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") {
		return nil
	}
	parts := strings.Split(strings.Trim(line, "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// usedTotal reads "4252 / 15137" (spaces optional).
func usedTotal(s string) (used, total *float64) {
	u, t, ok := strings.Cut(s, "/")
	if !ok {
		return nil, nil
	}
	return number(u), number(t)
}

// npuSample is a sample with the chip it belongs to ("npuN-chipC").
type npuSample struct {
	Sample
	chip string
}

func parseNPUSMI(b []byte) ([]Device, []npuSample, error) {
	var devs []Device
	var samples []npuSample
	driver := ""
	var first []string // the first row of a chip, waiting for its second
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "Process id") || strings.Contains(line, "Process name") {
			break
		}
		c := cells(line)
		if len(c) == 1 && strings.HasPrefix(c[0], "npu-smi") {
			if _, v, ok := strings.Cut(c[0], "Version:"); ok {
				driver = strings.TrimSpace(v)
			} else if f := strings.Fields(c[0]); len(f) > 1 {
				driver = f[1]
			}
			continue
		}
		if len(c) != 3 || strings.HasPrefix(c[0], "NPU") || strings.HasPrefix(c[0], "Chip") {
			continue
		}
		if first == nil {
			if f := strings.Fields(c[0]); len(f) >= 1 {
				if _, err := strconv.Atoi(f[0]); err == nil {
					first = c
				}
			}
			continue
		}
		// The second row: chip, bus id, AICore and memory.
		row1, row2 := first, c
		first = nil
		f1, f2 := strings.Fields(row1[0]), strings.Fields(row2[0])
		if len(f2) == 0 {
			continue
		}
		npu := f1[0]
		name := strings.Join(f1[1:], " ")
		idx := len(devs)
		d := Device{Index: idx, Name: name, UUID: "npu" + npu + "-chip" + f2[0], Driver: driver, PCIAddress: PCIAddress(row2[1])}
		s := npuSample{Sample: Sample{Index: idx}, chip: d.UUID}
		p := strings.Fields(row1[2])
		if len(p) > 0 {
			s.PowerW = number(p[0])
		}
		// "0   4252 / 15137   0 / 32768": AICore, then one or two used/total pairs.
		usage := strings.Fields(strings.ReplaceAll(row2[2], "/", " / "))
		if len(usage) > 0 {
			s.UtilPct = percent(usage[0])
		}
		var pairs [][2]*float64
		for i := 1; i+2 < len(usage); i++ {
			if usage[i+1] == "/" {
				u, t := number(usage[i]), number(usage[i+2])
				pairs = append(pairs, [2]*float64{u, t})
				i += 2
			}
		}
		var mem [2]*float64
		for _, pr := range pairs {
			if pr[1] != nil && *pr[1] > 0 {
				mem = pr // the last non-empty pair: HBM when present
			}
		}
		if mem[1] != nil {
			d.MemoryBytes = int64(*mem[1]) << 20
		}
		if mem[0] != nil {
			used := int64(*mem[0]) << 20
			s.MemUsedBytes = &used
		}
		devs = append(devs, d)
		samples = append(samples, s)
	}
	if len(devs) == 0 {
		return nil, nil, errNoDevices("npu-smi")
	}
	return devs, samples, nil
}
