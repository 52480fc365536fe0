package chartdata

import (
	"fmt"
	"sort"

	"github.com/accordlab/accord/acceptance"
)

// GroupTimeline is the one time axis the run page lays the accelerators,
// the storage and the inference server on.
const GroupTimeline = "timeline"

// Telemetry keys the timeline draws (the ingest's quantities).
const (
	KeyGPUUtil        = "gpu"
	KeyNSReadLatency  = "ns_read_latency"
	KeyNSWriteLatency = "ns_write_latency"
)

// Timeline lays on one time axis (seconds of the run) what explains a slow
// TTFT: the accelerators' utilisation, the storage's latency per second
// (the namespaces' read and write latency) and each inference step's
// rolling TTFT percentile. It returns nothing unless the run has the GPU
// utilisation and at least one of the other two: alone, each has its own
// chart already.
func Timeline(a Aggregates) []TimeSeries {
	var gpu, storage []TimeSeries
	for _, ts := range a.TimeSeries {
		switch ts.Key {
		case KeyGPUUtil:
			gpu = append(gpu, ts)
		case KeyNSReadLatency, KeyNSWriteLatency:
			storage = append(storage, ts)
		}
	}
	steps := make([]string, 0, len(a.OverRun))
	for step := range a.OverRun {
		steps = append(steps, step)
	}
	sort.Strings(steps)
	var ttft []TimeSeries
	for _, step := range steps {
		or := a.OverRun[step]
		if len(or.Rolling) == 0 {
			continue
		}
		pts := make([]Point, len(or.Rolling))
		for i, p := range or.Rolling {
			pts[i] = Point{X: p[0], Y: p[1]}
		}
		metric := or.Metric
		if m, ok := acceptance.LookupMetric(or.Metric); ok {
			metric = m.Name
		}
		name := fmt.Sprintf("%s, rolling p%g, step %s", metric, or.Quantile*100, step)
		ttft = append(ttft, timeSeriesOf(GroupTimeline, name, "ms", pts))
	}
	if len(gpu) == 0 || len(storage)+len(ttft) == 0 {
		return nil
	}
	var out []TimeSeries
	for _, group := range [][]TimeSeries{gpu, storage, ttft} {
		for _, ts := range group {
			ts.Group = GroupTimeline
			out = append(out, ts)
		}
	}
	return out
}
