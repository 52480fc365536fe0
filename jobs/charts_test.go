package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/stats"
	"github.com/accordlab/accord/runners/probe/emulator"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/charts"
)

func lognormalSorted(seed uint64, n int, scale, sigma float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Round(scale*math.Exp(sigma*r.NormFloat64())*1000) / 1000 // µs resolution: ties happen
	}
	slices.Sort(v)
	return v
}

// A reduced CDF is exact at every point (the share at or below each value
// is the share of samples), bounded, and the chart builder's table reads
// the exact percentiles from it.
func TestCDFCurveIsExactAtItsPoints(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 10, cdfBody + cdfTail, cdfBody + cdfTail + 1, 50_000, 1_000_000} {
		values := lognormalSorted(uint64(n), n, 400, 0.6)
		c := cdfCurve(values)
		require.Equal(t, int64(n), c.N)
		if n <= cdfBody+cdfTail {
			require.Equal(t, values, c.Values, "every sample when they fit")
			continue
		}
		require.LessOrEqual(t, len(c.Points), cdfBody+cdfTail+len(cdfQuantiles)+2)
		cum := 0
		for _, p := range c.Points {
			cum += int(p[1])
			atOrBelow, _ := slices.BinarySearchFunc(values, p[0], func(e, t float64) int {
				if e <= t {
					return -1
				}
				return 1
			})
			require.Equal(t, atOrBelow, cum, "the share at or below %v is exact", p[0])
		}
		require.Equal(t, n, cum)
		require.Equal(t, values[0], c.Points[0][0])
		require.Equal(t, values[n-1], c.Points[len(c.Points)-1][0])

		buckets := make([]charts.Bucket, len(c.Points))
		for i, p := range c.Points {
			buckets[i] = charts.Bucket{Value: p[0], Count: int64(p[1])}
		}
		_, table, err := charts.LatencyCDF(charts.CDFInput{Unit: "ms", Series: []charts.CDFSeries{{Name: "x", Buckets: buckets}}})
		require.NoError(t, err)
		_, exact, err := charts.LatencyCDF(charts.CDFInput{Unit: "ms", Series: []charts.CDFSeries{{Name: "x", Values: values}}})
		require.NoError(t, err)
		require.Equal(t, exact.Rows, table.Rows, "n, min, p50, p90, p99, p99.9 and max are exact")
	}
}

// A log histogram keeps every percentile within the grid's 0.1 %.
func TestLogHistogramKeepsPercentiles(t *testing.T) {
	t.Parallel()
	values := lognormalSorted(7, 200_000, 25, 0.8)
	values = append(values, 0, 0)
	m := acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: "s", Level: "c=1", Repetition: 2, Values: values}
	h, ok := logHistogram(m)
	require.True(t, ok)
	require.Equal(t, int64(2), h.Zero)
	back := LogHistogramMeasurement(h)
	require.Equal(t, m.Metric, back.Metric)
	require.Equal(t, 2, back.Repetition)
	raw, err := stats.NewSample(values, nil)
	require.NoError(t, err)
	hist, err := stats.NewSample(back.Values, back.Counts)
	require.NoError(t, err)
	require.Equal(t, raw.N(), hist.N())
	for _, q := range []float64{0.001, 0.5, 0.9, 0.99, 0.999, 1} {
		want, got := raw.Quantile(q), hist.Quantile(q)
		require.InEpsilon(t, want, got, stats.HistogramRelativeError*1.0001, "q=%v", q)
	}
	// Histogram input (ITL) keeps its counts.
	itl := acceptance.Measurement{Metric: acceptance.MetricITL, Values: []float64{5, 10, 20}, Counts: []int64{3, 0, 7}}
	h, ok = logHistogram(itl)
	require.True(t, ok)
	var total int64
	for _, c := range h.Counts {
		total += c
	}
	require.Equal(t, int64(10), total)
	// A range beyond the bound is refused rather than made huge.
	_, ok = logHistogram(acceptance.Measurement{Values: []float64{1e-9, 1e9}})
	require.False(t, ok)
}

func TestSpreadOverKeepsTheAmount(t *testing.T) {
	t.Parallel()
	a := newRecordAggregates(nil)
	a.grow(9)
	spreadOver(a.tokens, a.tokenRate, 1.5, 4.5, 30)
	spreadOver(a.tokens, a.tokenRate, 7.2, 7.2, 3)
	spreadOver(a.tokens, a.tokenRate, 8.25, 8.75, 2)
	a.tokenSeconds()
	require.Equal(t, []float64{0, 5, 10, 10, 5, 0, 0, 3, 2, 0}, a.tokens[:10])
	var sum float64
	for _, v := range a.tokens {
		sum += v
	}
	require.InDelta(t, 35, sum, 1e-9)
}

// memFiles is a run folder in memory.
type memFiles map[string][]byte

func (m memFiles) Names() []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (m memFiles) Open(name string) (io.ReadCloser, error) {
	b, ok := m[name]
	if !ok {
		return nil, fmt.Errorf("no %s", name)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// aggregateRecords runs the record aggregation over a folder.
func aggregateRecords(files RunFiles) (*recordAggregates, []store.OverRun, []store.TimeSeriesAgg, []string) {
	results, notes := readStepResults(files)
	rec := newRecordAggregates(results)
	notes = append(notes, rec.readAll(context.Background(), files)...)
	var ors []store.OverRun
	for _, r := range results {
		if or, ok, err := rec.overRun(r.Step); err == nil && ok {
			ors = append(ors, or)
		} else if err != nil {
			notes = append(notes, err.Error())
		}
	}
	return rec, ors, rec.timeSeries(), notes
}

func stepFolder(t testing.TB, started string, records, telemetry []byte) memFiles {
	res, err := json.Marshal(wire.StepResult{Step: "chat", Kind: acceptance.StepInference, Repetition: 1, Level: "c=1", Format: "probe-requests", StartedAt: started})
	require.NoError(t, err)
	return memFiles{
		"out/01-chat/rep-1/c=1/" + wire.StepResultFile: res,
		"out/01-chat/rep-1/c=1/" + wire.RequestsFile:   records,
		"out/01-chat/rep-1/c=1/" + wire.TelemetryFile:  telemetry,
	}
}

// Requests become TTFT dots at their send time, warm-up apart, failed ones
// counted; tokens and completions land in the seconds they happened.
func TestRecordAggregates(t *testing.T) {
	t.Parallel()
	var lines bytes.Buffer
	enc := json.NewEncoder(&lines)
	for i := range 200 {
		sent := int64(i+1) * 10_000_000 // every 10 ms over 2 s
		rec := wire.RequestRecord{ID: int64(i), Warmup: i < 20, Sent: sent, FirstToken: sent + 50_000_000, Done: sent + 100_000_000, OutputTokens: 10}
		if i%50 == 49 {
			rec = wire.RequestRecord{ID: int64(i), Sent: sent, ErrorKind: "http", HTTPStatus: 500}
		}
		require.NoError(t, enc.Encode(rec))
	}
	tel, _ := json.Marshal(wire.TelemetrySample{T: 1e9, CPUBusyPct: 42, NICRxBps: 2e6})
	files := stepFolder(t, "2026-01-01T00:00:00Z", lines.Bytes(), append(tel, '\n'))
	rec, ors, ts, notes := aggregateRecords(files)
	require.Empty(t, notes)
	require.Equal(t, int64(200), rec.requests)
	require.Len(t, ors, 1)
	or := ors[0]
	require.Equal(t, int64(176), or.Requests, "200 − 20 warm-up − 4 failed")
	require.Equal(t, int64(20), or.WarmupCount)
	require.Equal(t, int64(4), or.Failed)
	require.Equal(t, [2]float64{0.21, 50}, or.Points[0], "sent at 0.21 s, TTFT 50 ms")
	require.NotEmpty(t, or.Rolling)
	var tokens, requests store.TimeSeriesAgg
	for _, s := range ts {
		switch s.Name {
		case "Output tokens/s":
			tokens = s
		case "Requests/s":
			requests = s
		}
	}
	require.InDelta(t, 196*10, tokens.Mean*float64(tokens.N), 1e-6, "every token of the 196 succeeded requests")
	require.InDelta(t, 196, requests.Mean*float64(requests.N), 1e-9)
	names := []string{}
	for _, s := range ts {
		names = append(names, s.Name)
	}
	require.Contains(t, names, "CPU busy")
	require.Contains(t, names, "NIC receive")
}

// Whatever the run folder holds, the aggregation never fails the ingest:
// what it cannot read becomes a note.
func FuzzRecordAggregates(f *testing.F) {
	good, _ := json.Marshal(wire.RequestRecord{ID: 1, Sent: 1000, FirstToken: 2000, Done: 3000, OutputTokens: 2})
	tel, _ := json.Marshal(wire.TelemetrySample{T: 1, CPUBusyPct: 1})
	f.Add("2026-01-01T00:00:00Z", append(good, '\n'), tel)
	f.Add("x", []byte(`{"t_sent":-5,"t_first_token":9223372036854775807,"t_done":9223372036854775807,"output_tokens":3}`), []byte(`{"t":-1}`))
	f.Add("", []byte("{\n}\n{\"warmup\":true}"), []byte("[]"))
	f.Add("2026-01-01T00:00:00Z", []byte(`{"t_sent":1,"t_first_token":2,"t_done":604799999999999,"output_tokens":100000000}`), []byte("{}\n{}"))
	f.Fuzz(func(t *testing.T, started string, records, telemetry []byte) {
		files := stepFolder(t, started, records, telemetry)
		_, ors, ts, _ := aggregateRecords(files)
		for _, or := range ors {
			require.LessOrEqual(t, len(or.Points), charts.DefaultScatterPoints)
			_, err := json.Marshal(or)
			require.NoError(t, err)
		}
		_, err := json.Marshal(ts)
		require.NoError(t, err)
	})
}

// startEmulatorInProcess serves the emulator on 127.0.0.1 for the test.
func startEmulatorInProcess(t *testing.T) string {
	t.Helper()
	srv, err := emulator.New(emulator.Config{ITL: 2 * time.Millisecond, PrefillPerToken: 10 * time.Microsecond, BlockTokens: 16, BlockBytes: 64 << 10,
		CacheBlocks: 64, DefaultMaxTokens: 8, Seed: 1}, io.Discard)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = srv.Close()
	})
	return "http://" + ln.Addr().String() + "/v1"
}

// A real run through SSH stores its chart aggregates in the ingest
// transaction: the distributions, TTFT over the run from the raw records,
// throughput and telemetry per second, histograms and host facts.
func TestRunChartsPrecomputedAtIngest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	endpoint := startEmulatorInProcess(t)
	p := b.quickProfile(100 * time.Millisecond)
	p.Steps = append(p.Steps, acceptance.StepSpec{Name: "chat", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{
		Endpoint: endpoint, Model: "emulated", API: "chat",
		PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 32}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 8},
		Load: acceptance.Load{Mode: "concurrency", Concurrency: 2}, Duration: acceptance.Duration(1500 * time.Millisecond),
	}})
	p = p.Normalized()
	runID := b.submit(t, b.river, b.saveProfile(t, p), nil, nil)
	run := b.waitFor(t, runID, 90*time.Second, "settle", settled)
	require.Equal(t, store.RunDone, run.State, run.Reason)

	docs, err := b.store.RunCharts(ctx, runID)
	require.NoError(t, err)
	var meta store.ChartMeta
	require.NoError(t, json.Unmarshal(docs[store.ChartKeyMeta], &meta))
	require.Equal(t, store.ChartsVersion, meta.Version)
	require.Empty(t, meta.Notes)
	require.Equal(t, []store.ChartStep{{Name: "settle", Kind: "pause", Levels: []string{""}}, {Name: "read", Kind: "fio", Levels: []string{""}},
		{Name: "chat", Kind: "inference", Levels: []string{"c=2"}}}, meta.Steps)
	require.Positive(t, meta.Requests)

	var summary []store.SeriesStats
	require.NoError(t, json.Unmarshal(docs[store.ChartKeySummary], &summary))
	ms, err := b.store.MeasurementSummaries(ctx, runID)
	require.NoError(t, err)
	var ttftN int64
	for _, m := range ms {
		if m.Metric == acceptance.MetricTTFT {
			ttftN += m.Summary.N
			found := false
			for _, s := range summary {
				if s.Metric == m.Metric && s.Step == m.Step && s.Level == m.Level {
					found = true
					require.Equal(t, m.Summary.P99, s.P99, "one repetition: the pooled p99 is the repetition's")
				}
			}
			require.True(t, found)
		}
	}
	require.Positive(t, ttftN)

	var cdf map[string]store.CDFCurve
	require.NoError(t, json.Unmarshal(docs[store.ChartKeyCDF("chat", "c=2")], &cdf))
	require.Equal(t, ttftN, cdf[acceptance.MetricTTFT].N)
	require.Contains(t, cdf, acceptance.MetricE2EL)

	var or store.OverRun
	require.NoError(t, json.Unmarshal(docs[store.ChartKeyOverRun("chat")], &or))
	require.Equal(t, ttftN, or.Requests, "a dot per measured request")
	require.Positive(t, or.Points[0][0], "the inference step ran after the fio step: its time is on the run's clock")

	var ts []store.TimeSeriesAgg
	require.NoError(t, json.Unmarshal(docs[store.ChartKeyTimeSeries], &ts))
	groups := map[string]int{}
	for _, s := range ts {
		groups[s.Group]++
	}
	require.Equal(t, 2, groups["throughput"])
	require.GreaterOrEqual(t, groups["telemetry"], 4)

	var hists []store.LogHistogram
	require.NoError(t, json.Unmarshal(docs[store.ChartKeyHist], &hists))
	metrics := map[string]bool{}
	for _, h := range hists {
		metrics[h.Metric] = true
	}
	require.True(t, metrics[acceptance.MetricTTFT] && metrics[acceptance.MetricReadCLat] && metrics[acceptance.MetricITL])
	var facts map[string]string
	require.NoError(t, json.Unmarshal(docs[store.ChartKeyFacts], &facts))
	require.NotEmpty(t, facts["kernel"])
}

// A series with only a tool's summary (vLLM's bench gives mean, median and
// p99) keeps the tool's figures, averaged over repetitions, and says which
// statistics it lacks instead of showing them as 0.
func TestSeriesStatsFromAToolSummaryNameWhatIsMissing(t *testing.T) {
	t.Parallel()
	g := groupMeasurements([]acceptance.Measurement{
		{Metric: acceptance.MetricTTFT, Step: "chat", Repetition: 1, ToolSummary: map[string]float64{"mean": 10, "p50": 9, "p99": 30}},
		{Metric: acceptance.MetricTTFT, Step: "chat", Repetition: 2, ToolSummary: map[string]float64{"mean": 12, "p50": 11, "p99": 34}},
	})
	require.Len(t, g, 1)
	st, err := seriesStats(g[0])
	require.NoError(t, err)
	require.True(t, st.Summary)
	require.ElementsMatch(t, []string{"p90", "p95", "p99.9", "max", "min"}, st.Missing)
	raw, err := json.Marshal(st)
	require.NoError(t, err)
	var back store.SeriesStats
	require.NoError(t, json.Unmarshal(raw, &back))
	for name, want := range map[string]float64{"p50": 10, "p99": 32, "mean": 11} {
		v, ok := back.Stat(name)
		require.True(t, ok, name)
		require.Equal(t, want, v, name)
	}
	for _, name := range []string{"p90", "p95", "p99.9", "max", "min"} {
		_, ok := back.Stat(name)
		require.False(t, ok, "%s is not known, not 0", name)
	}
}
