package parse

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// FormatGPUPath is a gpu-path step's result (wire.GPUPathResult).
const FormatGPUPath Format = "gpu-path-json"

// decodeProbeJSON reads one of the probe's JSON documents within the size
// limit of a tool's document.
func decodeProbeJSON(in string, data []byte, opts Options, v any) error {
	if int64(len(data)) > opts.limit(MaxToolJSONBytes) {
		return tooLarge(in, int64(len(data)), opts.limit(MaxToolJSONBytes))
	}
	if err := json.Unmarshal(data, v); err != nil {
		return &Error{Input: in, Err: jsonErr(err)}
	}
	return nil
}

// ImportGPUPath reads a gpu-path result (wire.GPUPathResult: the
// probe's gpu-path.json, or the same document a vendor transfer tool's
// wrapper prints as a command step) into gpu_path_bandwidth and
// cpu_seconds_per_gib, one pair per path that was measured, with the
// path (cpu-mediated, gds-gpu-direct, gds-cpu-gpu, or a vendor's own
// mode name) as the level. Paths that were not measured become warnings
// that say why; so does a measured path that gives no CPU time (no
// cpu_seconds_per_gib: a zero would claim the CPU paid nothing).
func ImportGPUPath(data []byte, opts Options) ([]acceptance.Measurement, []string, error) {
	in := opts.name(wire.GPUPathFile)
	var r wire.GPUPathResult
	if err := decodeProbeJSON(in, data, opts, &r); err != nil {
		return nil, nil, err
	}
	// Which modes carry a CPU figure at all (the field is omitted when zero).
	var present struct {
		Modes []map[string]json.RawMessage `json:"modes"`
	}
	_ = json.Unmarshal(data, &present)
	var out []acceptance.Measurement
	var warnings []string
	seen := map[string]bool{}
	for i, m := range r.Modes {
		field := fmt.Sprintf("modes[%d]", i)
		if m.Mode == "" {
			return nil, nil, errf(in, 0, field+".mode", "missing")
		}
		if !validMode(m.Mode) {
			return nil, nil, errf(in, 0, field+".mode", "%q is not a mode name (1 to 64 of a-z, 0-9, '.', '_', '-'; it becomes the measurements' level)", m.Mode)
		}
		if seen[m.Mode] {
			return nil, nil, errf(in, 0, field+".mode", "%q appears twice", m.Mode)
		}
		seen[m.Mode] = true
		if m.Absent {
			warnings = append(warnings, fmt.Sprintf("gpu-path %s not measured: %s", m.Mode, m.Reason))
			continue
		}
		if strings.TrimSpace(m.Tool) == "" {
			return nil, nil, errf(in, 0, field+".tool", "missing: a measured path names the tool that measured it")
		}
		if err := checkRate(m.BandwidthBps, maxBandwidth); err != nil || m.BandwidthBps == 0 {
			if err == nil {
				err = fmt.Errorf("zero bandwidth for a measured path")
			}
			return nil, nil, &Error{Input: in, Field: field + ".bandwidth_bps", Err: err}
		}
		version := m.ToolVersion
		if version == "" && m.Tool == ToolProbe {
			version = opts.ToolVersion
		}
		src := acceptance.Source{Tool: m.Tool, ToolVersion: version, Field: in + ": " + field}
		bw := opts.measurement(acceptance.MetricGPUPathBandwidth, src)
		bw.Level = m.Mode
		bw.Values = []float64{m.BandwidthBps}
		out = append(out, bw)
		hasCPU := false
		if i < len(present.Modes) {
			_, hasCPU = present.Modes[i]["cpu_seconds_per_gib"]
		}
		if !hasCPU {
			warnings = append(warnings, fmt.Sprintf("gpu-path %s: no cpu_seconds_per_gib (%s gave no CPU time)", m.Mode, m.Tool))
			continue
		}
		if math.IsNaN(m.CPUSecPerGiB) || math.IsInf(m.CPUSecPerGiB, 0) || m.CPUSecPerGiB < 0 || m.CPUSecPerGiB > 1e6 {
			return nil, nil, errf(in, 0, field+".cpu_seconds_per_gib", "must be a finite number ≥ 0, got %v", m.CPUSecPerGiB)
		}
		cpu := opts.measurement(acceptance.MetricCPUSecondsPerGiB, src)
		cpu.Level = m.Mode
		cpu.Values = []float64{m.CPUSecPerGiB}
		out = append(out, cpu)
	}
	for _, s := range r.NotMeasured {
		warnings = append(warnings, "gpu-path: not measured: "+s)
	}
	if len(out) == 0 {
		return nil, nil, errf(in, 0, "modes", "no path was measured")
	}
	return out, warnings, nil
}

// validMode: a mode name is a level, shown and matched by gates.
func validMode(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
