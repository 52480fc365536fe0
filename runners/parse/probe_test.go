package parse

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

const ms = int64(1_000_000) // ns

func jsonl(t testing.TB, recs ...wire.RequestRecord) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range recs {
		require.NoError(t, enc.Encode(r))
	}
	return buf.Bytes()
}

func stepResult(window float64, rate float64) *wire.StepResult {
	return &wire.StepResult{
		Step: "ttft", Kind: acceptance.StepInference, Repetition: 1, Level: "r=8", Format: string(FormatProbeRequests),
		Inference: &wire.InferenceSummary{WindowSec: window, OfferedRate: rate},
	}
}

func byMetric(t testing.TB, ms []acceptance.Measurement) map[string]acceptance.Measurement {
	t.Helper()
	out := map[string]acceptance.Measurement{}
	for _, m := range ms {
		_, known := acceptance.LookupMetric(m.Metric)
		require.True(t, known, "metric %q is not in the catalog", m.Metric)
		_, dup := out[m.Metric]
		require.False(t, dup, "metric %q twice", m.Metric)
		out[m.Metric] = m
	}
	return out
}

func TestImportProbeRecordsComputesEveryMetric(t *testing.T) {
	t.Parallel()
	recs := []wire.RequestRecord{
		// warm-up: excluded everywhere
		{ID: 1, Warmup: true, Intended: 0, Sent: 1 * ms, FirstToken: 900 * ms, Done: 2000 * ms, OutputTokens: 10},
		// five succeeded requests
		{ID: 2, Intended: 100 * ms, Sent: 101 * ms, FirstChunk: 150 * ms, FirstToken: 201 * ms, FirstContent: 221 * ms, LastToken: 1100 * ms, Done: 1101 * ms, PromptTokens: 100, OutputTokens: 11, Chunks: 11},
		{ID: 3, Intended: 200 * ms, Sent: 210 * ms, FirstToken: 260 * ms, FirstContent: 260 * ms, Done: 710 * ms, PromptTokens: 100, OutputTokens: 6, Chunks: 6},
		{ID: 4, Intended: 300 * ms, Sent: 300 * ms, FirstToken: 700 * ms, FirstContent: 700 * ms, Done: 700 * ms, PromptTokens: 50, OutputTokens: 1, Chunks: 1},
		// reasoning only: no visible content
		{ID: 5, Intended: 400 * ms, Sent: 400 * ms, FirstToken: 430 * ms, Done: 630 * ms, PromptTokens: 10, OutputTokens: 3, Chunks: 3, UsageCounted: true},
		{ID: 6, Intended: 500 * ms, Sent: 505 * ms, FirstToken: 555 * ms, FirstContent: 555 * ms, Done: 3505 * ms, PromptTokens: 10, OutputTokens: 101, Chunks: 50},
		// one failed
		{ID: 7, Intended: 600 * ms, Sent: 600 * ms, Done: 650 * ms, ErrorKind: "http", Error: "503 Service Unavailable", HTTPStatus: 503},
	}
	res := stepResult(2, 8)
	res.Inference.ITL = []wire.HistogramBucket{{Value: 20, Count: 5}, {Value: 10, Count: 3}, {Value: 20, Count: 1}, {Value: 30, Count: 0}}
	res.PromDelta = map[string]float64{
		`vllm:prefix_cache_hits_total{engine="0",model_name="m"}`:    300,
		`vllm:prefix_cache_hits_total{engine="1",model_name="m"}`:    100,
		`vllm:prefix_cache_queries_total{engine="0",model_name="m"}`: 600,
		`vllm:prefix_cache_queries_total{engine="1",model_name="m"}`: 400,
		`vllm:generation_tokens_total{model_name="m"}`:               122,
	}
	opts := Options{Step: "ttft", Level: "r=8", Repetition: 2, Result: res, ToolVersion: "v0.1.0",
		SLO: acceptance.SLO{TTFTMs: 100, E2ELMs: 1000}}

	got, warnings, err := Import(FormatProbeRequests, jsonl(t, recs...), opts)
	require.NoError(t, err)
	m := byMetric(t, got)

	require.Equal(t, []float64{100, 50, 400, 30, 50}, m[acceptance.MetricTTFT].Values)
	require.Equal(t, []float64{120, 50, 400, 50}, m[acceptance.MetricTTFTContent].Values)
	require.Equal(t, []float64{1000, 500, 400, 230, 3000}, m[acceptance.MetricE2EL].Values)
	// (e2el − ttft) / (out − 1), only for out > 1
	require.Equal(t, []float64{90, 90, 100, 29.5}, m[acceptance.MetricTPOT].Values)
	require.Equal(t, []float64{101, 60, 400, 30, 55}, m[acceptance.MetricTTFTIntended].Values)
	require.Equal(t, []float64{1001, 510, 400, 230, 3005}, m[acceptance.MetricE2ELIntended].Values)
	require.Equal(t, []float64{1, 10, 0, 0, 5}, m[acceptance.MetricSendDelay].Values)

	itl := m[acceptance.MetricITL]
	require.Equal(t, []float64{10, 20}, itl.Values)
	require.Equal(t, []int64{3, 6}, itl.Counts)
	require.Equal(t, MethodHistogram, itl.Source.PercentileMethod)

	require.Equal(t, []float64{2.5}, m[acceptance.MetricRequestThroughput].Values)
	require.Equal(t, []float64{122.0 / 2}, m[acceptance.MetricOutputTokenThroughput].Values)
	require.Equal(t, []float64{(122.0 + 270) / 2}, m[acceptance.MetricTotalTokenThroughput].Values)
	// ttft ≤ 100 and e2el ≤ 1000: ids 2, 3, 5
	require.Equal(t, []float64{1.5}, m[acceptance.MetricGoodput].Values)
	require.Equal(t, []float64{1.0 / 6}, m[acceptance.MetricErrorRate].Values)
	require.Equal(t, []float64{0.4}, m[acceptance.MetricCacheHitRatio].Values)
	require.Contains(t, m[acceptance.MetricCacheHitRatio].Source.Field, "vllm:prefix_cache_hits_total")

	for _, x := range got {
		require.Equal(t, "ttft", x.Step)
		require.Equal(t, "r=8", x.Level)
		require.Equal(t, 2, x.Repetition)
		require.Equal(t, ToolProbe, x.Source.Tool)
		require.Equal(t, "v0.1.0", x.Source.ToolVersion)
		require.NotEmpty(t, x.Source.Field)
	}
	require.Equal(t, MethodRawSamples, m[acceptance.MetricTTFT].Source.PercentileMethod)

	all := strings.Join(warnings, "\n")
	require.Contains(t, all, "1 of 5 succeeded requests had token counts counted from chunks")
	require.Contains(t, all, `1 of 6 requests failed ("http": 1)`)
	require.Contains(t, all, "1 succeeded requests had no visible content")
}

func TestImportProbeRecordsClosedLoopWithoutIntendedTimes(t *testing.T) {
	t.Parallel()
	recs := []wire.RequestRecord{
		{ID: 1, Sent: 1 * ms, FirstToken: 11 * ms, FirstContent: 11 * ms, Done: 21 * ms, OutputTokens: 2},
		{ID: 2, Sent: 22 * ms, FirstToken: 32 * ms, FirstContent: 32 * ms, Done: 52 * ms, OutputTokens: 3},
	}
	got, warnings, err := Import(FormatProbeRequests, jsonl(t, recs...), Options{Result: stepResult(1, 0)})
	require.NoError(t, err)
	m := byMetric(t, got)
	require.NotContains(t, m, acceptance.MetricTTFTIntended)
	require.NotContains(t, m, acceptance.MetricSendDelay)
	require.NotContains(t, m, acceptance.MetricGoodput)
	require.NotContains(t, m, acceptance.MetricCacheHitRatio)
	require.Equal(t, []float64{0}, m[acceptance.MetricErrorRate].Values)
	require.Contains(t, strings.Join(warnings, "\n"), "no SLO set")
	require.Contains(t, strings.Join(warnings, "\n"), "no ITL histogram")
}

func TestImportProbeRecordsAllFailed(t *testing.T) {
	t.Parallel()
	recs := []wire.RequestRecord{
		{ID: 1, Sent: 1 * ms, ErrorKind: "connect", Error: "connection refused"},
		{ID: 2, Sent: 2 * ms, ErrorKind: "timeout"},
	}
	got, warnings, err := Import(FormatProbeRequests, jsonl(t, recs...), Options{Result: stepResult(1, 0)})
	require.NoError(t, err)
	m := byMetric(t, got)
	require.Equal(t, []float64{1}, m[acceptance.MetricErrorRate].Values)
	require.Equal(t, []float64{0}, m[acceptance.MetricRequestThroughput].Values)
	require.NotContains(t, m, acceptance.MetricTTFT)
	require.Contains(t, strings.Join(warnings, "\n"), "all 2 measured requests failed")
}

func TestImportProbeRecordsAcceptsWhatEncodingJSONAccepts(t *testing.T) {
	t.Parallel()
	// Key order, whitespace, unknown keys of every kind, escapes, nulls,
	// case-insensitive keys, CRLF, blank lines.
	data := "{\"t_done\" : 30000000, \"extra\": {\"a\": [1, 2.5e3, \"x\\\"y\", null, true, {}], \"b\": []},\t" +
		"  \"T_SENT\": 10000000, \"t_first_token\":20000000, \"t\\u0069ntended\": null, \"error\": \"\", \"error_kind\": null, \"output_tokens\": 2, \"warmup\": false}\r\n" +
		"\n" +
		`{"t_sent":-0,"warmup":true}` + "\n"
	got, _, err := Import(FormatProbeRequests, []byte(data), Options{Result: stepResult(1, 0)})
	require.NoError(t, err)
	m := byMetric(t, got)
	require.Equal(t, []float64{10}, m[acceptance.MetricTTFT].Values)
	require.Equal(t, []float64{20}, m[acceptance.MetricE2EL].Values)
	require.Equal(t, []float64{10}, m[acceptance.MetricTPOT].Values)
}

func TestImportProbeRecordsRejectsBadInput(t *testing.T) {
	t.Parallel()
	good := `{"t_sent":1000000,"t_first_token":2000000,"t_first_content":2000000,"t_done":3000000,"output_tokens":2}`
	tests := []struct {
		name    string
		data    string
		opts    func(*Options)
		wantErr string
	}{
		{"truncated last line", good + "\n" + `{"t_sent":1000000,"t_first_tok`, nil, "line 2: truncated record"},
		{"truncated number", good + "\n" + `{"t_sent":10`, nil, "line 2: truncated record"},
		{"float in integer field", `{"t_sent":1.5,"t_done":3}`, nil, "line 1: t_sent: must be an integer, found 1.5"},
		{"exponent in integer field", `{"t_sent":1e9,"t_done":3}`, nil, "t_sent: must be an integer, found 1e9"},
		{"string in integer field", `{"t_done":"3"}`, nil, "t_done: must be an integer"},
		{"NaN", `{"t_done":NaN}`, nil, "t_done: invalid number"},
		{"overflow", `{"t_done":92233720368547758070}`, nil, "t_done: integer 9223372036854775807… overflows int64"},
		{"negative time", `{"t_sent":-5,"t_done":3}`, nil, "line 1: t_sent: negative time -5 ns"},
		{"done before sent", `{"t_sent":5000000,"t_done":3000000}`, nil, "t_done: 3000000 ns is before t_sent 5000000 ns"},
		{"first token after done", `{"t_sent":1,"t_first_token":9000000,"t_done":3000000}`, nil, "t_first_token: 9000000 ns is outside"},
		{"missing sent", `{"t_done":3000000}`, nil, "t_sent: missing (0) in a succeeded request"},
		{"intended after sent", `{"t_intended":5000000,"t_sent":1000000,"t_done":3000000}`, nil, "t_intended: 5000000 ns is after t_sent"},
		{"absurd latency", `{"t_sent":1,"t_done":90000000000000}`, nil, "t_done: end-to-end latency: latency 8.9999999999999e+07 ms is over a day"},
		{"absurd tokens", `{"t_sent":1,"t_done":3,"output_tokens":1000000000}`, nil, "output_tokens: 1000000000 is not a plausible token count"},
		{"negative tokens", `{"t_sent":1,"t_done":3,"prompt_tokens":-1}`, nil, "prompt_tokens: -1 is not a plausible token count"},
		{"bool as number", `{"t_sent":1,"t_done":3,"warmup":1}`, nil, "warmup: must be true or false"},
		{"array line", `[1,2]`, nil, "a record must be a JSON object"},
		{"trailing data", good + ` {}`, nil, "unexpected data after the record"},
		{"missing comma", `{"t_sent":1 "t_done":3}`, nil, "expected ',' or '}'"},
		{"trailing comma", `{"t_sent":1,}`, nil, "expected a key"},
		{"bad escape", `{"t_sent":1,"error":"\x"}`, nil, `invalid escape \x`},
		{"control char", "{\"t_sent\":1,\"error\":\"a\tb\"}", nil, "control character in string"},
		{"empty", "", nil, "no request records"},
		{"only blank lines", "\n\n  \n", nil, "no request records"},
		{"only warm-up", `{"warmup":true,"t_sent":1,"t_done":2}`, nil, "all 1 requests were sent during warm-up"},
		{"line too long", `{"error":"` + strings.Repeat("x", 300<<10) + `"}`, nil, "line 1: line longer than"},
		{"over the size limit", strings.Repeat(good+"\n", 10), func(o *Options) { o.MaxBytes = 200 }, "input too large"},
		{"no step result", good, func(o *Options) { o.Result = nil }, "step result (result.json) is required"},
		{"no window", good, func(o *Options) { o.Result = stepResult(0, 0) }, "inference.window_sec: must be a positive number"},
		{"NaN window", good, func(o *Options) { o.Result = stepResult(math.NaN(), 0) }, "inference.window_sec"},
		{"no inference summary", good, func(o *Options) { o.Result = &wire.StepResult{} }, "result.json: inference: missing"},
		{"bad ITL bucket", good, func(o *Options) {
			o.Result = stepResult(1, 0)
			o.Result.Inference.ITL = []wire.HistogramBucket{{Value: -1, Count: 2}}
		}, "inference.itl: bucket 0: value: negative latency"},
		{"NaN SLO", good, func(o *Options) { o.SLO.TTFTMs = math.NaN() }, "SLO ttft_ms must be a finite number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := Options{Result: stepResult(1, 0)}
			if tt.opts != nil {
				tt.opts(&opts)
			}
			got, warnings, err := Import(FormatProbeRequests, []byte(tt.data), opts)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.wantErr)
			require.Contains(t, err.Error(), "parse ")
			require.Nil(t, got)
			require.Nil(t, warnings)
		})
	}
}

func TestImportFileRefusesOversizeBeforeReading(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, wire.RequestsFile)
	f, err := os.Create(path)
	require.NoError(t, err)
	// A sparse file just over the limit: refused by its size, not read.
	require.NoError(t, f.Truncate(MaxRecordBytes+1))
	require.NoError(t, f.Close())
	_, _, err = ImportFile(FormatProbeRequests, path, Options{Result: stepResult(1, 0)})
	require.ErrorIs(t, err, ErrTooLarge)
	require.Contains(t, err.Error(), "the limit is 4294967296 bytes (4 GiB)")

	tool := filepath.Join(dir, "fio.json")
	require.NoError(t, os.WriteFile(tool, nil, 0o600))
	require.NoError(t, os.Truncate(tool, MaxToolJSONBytes+1))
	_, _, err = ImportFile(FormatFio, tool, Options{})
	require.ErrorIs(t, err, ErrTooLarge)
	require.Contains(t, err.Error(), "(64 MiB)")
}

func TestImportFileStreamsAndDetects(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), wire.RequestsFile)
	recs := jsonl(t, wire.RequestRecord{Sent: 1 * ms, FirstToken: 5 * ms, Done: 9 * ms, OutputTokens: 1})
	require.NoError(t, os.WriteFile(path, recs, 0o600))
	got, _, err := ImportFile("", path, Options{Result: stepResult(1, 0)})
	require.NoError(t, err)
	require.Equal(t, []float64{4}, byMetric(t, got)[acceptance.MetricTTFT].Values)
	require.Contains(t, byMetric(t, got)[acceptance.MetricTTFT].Source.Field, path)
}

func TestErrorNamesLineAndField(t *testing.T) {
	t.Parallel()
	_, _, err := Import(FormatProbeRequests, []byte("\n"+`{"t_sent":"x"}`), Options{Name: "out/01-ttft/rep-1/requests.jsonl", Result: stepResult(1, 0)})
	var pe *Error
	require.True(t, errors.As(err, &pe))
	require.Equal(t, 2, pe.Line)
	require.Equal(t, "t_sent", pe.Field)
	require.Equal(t, "out/01-ttft/rep-1/requests.jsonl", pe.Input)
	require.Equal(t, "parse out/01-ttft/rep-1/requests.jsonl: line 2: t_sent: must be an integer, found '\"'", err.Error())
}

func TestCacheHitRatio(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		delta map[string]float64
		ratio float64
		ok    bool
		warn  string
	}{
		{"current names", map[string]float64{"vllm:prefix_cache_hits_total": 25, "vllm:prefix_cache_queries_total": 100}, 0.25, true, ""},
		{"without _total", map[string]float64{"vllm:prefix_cache_hits": 1, "vllm:prefix_cache_queries": 4}, 0.25, true, ""},
		{"deprecated gpu_ names", map[string]float64{`vllm:gpu_prefix_cache_hits_total{model_name="x"}`: 3, `vllm:gpu_prefix_cache_queries_total{model_name="x"}`: 4}, 0.75, true, ""},
		{"SGLang", map[string]float64{`sglang:cached_tokens_total{model_name="m"}`: 300, `sglang:prompt_tokens_total{model_name="m"}`: 1200}, 0.25, true, ""},
		{"SGLang by cache source", map[string]float64{`sglang:cached_tokens_total{cache_source="device"}`: 200, `sglang:cached_tokens_total{cache_source="host"}`: 100,
			`sglang:prompt_tokens_total`: 600, `sglang:generation_tokens_total`: 999}, 0.5, true, ""},
		{"SGLang without cached tokens", map[string]float64{`sglang:prompt_tokens_total`: 600}, 0, false, "cache_hit_rate gauge"},
		{"current names win", map[string]float64{"vllm:prefix_cache_hits_total": 1, "vllm:prefix_cache_queries_total": 2, "vllm:gpu_prefix_cache_hits_total": 0, "vllm:gpu_prefix_cache_queries_total": 5}, 0.5, true, ""},
		{"no queries", map[string]float64{"vllm:prefix_cache_hits_total": 0, "vllm:prefix_cache_queries_total": 0}, 0, false, "no prefix cache queries"},
		{"counter reset", map[string]float64{"vllm:prefix_cache_hits_total": -10, "vllm:prefix_cache_queries_total": 5}, 0, false, "went down"},
		{"hits over queries", map[string]float64{"vllm:prefix_cache_hits_total": 10, "vllm:prefix_cache_queries_total": 5}, 0, false, "exceed queries"},
		{"half", map[string]float64{"vllm:prefix_cache_hits_total": 10}, 0, false, "incomplete"},
		{"V0 gauge", map[string]float64{"vllm:gpu_prefix_cache_hit_rate": 0.1}, 0, false, "is a gauge"},
		{"nothing", map[string]float64{"vllm:generation_tokens_total": 5}, 0, false, ""},
		{"NaN", map[string]float64{"vllm:prefix_cache_hits_total": math.NaN(), "vllm:prefix_cache_queries_total": 5}, 0, false, "not finite"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ratio, _, ok, warn := CacheHitRatio(tt.delta)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.ratio, ratio)
			if tt.warn == "" {
				require.Empty(t, warn)
			} else {
				require.Contains(t, warn, tt.warn)
			}
		})
	}
}

func TestImportTelemetry(t *testing.T) {
	t.Parallel()
	gpu := 55.5
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i, s := range []wire.TelemetrySample{
		{T: 1e9, CPUBusyPct: 10, DiskBusyPct: 40, NICRxBps: 1e9, NICTxBps: 2e6, GPUUtilPct: &gpu},
		{T: 2e9, CPUBusyPct: 20.5, DiskBusyPct: 100.3, NICRxBps: 2e9, NICTxBps: 3e6, GPUUtilPct: &gpu},
	} {
		require.NoError(t, enc.Encode(s), i)
	}
	got, warnings, err := Import(FormatProbeTelemetry, buf.Bytes(), Options{Step: "ttft", Repetition: 1})
	require.NoError(t, err)
	require.Empty(t, warnings)
	m := byMetric(t, got)
	require.Equal(t, []float64{10, 20.5}, m[acceptance.MetricCPUUtil].Values)
	require.Equal(t, []float64{55.5, 55.5}, m[acceptance.MetricGPUUtil].Values)
	require.Equal(t, []float64{40, 100.3}, m[acceptance.MetricDiskUtil].Values)
	require.Equal(t, []float64{1e9, 2e9}, m[acceptance.MetricNICRxBytes].Values)
	require.Equal(t, []float64{2e6, 3e6}, m[acceptance.MetricNICTxBytes].Values)

	for _, tt := range []struct{ data, want string }{
		{`{"t":1,"cpu_pct":250}`, "line 1: cpu_pct: value 250 is absurd"},
		{`{"t":1,"cpu_pct":-1}`, "cpu_pct: negative value"},
		{`{"t":1,"cpu_pct":1,"gpu_pct":101e3}`, "gpu_pct: value 101000 is absurd"},
		{`{"t":1,"cpu_pct":1}` + "\n" + `{"t":2,"cpu_pct":`, "line 2: truncated JSON"},
		{`{"t":1,"cpu_pct":"x"}`, "field cpu_pct: JSON string where a float64 belongs"},
		{`{"t":1,"cpu_pct":1} {}`, "unexpected data after the sample"},
		{``, "no telemetry samples"},
		{`{"t":-1,"cpu_pct":1}`, "t: negative time"},
		{`{"t":1,"cpu_pct":1,"nic_rx_bps":1e300}`, "nic_rx_bps: value 1e+300 is absurd"},
	} {
		got, _, err := Import(FormatProbeTelemetry, []byte(tt.data), Options{})
		require.ErrorContains(t, err, tt.want, tt.data)
		require.Nil(t, got)
	}
}

func TestImportFileDetectsLargeToolJSON(t *testing.T) {
	t.Parallel()
	// A detailed vLLM result larger than the bytes read to detect it.
	data := readTestdata(t, "vllm-benchmark-serving-old.json")
	pad := bytes.Repeat([]byte(`"x",`), 40<<10)
	data = bytes.Replace(data, []byte(`"generated_texts": [`), append([]byte(`"generated_texts": [`), pad...), 1)
	require.Greater(t, len(data), 64<<10)
	path := filepath.Join(t.TempDir(), "result.json")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	got, _, err := ImportFile("", path, Options{})
	require.NoError(t, err)
	require.Equal(t, ToolVLLM, got[0].Source.Tool)
}

// The probe's own records account for every field of their format in the
// import's report: each JSON field of wire.RequestRecord and
// wire.TelemetrySample is named by a line read or ignored.
func TestProbeFormatsAccountForEveryField(t *testing.T) {
	t.Parallel()
	fieldsOf := func(v any) []string {
		var out []string
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				out = append(out, name)
			}
		}
		return out
	}
	named := func(rep Report, field string) bool {
		mentions := func(line string) bool {
			for _, part := range strings.FieldsFunc(line, func(r rune) bool { return strings.ContainsRune(" ,:()/+−.[]", r) }) {
				if part == field {
					return true
				}
			}
			return false
		}
		for _, r := range rep.Read {
			if mentions(r.Field) {
				return true
			}
		}
		for _, ig := range rep.Ignored {
			if mentions(ig.Field) {
				return true
			}
		}
		return false
	}
	recs := jsonl(t, wire.RequestRecord{ID: 1, Intended: 1e6, Sent: 1e6, FirstChunk: 2e6, FirstToken: 3e6, FirstContent: 3e6, LastToken: 9e6, Done: 1e7,
		PromptTokens: 10, OutputTokens: 5, UsageCounted: true, Chunks: 5},
		wire.RequestRecord{ID: 2, Sent: 2e6, Done: 3e6, ErrorKind: "http", Error: "503", HTTPStatus: 503})
	r, err := ImportWithReport(FormatProbeRequests, recs, Options{Result: fuzzResult()})
	require.NoError(t, err)
	for _, f := range fieldsOf(wire.RequestRecord{}) {
		require.True(t, named(r.Report, f), "requests.jsonl: %s is neither read nor ignored\n%v\n%v", f, r.Report.Read, r.Report.Ignored)
	}

	gpu, mem, power := 50.0, int64(1<<30), 300.0
	tel, err := json.Marshal(wire.TelemetrySample{T: 1, CPUBusyPct: 10, MemUsedBytes: 1 << 30, DiskReadBps: 1, DiskWriteBps: 1, DiskBusyPct: 1, NICRxBps: 1, NICTxBps: 1,
		GPUUtilPct: &gpu, GPUs: []wire.GPUSample{{Tool: "nvidia-smi", UtilPct: &gpu, MemUsedBytes: &mem, PowerW: &power}}, Counters: map[string]float64{acceptance.MetricNICDrops: 1}, CounterDetail: map[string]float64{"eth0": 1}})
	require.NoError(t, err)
	r, err = ImportWithReport(FormatProbeTelemetry, append(tel, '\n'), Options{})
	require.NoError(t, err)
	for _, f := range fieldsOf(wire.TelemetrySample{}) {
		require.True(t, named(r.Report, f), "telemetry.jsonl: %s is neither read nor ignored\n%v\n%v", f, r.Report.Read, r.Report.Ignored)
	}
}

// A reader is imported as a file is, under the name it is given (a run
// folder's path, when the bytes come from the artifact store or a
// temporary file), whether its size is known or not.
func TestImportReaderNamesItsInput(t *testing.T) {
	t.Parallel()
	const name = "output/01-ttft/rep-1/requests.jsonl"
	recs := jsonl(t, wire.RequestRecord{Sent: 1 * ms, FirstToken: 5 * ms, Done: 9 * ms, OutputTokens: 1})
	for _, size := range []int64{int64(len(recs)), -1} {
		got, err := ImportReaderWithReport("", iotest.OneByteReader(bytes.NewReader(recs)), size, Options{Name: name, Step: "ttft", Result: stepResult(1, 0)})
		require.NoError(t, err)
		require.Equal(t, FormatProbeRequests, got.Report.Format)
		require.Equal(t, name, got.Report.Input)
		require.Equal(t, "ttft", got.Report.Step)
		require.Equal(t, []float64{4}, byMetric(t, got.Measurements)[acceptance.MetricTTFT].Values)
		require.Contains(t, byMetric(t, got.Measurements)[acceptance.MetricTTFT].Source.Field, name)
	}
	bad := append(append([]byte{}, recs...), `{"t_sent":"x"}`+"\n"...)
	_, err := ImportReaderWithReport(FormatProbeRequests, bytes.NewReader(bad), -1, Options{Name: name, Result: stepResult(1, 0)})
	require.EqualError(t, err, "parse "+name+": line 2: t_sent: must be an integer, found '\"'")

	// A tool's document larger than the bytes read to detect it.
	data := readTestdata(t, "vllm-benchmark-serving-old.json")
	pad := bytes.Repeat([]byte(`"x",`), 40<<10)
	data = bytes.Replace(data, []byte(`"generated_texts": [`), append([]byte(`"generated_texts": [`), pad...), 1)
	got, err := ImportReaderWithReport("", bytes.NewReader(data), -1, Options{Name: "imported/result.json"})
	require.NoError(t, err)
	require.Equal(t, ToolVLLM, got.Measurements[0].Source.Tool)
	require.Equal(t, "imported/result.json", got.Report.Input)

	_, err = ImportReaderWithReport(FormatFio, bytes.NewReader(bytes.Repeat([]byte(" "), 10)), MaxToolJSONBytes+1, Options{Name: "fio.json"})
	require.ErrorIs(t, err, ErrTooLarge)
	require.Contains(t, err.Error(), "fio.json")
}

// Records are written as requests end, not as they were sent: the samples
// of a request metric are kept in send order, second by second, with the
// index of each second's first sample (for drift criteria's windows).
func TestImportProbeRecordsKeepsSendOrder(t *testing.T) {
	t.Parallel()
	sec := 1000 * ms
	recs := []wire.RequestRecord{
		{ID: 1, Sent: 5*sec + 1*ms, FirstToken: 5*sec + 11*ms, Done: 5*sec + 20*ms, OutputTokens: 2},
		{ID: 2, Sent: 3*sec + 1*ms, FirstToken: 3*sec + 31*ms, Done: 6*sec + 1*ms, OutputTokens: 2}, // sent earlier, ended later
		{ID: 3, Sent: 5*sec + 2*ms, FirstToken: 5*sec + 42*ms, Done: 6*sec + 2*ms, OutputTokens: 2},
		{ID: 4, Sent: 8*sec + 9*ms, FirstToken: 8*sec + 59*ms, Done: 8*sec + 99*ms, OutputTokens: 2},
		{ID: 5, Warmup: true, Sent: 1 * ms, FirstToken: 2 * ms, Done: 3 * ms, OutputTokens: 2},
	}
	got, _, err := Import(FormatProbeRequests, jsonl(t, recs...), Options{Step: "s", Repetition: 1, Result: stepResult(6, 0)})
	require.NoError(t, err)
	m := byMetric(t, got)
	ttft := m[acceptance.MetricTTFT]
	require.Equal(t, []float64{30, 10, 40, 50}, ttft.Values)
	// Second 0 is second 3 of the step (the first measured request's).
	require.Equal(t, []int64{0, 1, 1, 3, 3, 3}, ttft.SentIndex)
	require.Equal(t, []int64{0, 1, 1, 3, 3, 3}, m[acceptance.MetricE2EL].SentIndex)
	require.Nil(t, m[acceptance.MetricRequestThroughput].SentIndex)
}
