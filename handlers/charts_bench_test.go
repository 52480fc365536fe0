package handlers

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/service/ingest"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
	"github.com/accordlab/accord/web"
)

// BenchmarkRunPageMillion times the run page of a finished run of one
// million requests (30 minutes at about 555 requests/s, TTFT and E2E per
// request, an ITL histogram, per-second telemetry) with a baseline of one
// million requests and a gate set, through the whole server (router,
// session, authorization, queries, chart options, HTML, gzip) over
// loopback. The runs are ingested as the execute_run worker does
// (service/ingest: the chart data computed before the ingest
// transaction); the figures:
//
//	median-ms          median of 21 page loads after the timed loop (wall clock)
//	cpu-ms/page        the process's CPU time over those loads, per load (server
//	                   and client: what the page costs whatever else runs)
//	page-KiB           the page's size before compression
//	ingest-charts-s    ingest.Charts of the candidate (one million records)
//	compare-median-ms  the compare page of the two runs (intervals per view)
func BenchmarkRunPageMillion(b *testing.B) { runPageBench(b, 1_000_000) }

// BenchmarkRunPageTenMillion is BenchmarkRunPageMillion with runs of ten
// million requests, whose samples the server keeps in segments
// (stats.InMemoryLimit): the page reads the same precomputed summaries
// and chart data, so its time should not grow with the run.
func BenchmarkRunPageTenMillion(b *testing.B) { runPageBench(b, 10_000_000) }

func runPageBench(b *testing.B, n int) {
	bb := setupChartBench(b)
	ctx := context.Background()
	base, _ := bb.ingestMillion(b, mrand.New(mrand.NewPCG(1, 2)), n, 420, nil, "local NVMe")
	cand, precompute := bb.ingestMillion(b, mrand.New(mrand.NewPCG(3, 4)), n, 450, &base, "NVMe-oF")
	run, err := bb.store.RunByID(ctx, cand)
	require.NoError(b, err)
	require.Equal(b, store.RunDone, run.State)
	require.NotEmpty(b, run.Verdict)

	page := bb.url(fmt.Sprintf("/runs/%d", cand))
	body := bb.getPage(b, page)
	for _, id := range []string{"chart-cdf-0", "chart-pct0-0", "chart-overrun-0", "chart-throughput", "chart-telemetry"} {
		require.Contains(b, body, `<script id="`+id+`" type="application/json">`)
	}
	require.Contains(b, body, `id="verdict"`)
	for _, m := range regexp.MustCompile(`(?s)<script id="([^"]+)" type="application/json">(.*?)</script>`).FindAllStringSubmatch(body, -1) {
		b.Logf("chart %s: %d KiB of option", m[1], len(m[2])/1024)
	}

	b.ReportAllocs()
	for b.Loop() {
		bb.getPage(b, page)
	}
	b.StopTimer()
	cpu0 := processCPU()
	b.ReportMetric(bb.median(b, page, 21), "median-ms")
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/21/1000, "cpu-ms/page")
	b.ReportMetric(float64(len(body))/1024, "page-KiB")
	b.ReportMetric(precompute.Seconds(), "ingest-charts-s")
	b.ReportMetric(bb.median(b, bb.url(fmt.Sprintf("/compare?run=%d&run=%d", cand, base)), 5), "compare-median-ms")
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type chartBench struct {
	store     *store.Store
	server    *Server
	ts        *httptest.Server
	client    *http.Client
	programID int64
	hostID    int64
	profile   int64
	gates     int64
	workers   *river.Client[pgx.Tx]
	keyring   *attest.Keyring
}

func (bb *chartBench) url(rest string) string {
	return fmt.Sprintf("/programs/%d%s", bb.programID, rest)
}

// setupChartBench is a server on a fresh database with a program, an
// engineer signed in, a host, a profile and a gate set.
func setupChartBench(b *testing.B) *chartBench {
	b.Helper()
	ctx := context.Background()
	pool := storetest.NewPool(b)
	st := store.New(pool)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	keys, err := auth.NewKeys(secret)
	require.NoError(b, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	keyring, err := attest.OpenKeyring(b.TempDir(), attest.KeyringOptions{})
	require.NoError(b, err)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger: log, Queues: map[string]river.QueueConfig{jobs.QueueReports: {MaxWorkers: 2}},
		Workers: jobs.Register(jobs.Deps{Log: log, Store: st, Keyring: keyring, Version: "bench", Report: web.RenderReport}), FetchPollInterval: 100 * time.Millisecond, TestOnly: true,
	})
	require.NoError(b, err)
	require.NoError(b, rc.Start(ctx))
	b.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rc.StopAndCancel(stop)
	})
	bb := &chartBench{store: st, workers: rc, keyring: keyring}
	bb.ts = httptest.NewUnstartedServer(nil)
	bb.ts.Start()
	base, _ := url.Parse(bb.ts.URL)
	bb.server = New(Options{Log: log, Pool: pool, Store: st, Keys: keys, BaseURL: base, Registry: prometheus.NewRegistry(), River: rc, Keyring: keyring})
	bb.ts.Config.Handler = bb.server
	b.Cleanup(bb.server.Close)
	b.Cleanup(bb.ts.Close)

	vendor, err := st.CreateOrganization(ctx, "Vendor", "vendor")
	require.NoError(b, err)
	customer, err := st.CreateOrganization(ctx, "Customer", "customer")
	require.NoError(b, err)
	bb.programID, err = st.CreateProgram(ctx, "Program", "", vendor, customer, nil)
	require.NoError(b, err)
	uid, err := st.CreateUser(ctx, store.NewUser{Email: "eng@vendor.example", DisplayName: "eng", PasswordHash: passwordHash, OrganizationID: &vendor})
	require.NoError(b, err)
	_, err = st.SetMember(ctx, bb.programID, uid, store.RoleEngineer)
	require.NoError(b, err)
	jar, _ := cookiejar.New(nil)
	bb.client = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"email": {"eng@vendor.example"}, "password": {testPassword}}
	req, _ := http.NewRequest(http.MethodPost, bb.ts.URL+"/signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := bb.client.Do(req)
	require.NoError(b, err)
	res.Body.Close()
	require.Equal(b, http.StatusSeeOther, res.StatusCode)

	bb.hostID, err = st.CreateHost(ctx, bb.programID, store.NewHost{Name: "gpu-a", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(b, err)
	profile := acceptance.ProfileSpec{SchemaVersion: 1, Name: "online TTFT", Purpose: acceptance.PurposeInferenceServing,
		Storage: acceptance.Storage{Transport: acceptance.TransportNVMeoFRDMA}, Repetitions: 1,
		Steps: []acceptance.StepSpec{{Name: "serve", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{
			Endpoint: "http://10.0.0.5:8000/v1", Model: "llama", API: "chat",
			PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 512}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 128},
			Load: acceptance.Load{Mode: "concurrency", Concurrency: 256}, Duration: acceptance.Duration(30 * time.Minute), SLO: acceptance.SLO{TTFTMs: 2000},
		}}}}.Normalized()
	canon, err := acceptance.ProfileCanonicalJSON(profile)
	require.NoError(b, err)
	digest, err := acceptance.ProfileDigest(profile)
	require.NoError(b, err)
	_, pv, err := st.CreateSpec(ctx, store.KindProfile, bb.programID, store.NewSpecVersion{Name: profile.Name, Spec: canon, Digest: digest})
	require.NoError(b, err)
	bb.profile = pv.ID
	gates := acceptance.GateSetSpec{SchemaVersion: 1, Name: "serving gates", Criteria: []acceptance.Criterion{
		{Name: "ttft-p99", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Absolute, Comparator: acceptance.LessOrEqual, Threshold: 2000, Unit: "ms", Severity: acceptance.Blocking},
		{Name: "ttft-p99-vs-local", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99, Mode: acceptance.Relative, Comparator: acceptance.LessOrEqual, Threshold: 10, Unit: "%", Severity: acceptance.Blocking},
		{Name: "e2e-p99", Metric: acceptance.MetricE2EL, Statistic: acceptance.StatP99, Mode: acceptance.Absolute, Comparator: acceptance.LessOrEqual, Threshold: 8, Unit: "s", Severity: acceptance.Advisory},
	}}.Normalized()
	require.Empty(b, acceptance.ValidateGateSet(gates))
	gcanon, err := acceptance.GateSetCanonicalJSON(gates)
	require.NoError(b, err)
	gdigest, err := acceptance.GateSetDigest(gates)
	require.NoError(b, err)
	_, gv, err := st.CreateSpec(ctx, store.KindGateSet, bb.programID, store.NewSpecVersion{Name: gates.Name, Spec: gcanon, Digest: gdigest})
	require.NoError(b, err)
	bb.gates = gv.ID
	return bb
}

func (bb *chartBench) getPage(b *testing.B, path string) string {
	req, _ := http.NewRequest(http.MethodGet, bb.ts.URL+path, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	res, err := bb.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d", path, res.StatusCode)
	}
	if res.Header.Get("Content-Encoding") == "" {
		return string(body)
	}
	// The transport did not decompress (Accept-Encoding was set by hand):
	// fetch once more for the text.
	res, err = bb.client.Get(bb.ts.URL + path)
	if err != nil {
		b.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	return string(body)
}

// median times n loads of a page, in milliseconds.
func (bb *chartBench) median(b *testing.B, path string, n int) float64 {
	var ms []float64
	for range n {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, bb.ts.URL+path, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		res, err := bb.client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d", path, res.StatusCode)
		}
		ms = append(ms, float64(time.Since(start).Microseconds())/1000)
	}
	slices.Sort(ms)
	return ms[len(ms)/2]
}

// ingestMillion writes a run folder of n requests and ingests it; it
// returns the run and how long the chart aggregates took.
func (bb *chartBench) ingestMillion(b *testing.B, r *mrand.Rand, n int, ttftMs float64, baseline *int64, label string) (int64, time.Duration) {
	b.Helper()
	ctx := context.Background()
	nr := store.NewRun{ProgramID: bb.programID, ProfileVersionID: bb.profile, HostID: bb.hostID, BaselineRunID: baseline, Label: label}
	if baseline != nil {
		nr.GateSetVersionID = &bb.gates
	}
	runID, err := bb.store.CreateRun(ctx, nr)
	require.NoError(b, err)
	pv, err := bb.store.GetSpecVersionByID(ctx, store.KindProfile, bb.programID, bb.profile)
	require.NoError(b, err)
	var profile acceptance.ProfileSpec
	require.NoError(b, json.Unmarshal(pv.Spec, &profile))
	coll := millionRunFolder(b, r, n, ttftMs)
	require.NoError(b, bb.store.SetRunState(ctx, runID, store.RunRunning, "bench"))
	res := ingest.Results{Files: coll, HostID: &bb.hostID}
	res.Measurements, res.Warnings, err = ingest.ReadFolder(ingest.CollectionFiles(coll), profile, "bench")
	require.NoError(b, err)
	defer ingest.Release(res.Measurements)
	start := time.Now()
	res.Charts, err = ingest.Charts(ctx, bb.store, profile, baseline, res)
	require.NoError(b, err)
	took := time.Since(start)
	run, err := bb.store.RunByID(ctx, runID)
	require.NoError(b, err)
	env := rollout.Env{Keyring: bb.keyring, Queue: jobs.NewQueue(bb.workers)}
	require.NoError(b, bb.store.InTx(ctx, func(tx *store.Store) error {
		return ingest.Save(ctx, tx, env, run, res, ingest.Outcome{State: store.RunEvaluating, Reason: "judging"})
	}))
	if baseline == nil {
		return runID, took
	}
	require.Eventually(b, func() bool {
		run, err := bb.store.RunByID(ctx, runID)
		return err == nil && run.State == store.RunDone && run.Verdict != ""
	}, 5*time.Minute*time.Duration(max(1, n/1_000_000)), 100*time.Millisecond)
	runtime.GC()
	return runID, took
}

// millionRunFolder is the probe's run folder for one 30-minute level of n
// requests: lognormal TTFT around ttftMs with a tail event two thirds in,
// 64 to 192 output tokens at about 20 ms each, a thousand warm-up requests,
// and per-second telemetry.
func millionRunFolder(b *testing.B, r *mrand.Rand, n int, ttftMs float64) *sshrun.Collection {
	b.Helper()
	const window = 1800.0
	dir := "out/01-serve/rep-1/c=256"
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// The records go to a temporary file, as a collection keeps a large
	// file (ten million requests are 2.4 GB).
	recPath := filepath.Join(b.TempDir(), wire.RequestsFile)
	recFile, err := os.Create(recPath)
	require.NoError(b, err)
	recHash := sha256.New()
	recOut := bufio.NewWriterSize(io.MultiWriter(recFile, recHash), 1<<20)
	var recSize int64
	var lines []byte
	itl := map[float64]int64{}
	for i := range n + 1000 {
		lines = lines[:0]
		warm := i < 1000
		sent := int64((float64(i) + r.Float64()) * window / float64(n+1000) * 1e9)
		ttft := ttftMs * math.Exp(0.45*r.NormFloat64())
		if j := i - 2*n/3; j >= 0 && j < 3000 {
			ttft *= 6 // a tail event
		}
		out := 64 + r.IntN(129)
		gap := 20 * math.Exp(0.2*r.NormFloat64())
		itl[math.Round(gap*10)/10] += int64(out - 1)
		first := sent + int64(ttft*1e6)
		last := first + int64(float64(out-1)*gap*1e6)
		done := last + 1_000_000
		lines = append(lines, `{"id":`...)
		lines = strconv.AppendInt(lines, int64(i), 10)
		if warm {
			lines = append(lines, `,"warmup":true`...)
		}
		for _, f := range []struct {
			k string
			v int64
		}{{"t_sent", sent}, {"t_first_chunk", first - 1000}, {"t_first_token", first}, {"t_first_content", first}, {"t_last_token", last}, {"t_done", done}, {"prompt_tokens", 512}, {"output_tokens", int64(out)}, {"chunks", int64(out)}} {
			lines = append(lines, `,"`...)
			lines = append(lines, f.k...)
			lines = append(lines, `":`...)
			lines = strconv.AppendInt(lines, f.v, 10)
		}
		lines = append(lines, "}\n"...)
		_, err := recOut.Write(lines)
		require.NoError(b, err)
		recSize += int64(len(lines))
	}
	require.NoError(b, recOut.Flush())
	require.NoError(b, recFile.Close())
	var buckets []wire.HistogramBucket
	for v, c := range itl {
		buckets = append(buckets, wire.HistogramBucket{Value: v, Count: c})
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].Value < buckets[j].Value })
	res := wire.StepResult{Step: "serve", Kind: acceptance.StepInference, Repetition: 1, Level: "c=256", Dir: dir, Format: "probe-requests",
		Files: []string{dir + "/" + wire.RequestsFile}, StartedAt: start.Format(time.RFC3339Nano), EndedAt: start.Add(31 * time.Minute).Format(time.RFC3339Nano),
		Inference: &wire.InferenceSummary{WindowSec: window, Requests: int64(n + 1000), Succeeded: int64(n), WarmupDropped: 1000, ITL: buckets, Concurrency: 256}}
	resJSON, err := json.Marshal(res)
	require.NoError(b, err)
	var tel []byte
	for s := range 1860 {
		gpu := 70 + 20*r.Float64()
		sample := wire.TelemetrySample{T: int64(s) * 1e9, CPUBusyPct: 30 + 10*r.Float64(), MemUsedBytes: 64 << 30, DiskReadBps: 2e9 * (0.8 + 0.4*r.Float64()),
			DiskWriteBps: 1e7, DiskBusyPct: 40 + 20*r.Float64(), NICRxBps: 3e9 * (0.8 + 0.4*r.Float64()), NICTxBps: 1e8, GPUUtilPct: &gpu}
		line, _ := json.Marshal(sample)
		tel = append(append(tel, line...), '\n')
	}
	c := &sshrun.Collection{Files: []sshrun.File{{Name: dir + "/" + wire.RequestsFile, Size: recSize, SHA256: hex.EncodeToString(recHash.Sum(nil)), Path: recPath}}}
	for _, f := range []struct {
		name string
		data []byte
	}{{dir + "/" + wire.StepResultFile, resJSON}, {dir + "/" + wire.TelemetryFile, tel}} {
		sum := sha256.Sum256(f.data)
		c.Files = append(c.Files, sshrun.File{Name: f.name, Size: int64(len(f.data)), SHA256: hex.EncodeToString(sum[:]), Data: f.data})
	}
	sort.Slice(c.Files, func(i, j int) bool { return c.Files[i].Name < c.Files[j].Name })
	return c
}
