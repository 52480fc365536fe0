package handlers

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/internal/fakebin"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/gpu/gputest"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
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
	fakebin.Write(t, filepath.Join(dir, "npu-dma-bench"), script)
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

	ms, err := cb.store.RunMeasurements(ctx, runID)
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

	ev, err := cb.store.RunLatestEvaluation(ctx, runID)
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

	ev, err := cb.store.RunLatestEvaluation(ctx, candidate)
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

// TestLabHostRunWithVendorTools: a run through a real lab host (sshd on
// loopback, the accord binary as the probe, River working the
// run as `accord serve` does) whose PATH has npu-smi, amd-smi, rocm-smi
// and cnmon printing their recorded outputs. The probe on the host writes
// the devices into facts.json and samples them into telemetry.jsonl; the
// ingest keeps the facts and the accelerators' telemetry; the host page
// lists the devices and the run page their readings.
func TestLabHostRunWithVendorTools(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	tools := gputest.Dir(t, gputest.Only("npu-smi", "amd-smi", "rocm-smi", "cnmon"))
	sshd := sshtest.StartSSHD(t, sshtest.Options{Env: []string{"PATH=" + tools + ":" + os.Getenv("PATH")}})

	hostID, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "npu-node-1", Address: sshd.Addr, Port: sshd.Port,
		Username: sshd.User, AuthMethod: "key", PublicKey: "test", WritePlaces: []string{t.TempDir()}})
	require.NoError(t, err)
	sealed, err := pb.sealer.Seal(sshd.ClientKeyPEM, labhost.SealLabel(hostID))
	require.NoError(t, err)
	require.NoError(t, pb.store.SetHostSealedKey(ctx, hostID, sealed))
	require.NoError(t, pb.store.PinHostKeys(ctx, pb.programID, hostID, sshrun.AuthorizedKey(sshd.HostKey), sshrun.Fingerprint(sshd.HostKey), nil))

	remote := t.TempDir()
	sshtest.SeedProbe(t, remote) // as an earlier run left it: this test is not about the upload
	deps := jobs.Deps{Log: pb.log, Store: pb.store, Sealer: pb.sealer, Keyring: pb.keyring, Report: web.RenderReport, Version: "test",
		Holder: "test/" + t.Name(), LeaseTTL: 10 * time.Second,
		Runner: runners.Config{Options: sshrun.Options{RemoteBase: remote, HandshakeTimeout: 10 * time.Second},
			Backoff: sshrun.Backoff{Initial: 200 * time.Millisecond, Max: time.Second, Attempts: 8},
			Probe:   sshrun.ProbeSource{File: sshtest.BuildAccord(t)}, Limits: sshrun.Limits{TempDir: t.TempDir()}}}
	client, err := river.NewClient(riverpgxv5.New(pb.pool), &river.Config{Logger: pb.log,
		Queues:  map[string]river.QueueConfig{jobs.QueueDefault: {MaxWorkers: 2}, jobs.QueueRuns: {MaxWorkers: 2}, jobs.QueueReports: {MaxWorkers: 1}},
		Workers: jobs.Register(deps), FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond, TestOnly: true})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(stop)
	})

	// Three seconds of a command step: a few telemetry samples of every tool.
	p := acceptance.ProfileSpec{SchemaVersion: acceptance.ProfileSchemaVersion, Name: "settle", Purpose: acceptance.PurposeCustom,
		Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe}, Repetitions: 1,
		Steps: []acceptance.StepSpec{{Name: "settle", Kind: acceptance.StepCommand,
			Command: &acceptance.CommandStep{Program: "sleep", Args: []string{"3"}, Format: acceptance.FormatText}}}}.Normalized()
	require.Empty(t, acceptance.ValidateProfile(p))
	pv := saveSpec(t, pb.store, pb.programID, store.KindProfile, p.Name, acceptance.ProfileCanonicalJSON, acceptance.ProfileDigest, p)
	var runID int64
	require.NoError(t, pb.store.InTx(ctx, func(tx *store.Store) error {
		if runID, err = tx.CreateRun(ctx, store.NewRun{ProgramID: pb.programID, ProfileVersionID: pv.ID, HostID: hostID}); err != nil {
			return err
		}
		res, err := client.InsertTx(ctx, tx.Tx(), jobs.ExecuteRunArgs{RunID: runID}, nil)
		if err != nil {
			return err
		}
		return tx.SetRunJob(ctx, runID, res.Job.ID)
	}))
	var run store.Run
	require.Eventually(t, func() bool {
		run, err = pb.store.RunByID(ctx, runID)
		return err == nil && store.RunFinal(run.State)
	}, 3*time.Minute, 200*time.Millisecond, "the run ends")
	require.Equal(t, store.RunDone, run.State, run.Reason)

	// On the host: facts.json has the devices of each tool, the
	// telemetry every device each tool samples.
	folder := filepath.Join(remote, "runs", strconv.FormatInt(runID, 10)+"-1")
	raw, err := os.ReadFile(filepath.Join(folder, wire.FactsFile))
	require.NoError(t, err)
	var f facts.Facts
	require.NoError(t, json.Unmarshal(raw, &f))
	perTool := map[string]int{}
	for _, d := range f.GPU.GPUs {
		perTool[d.Tool]++
	}
	require.Equal(t, map[string]int{"npu-smi": 8, "amd-smi": 1, "cnmon": 2}, perTool, "rocm-smi is superseded by amd-smi")
	samples := 0
	seen := map[string]map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(mustRead(t, filepath.Join(folder, wire.OutputDir, "01-settle", "rep-1", wire.TelemetryFile)))), "\n") {
		var s wire.TelemetrySample
		require.NoError(t, json.Unmarshal([]byte(line), &s))
		samples++
		for _, g := range s.GPUs {
			if seen[g.Tool] == nil {
				seen[g.Tool] = map[int]bool{}
			}
			seen[g.Tool][g.Index] = true
		}
	}
	require.GreaterOrEqual(t, samples, 2)
	require.Equal(t, map[string]map[int]bool{"npu-smi": {0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true},
		"amd-smi": {0: true, 1: true}, "cnmon": {0: true, 1: true}}, seen)

	// Ingested: the run's facts are the host's, and its telemetry the
	// accelerators' readings.
	stored, err := pb.store.RunFacts(ctx, runID)
	require.NoError(t, err)
	require.JSONEq(t, string(raw), string(stored.Facts))
	ms, err := pb.store.RunMeasurements(ctx, runID)
	require.NoError(t, err)
	var power []float64
	for _, m := range ms {
		if m.Metric == acceptance.MetricGPUPower && m.Step == "settle" {
			power = m.Values
		}
	}
	require.NotEmpty(t, power, "the accelerators' power each second")

	_, page := pb.get(t, pb.viewer, pb.url("/hosts/")+strconv.FormatInt(hostID, 10))
	text := htmltest.Text(htmltest.Parse(t, page))
	for _, want := range []string{"GPU 0 (amd-smi)", "AMD Instinct MI210", "Huawei Ascend xxx", "driver 24.1.RC2", "Cambricon MLU370-X8",
		"npu-smi", "rocm-smi (superseded by amd-smi)"} {
		require.Contains(t, text, want)
	}
	_, page = pb.get(t, pb.viewer, pb.url("/runs/")+strconv.FormatInt(runID, 10))
	text = htmltest.Text(htmltest.Parse(t, page))
	require.Contains(t, text, "Accelerator power")
	require.Contains(t, text, "Accelerator memory used")
	require.Contains(t, text, "GPU utilisation")
	charts := pageCharts(t, page)
	tel, ok := charts["chart-telemetry"]
	require.True(t, ok, "the host telemetry chart")
	require.Contains(t, strings.Join(tel.names(), " | "), "GPU")
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return b
}
