package exporter

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/gpu"
	"github.com/accordlab/accord/runners/probe/promtext"
)

func doc(t *testing.T, name string) *promtext.Doc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	d, err := promtext.Parse(string(b))
	require.NoError(t, err)
	return d
}

func f(v float64) *float64 { return &v }
func i(v int64) *int64     { return &v }

const mibBytes = 1 << 20

// TestEveryKindHasAMapping: each kind a profile may name but custom has a
// built-in mapping, and every mapping reads something.
func TestEveryKindHasAMapping(t *testing.T) {
	t.Parallel()
	for _, kind := range acceptance.FieldChoices("telemetry.exporters[0].kind") {
		if kind == acceptance.ExporterCustom {
			continue
		}
		m, ok := Builtin(kind)
		require.True(t, ok, kind)
		require.NotEmpty(t, m.DeviceLabel, kind)
		require.NotEmpty(t, m.Util, kind)
	}
}

func TestReadDCGM(t *testing.T) {
	t.Parallel()
	m, _ := Builtin(acceptance.ExporterDCGM)
	s := Read(m, doc(t, "dcgm-exporter-tesla-t4.prom"))
	require.Equal(t, []gpu.Sample{{Index: 0, UtilPct: f(0), MemBWPct: f(0), MemUsedBytes: i(0), PowerW: f(8.969)}}, s)
}

func TestReadAscend(t *testing.T) {
	t.Parallel()
	m, _ := Builtin(acceptance.ExporterAscendNPU)
	s := Read(m, doc(t, "ascend-npu-exporter-910.prom"))
	require.Len(t, s, 8)
	for n, x := range s {
		require.Equal(t, gpu.Sample{Index: n, UtilPct: f(0), MemUsedBytes: i(0), PowerW: f(0)}, x,
			"this exporter release has no HBM bandwidth: absent, not zero")
	}
}

func TestReadAMD(t *testing.T) {
	t.Parallel()
	m, _ := Builtin(acceptance.ExporterAMD)
	s := Read(m, doc(t, "amd-device-metrics-exporter-mi300x.prom"))
	require.Equal(t, []gpu.Sample{
		{Index: 0, UtilPct: f(94), MemBWPct: f(61), MemUsedBytes: i(17153 * mibBytes), PowerW: f(612)},
		{Index: 1, UtilPct: f(0), MemBWPct: f(0), MemUsedBytes: i(284 * mibBytes), PowerW: f(141)},
	}, s)
}

// An exporter nobody wrote a mapping for still reports, through the
// profile's mapping; device names that are not numbers are ranked.
func TestReadCustom(t *testing.T) {
	t.Parallel()
	m, err := MappingOf(acceptance.ExporterSpec{URL: "http://127.0.0.1:9445/metrics", Kind: acceptance.ExporterCustom, Mapping: &acceptance.ExporterMapping{
		DeviceLabel: "path",
		MemUsed:     []acceptance.ExporterSeries{{Metric: "nvidia_gpu_memory_used_bytes"}, {Metric: "nvidia_gpu_memory_used_mb", Scale: mibBytes}},
		Power:       []acceptance.ExporterSeries{{Metric: "nvidia_gpu_power_usage"}},
	}})
	require.NoError(t, err)
	s := Read(m, doc(t, "pytimer-gpu-exporter-tesla-p4.prom"))
	require.Equal(t, []gpu.Sample{{Index: 0, MemUsedBytes: i(0), PowerW: f(7)}, {Index: 1, MemUsedBytes: i(0), PowerW: f(6)}}, s)

	_, err = MappingOf(acceptance.ExporterSpec{URL: "http://x/metrics", Kind: acceptance.ExporterCustom})
	require.Error(t, err)
	_, err = MappingOf(acceptance.ExporterSpec{URL: "http://x/metrics", Kind: "nope"})
	require.Error(t, err)
	require.Equal(t, "dcgm", Name(acceptance.ExporterSpec{Kind: "dcgm"}))
}

// Several series of one device (partitions) are averaged for shares and
// summed for memory; out-of-range shares and non-finite values are absent.
func TestReadAggregatesAndRefuses(t *testing.T) {
	t.Parallel()
	d, err := promtext.Parse(`gpu_gfx_activity{gpu_id="0",gpu_partition_id="0"} 40
gpu_gfx_activity{gpu_id="0",gpu_partition_id="1"} 60
gpu_used_vram{gpu_id="0",gpu_partition_id="0"} 10
gpu_used_vram{gpu_id="0",gpu_partition_id="1"} 20
gpu_gfx_activity{gpu_id="1"} 250
gpu_umc_activity{gpu_id="1"} NaN
`)
	require.NoError(t, err)
	m, _ := Builtin(acceptance.ExporterAMD)
	s := Read(m, d)
	require.Equal(t, []gpu.Sample{{Index: 0, UtilPct: f(50), MemUsedBytes: i(30 * mibBytes)}, {Index: 1}}, s)
}

func FuzzRead(f *testing.F) {
	entries, _ := os.ReadDir("testdata")
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join("testdata", e.Name())); err == nil {
			f.Add(string(b))
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		d, err := promtext.Parse(text)
		if err != nil {
			return
		}
		for _, kind := range []string{acceptance.ExporterDCGM, acceptance.ExporterAscendNPU, acceptance.ExporterAMD} {
			m, _ := Builtin(kind)
			for _, s := range Read(m, d) {
				if s.UtilPct != nil && (*s.UtilPct < 0 || *s.UtilPct > 105) {
					t.Fatalf("%s: utilisation %v", kind, *s.UtilPct)
				}
				if s.MemUsedBytes != nil && *s.MemUsedBytes < 0 {
					t.Fatalf("%s: negative memory", kind)
				}
				if s.Index < 0 {
					t.Fatalf("%s: negative index", kind)
				}
			}
		}
	})
}
