package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/runners/probe/emulator"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/store"
)

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

// aggregateRecords reads a folder's step results and records and makes
// their chart data.
func aggregateRecords(files RunFiles) chartdata.Aggregates {
	steps, notes := readStepResults(files)
	rec := readRecords(context.Background(), files, steps)
	return chartdata.Compute(chartdata.Input{Steps: steps, Records: rec, Notes: notes})
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
	a := aggregateRecords(files)
	require.Empty(t, a.Meta.Notes)
	require.Equal(t, int64(200), a.Meta.Requests)
	require.Len(t, a.OverRun, 1)
	or := a.OverRun["chat"]
	ts := a.TimeSeries
	require.Equal(t, int64(176), or.Requests, "200 − 20 warm-up − 4 failed")
	require.Equal(t, int64(20), or.WarmupCount)
	require.Equal(t, int64(4), or.Failed)
	require.Equal(t, [2]float64{0.21, 50}, or.Points[0], "sent at 0.21 s, TTFT 50 ms")
	require.NotEmpty(t, or.Rolling)
	var tokens, requests chartdata.TimeSeries
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
		a := aggregateRecords(files)
		for _, or := range a.OverRun {
			require.LessOrEqual(t, len(or.Points), chartdata.ScatterPoints)
			_, err := json.Marshal(or)
			require.NoError(t, err)
		}
		_, err := json.Marshal(a.TimeSeries)
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
	var meta chartdata.Meta
	require.NoError(t, json.Unmarshal(docs[chartdata.KeyMeta], &meta))
	require.Equal(t, chartdata.Version, meta.Version)
	require.Empty(t, meta.Notes)
	require.Equal(t, []chartdata.Step{{Name: "settle", Kind: "pause", Levels: []string{""}}, {Name: "read", Kind: "fio", Levels: []string{""}},
		{Name: "chat", Kind: "inference", Levels: []string{"c=2"}}}, meta.Steps)
	require.Positive(t, meta.Requests)

	var summary []chartdata.SeriesStats
	require.NoError(t, json.Unmarshal(docs[chartdata.KeySummary], &summary))
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

	var cdf map[string]chartdata.CDFCurve
	require.NoError(t, json.Unmarshal(docs[chartdata.KeyCDF("chat", "c=2")], &cdf))
	require.Equal(t, ttftN, cdf[acceptance.MetricTTFT].N)
	require.Contains(t, cdf, acceptance.MetricE2EL)

	var or chartdata.OverRun
	require.NoError(t, json.Unmarshal(docs[chartdata.KeyOverRun("chat")], &or))
	require.Equal(t, ttftN, or.Requests, "a dot per measured request")
	require.Positive(t, or.Points[0][0], "the inference step ran after the fio step: its time is on the run's clock")

	var ts []chartdata.TimeSeries
	require.NoError(t, json.Unmarshal(docs[chartdata.KeyTimeSeries], &ts))
	groups := map[string]int{}
	for _, s := range ts {
		groups[s.Group]++
	}
	require.Equal(t, 2, groups["throughput"])
	require.GreaterOrEqual(t, groups["telemetry"], 4)

	var hists []chartdata.LogHistogram
	require.NoError(t, json.Unmarshal(docs[chartdata.KeyHist], &hists))
	metrics := map[string]bool{}
	for _, h := range hists {
		metrics[h.Metric] = true
	}
	require.True(t, metrics[acceptance.MetricTTFT] && metrics[acceptance.MetricReadCLat] && metrics[acceptance.MetricITL])
	var facts map[string]string
	require.NoError(t, json.Unmarshal(docs[chartdata.KeyFacts], &facts))
	require.NotEmpty(t, facts["kernel"])
}
