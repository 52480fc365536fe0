package probe

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/parse"
	"github.com/accordlab/accord/runners/probe/wire"
)

// TestGPUPathCPUMediatedOnThisHost measures the CPU-mediated path for real
// against a file (this machine has no GPU and no gdsio): the bytes read
// are exactly the size asked for, bandwidth and CPU cost are measured,
// the GPU paths are reported absent with the reason, and the importer
// turns it into the two gate metrics.
func TestGPUPathCPUMediatedOnThisHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "data.bin")
	b := make([]byte, 8<<20)
	_, _ = rand.Read(b)
	require.NoError(t, os.WriteFile(target, b, 0o644))
	step := &acceptance.GPUPathStep{Target: target, BlockSize: 1 << 20, Size: 24 << 20} // three passes over the file
	noGdsio := func(string) (string, error) { return "", errors.New("not found") }
	res, err := measureGPUPath(context.Background(), step, dir, noGdsio)
	require.NoError(t, err)

	require.Len(t, res.Modes, 3)
	cpu := res.Modes[0]
	require.Equal(t, wire.GPUPathCPU, cpu.Mode)
	require.False(t, cpu.Absent)
	require.Equal(t, int64(24<<20), cpu.Bytes)
	require.Positive(t, cpu.Seconds)
	require.Positive(t, cpu.BandwidthBps)
	require.GreaterOrEqual(t, cpu.CPUSeconds, 0.0)
	require.InDelta(t, cpu.CPUSeconds/(24.0/1024), cpu.CPUSecPerGiB, 1e-9)
	require.LessOrEqual(t, cpu.CopySeconds, cpu.Seconds)
	require.NotEmpty(t, cpu.Measured)
	if cpu.ODirect {
		require.Contains(t, cpu.Measured, "O_DIRECT")
	} else {
		require.Contains(t, cpu.Measured, "refused O_DIRECT")
	}
	for _, m := range res.Modes[1:] {
		require.True(t, m.Absent, m.Mode)
		require.Contains(t, m.Reason, "gdsio")
	}
	require.Len(t, res.NotMeasured, 2)

	js, err := json.Marshal(res)
	require.NoError(t, err)
	ms, warns, err := parse.Import(parse.FormatGPUPath, js, parse.Options{Step: "path", Repetition: 1})
	require.NoError(t, err)
	require.Len(t, ms, 2)
	require.Equal(t, acceptance.MetricGPUPathBandwidth, ms[0].Metric)
	require.Equal(t, wire.GPUPathCPU, ms[0].Level)
	require.Equal(t, []float64{cpu.BandwidthBps}, ms[0].Values)
	require.Equal(t, acceptance.MetricCPUSecondsPerGiB, ms[1].Metric)
	require.Len(t, warns, 4, "two absent GDS modes and two unmeasured parts, said plainly")
}

func TestGPUPathRefusesBadTargets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	_, err := cpuMediatedRead(context.Background(), empty, 4096, 8192)
	require.ErrorContains(t, err, "is empty")
	_, err = cpuMediatedRead(context.Background(), filepath.Join(dir, "missing"), 4096, 8192)
	require.ErrorContains(t, err, "open")
	require.Error(t, validateGPUPath(&acceptance.GPUPathStep{Target: "rel", BlockSize: 4096, Size: 4096}))
	require.Error(t, validateGPUPath(&acceptance.GPUPathStep{Target: "/x", BlockSize: 1000, Size: 4096}))
}

func TestParseGdsio(t *testing.T) {
	t.Parallel()
	// The summary line gdsio prints (layout as in NVIDIA's GDS benchmarking guide).
	v, ok := ParseGdsio("IoType: READ XferType: GPUD Threads: 1 DataSetSize: 1048576/1048576(KiB) IOSize: 1024(KiB) Throughput: 5.231468 GiB/sec, Avg_Latency: 186.657227 usecs ops: 1024 total_time 0.191150 secs\n")
	require.True(t, ok)
	require.InDelta(t, 5.231468, v, 1e-9)
	_, ok = ParseGdsio("error: cuFileDriverOpen failed\n")
	require.False(t, ok)
}

func FuzzImportGPUPath(f *testing.F) {
	f.Add([]byte(`{"modes":[{"mode":"cpu-mediated","tool":"accord-probe","bandwidth_bps":1e9,"cpu_seconds_per_gib":0.2}]}`))
	f.Add([]byte(`{"modes":[{"mode":"gds-gpu-direct","absent":true,"reason":"x"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, _, err := parse.ImportGPUPath(b, parse.Options{})
		if err == nil && len(ms) == 0 {
			t.Fatal("no error and no measurements")
		}
	})
}
