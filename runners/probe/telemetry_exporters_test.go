package probe

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/parse"
	"github.com/accordlab/accord/runners/probe/wire"
)

// serveExposition serves a recorded exposition from exporter/testdata on
// 127.0.0.1, as the exporter would.
func serveExposition(t testing.TB, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("exporter", "testdata", file))
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

func readTelemetryFile(t testing.TB, path string) []wire.TelemetrySample {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []wire.TelemetrySample
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s wire.TelemetrySample
		require.NoError(t, json.Unmarshal(sc.Bytes(), &s))
		out = append(out, s)
	}
	require.NoError(t, sc.Err())
	return out
}

// TestTelemetryScrapesExporters: the profile's exporters (the three
// built-in mappings and a custom one, each served by a real HTTP server)
// are scraped every second into telemetry.jsonl; the first exposition of
// each is kept; an exporter that fails is said once and gives no
// readings; the importer makes the host's GPU figures of the readings.
func TestTelemetryScrapesExporters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plan := &wire.Plan{Profile: acceptance.ProfileSpec{Telemetry: &acceptance.TelemetrySpec{Exporters: []acceptance.ExporterSpec{
		{URL: serveExposition(t, "dcgm-exporter-tesla-t4.prom"), Kind: acceptance.ExporterDCGM},
		{URL: serveExposition(t, "amd-device-metrics-exporter-mi300x.prom"), Kind: acceptance.ExporterAMD},
		{URL: serveExposition(t, "ascend-npu-exporter-910.prom"), Kind: acceptance.ExporterAscendNPU},
		{URL: serveExposition(t, "pytimer-gpu-exporter-tesla-p4.prom"), Kind: acceptance.ExporterCustom, Name: "p4",
			Mapping: &acceptance.ExporterMapping{DeviceLabel: "path", MemUsed: []acceptance.ExporterSeries{{Metric: "nvidia_gpu_memory_used_mb", Scale: 1 << 20}},
				Power: []acceptance.ExporterSeries{{Metric: "nvidia_gpu_power_usage"}}}},
		{URL: strings.TrimSuffix(serveExposition(t, "dcgm-exporter-tesla-t4.prom"), "/metrics") + "/wrong", Kind: acceptance.ExporterDCGM, Name: "broken"},
	}}}}
	ev, err := openEventLog(dir)
	require.NoError(t, err)
	r := newRunner(dir, plan, ev, time.Now())
	tel, err := r.startTelemetry(context.Background(), dir, nil)
	require.NoError(t, err)
	path := filepath.Join(dir, wire.TelemetryFile)
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(path)
		return strings.Count(string(b), "\n") >= 2
	}, 20*time.Second, 50*time.Millisecond)
	require.NoError(t, tel.stop())
	require.NoError(t, ev.close())

	samples := readTelemetryFile(t, path)
	require.GreaterOrEqual(t, len(samples), 2)
	for _, s := range samples {
		per := map[string]int{}
		byTool := map[string]wire.GPUSample{}
		for _, g := range s.GPUs {
			if strings.HasPrefix(g.Tool, wire.ExporterToolPrefix) {
				per[g.Tool]++
				byTool[g.Tool] = g
			}
		}
		require.Equal(t, map[string]int{"exporter:dcgm": 1, "exporter:amd-device-metrics": 2, "exporter:ascend-npu": 8, "exporter:p4": 2}, per)
		require.Equal(t, 8.969, *byTool["exporter:dcgm"].PowerW)
		require.Equal(t, 6.0, *byTool["exporter:p4"].PowerW, "the second Tesla P4")
		require.Nil(t, byTool["exporter:p4"].UtilPct, "not mapped: absent")
	}

	kept, err := os.ReadFile(filepath.Join(dir, exporterFile("dcgm")))
	require.NoError(t, err)
	require.Contains(t, string(kept), "DCGM_FI_DEV_GPU_UTIL")
	require.NoFileExists(t, filepath.Join(dir, exporterFile("broken")))

	events, err := os.ReadFile(filepath.Join(dir, wire.EventsFile))
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(events), "exporter broken"), "a failing exporter is said once")
	require.Contains(t, string(events), "HTTP 404")

	// The host's GPU figures: on this machine no vendor tool is installed,
	// so they are the exporters' (DCGM 8.969 W + MI300X 612 + 141 W +
	// the 910s' 0 W + the P4s' 7 + 6 W).
	if len(presentTools(lookPathReal)) > 0 {
		t.Skip("a vendor tool is installed here: the host figures are its readings")
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	ms, _, err := parse.ImportTelemetry(f, parse.Options{Step: "s", Repetition: 1})
	require.NoError(t, err)
	got := map[string][]float64{}
	for _, m := range ms {
		got[m.Metric] = m.Values
	}
	require.InDelta(t, 8.969+612+141+7+6, got[acceptance.MetricGPUPower][0], 1e-9)
	require.InDelta(t, (0+94+0+0*8)/11.0, got[acceptance.MetricGPUUtil][0], 1e-9, "the mean over every device reporting utilisation")
	require.Len(t, got[acceptance.MetricGPUUtil], len(samples))
}
