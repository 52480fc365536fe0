package handlers

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/gpu/gputest"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/htmltest"
)

// npuWrapperOutput is what a wrapper around a vendor's own transfer tool
// prints for a gpu-path-json command step. It is made by hand (it is
// Accord's own document, which no vendor tool prints by itself): a
// direct mode with its CPU cost and a staged one whose CPU time the
// wrapper could not measure.
const npuWrapperOutput = `{"target":"/dev/nvme1n1","block_size":1048576,"size":1073741824,"modes":[` +
	`{"mode":"ascend-direct","tool":"npu-dma-bench","tool_version":"2.1","bandwidth_bps":9.5e9,"cpu_seconds_per_gib":0.01},` +
	`{"mode":"ascend-staged","tool":"npu-dma-bench","tool_version":"2.1","bandwidth_bps":6e9}]}`

// transferToolHost is a lab host's PATH with gdsio (printing the
// GPU-direct read a user posted on NVIDIA's forum) and a vendor tool's
// wrapper.
func transferToolHost(t *testing.T) string {
	t.Helper()
	dir := gputest.Dir(t, map[string]map[string]string{"gdsio": {"*-x 0*": "gdsio-x0-read-forum-cuda12.2.txt"}})
	script := "#!/bin/sh\ncat <<'EOF'\n" + npuWrapperOutput + "\nEOF\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "npu-dma-bench"), []byte(script), 0o755))
	return dir
}

// TestVendorTransferToolAsACommandStep: gdsio and a vendor tool's wrapper
// run as command steps by the probe (found on the host's PATH), their
// outputs imported by the run's ingest into gpu_path_bandwidth and
// cpu_seconds_per_gib (gdsio's from the CPU time the probe measured of
// the command), which gates judge like the gpu-path step's.
func TestVendorTransferToolAsACommandStep(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	ctx := context.Background()
	p := acceptance.ProfileSpec{
		SchemaVersion: acceptance.ProfileSchemaVersion, Name: "transfer tools", Purpose: acceptance.PurposeStorageMicrobench,
		Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe}, Repetitions: 2,
		Steps: []acceptance.StepSpec{
			{Name: "gds", Kind: acceptance.StepCommand, Command: &acceptance.CommandStep{Program: "gdsio",
				Args: []string{"-f", "/mnt/dd.txt", "-d", "0", "-w", "4", "-s", "100G", "-i", "1M", "-I", "0", "-x", "0"}, Format: acceptance.FormatGdsioText}},
			{Name: "npu-dma", Kind: acceptance.StepCommand, Command: &acceptance.CommandStep{Program: "npu-dma-bench", Format: acceptance.FormatGPUPathJSON}},
		},
	}.Normalized()
	require.Empty(t, acceptance.ValidateProfile(p))
	g := acceptance.GateSetSpec{SchemaVersion: acceptance.GateSchemaVersion, Name: "data path", Criteria: []acceptance.Criterion{
		{Name: "gds-bandwidth", Metric: acceptance.MetricGPUPathBandwidth, Statistic: acceptance.StatRate, Mode: acceptance.Absolute, Step: "gds",
			Comparator: acceptance.GreaterOrEqual, Threshold: 6, Unit: "GiB/s", Severity: acceptance.Blocking},
		{Name: "gds-cpu", Metric: acceptance.MetricCPUSecondsPerGiB, Statistic: acceptance.StatRate, Mode: acceptance.Absolute, Step: "gds",
			Comparator: acceptance.LessOrEqual, Threshold: 0.5, Unit: "s/GiB", Severity: acceptance.Blocking},
		{Name: "npu-bandwidth", Metric: acceptance.MetricGPUPathBandwidth, Statistic: acceptance.StatRate, Mode: acceptance.Absolute, Step: "npu-dma",
			Comparator: acceptance.GreaterOrEqual, Threshold: 12, Unit: "GiB/s", Severity: acceptance.Blocking},
	}}.Normalized()
	require.Empty(t, acceptance.ValidateGateSet(g))
	require.Empty(t, acceptance.ValidateGateSetForProfile(g, p), "a command step importing the data path produces its metrics")
	text := p
	text.Steps = []acceptance.StepSpec{{Name: "gds", Kind: acceptance.StepCommand, Command: &acceptance.CommandStep{Program: "gdsio", Format: acceptance.FormatText}}}
	require.NotEmpty(t, acceptance.ValidateGateSetForProfile(g, text), "kept as text, gdsio's output gives no metric to gate")

	pv := saveSpec(t, cb.store, cb.programID, store.KindProfile, p.Name, acceptance.ProfileCanonicalJSON, acceptance.ProfileDigest, p)
	gv := saveSpec(t, cb.store, cb.programID, store.KindGateSet, g.Name, acceptance.GateSetCanonicalJSON, acceptance.GateSetDigest, g)
	runID := cb.labRun(t, labRunOpts{profileVersion: pv.ID, gates: true, gateVersion: gv.ID, tools: transferToolHost(t)})

	ms, err := cb.store.LoadMeasurements(ctx, runID)
	require.NoError(t, err)
	got := map[string]acceptance.Measurement{}
	for _, m := range ms {
		got[m.Metric+"|"+m.Step+"|"+m.Level+"|"+strconv.Itoa(m.Repetition)] = m
	}
	for rep := 1; rep <= 2; rep++ {
		r := strconv.Itoa(rep)
		bw, ok := got[acceptance.MetricGPUPathBandwidth+"|gds|"+wire.GPUPathGDS+"|"+r]
		require.True(t, ok, "gdsio's GPUD read is the gds-gpu-direct level")
		require.InDelta(t, 104837120.0*1024/15.097011, bw.Values[0], 1e-3)
		require.Equal(t, "gdsio", bw.Source.Tool)
		cpu, ok := got[acceptance.MetricCPUSecondsPerGiB+"|gds|"+wire.GPUPathGDS+"|"+r]
		require.True(t, ok, "the command's CPU time per GiB gdsio moved")
		require.GreaterOrEqual(t, cpu.Values[0], 0.0)
		require.Contains(t, cpu.Source.Field, "command.cpu_seconds")
		require.Equal(t, []float64{9.5e9}, got[acceptance.MetricGPUPathBandwidth+"|npu-dma|ascend-direct|"+r].Values)
		require.Equal(t, []float64{0.01}, got[acceptance.MetricCPUSecondsPerGiB+"|npu-dma|ascend-direct|"+r].Values)
		require.Equal(t, "2.1", got[acceptance.MetricGPUPathBandwidth+"|npu-dma|ascend-direct|"+r].Source.ToolVersion)
		_, ok = got[acceptance.MetricCPUSecondsPerGiB+"|npu-dma|ascend-staged|"+r]
		require.False(t, ok, "no CPU time given: no figure, rather than a zero")
	}

	ev, err := cb.store.LatestEvaluation(ctx, runID)
	require.NoError(t, err)
	var res acceptance.Evaluation
	require.NoError(t, json.Unmarshal(ev.Result, &res))
	verdicts := map[string]acceptance.CriterionResult{}
	for _, c := range res.Criteria {
		verdicts[c.Name] = c
	}
	require.Equal(t, acceptance.Pass, verdicts["gds-bandwidth"].Verdict, verdicts["gds-bandwidth"].Explanation)
	require.Equal(t, acceptance.Pass, verdicts["gds-cpu"].Verdict, verdicts["gds-cpu"].Explanation)
	require.Equal(t, acceptance.Fail, verdicts["npu-bandwidth"].Verdict, "8.8 GiB/s is below 12: %s", verdicts["npu-bandwidth"].Explanation)

	_, page := cb.get(t, cb.viewer, cb.url("/runs/")+strconv.FormatInt(runID, 10))
	text2 := htmltest.Text(htmltest.Parse(t, page))
	require.Contains(t, text2, "GPU data path bandwidth")
	require.Contains(t, text2, "CPU seconds per GiB")
	require.Contains(t, text2, "ascend-staged")
	require.Contains(t, text2, "gds-gpu-direct")
}

// TestAnotherGPUModelIsIncomparable: a baseline on a host whose rocm-smi
// lists four Instinct MI100 and a candidate on one whose rocm-smi lists a
// Radeon RX 6700 XT, both with driver 6.3.6 (recorded outputs, a real
// model change and nothing else of the accelerators): the candidate's
// relative criterion is INCOMPARABLE, with the model on both sides shown.
func TestAnotherGPUModelIsIncomparable(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	ctx := context.Background()
	target := filepath.Join(cb.work, "path.dat")
	data := make([]byte, 4<<20)
	_, _ = rand.Read(data)
	require.NoError(t, os.WriteFile(target, data, 0o644))
	p := acceptance.ProfileSpec{
		SchemaVersion: acceptance.ProfileSchemaVersion, Name: "data path", Purpose: acceptance.PurposeStorageMicrobench,
		Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe}, Repetitions: 2,
		Steps: []acceptance.StepSpec{{Name: "path", Kind: acceptance.StepGPUPath, Timeout: acceptance.Duration(time.Minute),
			GPUPath: &acceptance.GPUPathStep{Target: target, BlockSize: 1 << 20, Size: 4 << 20}}},
	}.Normalized()
	g := acceptance.GateSetSpec{SchemaVersion: acceptance.GateSchemaVersion, Name: "vs baseline", Criteria: []acceptance.Criterion{
		{Name: "bandwidth-vs-baseline", Metric: acceptance.MetricGPUPathBandwidth, Statistic: acceptance.StatRate, Mode: acceptance.Relative,
			Comparator: acceptance.GreaterOrEqual, Threshold: -90, Unit: "%", Severity: acceptance.Advisory},
	}}.Normalized()
	require.Empty(t, acceptance.ValidateProfile(p))
	require.Empty(t, acceptance.ValidateGateSet(g))
	pv := saveSpec(t, cb.store, cb.programID, store.KindProfile, p.Name, acceptance.ProfileCanonicalJSON, acceptance.ProfileDigest, p)
	gv := saveSpec(t, cb.store, cb.programID, store.KindGateSet, g.Name, acceptance.GateSetCanonicalJSON, acceptance.GateSetDigest, g)

	mi100 := gputest.Dir(t, map[string]map[string]string{"rocm-smi": {"*": "rocm-smi-mi100-rocm602.json"}})
	rx6700 := gputest.Dir(t, map[string]map[string]string{"rocm-smi": {"*": "rocm-smi-rx6700xt-rocm612.json"}})
	baseline := cb.labRun(t, labRunOpts{profileVersion: pv.ID, gates: true, gateVersion: gv.ID, tools: mi100})
	candidate := cb.labRun(t, labRunOpts{profileVersion: pv.ID, gates: true, gateVersion: gv.ID, baseline: &baseline, tools: rx6700})

	ev, err := cb.store.LatestEvaluation(ctx, candidate)
	require.NoError(t, err)
	var res acceptance.Evaluation
	require.NoError(t, json.Unmarshal(ev.Result, &res))
	require.True(t, res.Comparability.Checked)
	require.False(t, res.Comparability.Comparable)
	diffs := map[string]acceptance.FactDiff{}
	for _, d := range res.Comparability.Differences {
		diffs[d.Fact] = d
	}
	model, ok := diffs["gpu.model"]
	require.True(t, ok, "the model is a difference: %+v", res.Comparability.Differences)
	require.Equal(t, "4x AMD Arcturus GL-XL [Instinct MI100]", model.Baseline)
	require.Equal(t, "AMD Navi 22 [Radeon RX 6700/6700 XT / 6800M]", model.Candidate)
	require.NotContains(t, diffs, "gpu.driver", "both hosts run driver 6.3.6")
	require.Equal(t, acceptance.Incomparable, res.Criteria[0].Verdict, res.Criteria[0].Explanation)

	_, page := cb.get(t, cb.viewer, cb.url("/runs/")+strconv.FormatInt(candidate, 10))
	text := htmltest.Text(htmltest.Parse(t, page))
	require.Contains(t, text, "INCOMPARABLE")
	require.Contains(t, text, "gpu.model")
	require.Contains(t, text, "AMD Navi 22 [Radeon RX 6700/6700 XT / 6800M]")
	require.Contains(t, text, "4x AMD Arcturus GL-XL [Instinct MI100]")
}
