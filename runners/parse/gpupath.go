package parse

import (
	"encoding/json"
	"fmt"
	"math"

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

// ImportGPUPath reads a gpu-path step's gpu-path.json into
// gpu_path_bandwidth and cpu_seconds_per_gib, one pair per path that was
// measured, with the path (cpu-mediated, gds-gpu-direct, gds-cpu-gpu) as
// the level. Paths that were not measured become warnings that say why.
func ImportGPUPath(data []byte, opts Options) ([]acceptance.Measurement, []string, error) {
	in := opts.name(wire.GPUPathFile)
	var r wire.GPUPathResult
	if err := decodeProbeJSON(in, data, opts, &r); err != nil {
		return nil, nil, err
	}
	var out []acceptance.Measurement
	var warnings []string
	for i, m := range r.Modes {
		field := fmt.Sprintf("modes[%d]", i)
		if m.Mode == "" {
			return nil, nil, errf(in, 0, field+".mode", "missing")
		}
		if m.Absent {
			warnings = append(warnings, fmt.Sprintf("gpu-path %s not measured: %s", m.Mode, m.Reason))
			continue
		}
		if err := checkRate(m.BandwidthBps, maxBandwidth); err != nil || m.BandwidthBps == 0 {
			if err == nil {
				err = fmt.Errorf("zero bandwidth for a measured path")
			}
			return nil, nil, &Error{Input: in, Field: field + ".bandwidth_bps", Err: err}
		}
		if math.IsNaN(m.CPUSecPerGiB) || math.IsInf(m.CPUSecPerGiB, 0) || m.CPUSecPerGiB < 0 || m.CPUSecPerGiB > 1e6 {
			return nil, nil, errf(in, 0, field+".cpu_seconds_per_gib", "must be a finite number ≥ 0, got %v", m.CPUSecPerGiB)
		}
		src := acceptance.Source{Tool: m.Tool, ToolVersion: opts.ToolVersion, Field: in + ": " + field}
		bw := opts.measurement(acceptance.MetricGPUPathBandwidth, src)
		bw.Level = m.Mode
		bw.Values = []float64{m.BandwidthBps}
		cpu := opts.measurement(acceptance.MetricCPUSecondsPerGiB, src)
		cpu.Level = m.Mode
		cpu.Values = []float64{m.CPUSecPerGiB}
		out = append(out, bw, cpu)
	}
	for _, s := range r.NotMeasured {
		warnings = append(warnings, "gpu-path: not measured: "+s)
	}
	if len(out) == 0 {
		return nil, nil, errf(in, 0, "modes", "no path was measured")
	}
	return out, warnings, nil
}
