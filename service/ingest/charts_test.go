package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"testing"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/stretchr/testify/require"
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

func (m memFiles) Size(name string) (int64, bool) {
	b, ok := m[name]
	return int64(len(b)), ok
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
func aggregateRecords(files Files) chartdata.Aggregates {
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
