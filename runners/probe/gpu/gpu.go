// Package gpu reads accelerators through their vendors' management tools:
// one Adapter per tool (nvidia-smi, rocm-smi, hy-smi, npu-smi, cnmon,
// xpu-smi, mthreads-gmi, mx-smi, ixsmi, efsmi, brsmi), each in a file of
// its own that registers itself, so adding a vendor is adding one file.
//
// An adapter is data plus two parsers: the argument vectors to run for the
// host facts and for one telemetry sample, and the functions that turn
// their standard output into Devices and Samples. Running the commands is
// the caller's business (facts records every command and its raw output;
// telemetry runs the sample commands every second), so the parsers are
// pure and are tested against recorded outputs in testdata/.
//
// The package imports only the standard library: it runs on lab hosts.
package gpu

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Device is one accelerator as its vendor tool describes it.
type Device struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	UUID        string `json:"uuid,omitempty"`
	Driver      string `json:"driver_version,omitempty"`
	Firmware    string `json:"firmware_version,omitempty"`
	MemoryBytes int64  `json:"memory_total_bytes,omitempty"`
	// PCIAddress is in sysfs form (0000:3b:00.0), empty when the tool does
	// not say.
	PCIAddress string `json:"pci_address,omitempty"`
	// NUMANode as the tool reports it (-1 or empty when it does not);
	// facts cross-checks it with sysfs.
	NUMANode string `json:"numa_node,omitempty"`
	// NotReported says, per empty field (by its JSON name), why it is
	// empty: the tool has no such field, printed N/A, or a command failed.
	// Explain fills it, so that no blank is silent.
	NotReported map[string]string `json:"not_reported,omitempty"`
}

// ExplainedFields are the device facts every blank of is explained.
var ExplainedFields = []string{"driver_version", "firmware_version", "pci_address"}

// Sample is one device's reading at one moment. A nil field is a reading
// the tool does not give (or gave as N/A): absent, never zero.
type Sample struct {
	Index        int      `json:"index"`
	UtilPct      *float64 `json:"util_pct,omitempty"`
	MemUsedBytes *int64   `json:"mem_used_bytes,omitempty"`
	// MemBWPct is the share of time the memory was busy (nvidia-smi's
	// utilization.memory, rocm-smi's GPU memory use): the tools' measure of
	// memory bandwidth use.
	MemBWPct *float64 `json:"mem_bw_pct,omitempty"`
	PowerW   *float64 `json:"power_w,omitempty"`
}

// Adapter describes one vendor tool.
type Adapter struct {
	// Tool is the program looked up on PATH; its absence means "this
	// vendor's accelerators are not visible here", never a failure.
	Tool   string
	Vendor string
	// Supersedes names an older tool of the same vendor that reports the
	// same devices (amd-smi and rocm-smi): where both are installed only
	// this one is used, so no device is counted twice.
	Supersedes string
	// Facts and Telemetry are the argument vectors (after Tool) whose
	// standard outputs, in order, ParseFacts and ParseTelemetry read.
	Facts     [][]string
	Telemetry [][]string
	// MoreTelemetry, when set, derives further argument vectors from the
	// Telemetry outputs (npu-smi reports memory bandwidth per NPU, so it
	// needs the NPU ids first); their outputs follow the Telemetry ones,
	// nil where a command failed.
	MoreTelemetry func(outputs [][]byte) [][]string
	// OptionalFacts are further facts commands (after Facts) that some
	// releases lack: their failure leaves the devices listed, with the
	// facts they would have given explained as not reported. MoreFacts
	// derives per-device commands from the Facts outputs (npu-smi's board
	// query per NPU). ParseFacts receives the Facts outputs, then the
	// OptionalFacts ones, then the MoreFacts ones, nil where a command
	// failed.
	OptionalFacts [][]string
	MoreFacts     func(outputs [][]byte) [][]string
	// NotReported names the facts the tool's machine-readable output has
	// no field for, with why (by Device JSON field name).
	NotReported    map[string]string
	ParseFacts     func(outputs [][]byte) ([]Device, error)
	ParseTelemetry func(outputs [][]byte) ([]Sample, error)
}

// Explain gives every blank driver, firmware and PCIe address of devs a
// reason: the parser's own (a failed command), the adapter's (the tool
// has no such field), or, failing both, that the tool did not report it.
func (a Adapter) Explain(devs []Device) {
	for i := range devs {
		d := &devs[i]
		for _, f := range ExplainedFields {
			if d.field(f) != "" {
				delete(d.NotReported, f)
				continue
			}
			if d.NotReported[f] != "" {
				continue
			}
			why := a.NotReported[f]
			if why == "" {
				why = "not reported by " + a.Tool
			}
			if d.NotReported == nil {
				d.NotReported = map[string]string{}
			}
			d.NotReported[f] = why
		}
	}
}

func (d Device) field(name string) string {
	switch name {
	case "driver_version":
		return d.Driver
	case "firmware_version":
		return d.Firmware
	case "pci_address":
		return d.PCIAddress
	}
	return ""
}

// note records why a device's field is blank (a parser's own reason).
func (d *Device) note(field, why string) {
	if d.NotReported == nil {
		d.NotReported = map[string]string{}
	}
	d.NotReported[field] = why
}

// Argv returns Tool followed by args.
func (a Adapter) Argv(args []string) []string {
	return append([]string{a.Tool}, args...)
}

var registry = map[string]Adapter{}

// register adds an adapter; each vendor file calls it from init.
func register(a Adapter) {
	if _, dup := registry[a.Tool]; dup {
		panic("gpu: adapter " + a.Tool + " registered twice")
	}
	if len(a.Facts) == 0 || len(a.Telemetry) == 0 || a.ParseFacts == nil || a.ParseTelemetry == nil {
		panic("gpu: adapter " + a.Tool + " is incomplete")
	}
	registry[a.Tool] = a
}

// Adapters returns every adapter, sorted by tool name.
func Adapters() []Adapter {
	out := make([]Adapter, 0, len(registry))
	for _, a := range registry {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out
}

// Superseded reports which of the installed tools are not to be used
// because a tool that supersedes them is installed too.
func Superseded(installed func(tool string) bool) map[string]bool {
	out := map[string]bool{}
	for _, a := range registry {
		if a.Supersedes != "" && installed(a.Tool) {
			out[a.Supersedes] = true
		}
	}
	return out
}

// Lookup returns the adapter of a tool.
func Lookup(tool string) (Adapter, bool) {
	a, ok := registry[tool]
	return a, ok
}

// one returns the single output an adapter with one command receives.
func one(outputs [][]byte) []byte {
	if len(outputs) == 0 {
		return nil
	}
	return outputs[0]
}

// output is the i-th output an adapter received; nil when the command
// failed or did not run.
func output(outputs [][]byte, i int) []byte {
	if i < len(outputs) {
		return outputs[i]
	}
	return nil
}

// number reads the leading number of a reading such as "67.03 W",
// "35 ℃", "0 %" or "16384 MiB"; nil for N/A, "-", empty or a non-finite value.
func number(s string) *float64 {
	s = strings.TrimSpace(s)
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.' || (end == 0 && (s[end] == '-' || s[end] == '+'))) {
		end++
	}
	if end == 0 {
		return nil
	}
	v, err := strconv.ParseFloat(s[:end], 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// bytesOf reads a memory reading with its unit ("81920 MiB", "42976MiB",
// "17163091968" with unit given by def); nil when there is no number.
func bytesOf(s string, def int64) *int64 {
	v := number(s)
	if v == nil || *v < 0 {
		return nil
	}
	mult := def
	u := strings.ToUpper(strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(s), "0123456789.+-")))
	switch {
	case strings.HasPrefix(u, "KIB"), strings.HasPrefix(u, "KB"):
		mult = 1 << 10
	case strings.HasPrefix(u, "MIB"), strings.HasPrefix(u, "MB"):
		mult = 1 << 20
	case strings.HasPrefix(u, "GIB"), strings.HasPrefix(u, "GB"):
		mult = 1 << 30
	case strings.HasPrefix(u, "B"):
		mult = 1
	}
	f := *v * float64(mult)
	if f > math.MaxInt64/2 {
		return nil
	}
	n := int64(f)
	return &n
}

// percent is number limited to plausible utilisation (0..100, a little
// jitter above allowed); nil otherwise.
func percent(s string) *float64 {
	v := number(s)
	if v == nil || *v < 0 || *v > 105 {
		return nil
	}
	return v
}

// PCIAddress normalises a bus id to the sysfs form, lower case with a
// 4-digit domain: "00000000:3B:00.0" → "0000:3b:00.0", "00:2d:00.0" →
// "0000:2d:00.0"; an address without a domain ("3b:00.0") gets 0000.
func PCIAddress(busID string) string {
	s := strings.ToLower(strings.TrimSpace(busID))
	if s == "" || s == "n/a" {
		return ""
	}
	parts := strings.Split(s, ":")
	switch len(parts) {
	case 2: // bus:dev.fn
		return "0000:" + pad(parts[0], 2) + ":" + parts[1]
	case 3:
		dom := parts[0]
		if len(dom) > 4 {
			dom = dom[len(dom)-4:]
		}
		return pad(dom, 4) + ":" + pad(parts[1], 2) + ":" + parts[2]
	}
	return s
}

func pad(s string, n int) string {
	for len(s) < n {
		s = "0" + s
	}
	return s
}

// kvLines splits "key : value" lines (the layout of efsmi -q, cnmon info,
// xpu-smi -q and npu-smi info -t) into trimmed pairs, keeping their order
// and the indentation depth of each line.
type kvLine struct {
	Indent     int
	Key, Value string
	HasValue   bool
}

func kvLines(b []byte) []kvLine {
	var out []kvLine
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimRight(line, "\r")
		trimmed := strings.TrimLeft(line, " \t")
		if strings.TrimSpace(trimmed) == "" {
			continue
		}
		indent := len(line) - len(trimmed)
		k, v, ok := strings.Cut(trimmed, ":")
		out = append(out, kvLine{Indent: indent, Key: strings.TrimSpace(k), Value: strings.TrimSpace(v), HasValue: ok && strings.TrimSpace(v) != ""})
	}
	return out
}

func errNoDevices(tool string) error {
	return fmt.Errorf("%s: no device in the output", tool)
}
