package handlers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/stats"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/runners/probe"
	"github.com/accordlab/accord/runners/probe/emulator"
	"github.com/accordlab/accord/runners/probe/emulator/emulatortest"
	"github.com/accordlab/accord/runners/probe/gpu/gputest"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/service/ingest"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
	"github.com/accordlab/accord/web/htmltest"
	"github.com/accordlab/accord/web/palette"
)

// The charts tests run real measurements: the probe (`accord probe run`,
// in-process) drives Accord's inference emulator on 127.0.0.1 with a
// concurrency sweep and reads a file with fio, and the run folder is
// ingested as the execute_run worker does (artifacts, host facts,
// measurements, chart aggregates in one transaction) and judged by the
// gate engine.

type chartsBundle struct {
	*programBundle
	workers *river.Client[pgx.Tx] // works evaluate_run (and what follows it)
	hostID  int64
	// Profile versions of one profile: v1 against a fast emulator (the
	// baseline's storage), v2 against a slower one (the candidate's).
	fastVersion, slowVersion int64
	profileID                int64
	gateVersion              int64
	work                     string
}

// chartEmulator serves the OpenAI API on 127.0.0.1 with a KV file in a
// temporary folder (real reads), until the test ends.
func chartEmulator(t *testing.T, cfg emulator.Config) string {
	t.Helper()
	cfg.KVFile = filepath.Join(t.TempDir(), "kv.bin")
	cfg.KVFileSize, cfg.BlockBytes, cfg.BlockTokens, cfg.CacheBlocks, cfg.DefaultMaxTokens = 8<<20, 64<<10, 16, 16, 8
	return emulatortest.Serve(t, cfg, nil)
}

// chartProfile is a concurrency sweep against endpoint and a short fio read.
func chartProfile(endpoint, fioTarget string) acceptance.ProfileSpec {
	return acceptance.ProfileSpec{
		SchemaVersion: acceptance.ProfileSchemaVersion, Name: "chat sweep", Purpose: acceptance.PurposeInferenceServing,
		Storage: acceptance.Storage{Transport: acceptance.TransportEmulated}, Repetitions: 1, Warmup: acceptance.Duration(200 * time.Millisecond),
		Steps: []acceptance.StepSpec{
			{Name: "chat", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{
				Endpoint: endpoint, Model: "emulated", API: "chat",
				PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 64}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 8},
				Load:     acceptance.Load{Mode: "concurrency", Sweep: []float64{1, 4}},
				Duration: acceptance.Duration(1200 * time.Millisecond), SLO: acceptance.SLO{TTFTMs: 100}, Seed: 3,
			}},
			{Name: "kv-read", Kind: acceptance.StepFio, Fio: &acceptance.FioStep{RW: "randread", BlockSize: 4 << 10, IODepth: 1, NumJobs: 1,
				Size: 8 << 20, Runtime: acceptance.Duration(time.Second), IOEngine: "psync", Target: fioTarget}},
		},
	}.Normalized()
}

// chartGates: a blocking limit on p99 TTFT and an advisory relative one.
func chartGates() acceptance.GateSetSpec {
	return acceptance.GateSetSpec{SchemaVersion: acceptance.GateSchemaVersion, Name: "ttft gates", Criteria: []acceptance.Criterion{
		{Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
			Comparator: acceptance.LessOrEqual, Threshold: 0.05, Unit: "s", Severity: acceptance.Blocking},
		{Name: "ttft-vs-baseline", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP50, Mode: acceptance.Relative,
			Comparator: acceptance.LessOrEqual, Threshold: 10, Unit: "%", Severity: acceptance.Advisory},
	}}.Normalized()
}

func setupCharts(t *testing.T) *chartsBundle {
	t.Helper()
	pb := setupProgram(t)
	ctx := context.Background()
	cb := &chartsBundle{programBundle: pb, work: t.TempDir()}
	var err error
	cb.hostID, err = pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "gpu-lab-1", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key", Emulated: true})
	require.NoError(t, err)
	fast := chartEmulator(t, emulator.Config{ITL: 2 * time.Millisecond, PrefillPerToken: 20 * time.Microsecond, Seed: 1})
	slow := chartEmulator(t, emulator.Config{ITL: 3 * time.Millisecond, PrefillPerToken: 150 * time.Microsecond, Seed: 2})
	target := filepath.Join(cb.work, "fio.dat")

	save := func(kind store.SpecKind, spec any, canon []byte, digest string, specID int64) (int64, int64) {
		nv := store.NewSpecVersion{Name: "chat sweep", Spec: canon, Digest: digest}
		if kind == store.KindGateSet {
			nv.Name = "ttft gates"
		}
		if specID == 0 {
			sp, v, err := pb.store.CreateSpec(ctx, kind, pb.programID, nv)
			require.NoError(t, err)
			return sp.ID, v.ID
		}
		v, err := pb.store.AddSpecVersion(ctx, kind, pb.programID, specID, nv)
		require.NoError(t, err)
		return specID, v.ID
	}
	profileVersion := func(endpoint string) (acceptance.ProfileSpec, []byte, string) {
		p := chartProfile(endpoint, target)
		require.Empty(t, acceptance.ValidateProfile(p))
		canon, err := acceptance.ProfileCanonicalJSON(p)
		require.NoError(t, err)
		digest, err := acceptance.ProfileDigest(p)
		require.NoError(t, err)
		return p, canon, digest
	}
	p1, c1, d1 := profileVersion(fast)
	cb.profileID, cb.fastVersion = save(store.KindProfile, p1, c1, d1, 0)
	p2, c2, d2 := profileVersion(slow)
	_, cb.slowVersion = save(store.KindProfile, p2, c2, d2, cb.profileID)
	g := chartGates()
	require.Empty(t, acceptance.ValidateGateSet(g))
	gc, err := acceptance.GateSetCanonicalJSON(g)
	require.NoError(t, err)
	gd, err := acceptance.GateSetDigest(g)
	require.NoError(t, err)
	_, cb.gateVersion = save(store.KindGateSet, g, gc, gd, 0)
	return cb
}

type labRunOpts struct {
	profileVersion int64
	gates          bool
	baseline       *int64
	label          string
	// editFacts changes the host facts the probe took, as a firmware or
	// kernel update between runs would.
	editFacts func(map[string]any)
	// editFolder changes the run folder after the probe wrote it (what
	// this machine cannot give: an RDMA port's counters, an accelerator).
	editFolder func(dir string)
	// gateVersion judges the run with this gate set instead of the
	// bundle's (gates must be set).
	gateVersion int64
	// tools is a folder of fake programs (vendor tools printing recorded
	// outputs, gdsio, a vendor tool's wrapper) the probe finds in front of
	// PATH, as on a lab host where they are installed.
	tools string
	// recorded names a run folder the probe wrote earlier
	// (testdata/labruns/NAME, see its README) to ingest instead of running
	// the probe now: tests that assert which run is faster read recorded
	// timings, never the speed of a shared machine.
	recorded string
}

// recordedLabRuns are the folders of testdata/labruns: two runs against
// the fast emulator and one against the slow one.
var recordedLabRuns = []struct {
	name string
	slow bool
}{{"local-1", false}, {"fabric-1", true}, {"local-2", false}}

// labRun executes a run for real and ingests it; it returns the run id.
func (cb *chartsBundle) labRun(t *testing.T, o labRunOpts) int64 {
	t.Helper()
	ctx := context.Background()
	nr := store.NewRun{ProgramID: cb.programID, ProfileVersionID: o.profileVersion, HostID: cb.hostID, BaselineRunID: o.baseline, Label: o.label, Emulated: true}
	if o.gates {
		nr.GateSetVersionID = &cb.gateVersion
		if o.gateVersion != 0 {
			nr.GateSetVersionID = &o.gateVersion
		}
	}
	runID, err := cb.store.CreateRun(ctx, nr)
	require.NoError(t, err)
	pv, err := cb.store.GetSpecVersionByID(ctx, store.KindProfile, cb.programID, o.profileVersion)
	require.NoError(t, err)
	var profile acceptance.ProfileSpec
	require.NoError(t, json.Unmarshal(pv.Spec, &profile))

	dir := t.TempDir()
	if o.recorded != "" {
		require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "labruns", o.recorded))))
	} else {
		cb.runProbe(t, dir, runID, profile, o.tools)
	}
	if o.editFacts != nil {
		path := filepath.Join(dir, wire.FactsFile)
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		var f map[string]any
		require.NoError(t, json.Unmarshal(raw, &f))
		o.editFacts(f)
		raw, err = json.Marshal(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, raw, 0o644))
	}
	if o.editFolder != nil {
		o.editFolder(dir)
	}
	coll := collectDir(t, dir)

	// Ingest as the execute_run worker does (service/ingest).
	require.NoError(t, cb.store.SetRunState(ctx, runID, store.RunRunning, "test"))
	res := ingest.Results{Files: coll, HostID: &cb.hostID}
	res.Measurements, res.Warnings, err = ingest.ReadFolder(ingest.CollectionFiles(coll), profile, "test")
	if err != nil {
		events, _ := os.ReadFile(filepath.Join(dir, wire.EventsFile))
		require.NoError(t, err, "events: %s", events)
	}
	res.Charts, err = ingest.Charts(ctx, cb.store, profile, o.baseline, res)
	require.NoError(t, err)
	run, err := cb.store.RunByID(ctx, runID)
	require.NoError(t, err)
	env := rollout.Env{Keyring: cb.keyring, Queue: jobs.NewQueue(cb.river)}
	require.NoError(t, cb.store.InTx(ctx, func(tx *store.Store) error {
		return ingest.Save(ctx, tx, env, run, res, ingest.Outcome{State: store.RunEvaluating, Reason: "judging the results"})
	}))
	if o.gates {
		cb.evaluate(t, runID)
	}
	return runID
}

// runProbe runs the probe on a run folder as the runner launches it on a
// lab host, with the programs of the folder tools (if any) in front of
// PATH.
func (cb *chartsBundle) runProbe(t *testing.T, dir string, runID int64, profile acceptance.ProfileSpec, tools string) {
	t.Helper()
	// The profile's fio files are under the temporary folder, which this
	// "host" declares as scratch space.
	plan, err := json.Marshal(wire.Plan{SchemaVersion: wire.PlanSchemaVersion, RunID: runID, Attempt: 1, Profile: profile, Interim: acceptance.Duration(time.Second),
		WritePlaces: []string{os.TempDir()}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, wire.PlanFile), plan, 0o644))
	var stderr bytes.Buffer
	host := probe.Host{}
	if tools != "" {
		host.LookPath = gputest.InFrontOfPath(tools)
	}
	code := probe.RunIn(context.Background(), dir, host, &stderr)
	require.Equal(t, 0, code, "probe run: %s", stderr.String())
}

// TestRecordLabRuns is not a test but the recorder of testdata/labruns:
// ACCORD_RECORD_LABRUNS=1 go test ./handlers -run TestRecordLabRuns runs
// the probe against the fast and the slow emulator and keeps the folders,
// after checking that the slow runs are slower beyond doubt at every
// level (re-record on a quieter machine if they are not).
func TestRecordLabRuns(t *testing.T) {
	if os.Getenv("ACCORD_RECORD_LABRUNS") == "" {
		t.Skip("set ACCORD_RECORD_LABRUNS=1 to record testdata/labruns again")
	}
	cb := setupCharts(t)
	ctx := context.Background()
	p50 := map[string]map[string]float64{}
	for _, rr := range recordedLabRuns {
		version := cb.fastVersion
		if rr.slow {
			version = cb.slowVersion
		}
		runID, err := cb.store.CreateRun(ctx, store.NewRun{ProgramID: cb.programID, ProfileVersionID: version, HostID: cb.hostID, Emulated: true})
		require.NoError(t, err)
		pv, err := cb.store.GetSpecVersionByID(ctx, store.KindProfile, cb.programID, version)
		require.NoError(t, err)
		var profile acceptance.ProfileSpec
		require.NoError(t, json.Unmarshal(pv.Spec, &profile))
		dir := t.TempDir()
		cb.runProbe(t, dir, runID, profile, "")
		ms, _, err := ingest.ReadFolder(ingest.CollectionFiles(collectDir(t, dir)), profile, "record")
		require.NoError(t, err)
		p50[rr.name] = map[string]float64{}
		for _, m := range ms {
			if m.Metric == acceptance.MetricTTFT {
				s, err := stats.NewSample(m.Values, m.Counts)
				require.NoError(t, err)
				p50[rr.name][m.Level] = s.Quantile(0.5)
			}
		}
		out := filepath.Join("testdata", "labruns", rr.name)
		require.NoError(t, os.RemoveAll(out))
		require.NoError(t, os.CopyFS(out, os.DirFS(dir)))
	}
	for _, level := range []string{"c=1", "c=4"} {
		for _, local := range []string{"local-1", "local-2"} {
			require.Greater(t, p50["fabric-1"][level], 2*p50[local][level], "the slow emulator's p50 TTFT at %s is not clearly above %s's: record again on a quieter machine", level, local)
		}
	}
	t.Logf("p50 TTFT (ms): %v", p50)
}

// evaluate works the evaluate_run job the ingest enqueued for a run, with
// River as in production, and waits until the run is judged.
func (cb *chartsBundle) evaluate(t *testing.T, runID int64) {
	t.Helper()
	ctx := context.Background()
	if cb.workers == nil {
		deps := jobs.Deps{Log: cb.log, Store: cb.store, Keyring: cb.keyring, Version: "test", Report: web.RenderReport}
		client, err := river.NewClient(riverpgxv5.New(cb.pool), &river.Config{
			Logger: cb.log, Queues: map[string]river.QueueConfig{jobs.QueueReports: {MaxWorkers: 2}},
			Workers: jobs.Register(deps), FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond, TestOnly: true,
		})
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() {
			stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = client.StopAndCancel(stop)
		})
		cb.workers = client
	}
	require.Eventually(t, func() bool {
		run, err := cb.store.RunByID(ctx, runID)
		return err == nil && run.State == store.RunDone && run.Verdict != ""
	}, time.Minute, 50*time.Millisecond, "run %d is judged", runID)
}

// collectDir reads a run folder as sshrun.Collect delivers it.
func collectDir(t *testing.T, dir string) *sshrun.Collection {
	t.Helper()
	c := &sshrun.Collection{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		sum := sha256.Sum256(data)
		c.Files = append(c.Files, sshrun.File{Name: filepath.ToSlash(rel), Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Data: data})
		c.Bytes += int64(len(data))
		return nil
	}))
	sort.Slice(c.Files, func(i, j int) bool { return c.Files[i].Name < c.Files[j].Name })
	return c
}

// chartOption is the part of an ECharts option the tests read.
type chartOption struct {
	Series []struct {
		Name     string            `json:"name"`
		Type     string            `json:"type"`
		Color    string            `json:"color"`
		Data     []json.RawMessage `json:"data"`
		MarkLine *struct {
			Data []struct {
				Name  string   `json:"name"`
				XAxis *float64 `json:"xAxis"`
				YAxis *float64 `json:"yAxis"`
			} `json:"data"`
		} `json:"markLine"`
	} `json:"series"`
	XAxis []struct {
		Type string `json:"type"`
	} `json:"xAxis"`
}

// colour is the colour of the series named name.
func (o chartOption) colour(t *testing.T, name string) string {
	t.Helper()
	for _, s := range o.Series {
		if s.Name == name {
			return s.Color
		}
	}
	require.Failf(t, "no series", "%q among %v", name, o.names())
	return ""
}

func (o chartOption) names() []string {
	var out []string
	for _, s := range o.Series {
		out = append(out, s.Name)
	}
	return out
}

// pageCharts returns each chart's option on a page, by id, read from the
// JSON script elements templ.JSONScript writes.
func pageCharts(t *testing.T, body string) map[string]chartOption {
	t.Helper()
	out := map[string]chartOption{}
	re := regexp.MustCompile(`(?s)<script id="([^"]+)" type="application/json">(.*?)</script>`)
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		var o chartOption
		require.NoError(t, json.Unmarshal([]byte(m[2]), &o), "chart %s", m[1])
		out[m[1]] = o
		require.Contains(t, body, `data-chart="`+m[1]+`"`, "a drawing element for chart %s", m[1])
	}
	return out
}

// blockTable returns the rows of the data table beside a chart.
func blockTable(t *testing.T, body, id string) [][]string {
	t.Helper()
	start := strings.Index(body, `id="block-`+id+`"`)
	require.GreaterOrEqual(t, start, 0, "block of %s", id)
	rest := body[start:]
	end := strings.Index(rest, `</details>`)
	require.Greater(t, end, 0, "the data of %s", id)
	rest = rest[:end]
	var rows [][]string
	for _, tr := range regexp.MustCompile(`(?s)<tr>(.*?)</tr>`).FindAllStringSubmatch(rest, -1) {
		var cells []string
		for _, td := range regexp.MustCompile(`(?s)<t[dh][^>]*>(.*?)</t[dh]>`).FindAllStringSubmatch(tr[1], -1) {
			cells = append(cells, strings.TrimSpace(td[1]))
		}
		rows = append(rows, cells)
	}
	require.NotEmpty(t, rows, "table beside %s", id)
	return rows
}

// pooled is the exact nearest-rank statistic of a metric in a series, all
// repetitions pooled, from the stored samples.
func pooled(t *testing.T, st *store.Store, runID int64, metric, step, level string, q float64) float64 {
	t.Helper()
	ms, err := st.RunMeasurements(context.Background(), runID)
	require.NoError(t, err)
	var samples []stats.Sample
	for _, m := range ms {
		if m.Metric == metric && m.Step == step && m.Level == level {
			s, err := stats.NewSample(m.Values, m.Counts)
			require.NoError(t, err)
			samples = append(samples, s)
		}
	}
	require.NotEmpty(t, samples, "%s in %s %s", metric, step, level)
	return stats.Merge(samples...).Quantile(q)
}

// num4 formats as the charts' tables do: four significant digits, whole
// numbers from 1000 up.
func num4(v float64) string {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	if math.Abs(v) >= 1000 {
		r = math.Round(v)
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// A finished run shows, from the aggregates made at ingest, every chart
// with its table: the latency CDF with the baseline and the gate limit,
// percentile bars with intervals, TTFT over the run, the knee of the
// sweep, fio per job, throughput and telemetry.
func TestRunPageChartsFromIngest(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	base := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, label: "local NVMe", recorded: "local-1"})
	cand := cb.labRun(t, labRunOpts{profileVersion: cb.slowVersion, gates: true, baseline: &base, label: "NVMe-oF", recorded: "fabric-1"})

	res, body := cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/runs/%d", cand)))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `id="verdict"`, "the verdict panel")
	require.Contains(t, body, fmt.Sprintf(`/compare?run=%d&amp;run=%d`, cand, base), "the compare button")
	opts := pageCharts(t, body)
	for _, id := range []string{"chart-cdf-0", "chart-pct0-0", "chart-pct1-0", "chart-overrun-0", "chart-knee-0", "chart-fio-latency", "chart-fio-bandwidth", "chart-throughput", "chart-telemetry"} {
		require.Contains(t, opts, id)
	}

	// The CDF: TTFT and E2E of both runs, the gate's 50 ms limit, at the
	// sweep's worst level; its table's percentiles are exact.
	cdf := opts["chart-cdf-0"]
	candName, baseName := fmt.Sprintf("run #%d", cand), fmt.Sprintf("baseline run #%d", base)
	require.Equal(t, []string{"TTFT " + candName, "TTFT " + baseName, "E2E " + candName, "E2E " + baseName, "Gate limits", "Percentiles"}, cdf.names())
	require.Equal(t, "log", cdf.XAxis[0].Type)
	limits := cdf.Series[4].MarkLine.Data
	require.Len(t, limits, 1)
	require.Equal(t, 50.0, *limits[0].XAxis)
	require.Equal(t, "p99 TTFT ≤ 50 ms", limits[0].Name)
	// The sweep level shown is the one with the higher p99 TTFT.
	level := "c=4"
	p99 := pooled(t, cb.store, cand, acceptance.MetricTTFT, "chat", level, 0.99)
	if other := pooled(t, cb.store, cand, acceptance.MetricTTFT, "chat", "c=1", 0.99); other > p99 {
		level, p99 = "c=1", other
	}
	require.Contains(t, body, "Latency distribution, step chat at "+level)
	rows := blockTable(t, body, "chart-cdf-0")
	require.Equal(t, []string{"Series", "n", "min ms", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"}, rows[0])
	require.Equal(t, "TTFT "+candName, rows[1][0])
	require.Equal(t, num4(p99), rows[1][5], "the table's p99 is the exact p99 of every request")
	require.Equal(t, num4(pooled(t, cb.store, base, acceptance.MetricTTFT, "chat", level, 0.99)), rows[2][5])

	// Percentile bars: the difference is the exact relative difference;
	// the interval brackets it.
	pct := blockTable(t, body, "chart-pct0-0")
	require.Equal(t, "Percentile", pct[0][0])
	require.Equal(t, "p50", pct[1][0])
	c50 := pooled(t, cb.store, cand, acceptance.MetricTTFT, "chat", level, 0.5)
	b50 := pooled(t, cb.store, base, acceptance.MetricTTFT, "chat", level, 0.5)
	require.Greater(t, c50, b50, "the slower emulator's TTFT is higher")
	diff, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(strings.Fields(pct[1][3])[0], "+"), ""), 64)
	require.NoError(t, err, "difference %q", pct[1][3])
	require.InDelta(t, 100*(c50-b50)/b50, diff, 0.06)
	require.Regexp(t, `^[+−-]?[0-9.]+ % to [+−-]?[0-9.]+ %$`, pct[1][4], "an interval for p50")
	require.Equal(t, "–", pct[5][4], "p99.9 of a few hundred requests has no interval")

	// TTFT over the run: the scatter of every request and its p99 line.
	or := opts["chart-overrun-0"]
	require.Equal(t, "TTFT", or.Series[0].Name)
	require.Equal(t, "scatter", or.Series[0].Type)
	n := 0
	for _, lv := range []string{"c=1", "c=4"} {
		ms, err := cb.store.RunMeasurementSummaries(context.Background(), cand)
		require.NoError(t, err)
		for _, m := range ms {
			if m.Metric == acceptance.MetricTTFT && m.Level == lv {
				n += int(m.N)
			}
		}
	}
	require.Len(t, or.Series[0].Data, n, "every measured request is a dot (few enough to keep all)")
	require.Regexp(t, `^TTFT p99 per [0-9.]+ s$`, or.Series[1].Name)
	require.Contains(t, or.names(), "TTFT in warm-up (not measured)")
	require.Contains(t, or.names(), "Gate limits")
	require.NotEmpty(t, blockTable(t, body, "chart-overrun-0"))

	// The knee: both runs' levels, the gate's p99 limit as the SLO.
	knee := opts["chart-knee-0"]
	require.Equal(t, []string{candName, baseName, "Gate limits"}, knee.names())
	require.Len(t, knee.Series[0].Data, 2)
	kneeRows := blockTable(t, body, "chart-knee-0")
	require.Equal(t, []string{"Series", "Level", "Output tokens/s (tok/s)", "p99 TTFT (ms)", "Within SLO"}, kneeRows[0])
	require.Equal(t, "c=1", kneeRows[1][1])

	// fio: the job's read latency percentiles and bandwidth.
	fio := blockTable(t, body, "chart-fio-bandwidth")
	require.Equal(t, "kv-read", fio[1][0])
	require.Equal(t, "read", fio[1][1])
	require.Contains(t, opts["chart-fio-latency"].names(), "p99")

	// Throughput and telemetry per second.
	require.Equal(t, []string{"Output tokens/s", "Requests/s"}, opts["chart-throughput"].names())
	require.Contains(t, opts["chart-telemetry"].names(), "CPU busy")
	require.Contains(t, opts["chart-telemetry"].names(), "NIC receive")
	require.Contains(t, body, `class="chart tall"`, "percentile bars are tall")

	// The page reads aggregates only: with the raw samples gone, the
	// charts are the same bytes.
	scripts := func() string {
		_, body := cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/runs/%d", cand)))
		var b strings.Builder
		for _, m := range regexp.MustCompile(`(?s)<script id="chart-[^"]+" type="application/json">.*?</script>`).FindAllString(body, -1) {
			b.WriteString(m)
		}
		return b.String()
	}
	before := scripts()
	require.NotEmpty(t, before)
	_, err = cb.pool.Exec(context.Background(), `UPDATE measurements SET values_f64 = '\x'::bytea, counts = NULL WHERE run_id IN ($1, $2)`, cand, base)
	require.NoError(t, err)
	require.Equal(t, before, scripts())
}

// A run without results (queued) shows no charts, and no error.
func TestRunPageWithoutAggregates(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	id, err := cb.store.CreateRun(context.Background(), store.NewRun{ProgramID: cb.programID, ProfileVersionID: cb.fastVersion, HostID: cb.hostID})
	require.NoError(t, err)
	res, body := cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/runs/%d", id)))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Empty(t, pageCharts(t, body))
}

// Three runs side by side: deltas against the earliest with the gate
// engine's intervals, the slower run flagged worse, overlaid CDFs, the
// host facts diff; another program's run is 404 and the count is checked.
func TestComparePageThreeRuns(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	// Recorded runs: which is slower is a fact of the data, not of how busy
	// the machine is while the test runs.
	a := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, label: "local", recorded: "local-1"})
	b := cb.labRun(t, labRunOpts{profileVersion: cb.slowVersion, label: "fabric", baseline: &a, gates: true, recorded: "fabric-1"})
	c := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, label: "local again", recorded: "local-2", editFacts: func(f map[string]any) {
		f["kernel"].(map[string]any)["release"].(map[string]any)["value"] = "6.99.0-upgraded"
	}})

	path := cb.url(fmt.Sprintf("/compare?run=%d&run=%d&run=%d", b, a, c))
	res, body := cb.get(t, cb.viewer, path)
	require.Equal(t, http.StatusOK, res.StatusCode)
	table := tableRows(t, body, "compare-table")
	require.Len(t, table[0], 4, "a column per run")
	require.Contains(t, table[0][1], fmt.Sprintf("run #%d", b))
	require.Contains(t, table[0][2], "★", "the earliest run is the reference")
	// p50 TTFT row: the reference's value alone; the others with a delta
	// and an interval.
	p50 := table[1]
	require.Contains(t, p50[0], "p50 TTFT")
	require.Regexp(t, `%`, p50[1])
	require.Regexp(t, `[+−-][0-9.]+ % to [+−-][0-9.]+ %`, p50[1], "an interval")
	require.NotContains(t, p50[2], "%", "the reference has no delta")
	require.Contains(t, body, `class="delta worse"`, "the fabric run is worse than local beyond doubt")
	// The delta is the relative difference of the histograms' p50 (within
	// their 0.1 % buckets) at the reference's worst level.
	level := "c=4"
	if pooled(t, cb.store, a, acceptance.MetricTTFT, "chat", "c=1", 0.99) > pooled(t, cb.store, a, acceptance.MetricTTFT, "chat", "c=4", 0.99) {
		level = "c=1"
	}
	require.Contains(t, body, "Differences, chat at "+level)
	cp := pooled(t, cb.store, b, acceptance.MetricTTFT, "chat", level, 0.5)
	ap := pooled(t, cb.store, a, acceptance.MetricTTFT, "chat", level, 0.5)
	m := regexp.MustCompile(`([+-][0-9.]+) %`).FindStringSubmatch(p50[1])
	require.NotNil(t, m)
	got, _ := strconv.ParseFloat(m[1], 64)
	// Each p50 is within HistogramRelativeError of the exact one, so the
	// ratio is within about twice that, relative to the ratio itself (a
	// 4.5× slower run can be off by 0.9 points); plus half a unit of the
	// three significant digits shown.
	e := stats.HistogramRelativeError
	ratio := cp / ap
	shown := 0.5 * math.Pow(10, math.Floor(math.Log10(math.Abs(got)))-2)
	require.InDelta(t, 100*(ratio-1), got, 100*ratio*((1+e)/(1-e)-1)+shown)
	for _, row := range table[1:] {
		if strings.Contains(row[0], "Output token throughput") {
			require.Contains(t, row[1], "no interval", "one repetition a side gives a rate no interval")
		}
	}

	charts := pageCharts(t, body)
	require.Contains(t, charts, "chart-compare-cdf-0")
	require.Len(t, charts["chart-compare-cdf-0"].Series, 4, "three runs and the percentile guides")
	require.Contains(t, body, "TTFT distribution of each run, chat at "+level)

	facts := tableRows(t, body, "facts-diff")
	require.Equal(t, "kernel", facts[1][0])
	require.Equal(t, "6.99.0-upgraded", facts[1][3])
	require.NotEqual(t, facts[1][1], facts[1][3])

	// Another series, another reference.
	res, body = cb.get(t, cb.viewer, path+"&series=kv-read%7C&ref="+strconv.FormatInt(c, 10))
	require.Equal(t, http.StatusOK, res.StatusCode)
	table = tableRows(t, body, "compare-table")
	require.Contains(t, table[0][3], "★")
	require.Contains(t, table[1][0], "p50 read clat")

	// The count is checked; another program's run is not found.
	res, body = cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/compare?run=%d", a)))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, fmt.Sprintf("Choose at least one more run to compare run #%d with.", a))
	require.Regexp(t, fmt.Sprintf(`id="choose-%d" checked`, a), body)
	many := url.Values{}
	for _, id := range []int64{a, b, c} {
		many.Add("run", strconv.FormatInt(id, 10))
	}
	for range 4 {
		id, err := cb.store.CreateRun(context.Background(), store.NewRun{ProgramID: cb.programID, ProfileVersionID: cb.fastVersion, HostID: cb.hostID})
		require.NoError(t, err)
		many.Add("run", strconv.FormatInt(id, 10))
	}
	res, body = cb.get(t, cb.viewer, cb.url("/compare?"+many.Encode()))
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, body, "Choose 2 to 6 runs of this program (7 chosen).")
	otherRun, _ := cb.otherProgramRun(t)
	res, _ = cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/compare?run=%d&run=%d", a, otherRun)))
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	res, _ = cb.get(t, cb.viewer, cb.url("/compare?run=x"))
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	// The form lists finished runs.
	res, body = cb.get(t, cb.viewer, cb.url("/compare"))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, fmt.Sprintf(`id="choose-%d"`, c))
}

// tableRows reads a table by id: its header row, then its body rows, each
// cell's text.
func tableRows(t *testing.T, body, id string) [][]string {
	t.Helper()
	start := strings.Index(body, `id="`+id+`"`)
	require.GreaterOrEqual(t, start, 0, "table %s", id)
	rest := body[start:]
	rest = rest[:strings.Index(rest, "</table>")]
	tags := regexp.MustCompile(`<[^>]+>`)
	var rows [][]string
	for _, tr := range regexp.MustCompile(`(?s)<tr[^>]*>(.*?)</tr>`).FindAllStringSubmatch(rest, -1) {
		var cells []string
		for _, td := range regexp.MustCompile(`(?s)<t[dh][^>]*>(.*?)</t[dh]>`).FindAllStringSubmatch(tr[1], -1) {
			cells = append(cells, strings.Join(strings.Fields(tags.ReplaceAllString(td[1], " ")), " "))
		}
		rows = append(rows, cells)
	}
	return rows
}

// The trend follows the profile's runs per host over time, with the gate's
// limit, and marks the run whose host facts changed.
func TestTrendPage(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	a := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, gates: true})
	b := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, gates: true, editFacts: func(f map[string]any) {
		f["kernel"].(map[string]any)["release"].(map[string]any)["value"] = "6.99.0-upgraded"
	}})

	res, body := cb.get(t, cb.viewer, cb.url("/trend"))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `id="choose-profile"`)

	res, body = cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/trend?profile=%d", cb.profileID)))
	require.Equal(t, http.StatusOK, res.StatusCode)
	charts := pageCharts(t, body)
	require.Contains(t, charts, "chart-trend-0")
	first := charts["chart-trend-0"]
	require.Equal(t, []string{"gpu-lab-1", "Gate limits"}, first.names(), "a line per host and the gate's limit")
	require.Len(t, first.Series[0].Data, 2, "a point per run")
	require.Equal(t, 50.0, *first.Series[1].MarkLine.Data[0].YAxis)
	require.Contains(t, body, "p99 TTFT, chat at c=4")
	rows := blockTable(t, body, "chart-trend-0")
	require.Equal(t, []string{"Host", "Run", "Time", "p99 TTFT (ms)", "Note"}, rows[0])
	require.Equal(t, fmt.Sprintf("run #%d", a), rows[1][1])
	require.Equal(t, num4(pooled(t, cb.store, a, acceptance.MetricTTFT, "chat", "c=4", 0.99)), rows[1][3])
	require.Contains(t, rows[2][4], "changed: kernel", "the kernel change is noted on the run after it")
	changes := tableRows(t, body, "fact-changes")
	require.Contains(t, changes[1][1], fmt.Sprint(b))
	require.Contains(t, changes[1][3], "6.99.0-upgraded")

	// One metric, one statistic.
	res, body = cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/trend?profile=%d&metric=read_iops&statistic=rate", cb.profileID)))
	require.Equal(t, http.StatusOK, res.StatusCode)
	charts = pageCharts(t, body)
	require.Len(t, charts, 1)
	require.Contains(t, body, "Read IOPS, kv-read")
	// Another program's profile is not found.
	_, otherProfile := cb.otherProgramRun(t)
	res, _ = cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/trend?profile=%d", otherProfile)))
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

// otherProgramRun makes a finished run in another program; it returns the
// run and its profile.
func (cb *chartsBundle) otherProgramRun(t *testing.T) (int64, int64) {
	t.Helper()
	ctx := context.Background()
	org := cb.createOrg(t, "Elsewhere", "vendor")
	org2 := cb.createOrg(t, "Elsewhere customer", "customer")
	pid, err := cb.store.CreateProgram(ctx, "Other", "", org, org2, nil)
	require.NoError(t, err)
	host, err := cb.store.CreateHost(ctx, pid, store.NewHost{Name: "lab", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	p := chartProfile("http://127.0.0.1:1/v1", filepath.Join(cb.work, "x"))
	canon, err := acceptance.ProfileCanonicalJSON(p)
	require.NoError(t, err)
	digest, err := acceptance.ProfileDigest(p)
	require.NoError(t, err)
	sp, v, err := cb.store.CreateSpec(ctx, store.KindProfile, pid, store.NewSpecVersion{Name: p.Name, Spec: canon, Digest: digest})
	require.NoError(t, err)
	run, err := cb.store.CreateRun(ctx, store.NewRun{ProgramID: pid, ProfileVersionID: v.ID, HostID: host})
	require.NoError(t, err)
	require.NoError(t, cb.store.SetRunState(ctx, run, store.RunDone, "test"))
	return run, sp.ID
}

// The candidate and the baseline have one colour each, wherever they are
// drawn: the run page's charts, the compare page's (where the reference is
// the baseline) and the signed report's SVG figures.
func TestOnePaletteOnRunCompareAndReport(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	ctx := context.Background()
	base := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, label: "local NVMe", recorded: "local-1"})
	cand := cb.labRun(t, labRunOpts{profileVersion: cb.slowVersion, gates: true, baseline: &base, label: "NVMe-oF", recorded: "fabric-1"})
	third := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, label: "again", recorded: "local-2"})
	candName, baseName := fmt.Sprintf("run #%d", cand), fmt.Sprintf("run #%d", base)

	// The run page: candidate blue, baseline grey, on every chart.
	_, body := cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/runs/%d", cand)))
	opts := pageCharts(t, body)
	cdf := opts["chart-cdf-0"]
	require.Equal(t, palette.CandidateColour, cdf.colour(t, "TTFT "+candName))
	require.Equal(t, palette.BaselineColour, cdf.colour(t, "TTFT baseline "+baseName))
	require.Equal(t, palette.CandidateColour, opts["chart-pct0-0"].colour(t, candName))
	require.Equal(t, palette.BaselineColour, opts["chart-pct0-0"].colour(t, "baseline "+baseName))
	require.Equal(t, palette.CandidateColour, opts["chart-knee-0"].colour(t, candName))
	require.Equal(t, palette.BaselineColour, opts["chart-knee-0"].colour(t, "baseline "+baseName))

	// The compare page: the reference (the earliest, the baseline) grey,
	// the candidate blue, a third run neither.
	_, body = cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/compare?run=%d&run=%d&run=%d", cand, base, third)))
	cmp := pageCharts(t, body)["chart-compare-cdf-0"]
	require.Equal(t, palette.BaselineColour, cmp.colour(t, baseName+" local NVMe (reference)"))
	require.Equal(t, palette.CandidateColour, cmp.colour(t, candName+" NVMe-oF"))
	other := cmp.colour(t, fmt.Sprintf("run #%d again", third))
	require.Equal(t, palette.Others[0], other)
	require.NotContains(t, []string{palette.CandidateColour, palette.BaselineColour, palette.LimitColour}, other)

	// The signed report's figures.
	require.Eventually(t, func() bool {
		_, err := cb.store.RunLatestReport(ctx, cand)
		return err == nil
	}, time.Minute, 100*time.Millisecond, "run %d is signed", cand)
	report := string(fileOf(t, cb.download(t, cb.viewer, cb.url(fmt.Sprintf("/runs/%d/report.tar.gz", cand))), "report.html"))
	doc := htmltest.Parse(t, report)
	stroke := func(series string) string {
		lines := htmltest.All(doc, func(n *html.Node) bool {
			return n.Data == "polyline" && htmltest.Attr(n, "data-series") == series
		})
		require.NotEmpty(t, lines, "a line for %s in the report", series)
		return htmltest.Attr(lines[0], "stroke")
	}
	require.Equal(t, palette.CandidateColour, stroke("TTFT "+candName))
	require.Equal(t, palette.BaselineColour, stroke(fmt.Sprintf("TTFT baseline #%d", base)))
	fill := func(series string) string {
		bars := htmltest.All(doc, func(n *html.Node) bool { return n.Data == "rect" && htmltest.Attr(n, "data-series") == series })
		require.NotEmpty(t, bars, "bars of %s in the report", series)
		return htmltest.Attr(bars[0], "fill")
	}
	require.Equal(t, palette.CandidateColour, fill(candName))
	require.Equal(t, palette.BaselineColour, fill(fmt.Sprintf("baseline #%d", base)))
}

// A baseline that did not run the candidate's worst level: the charts of
// that level say there are no baseline figures and why, rather than
// showing empty panels; the percentile chart says it in its empty panel.
func TestRunPageSaysWhenTheBaselineHasNoFigures(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	base := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, label: "local NVMe", recorded: "local-1", editFolder: func(dir string) {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "out", "01-chat", "rep-1", "c=1")))
	}})
	cand := cb.labRun(t, labRunOpts{profileVersion: cb.slowVersion, gates: true, baseline: &base, label: "NVMe-oF", recorded: "fabric-1"})
	// The recording's worst level (the highest p99 TTFT) is c=1.
	require.Greater(t, pooled(t, cb.store, cand, acceptance.MetricTTFT, "chat", "c=1", 0.99), pooled(t, cb.store, cand, acceptance.MetricTTFT, "chat", "c=4", 0.99))

	_, body := cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/runs/%d", cand)))
	doc := htmltest.Parse(t, body)
	why := fmt.Sprintf("baseline run #%d did not measure step chat at c=1 (its levels: c=4).", base)
	require.Equal(t, "No baseline figures for TTFT, chat at c=1: "+why, htmltest.Text(htmltest.ByID(doc, "note-chart-cdf-0")))
	require.Equal(t, "No baseline figures for TTFT, chat at c=1: "+why, htmltest.Text(htmltest.ByID(doc, "note-chart-pct0-0")))
	require.Equal(t, "No baseline figures for E2E, chat at c=1: "+why, htmltest.Text(htmltest.ByID(doc, "note-chart-pct1-0")))
	opts := pageCharts(t, body)
	require.Equal(t, []string{"TTFT " + fmt.Sprintf("run #%d", cand), "E2E " + fmt.Sprintf("run #%d", cand), "Gate limits", "Percentiles"}, opts["chart-cdf-0"].names(), "no baseline curve")
	var pct struct {
		Graphic []struct {
			Style struct {
				Text string `json:"text"`
			} `json:"style"`
		} `json:"graphic"`
	}
	raw := regexp.MustCompile(`(?s)<script id="chart-pct0-0" type="application/json">(.*?)</script>`).FindStringSubmatch(body)
	require.NotNil(t, raw)
	require.NoError(t, json.Unmarshal([]byte(raw[1]), &pct))
	require.Len(t, pct.Graphic, 1)
	require.Equal(t, "No baseline figures for this step and metric: "+strings.TrimSuffix(why, "."), pct.Graphic[0].Style.Text, "the empty panel says it")
	// The knee has the baseline's one level: drawn, without a note.
	require.Nil(t, htmltest.ByID(doc, "note-chart-knee-0"))
	require.Equal(t, 2, len(opts["chart-knee-0"].names())-1, "the run and the baseline, and the limits")

	// A run whose baseline has every figure has no note.
	full := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, recorded: "local-2"})
	other := cb.labRun(t, labRunOpts{profileVersion: cb.slowVersion, baseline: &full, recorded: "fabric-1"})
	_, body = cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/runs/%d", other)))
	require.NotContains(t, body, "chart-note")
}

// The percentile table leads with every repetition pooled (the figures the
// gate engine judges), each of the run's rows followed by its baseline's;
// the per-repetition rows are folded away below; a metric whose every
// figure is another's (TTFT to the first content token, when no response
// reasons first) is shown once and named.
func TestRunPagePooledAndBaselineFiguresFirst(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	base := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, label: "local NVMe", recorded: "local-1"})
	cand := cb.labRun(t, labRunOpts{profileVersion: cb.slowVersion, gates: true, baseline: &base, label: "NVMe-oF", recorded: "fabric-1"})
	_, body := cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/runs/%d", cand)))
	doc := htmltest.Parse(t, body)

	pooledTable := htmltest.ByID(doc, "percentiles-pooled")
	require.NotNil(t, pooledTable)
	perRep := htmltest.ByID(doc, "per-repetition")
	require.Equal(t, "details", perRep.Data)
	require.Empty(t, htmltest.Attr(perRep, "open"), "the repetitions are folded away")
	require.NotNil(t, htmltest.ByID(perRep, "percentiles"), "the per-repetition table is inside")
	require.Less(t, strings.Index(body, `id="percentiles-pooled"`), strings.Index(body, `id="per-repetition"`))

	rows := htmltest.Rows(pooledTable)
	require.Equal(t, []string{"Metric", "Step", "Run", "Reps", "n", "p50", "p90", "p95", "p99", "p99.9", "max", "mean"}, rows[0])
	find := func(metricPrefix, series, who string) []string {
		t.Helper()
		metric := ""
		for _, r := range rows[1:] {
			if r[0] != "" {
				metric = r[0]
			}
			if strings.HasPrefix(metric, metricPrefix) && r[1] == series && r[2] == who {
				return r
			}
		}
		require.Failf(t, "no row", "%s %s %s", metricPrefix, series, who)
		return nil
	}
	for _, lv := range []string{"c=1", "c=4"} {
		run := find("Time to first token", "chat "+lv, "this run")
		require.Equal(t, web.Num(pooled(t, cb.store, cand, acceptance.MetricTTFT, "chat", lv, 0.99)), run[8], "the run's pooled p99 at %s", lv)
		baseRow := find("Time to first token", "chat "+lv, fmt.Sprintf("baseline run #%d", base))
		require.Equal(t, web.Num(pooled(t, cb.store, base, acceptance.MetricTTFT, "chat", lv, 0.99)), baseRow[8], "the baseline's pooled p99 at %s", lv)
	}
	// The baseline's row comes right after the run's.
	for i, r := range rows[1:] {
		if r[2] == "this run" {
			require.Equal(t, fmt.Sprintf("baseline run #%d", base), rows[i+2][2], "row %d: %v", i+1, r)
		}
	}

	// TTFT to the first content token has TTFT's figures in every
	// repetition of both runs here: shown once, named.
	ms, err := cb.store.RunMeasurementSummaries(context.Background(), cand)
	require.NoError(t, err)
	figs := map[string]store.Summary{}
	for _, m := range ms {
		figs[m.Metric+m.Level] = m.Summary
	}
	for _, lv := range []string{"c=1", "c=4"} {
		require.Equal(t, figs[acceptance.MetricTTFT+lv].P99, figs[acceptance.MetricTTFTContent+lv].P99, "no response reasons first in the recording")
	}
	require.Contains(t, find("Time to first token", "chat c=1", "this run")[0], "same figures: Time to first content token")
	require.NotContains(t, htmltest.Text(pooledTable), "Time to first content token ms")
	require.NotContains(t, htmltest.Text(htmltest.ByID(perRep, "percentiles")), "Time to first content token ms")
	// Rates stay apart even where equal (goodput and request throughput,
	// every request within the SLO).
	require.Equal(t, find("Request throughput", "chat c=1", "this run")[5], find("Goodput", "chat c=1", "this run")[5])
}

// Pages name metrics by their catalog labels: no id such as
// output_token_throughput in what a page says (its YAML and code aside)
// where the catalog has a label, on a lab run's page, an imported run's
// page (its import report), the compare page and the gate set's form and
// page.
func TestPagesNameMetricsByTheirLabels(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	ctx := context.Background()
	base := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, label: "local NVMe", recorded: "local-1"})
	cand := cb.labRun(t, labRunOpts{profileVersion: cb.slowVersion, gates: true, baseline: &base, label: "NVMe-oF", recorded: "fabric-1"})
	vllm, err := os.ReadFile("../runners/parse/testdata/vllm-bench-serve-detailed.json")
	require.NoError(t, err)
	res, _ := cb.postMultipart(t, cb.engineer, cb.url("/runs/import/result"), map[string]string{"profile_version": strconv.FormatInt(cb.fastVersion, 10), "step": "chat"},
		map[string][]byte{"file": vllm})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	var imported int64
	require.NoError(t, cb.pool.QueryRow(ctx, `SELECT id FROM runs WHERE kind = 'imported' AND program_id = $1`, cb.programID).Scan(&imported))
	gv, err := cb.store.GetSpecVersionByID(ctx, store.KindGateSet, cb.programID, cb.gateVersion)
	require.NoError(t, err)
	gateSet := gv.SpecID

	var ids []string
	for _, m := range acceptance.Metrics() {
		if strings.Contains(m.ID, "_") && m.Name != m.ID {
			ids = append(ids, m.ID)
		}
	}
	rawID := regexp.MustCompile(`\b(` + strings.Join(ids, "|") + `)\b`)
	for _, path := range []string{
		fmt.Sprintf("/runs/%d", cand), fmt.Sprintf("/runs/%d", imported),
		fmt.Sprintf("/compare?run=%d&run=%d", base, cand),
		fmt.Sprintf("/gatesets/%d", gateSet), fmt.Sprintf("/gatesets/%d/edit", gateSet),
	} {
		res, body := cb.get(t, cb.engineer, cb.url(path))
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		prose := htmltest.ProseText(htmltest.Parse(t, body))
		for _, m := range rawID.FindAllStringIndex(prose, 5) {
			t.Errorf("%s names a metric by its id: …%s…", path, prose[max(0, m[0]-80):min(len(prose), m[1]+40)])
		}
	}

	// The import report says what each field became, by label.
	_, body := cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/runs/%d", imported)))
	read := htmltest.Rows(htmltest.ByID(htmltest.Parse(t, body), "import-read"))
	var metrics []string
	for _, r := range read[1:] {
		metrics = append(metrics, r[1])
	}
	require.Contains(t, metrics, "Output token throughput")
	require.Contains(t, metrics, "Time to first token")
	// The gate set's form offers metrics by label; the value is the id.
	_, body = cb.get(t, cb.engineer, cb.url(fmt.Sprintf("/gatesets/%d/edit", gateSet)))
	opt := htmltest.All(htmltest.Parse(t, body), func(n *html.Node) bool {
		return n.Data == "option" && htmltest.Attr(n, "value") == acceptance.MetricOutputTokenThroughput
	})
	require.NotEmpty(t, opt)
	require.Equal(t, "Output token throughput", htmltest.Text(opt[0]))
}
