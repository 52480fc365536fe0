package handlers

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/emulator"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/gpu"
	"github.com/accordlab/accord/runners/probe/gpu/gputest"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/htmltest"
)

// gpuProfile: the CPU-mediated data path into accelerator memory,
// measured for real against a file, then chat requests to the emulator.
func gpuProfile(endpoint, target string) acceptance.ProfileSpec {
	return acceptance.ProfileSpec{
		SchemaVersion: acceptance.ProfileSchemaVersion, Name: "gpu path", Purpose: acceptance.PurposeInferenceServing,
		Storage: acceptance.Storage{Transport: acceptance.TransportEmulated}, Repetitions: 2, Warmup: acceptance.Duration(200 * time.Millisecond),
		Steps: []acceptance.StepSpec{
			{Name: "path", Kind: acceptance.StepGPUPath, GPUPath: &acceptance.GPUPathStep{Target: target, BlockSize: 1 << 20, Size: 32 << 20}},
			{Name: "chat", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{
				Endpoint: endpoint, Model: "emulated", API: "chat",
				PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 64}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 8},
				Prefix: &acceptance.PrefixReuse{Tokens: 48, Distinct: 1}, MetricsURL: strings.TrimSuffix(endpoint, "/v1") + "/metrics",
				Load: acceptance.Load{Mode: "concurrency", Concurrency: 2}, Duration: acceptance.Duration(1500 * time.Millisecond), Seed: 5,
			}},
		},
	}.Normalized()
}

func mean(a, b float64) float64 { return (a + b) / 2 }

// saveSpec stores a spec as the program's new spec and returns its version.
func saveSpec[T any](t *testing.T, st *store.Store, programID int64, kind store.SpecKind, name string, canonical func(T) ([]byte, error), digest func(T) (string, error), spec T) store.SpecVersion {
	t.Helper()
	c, err := canonical(spec)
	require.NoError(t, err)
	d, err := digest(spec)
	require.NoError(t, err)
	_, v, err := st.CreateSpec(context.Background(), kind, programID, store.NewSpecVersion{Name: name, Spec: c, Digest: d})
	require.NoError(t, err)
	return v
}

// gpuGates judges what the issue asks a gate to judge: no RDMA
// retransmits, the CPU's cost per GiB without GPU-direct, the drives'
// wear; and TTFT against the baseline, which needs comparable hosts.
func gpuGates() acceptance.GateSetSpec {
	return acceptance.GateSetSpec{SchemaVersion: acceptance.GateSchemaVersion, Name: "fabric and data path", Criteria: []acceptance.Criterion{
		{Name: "no-retransmits", Metric: acceptance.MetricRDMARetransmits, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
			Comparator: acceptance.LessOrEqual, Threshold: 0, Unit: "/s", Severity: acceptance.Blocking},
		{Name: "cpu-per-gib", Metric: acceptance.MetricCPUSecondsPerGiB, Statistic: acceptance.StatRate, Mode: acceptance.Absolute, Step: "path",
			Comparator: acceptance.LessOrEqual, Threshold: 1000, Unit: "s/GiB", Severity: acceptance.Blocking},
		{Name: "drive-wear", Metric: acceptance.MetricDriveWritesPerDay, Statistic: acceptance.StatRate, Mode: acceptance.Absolute,
			Comparator: acceptance.LessOrEqual, Threshold: 1, Unit: "DWPD", Severity: acceptance.Advisory},
		{Name: "ttft-vs-baseline", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP50, Mode: acceptance.Relative,
			Comparator: acceptance.LessOrEqual, Threshold: 50, Unit: "%", Severity: acceptance.Advisory},
	}}.Normalized()
}

// addRDMA gives the telemetry the probe wrote here what a host with an
// RDMA port would have given beside it (this machine has none): 3
// retransmits and 1 CNP sent per second on mlx5_0 and 85 µs read latency
// on the namespace. The per-second samples, times, the accelerators'
// readings (from the recorded vendor tools on the probe's PATH) and
// everything else are the probe's own.
func addRDMA(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, wire.OutputDir, "*", "rep-*", "*", wire.TelemetryFile))
	require.NoError(t, err)
	more, err := filepath.Glob(filepath.Join(dir, wire.OutputDir, "*", "rep-*", wire.TelemetryFile))
	require.NoError(t, err)
	files = append(files, more...)
	require.NotEmpty(t, files)
	for _, name := range files {
		raw, err := os.ReadFile(name)
		require.NoError(t, err)
		var out bytes.Buffer
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var s wire.TelemetrySample
			require.NoError(t, json.Unmarshal(sc.Bytes(), &s))
			if s.Counters == nil {
				s.Counters, s.CounterDetail = map[string]float64{}, map[string]float64{}
			}
			s.Counters[acceptance.MetricRDMARetransmits] = 3
			s.Counters[acceptance.MetricRDMACNPSent] = 1
			s.Counters[acceptance.MetricNSReadLatency] = 85
			s.CounterDetail[acceptance.MetricRDMARetransmits+"{mlx5_0/1}"] = 3
			b, err := json.Marshal(s)
			require.NoError(t, err)
			out.Write(append(b, '\n'))
		}
		require.NoError(t, os.WriteFile(name, out.Bytes(), 0o644))
	}
}

// addDriveWear writes the drive wear a host with one 3.84 TB NVMe drive
// would have read (this machine has no NVMe drive): 40 GB written in each
// hour-long repetition, a quarter of a drive write per day.
func addDriveWear(t *testing.T, dir string) {
	t.Helper()
	u := func(v uint64) *uint64 { return &v }
	rd := func(rep int, at string, units uint64) wire.SmartReading {
		return wire.SmartReading{AfterRepetition: rep, At: at, DataUnitsWritten: u(units)}
	}
	wear := wire.DriveWear{Drives: []wire.DriveWearDrive{{Controller: "nvme0", Model: "SAMSUNG MZQL23T8HCLS-00A07", Transport: "pcie", CapacityBytes: 3_840_000_000_000,
		Readings: []wire.SmartReading{rd(0, "2026-12-01T10:00:00Z", 1_000_000), rd(1, "2026-12-01T11:00:00Z", 1_078_125), rd(2, "2026-12-01T12:00:00Z", 1_156_250)}}}} // 78125 × 512,000 B = 40 GB
	b, err := json.Marshal(wear)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, wire.DriveWearFile), b, 0o644))
}

// ascendHost is a folder with the npu-smi of an Atlas 800 training
// server (driver 24.1.RC2, eight NPUs) printing its recorded outputs.
func ascendHost(t *testing.T) string { return gputest.Dir(t, gputest.Only("npu-smi")) }

// ascendInferenceHost has the npu-smi of an Atlas 800 inference server
// (driver 21.0.4.B030, Ascend 310); its usages command fails, as on
// releases without it.
func ascendInferenceHost(t *testing.T) string {
	return gputest.Dir(t, map[string]map[string]string{"npu-smi": {"info -t usages*": "", "*": "npu-smi-info-atlas800-3000-21.0.4.txt"}})
}

// TestGPUPathAndFabricCountersEndToEnd: a run with a gpu-path step and an
// inference step, its probe run for real here with a recorded npu-smi on
// its PATH, is ingested with the counters an RDMA host would add and
// judged: retransmits fail their gate, the CPU cost per GiB (measured
// here) passes, drive wear is shown and judged; the run page draws the
// NPUs' utilisation, storage latency and TTFT on one time axis and the
// counters as rates; a candidate on a host with another Ascend driver is
// INCOMPARABLE with the difference shown.
func TestGPUPathAndFabricCountersEndToEnd(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	ctx := context.Background()
	target := filepath.Join(cb.work, "path.dat")
	data := make([]byte, 8<<20)
	_, _ = rand.Read(data)
	require.NoError(t, os.WriteFile(target, data, 0o644))
	endpoint := chartEmulator(t, emulator.Config{ITL: 2 * time.Millisecond, PrefillPerToken: 20 * time.Microsecond, Seed: 4})

	p := gpuProfile(endpoint, target)
	require.Empty(t, acceptance.ValidateProfile(p))
	g := gpuGates()
	require.Empty(t, acceptance.ValidateGateSet(g))
	require.Empty(t, acceptance.ValidateGateSetForProfile(g, p), "drive wear is the run's, so any profile has it")
	pv := saveSpec(t, cb.store, cb.programID, store.KindProfile, p.Name, acceptance.ProfileCanonicalJSON, acceptance.ProfileDigest, p)
	gv := saveSpec(t, cb.store, cb.programID, store.KindGateSet, g.Name, acceptance.GateSetCanonicalJSON, acceptance.GateSetDigest, g)

	edit := func(dir string) { addRDMA(t, dir); addDriveWear(t, dir) }
	baseline := cb.labRun(t, labRunOpts{profileVersion: pv.ID, gates: true, gateVersion: gv.ID, editFolder: edit, tools: ascendHost(t)})

	// The host facts the probe took name the NPUs npu-smi listed.
	hf, err := cb.store.RunFacts(ctx, baseline)
	require.NoError(t, err)
	var bf facts.Facts
	require.NoError(t, json.Unmarshal(hf.Facts, &bf))
	require.Len(t, bf.GPU.GPUs, 8)
	require.Equal(t, "24.1.RC2", bf.GPU.GPUs[0].DriverVersion)
	require.Equal(t, "npu-smi", bf.GPU.GPUs[0].Tool)

	// The measurements: the data path measured here, the counters' rates
	// and the drive's wear, as the ingest stored them.
	ms, err := cb.store.RunMeasurements(ctx, baseline)
	require.NoError(t, err)
	got := map[string]acceptance.Measurement{}
	for _, m := range ms {
		got[m.Metric+"|"+m.Step+"|"+m.Level+"|"+strconv.Itoa(m.Repetition)] = m
	}
	cpu, ok := got[acceptance.MetricCPUSecondsPerGiB+"|path|"+wire.GPUPathCPU+"|1"]
	require.True(t, ok, "cpu_seconds_per_gib of the CPU-mediated path")
	require.Len(t, cpu.Values, 1)
	require.Positive(t, got[acceptance.MetricGPUPathBandwidth+"|path|"+wire.GPUPathCPU+"|2"].Values[0])
	rt, ok := got[acceptance.MetricRDMARetransmits+"|path||1"]
	require.True(t, ok, "retransmits per second sampled during the gpu-path step")
	for _, v := range rt.Values {
		require.Equal(t, 3.0, v)
	}
	require.Equal(t, []float64{40e9}, got[acceptance.MetricDriveBytesWritten+"||nvme0|2"].Values)
	require.InDelta(t, 40e9/3.84e12*24, got[acceptance.MetricDriveWritesPerDay+"||nvme0|1"].Values[0], 1e-12)

	// The verdicts.
	ev, err := cb.store.RunLatestEvaluation(ctx, baseline)
	require.NoError(t, err)
	var res acceptance.Evaluation
	require.NoError(t, json.Unmarshal(ev.Result, &res))
	verdicts := map[string]acceptance.CriterionResult{}
	for _, c := range res.Criteria {
		verdicts[c.Name] = c
	}
	require.Equal(t, acceptance.Fail, verdicts["no-retransmits"].Verdict, verdicts["no-retransmits"].Explanation)
	require.Equal(t, acceptance.Pass, verdicts["cpu-per-gib"].Verdict, verdicts["cpu-per-gib"].Explanation)
	require.Equal(t, acceptance.Pass, verdicts["drive-wear"].Verdict, verdicts["drive-wear"].Explanation)
	require.Equal(t, acceptance.Fail, res.Verdict, "a blocking criterion failed")

	// The run page: the GPU beside storage latency and TTFT, the counters
	// as rates, the drive wear, the accelerator in the host facts.
	_, page := cb.get(t, cb.viewer, cb.url("/runs/")+strconv.FormatInt(baseline, 10))
	chartsOn := pageCharts(t, page)
	tl, ok := chartsOn["chart-timeline"]
	require.True(t, ok, "the timeline chart")
	names := strings.Join(tl.names(), " | ")
	require.Contains(t, names, "GPU")
	require.Contains(t, names, "Namespace read latency")
	require.Contains(t, names, "Time to first token, rolling p99, step chat")
	hit, ok := got[acceptance.MetricCacheHitRatio+"|chat|c=2|1"]
	require.True(t, ok, "the emulator's prefix cache counters give the hit ratio")
	require.Contains(t, page, fmt.Sprintf("prefix cache hit ratio %.1f %%", mean(hit.Values[0], got[acceptance.MetricCacheHitRatio+"|chat|c=2|2"].Values[0])*100),
		"beside the TTFT distribution")
	fabric, ok := chartsOn["chart-fabric"]
	require.True(t, ok, "the fabric counters chart")
	require.Subset(t, fabric.names(), []string{"RDMA retransmits", "CNPs sent"}, "with this machine's own NIC counters beside them")
	rows := blockTable(t, page, "chart-fabric")
	found := false
	for _, r := range rows {
		if len(r) == 6 && r[0] == "RDMA retransmits" {
			found = true
			require.Equal(t, "/s", r[1])
			require.Equal(t, "3.00", r[3], "min")
			require.Equal(t, "3.00", r[5], "max")
		}
	}
	require.True(t, found, "the table beside the chart has the exact rates: %v", rows)
	text := htmltest.Text(htmltest.Parse(t, page))
	require.Contains(t, text, "Drive writes per day")
	require.Contains(t, text, "nvme0")
	require.Contains(t, text, "RDMA retransmits")

	// The NPUs' telemetry, as npu-smi gave it to the probe: eight devices'
	// power summed each second (the recorded table's 206.9 W and the rest).
	power, ok := got[acceptance.MetricGPUPower+"|path||1"]
	require.True(t, ok, "accelerator power sampled during the gpu-path step")
	for _, v := range power.Values {
		require.InDelta(t, npuPowerSum(t), v, 1e-9)
	}

	// A candidate on a host with another Ascend driver: its relative
	// criterion is INCOMPARABLE, with the driver named on both sides.
	candidate := cb.labRun(t, labRunOpts{profileVersion: pv.ID, gates: true, gateVersion: gv.ID, baseline: &baseline, editFolder: edit, tools: ascendInferenceHost(t)})
	ev, err = cb.store.RunLatestEvaluation(ctx, candidate)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(ev.Result, &res))
	require.False(t, res.Comparability.Comparable)
	var driverDiff *acceptance.FactDiff
	for i, d := range res.Comparability.Differences {
		if d.Fact == "gpu.driver" {
			driverDiff = &res.Comparability.Differences[i]
		}
	}
	require.NotNil(t, driverDiff, "the driver is the difference: %+v", res.Comparability.Differences)
	require.Equal(t, "21.0.4.B030", driverDiff.Candidate)
	require.Equal(t, "24.1.RC2", driverDiff.Baseline)
	for _, c := range res.Criteria {
		if c.Name == "ttft-vs-baseline" {
			require.Equal(t, acceptance.Incomparable, c.Verdict)
		}
	}
	_, page = cb.get(t, cb.viewer, cb.url("/runs/")+strconv.FormatInt(candidate, 10))
	text = htmltest.Text(htmltest.Parse(t, page))
	require.Contains(t, text, "INCOMPARABLE")
	require.Contains(t, text, "gpu.driver")
	require.Contains(t, text, "21.0.4.B030")
	require.Contains(t, text, "24.1.RC2")
}

// npuPowerSum is the power of the recorded Atlas 800 table, summed over
// its chips as the gpu_power metric sums devices.
func npuPowerSum(t *testing.T) float64 {
	t.Helper()
	a, ok := gpu.Lookup("npu-smi")
	require.True(t, ok)
	raw, err := os.ReadFile(filepath.Join(gputest.Testdata(t), "npu-smi-info-atlas800-9010-24.1.RC2.txt"))
	require.NoError(t, err)
	samples, err := a.ParseTelemetry([][]byte{raw})
	require.NoError(t, err)
	sum := 0.0
	for _, s := range samples {
		sum += *s.PowerW
	}
	require.Greater(t, sum, 206.9)
	return sum
}
