package parse

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/gpu/gputest"
	"github.com/accordlab/accord/runners/probe/wire"
)

// gdsioOutput reads a recorded gdsio output (runners/probe/gpu/testdata,
// where the fake gdsio of the probe's tests reads them too).
func gdsioOutput(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(gputest.Testdata(tb), name))
	require.NoError(tb, err)
	return b
}

// TestImportGdsioWithTheCommandsCPUTime: the GPU-direct read a user of
// NVIDIA's forum posted, as a command step kept it, with the CPU time the
// probe measured of the command: the bandwidth is the bytes gdsio moved
// over its total_time (gdsio's own Throughput beside it agrees), and the
// CPU per GiB is the command's CPU over those bytes.
func TestImportGdsioWithTheCommandsCPUTime(t *testing.T) {
	t.Parallel()
	data := gdsioOutput(t, "gdsio-x0-read-forum-cuda12.2.txt")
	opts := Options{Step: "gds", Repetition: 1, Name: "run/gds/rep-1/output.txt", Result: &wire.StepResult{Command: &wire.CommandSummary{CPUSeconds: 8.72, WallSeconds: 17}}}
	require.Equal(t, FormatGdsio, mustDetect(t, data))
	res, err := ImportWithReport(FormatGdsio, data, opts)
	require.NoError(t, err)
	ms := res.Measurements
	checkMeasurements(t, ms)
	require.Len(t, ms, 2)

	moved := 104837120.0 * 1024 // DataSetSize done, KiB
	bw := ms[0]
	require.Equal(t, acceptance.MetricGPUPathBandwidth, bw.Metric)
	require.Equal(t, wire.GPUPathGDS, bw.Level, "GPUD is the gpu-path step's GPU-direct mode")
	require.Equal(t, "gds", bw.Step)
	require.Equal(t, ToolGdsio, bw.Source.Tool)
	require.InDelta(t, moved/15.097011, bw.Values[0], 1e-3)
	require.InDelta(t, 6.622534*(1<<30), bw.ToolSummary["mean"], 1e-3)
	require.InEpsilon(t, bw.ToolSummary["mean"], bw.Values[0], 1e-6, "gdsio's Throughput is DataSetSize over total_time")

	cpu := ms[1]
	require.Equal(t, acceptance.MetricCPUSecondsPerGiB, cpu.Metric)
	require.Equal(t, wire.GPUPathGDS, cpu.Level)
	require.InDelta(t, 8.72/(moved/(1<<30)), cpu.Values[0], 1e-12)
	require.Contains(t, cpu.Source.Field, "command.cpu_seconds 8.72")

	rep := res.Report
	require.Equal(t, FormatGdsio, rep.Format)
	require.Equal(t, 2, rep.Measurements)
	ignored := map[string]string{}
	for _, ig := range rep.Ignored {
		ignored[ig.Field] = ig.Reason
	}
	require.Contains(t, ignored, "Avg_Latency", "a mean without a distribution is said, not dropped silently")
	require.Contains(t, ignored, "ops")
	require.Contains(t, ignored, "Threads")
	require.Len(t, rep.Figures, 1, "gdsio's own Throughput beside Accord's figure")
	require.Contains(t, rep.Read[0].Note, "XferType GPUD")
	require.Contains(t, strings.Join(rep.Warnings, "\n"), "moved 104837120 of the 104857600 KiB asked")
	checkReport(t, FormatGdsio, data, opts)
}

// TestImportGdsioUploaded: an output uploaded by hand has no CPU time
// (gdsio does not print one): bandwidth only, and the report says why.
func TestImportGdsioUploaded(t *testing.T) {
	t.Parallel()
	ms, warnings, err := Import(FormatGdsio, gdsioOutput(t, "gdsio-x2-read-forum-cuda12.2.txt"), Options{Step: "imported", Repetition: 1})
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, wire.GPUPathGDSCPUGPU, ms[0].Level)
	require.InDelta(t, 104739840.0*1024/15.194972, ms[0].Values[0], 1e-3)
	require.Contains(t, strings.Join(warnings, "\n"), "no cpu_seconds_per_gib: gdsio does not report CPU time")
}

// TestImportGdsioOutputs: NVIDIA's documented outputs. A write and its
// verifying read: the read is imported, the write is said and left out,
// and the command's CPU time (both transfers) is not split. A write
// alone, or text with no summary, is refused.
func TestImportGdsioOutputs(t *testing.T) {
	t.Parallel()
	withCPU := Options{Step: "s", Repetition: 1, Result: &wire.StepResult{Command: &wire.CommandSummary{CPUSeconds: 3}}}
	ms, warnings, err := Import(FormatGdsio, gdsioOutput(t, "gdsio-x1-write-verify-nvidia-p2pdma-doc.txt"), withCPU)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, "gds-cpuonly", ms[0].Level)
	require.InDelta(t, 4069376.0*1024/1.438394, ms[0].Values[0], 1e-3)
	all := strings.Join(warnings, "\n")
	require.Contains(t, all, "line 1: gdsio WRITE (CPUONLY) not imported")
	require.Contains(t, all, "the command ran 2 transfers")
	require.Contains(t, all, "CPUONLY ends in host memory")

	ms, _, err = Import(FormatGdsio, gdsioOutput(t, "gdsio-x1-read-nvidia-p2pdma-doc.txt"), withCPU)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	require.InDelta(t, 3/(4187136.0/(1<<20)), ms[1].Values[0], 1e-12)

	_, _, err = Import(FormatGdsio, gdsioOutput(t, "gdsio-x0-write-8k-nvidia-getting-started.txt"), withCPU)
	require.ErrorContains(t, err, "no read transfer")
	_, _, err = Import(FormatGdsio, []byte("cuFile error: cuFileDriverOpen failed\n"), withCPU)
	require.ErrorContains(t, err, "no gdsio summary line")
	_, _, err = Import(FormatGdsio, []byte("IoType: READ Throughput: 1.0 GiB/sec\n"), withCPU)
	require.ErrorContains(t, err, "XferType: missing")
	twice := append(gdsioOutput(t, "gdsio-x0-read-forum-cuda12.2.txt"), gdsioOutput(t, "gdsio-x0-read-forum-cuda12.2.txt")...)
	_, _, err = Import(FormatGdsio, twice, withCPU)
	require.ErrorContains(t, err, "a second GPUD read (the first is on line 1)")
	_, _, err = Import(FormatGdsio, []byte("IoType: READ XferType: GPUD DataSetSize: 9/8(KiB) Throughput: 1.0 GiB/sec, total_time 1 secs\n"), withCPU)
	require.ErrorContains(t, err, "9 KiB done of 8 KiB asked")
}

// TestImportGPUPathFromAWrapper: the gpu-path document a wrapper around
// a vendor's transfer tool prints: its own mode names become levels, a
// mode without CPU time has no cpu_seconds_per_gib (not a zero), and a
// malformed document is refused.
func TestImportGPUPathFromAWrapper(t *testing.T) {
	t.Parallel()
	doc := `{"target":"/dev/nvme1n1","block_size":1048576,"size":1073741824,"modes":[` +
		`{"mode":"ascend-direct","tool":"vendor-dma-bench","tool_version":"2.1","bandwidth_bps":9.5e9,"cpu_seconds_per_gib":0.01},` +
		`{"mode":"ascend-staged","tool":"vendor-dma-bench","bandwidth_bps":6e9}]}`
	require.Equal(t, FormatGPUPath, mustDetect(t, []byte(doc)))
	res, err := ImportWithReport(FormatGPUPath, []byte(doc), Options{Step: "npu-path", Repetition: 1, ToolVersion: "probe-1"})
	require.NoError(t, err)
	ms := res.Measurements
	checkMeasurements(t, ms)
	require.Len(t, ms, 3)
	require.Equal(t, "ascend-direct", ms[0].Level)
	require.Equal(t, "2.1", ms[0].Source.ToolVersion, "the wrapper's version, not the probe's")
	require.Equal(t, []float64{0.01}, ms[1].Values)
	require.Equal(t, "ascend-staged", ms[2].Level)
	require.Equal(t, acceptance.MetricGPUPathBandwidth, ms[2].Metric)
	require.Empty(t, ms[2].Source.ToolVersion)
	require.Contains(t, strings.Join(res.Report.Warnings, "\n"), "gpu-path ascend-staged: no cpu_seconds_per_gib")
	ignored := map[string]bool{}
	for _, ig := range res.Report.Ignored {
		ignored[ig.Field] = true
	}
	require.True(t, ignored["target, block_size, size"])

	for _, bad := range []struct{ doc, says string }{
		{`{"modes":[{"mode":"Ascend Direct","tool":"x","bandwidth_bps":1}]}`, "is not a mode name"},
		{`{"modes":[{"mode":"a","tool":"x","bandwidth_bps":1},{"mode":"a","tool":"x","bandwidth_bps":2}]}`, "appears twice"},
		{`{"modes":[{"mode":"a","bandwidth_bps":1}]}`, "tool: missing"},
		{`{"modes":[{"mode":"a","tool":"x","bandwidth_bps":-1}]}`, "negative"},
		{`{"modes":[{"mode":"a","tool":"x","bandwidth_bps":1,"cpu_seconds_per_gib":-2}]}`, "cpu_seconds_per_gib"},
		{`{"modes":[{"mode":"a","absent":true,"reason":"no driver"}]}`, "no path was measured"},
	} {
		_, _, err := Import(FormatGPUPath, []byte(bad.doc), Options{})
		require.ErrorContains(t, err, bad.says, bad.doc)
	}
}

func mustDetect(t *testing.T, data []byte) Format {
	t.Helper()
	f, err := Detect(data)
	require.NoError(t, err)
	return f
}

func FuzzGdsio(f *testing.F) {
	for _, name := range []string{"gdsio-x0-read-forum-cuda12.2.txt", "gdsio-x2-read-forum-cuda12.2.txt", "gdsio-x1-read-nvidia-p2pdma-doc.txt",
		"gdsio-x1-write-verify-nvidia-p2pdma-doc.txt", "gdsio-x0-write-8k-nvidia-getting-started.txt"} {
		f.Add(gdsioOutput(f, name))
	}
	f.Add([]byte("IoType: RANDREAD XferType: GPU_BATCH Threads: 1 IoDepth: 8 DataSetSize: 100/100(KiB) IOSize: 4(KiB) Throughput: 0.5 GiB/sec, Avg_Latency: 9.5 usecs ops: 25 total_time 0.0002 secs\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := Options{Step: "s", Repetition: 1, Result: &wire.StepResult{Command: &wire.CommandSummary{CPUSeconds: 1.5}}}
		ms, _, err := Import(FormatGdsio, data, opts)
		if err != nil {
			require.Nil(t, ms)
			return
		}
		require.NotEmpty(t, ms)
		checkMeasurements(t, ms)
		checkReport(t, FormatGdsio, data, opts)
		levels := map[string]bool{}
		for _, m := range ms {
			require.NotEmpty(t, m.Level)
			if m.Metric == acceptance.MetricGPUPathBandwidth {
				require.False(t, levels[m.Level], "one bandwidth per transfer type")
				levels[m.Level] = true
			}
		}
	})
}

func FuzzGPUPathDocument(f *testing.F) {
	f.Add([]byte(`{"modes":[{"mode":"cpu-mediated","tool":"accord-probe","bandwidth_bps":1e9,"cpu_seconds_per_gib":0.2}]}`))
	f.Add([]byte(`{"modes":[{"mode":"gds-gpu-direct","absent":true,"reason":"x"},{"mode":"ascend-direct","tool":"w","tool_version":"1","bandwidth_bps":2e9}]}`))
	f.Add([]byte(`{"target":"/t","block_size":4096,"size":8192,"modes":[{"mode":"a","tool":"w","bandwidth_bps":1,"cpu_seconds_per_gib":0}],"not_measured":["x"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, _, err := Import(FormatGPUPath, data, Options{Step: "s", Repetition: 1})
		if err != nil {
			require.Nil(t, ms)
			return
		}
		require.NotEmpty(t, ms)
		checkMeasurements(t, ms)
		checkReport(t, FormatGPUPath, data, Options{Step: "s", Repetition: 1})
	})
}
