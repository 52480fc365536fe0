// Package exporter reads accelerators through Prometheus exporters: the
// vendor-neutral path beside the vendor tools of package gpu. A mapping
// says which series give a device's utilisation, memory in use, memory
// busy share and power; the known exporters (NVIDIA's DCGM exporter,
// Huawei's Ascend NPU exporter, AMD's device metrics exporter) have
// built-in mappings, any other is mapped in the profile.
//
// The package is pure: telemetry scrapes (promtext.Scrape) and hands the
// parsed document to Mapping.Read.
package exporter

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/gpu"
	"github.com/accordlab/accord/runners/probe/promtext"
)

// Mapping is acceptance.ExporterMapping, the profile's form.
type Mapping = acceptance.ExporterMapping

const (
	mib = 1 << 20
	pct = 100 // a 0..1 ratio to percent
)

func series(metric string, scale float64) acceptance.ExporterSeries {
	return acceptance.ExporterSeries{Metric: metric, Scale: scale}
}

// builtins are the vendors' exporters, from their own metric lists:
//
//   - DCGM exporter (NVIDIA/dcgm-exporter default-counters.csv): gpu label;
//     DCGM_FI_DEV_GPU_UTIL %, DCGM_FI_DEV_FB_USED MiB,
//     DCGM_FI_DEV_MEM_COPY_UTIL % (memory busy) or the profiling field
//     DCGM_FI_PROF_DRAM_ACTIVE (a 0..1 ratio), DCGM_FI_DEV_POWER_USAGE W.
//   - Ascend NPU exporter (collector/npu_collector.go): id label;
//     npu_chip_info_utilization % (AI core), npu_chip_info_hbm_used_memory
//     MB (MiB) or npu_chip_info_used_memory (DDR parts),
//     npu_chip_info_hbm_bandwidth_utilization %, npu_chip_info_power W.
//   - AMD device metrics exporter (docs/configuration/metricslist.md):
//     gpu_id label; gpu_gfx_activity %, gpu_used_vram MB (MiB: amdsmi's
//     bytes / 2^20), gpu_umc_activity % (memory controller busy),
//     gpu_package_power W (MI300) or gpu_power_usage / gpu_average_package_power.
var builtins = map[string]Mapping{
	acceptance.ExporterDCGM: {
		DeviceLabel: "gpu",
		Util:        []acceptance.ExporterSeries{series("DCGM_FI_DEV_GPU_UTIL", 1)},
		MemUsed:     []acceptance.ExporterSeries{series("DCGM_FI_DEV_FB_USED", mib)},
		MemBW:       []acceptance.ExporterSeries{series("DCGM_FI_DEV_MEM_COPY_UTIL", 1), series("DCGM_FI_PROF_DRAM_ACTIVE", pct)},
		Power:       []acceptance.ExporterSeries{series("DCGM_FI_DEV_POWER_USAGE", 1)},
	},
	acceptance.ExporterAscendNPU: {
		DeviceLabel: "id",
		Util:        []acceptance.ExporterSeries{series("npu_chip_info_utilization", 1)},
		MemUsed:     []acceptance.ExporterSeries{series("npu_chip_info_hbm_used_memory", mib), series("npu_chip_info_used_memory", mib)},
		MemBW:       []acceptance.ExporterSeries{series("npu_chip_info_hbm_bandwidth_utilization", 1)},
		Power:       []acceptance.ExporterSeries{series("npu_chip_info_power", 1)},
	},
	acceptance.ExporterAMD: {
		DeviceLabel: "gpu_id",
		Util:        []acceptance.ExporterSeries{series("gpu_gfx_activity", 1)},
		MemUsed:     []acceptance.ExporterSeries{series("gpu_used_vram", mib)},
		MemBW:       []acceptance.ExporterSeries{series("gpu_umc_activity", 1)},
		Power:       []acceptance.ExporterSeries{series("gpu_package_power", 1), series("gpu_power_usage", 1), series("gpu_average_package_power", 1)},
	},
}

// Builtin returns the built-in mapping of an exporter kind.
func Builtin(kind string) (Mapping, bool) {
	m, ok := builtins[kind]
	return m, ok
}

// MappingOf returns the mapping a profile's exporter is read with.
func MappingOf(e acceptance.ExporterSpec) (Mapping, error) {
	if e.Kind == acceptance.ExporterCustom {
		if e.Mapping == nil {
			return Mapping{}, fmt.Errorf("exporter %s: kind custom needs a mapping", e.URL)
		}
		return *e.Mapping, nil
	}
	m, ok := builtins[e.Kind]
	if !ok {
		return Mapping{}, fmt.Errorf("exporter %s: no built-in mapping for kind %q", e.URL, e.Kind)
	}
	return m, nil
}

// Name is what an exporter's readings are labelled with.
func Name(e acceptance.ExporterSpec) string {
	if e.Name != "" {
		return e.Name
	}
	return e.Kind
}

// Read maps one scraped document to one sample per device. A device is
// a value of the mapping's device label (its index when the value is a
// number, else its rank among the values in order). Where a device has
// several series of a metric (partitions, MIG instances), percentages are
// averaged and memory and power summed. A reading no candidate series
// has is absent, never zero; so is a value out of range or not finite.
func Read(m Mapping, doc *promtext.Doc) []gpu.Sample {
	type acc struct {
		sum float64
		n   int
	}
	devices := map[string]map[string]*acc{} // device → reading → accumulated
	readings := []struct {
		name   string
		series []acceptance.ExporterSeries
	}{{"util", m.Util}, {"mem_used", m.MemUsed}, {"mem_bw", m.MemBW}, {"power", m.Power}}
	byName := map[string][]promtext.Sample{}
	for _, s := range doc.Samples {
		byName[s.Name] = append(byName[s.Name], s)
	}
	for _, r := range readings {
		for _, cand := range r.series {
			found := byName[cand.Metric]
			if len(found) == 0 {
				continue
			}
			scale := cand.Scale
			if scale == 0 {
				scale = 1
			}
			for _, s := range found {
				v := s.Value * scale
				if math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				dev := s.Labels[m.DeviceLabel]
				if devices[dev] == nil {
					devices[dev] = map[string]*acc{}
				}
				a := devices[dev][r.name]
				if a == nil {
					a = &acc{}
					devices[dev][r.name] = a
				}
				a.sum += v
				a.n++
			}
			break // the first candidate the exporter has wins
		}
	}
	ids := make([]string, 0, len(devices))
	for d := range devices {
		ids = append(ids, d)
	}
	sort.Slice(ids, func(i, j int) bool { return deviceLess(ids[i], ids[j]) })
	out := make([]gpu.Sample, 0, len(ids))
	for rank, id := range ids {
		idx := rank
		if n, err := strconv.Atoi(id); err == nil && n >= 0 {
			idx = n
		}
		rd := devices[id]
		s := gpu.Sample{Index: idx}
		if a := rd["util"]; a != nil {
			s.UtilPct = percent(a.sum / float64(a.n))
		}
		if a := rd["mem_bw"]; a != nil {
			s.MemBWPct = percent(a.sum / float64(a.n))
		}
		if a := rd["mem_used"]; a != nil && a.sum >= 0 && a.sum < math.MaxInt64/2 {
			b := int64(a.sum)
			s.MemUsedBytes = &b
		}
		if a := rd["power"]; a != nil && a.sum >= 0 && a.sum < 1e6 {
			w := a.sum
			s.PowerW = &w
		}
		out = append(out, s)
	}
	return out
}

// deviceLess orders device label values numerically where both are numbers.
func deviceLess(a, b string) bool {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA == nil && errB == nil {
		return x < y
	}
	return a < b
}

func percent(v float64) *float64 {
	if v < 0 || v > 105 {
		return nil
	}
	return &v
}
