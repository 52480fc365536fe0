package parse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// Utilisation may read slightly above 100 % from sampling jitter; beyond
// this it is a unit error.
const maxPercent = 105.0

// ImportTelemetry reads the probe's telemetry.jsonl (one wire.TelemetrySample
// per second) into cpu_util, gpu_util (when sampled), disk_util, nic_rx_bw
// and nic_tx_bw distributions, one value per sample.
func ImportTelemetry(r io.Reader, opts Options) ([]acceptance.Measurement, []string, error) {
	in := opts.name(wire.TelemetryFile)
	br := bufio.NewReaderSize(&limitedReader{r: r, limit: opts.limit(MaxRecordBytes), input: in}, 64<<10)
	var cpu, gpu, disk, rx, tx []float64
	var gpuMem, gpuBW, gpuPower []float64
	counterVals := map[string][]float64{}
	lineNo, gpuMissing := 0, 0
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 || err == nil {
			lineNo++
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, nil, errf(in, lineNo, "", "line longer than %d bytes", br.Size())
		}
		if err != nil && !errors.Is(err, io.EOF) {
			var pe *Error
			if errors.As(err, &pe) {
				return nil, nil, pe
			}
			return nil, nil, &Error{Input: in, Line: lineNo, Err: err}
		}
		if !blank(line) {
			var s wire.TelemetrySample
			dec := json.NewDecoder(bytes.NewReader(line))
			if derr := dec.Decode(&s); derr != nil {
				return nil, nil, &Error{Input: in, Line: lineNo, Err: jsonErr(derr)}
			}
			if dec.InputOffset() != int64(len(bytes.TrimRight(line, " \t\r\n"))) {
				return nil, nil, errf(in, lineNo, "", "unexpected data after the sample")
			}
			if s.T < 0 {
				return nil, nil, errf(in, lineNo, "t", "negative time %d ns", s.T)
			}
			for _, f := range []struct {
				name string
				v    float64
				max  float64
			}{
				{"cpu_pct", s.CPUBusyPct, maxPercent}, {"disk_busy_pct", s.DiskBusyPct, maxPercent},
				{"nic_rx_bps", s.NICRxBps, maxBandwidth}, {"nic_tx_bps", s.NICTxBps, maxBandwidth},
				{"disk_read_bps", s.DiskReadBps, maxBandwidth}, {"disk_write_bps", s.DiskWriteBps, maxBandwidth},
			} {
				if err := checkRate(f.v, f.max); err != nil {
					return nil, nil, &Error{Input: in, Line: lineNo, Field: f.name, Err: err}
				}
			}
			cpu = append(cpu, s.CPUBusyPct)
			disk = append(disk, s.DiskBusyPct)
			rx = append(rx, s.NICRxBps)
			tx = append(tx, s.NICTxBps)
			if s.GPUUtilPct != nil {
				if err := checkRate(*s.GPUUtilPct, maxPercent); err != nil {
					return nil, nil, &Error{Input: in, Line: lineNo, Field: "gpu_pct", Err: err}
				}
				gpu = append(gpu, *s.GPUUtilPct)
			} else {
				gpuMissing++
			}
			if err := addGPUSamples(wire.HostGPUs(s.GPUs), &gpuMem, &gpuBW, &gpuPower); err != nil {
				return nil, nil, &Error{Input: in, Line: lineNo, Field: "gpus", Err: err}
			}
			for id, v := range s.Counters {
				m, known := acceptance.LookupMetric(id)
				if !known || m.Group != acceptance.GroupSystem {
					continue // a counter this build has no metric for is kept in the raw file only
				}
				if err := checkRate(v, maxBandwidth); err != nil {
					return nil, nil, &Error{Input: in, Line: lineNo, Field: "counters." + id, Err: err}
				}
				counterVals[id] = append(counterVals[id], v)
			}
		}
		if err != nil {
			break
		}
	}
	if len(cpu) == 0 {
		return nil, nil, errf(in, 0, "", "no telemetry samples")
	}
	var warnings []string
	if len(gpu) > 0 && gpuMissing > 0 {
		warnings = append(warnings, fmt.Sprintf("%d of %d telemetry samples have no gpu_pct", gpuMissing, len(cpu)))
	}
	var out []acceptance.Measurement
	add := func(metric string, values []float64, field string) {
		if len(values) == 0 {
			return
		}
		m := opts.measurement(metric, acceptance.Source{Tool: ToolProbe, ToolVersion: opts.ToolVersion, Field: in + ": " + field, PercentileMethod: MethodRawSamples})
		m.Values = values
		out = append(out, m)
	}
	add(acceptance.MetricCPUUtil, cpu, "cpu_pct")
	add(acceptance.MetricGPUUtil, gpu, "gpu_pct")
	add(acceptance.MetricDiskUtil, disk, "disk_busy_pct")
	add(acceptance.MetricNICRxBytes, rx, "nic_rx_bps")
	add(acceptance.MetricNICTxBytes, tx, "nic_tx_bps")
	add(acceptance.MetricGPUMemUsed, gpuMem, "gpus[].mem_used_bytes (sum)")
	add(acceptance.MetricGPUMemBW, gpuBW, "gpus[].mem_bw_pct (mean)")
	add(acceptance.MetricGPUPower, gpuPower, "gpus[].power_w (sum)")
	ids := make([]string, 0, len(counterVals))
	for id := range counterVals {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		add(id, counterVals[id], "counters."+id)
	}
	return out, warnings, nil
}

// addGPUSamples folds one second's device readings (wire.HostGPUs: the
// vendor tools', else the exporters') into the host's:
// memory used and power summed over the devices that report them, memory
// busy averaged. A second where no device reports a reading adds nothing.
func addGPUSamples(gs []wire.GPUSample, mem, bw, power *[]float64) error {
	var m, p, b float64
	var nm, np, nb int
	for _, g := range gs {
		if g.MemUsedBytes != nil {
			if *g.MemUsedBytes < 0 {
				return fmt.Errorf("%s device %d: negative memory used", g.Tool, g.Index)
			}
			m += float64(*g.MemUsedBytes)
			nm++
		}
		if g.PowerW != nil {
			if err := checkRate(*g.PowerW, 1e6); err != nil {
				return fmt.Errorf("%s device %d: power: %w", g.Tool, g.Index, err)
			}
			p += *g.PowerW
			np++
		}
		if g.MemBWPct != nil {
			if err := checkRate(*g.MemBWPct, maxPercent); err != nil {
				return fmt.Errorf("%s device %d: memory busy: %w", g.Tool, g.Index, err)
			}
			b += *g.MemBWPct
			nb++
		}
	}
	if nm > 0 {
		*mem = append(*mem, m)
	}
	if np > 0 {
		*power = append(*power, p)
	}
	if nb > 0 {
		*bw = append(*bw, b/float64(nb))
	}
	return nil
}

// jsonErr makes encoding/json's errors say what was wrong in plain words.
func jsonErr(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return errors.New("truncated JSON (the input ends inside a value)")
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Errorf("the document must be a JSON object, found a JSON %s", te.Value)
		}
		return fmt.Errorf("field %s: JSON %s where a %s belongs", te.Field, te.Value, te.Type)
	}
	return err
}
