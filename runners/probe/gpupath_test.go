package probe

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/internal/fakebin"
	"github.com/accordlab/accord/runners/parse"
	"github.com/accordlab/accord/runners/probe/gpu/gputest"
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

// fakeGdsio writes a gdsio for PATH that records its arguments, spends
// some CPU time (a shell loop: the kernel's accounting of it is what the
// probe reports), and prints what NVIDIA's gdsio printed for the mode
// asked (-x 0: GPU-direct, -x 2: through a CPU bounce buffer), or, with
// a script body given, does that instead.
func fakeGdsio(t *testing.T, body string) (lookPath func(string) (string, error), argsDir string) {
	t.Helper()
	dir, argsDir := t.TempDir(), t.TempDir()
	data := gputest.Testdata(t)
	if body == "" {
		body = fmt.Sprintf(`case "$*" in
*"-x 0"*) out=%q ;;
*"-x 2"*) out=%q ;;
*) echo "unexpected arguments: $*" >&2; exit 2 ;;
esac
exec cat "$out"`, filepath.Join(data, "gdsio-x0-read-forum-cuda12.2.txt"), filepath.Join(data, "gdsio-x2-read-forum-cuda12.2.txt"))
	}
	script := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' \"$@\" > %q/\"args$$\"\ni=0\nwhile [ $i -lt 20000 ]; do i=$((i+1)); done\n%s\n", argsDir, body)
	fakebin.Write(t, filepath.Join(dir, "gdsio"), script)
	return gputest.InFrontOfPath(dir), argsDir
}

// TestGPUPathWithGdsio: where gdsio is installed the step runs it in
// GPU-direct (-x 0) and CPU-path (-x 2) modes beside its own CPU-mediated
// read. The figures are gdsio's bytes over its time, the CPU time is the
// gdsio process's as the kernel accounted it, and each output is kept.
func TestGPUPathWithGdsio(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "data.bin")
	require.NoError(t, os.WriteFile(target, make([]byte, 1<<20), 0o644))
	lookPath, argsDir := fakeGdsio(t, "")
	step := &acceptance.GPUPathStep{Target: target, BlockSize: 1 << 20, Size: 4 << 20, GPU: 3}
	res, err := measureGPUPath(context.Background(), step, dir, lookPath)
	require.NoError(t, err)
	require.Len(t, res.Modes, 3)
	require.Empty(t, res.NotMeasured, "gdsio measured the GPU paths")

	want := map[string]struct {
		file    string
		doneKiB int64
		secs    float64
	}{
		wire.GPUPathGDS:       {"gdsio-x0-read-forum-cuda12.2.txt", 104837120, 15.097011},
		wire.GPUPathGDSCPUGPU: {"gdsio-x2-read-forum-cuda12.2.txt", 104739840, 15.194972},
	}
	for _, m := range res.Modes[1:] {
		w, ok := want[m.Mode]
		require.True(t, ok, m.Mode)
		require.False(t, m.Absent, "%s: %s", m.Mode, m.Reason)
		require.Equal(t, "gdsio", m.Tool)
		require.Equal(t, w.doneKiB<<10, m.Bytes, "what gdsio says it moved, not what was asked")
		require.Equal(t, w.secs, m.Seconds)
		require.InDelta(t, float64(w.doneKiB<<10)/w.secs, m.BandwidthBps, 1e-3)
		require.Positive(t, m.CPUSeconds, "the shell loop's CPU time, from the kernel")
		require.InDelta(t, m.CPUSeconds/(float64(m.Bytes)/(1<<30)), m.CPUSecPerGiB, 1e-15)
		kept, err := os.ReadFile(filepath.Join(dir, m.Output))
		require.NoError(t, err)
		require.Equal(t, string(gdsioFixture(t, w.file)), string(kept), "gdsio's output is kept as printed")
	}
	// Both runs read the step's target into the step's GPU, as asked.
	calls, err := filepath.Glob(filepath.Join(argsDir, "args*"))
	require.NoError(t, err)
	require.Len(t, calls, 2)
	for _, c := range calls {
		b, err := os.ReadFile(c)
		require.NoError(t, err)
		args := strings.Fields(string(b))
		require.Equal(t, []string{"-f", target, "-d", "3", "-w", "1", "-s", "4194304", "-i", "1024K"}, args[:10])
		require.Contains(t, []string{"0", "2"}, args[11])
		require.Equal(t, []string{"-I", "0"}, args[12:])
	}

	// The importer takes all three paths, each with its CPU cost.
	js, err := json.Marshal(res)
	require.NoError(t, err)
	ms, _, err := parse.Import(parse.FormatGPUPath, js, parse.Options{Step: "path", Repetition: 1})
	require.NoError(t, err)
	require.Len(t, ms, 6)
}

// TestGdsioFailures: a gdsio that fails, or prints no summary, leaves its
// mode absent with the reason (gdsio's own words), its output kept; the
// CPU-mediated path is measured all the same.
func TestGdsioFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "data.bin")
	require.NoError(t, os.WriteFile(target, make([]byte, 1<<20), 0o644))
	step := &acceptance.GPUPathStep{Target: target, BlockSize: 1 << 20, Size: 1 << 20}

	failing, _ := fakeGdsio(t, `echo "cuFile error: cuFileDriverOpen failed: nvidia-fs.ko driver not loaded" >&2; exit 5`)
	res, err := measureGPUPath(context.Background(), step, dir, failing)
	require.NoError(t, err)
	require.False(t, res.Modes[0].Absent, "the CPU-mediated path does not need gdsio")
	for _, m := range res.Modes[1:] {
		require.True(t, m.Absent)
		require.Contains(t, m.Reason, "exit status 5")
		require.Contains(t, m.Reason, "nvidia-fs.ko driver not loaded")
		kept, err := os.ReadFile(filepath.Join(dir, m.Output))
		require.NoError(t, err)
		require.Contains(t, string(kept), "cuFileDriverOpen failed")
	}

	dir2 := t.TempDir()
	silent, _ := fakeGdsio(t, `echo "Verifying data"`)
	res, err = measureGPUPath(context.Background(), step, dir2, silent)
	require.NoError(t, err)
	for _, m := range res.Modes[1:] {
		require.True(t, m.Absent)
		require.Contains(t, m.Reason, "no Throughput line")
		require.Zero(t, m.BandwidthBps)
	}
	// Only the CPU-mediated path reaches the importer; the absent modes
	// are warnings.
	js, err := json.Marshal(res)
	require.NoError(t, err)
	ms, warns, err := parse.Import(parse.FormatGPUPath, js, parse.Options{Step: "path", Repetition: 1})
	require.NoError(t, err)
	require.Len(t, ms, 2)
	require.Contains(t, strings.Join(warns, "\n"), "gds-gpu-direct not measured: gdsio's output has no Throughput line")

	dir3 := t.TempDir()
	wrongMode, _ := fakeGdsio(t, "exec cat "+filepath.Join(gputest.Testdata(t), "gdsio-x1-read-nvidia-p2pdma-doc.txt"))
	res, err = measureGPUPath(context.Background(), step, dir3, wrongMode)
	require.NoError(t, err)
	require.Contains(t, res.Modes[1].Reason, "reported XferType CPUONLY, not GPUD")
}

func gdsioFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(gputest.Testdata(t), name))
	require.NoError(t, err)
	return b
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
