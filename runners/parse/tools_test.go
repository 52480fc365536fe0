package parse

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return data
}

func TestImportVLLMDetailed(t *testing.T) {
	t.Parallel()
	got, warnings, err := Import(FormatVLLMBench, readTestdata(t, "vllm-bench-serve-detailed.json"), Options{Step: "serve", Level: "r=8", Repetition: 1})
	require.NoError(t, err)
	require.Empty(t, warnings)
	m := byMetric(t, got)

	// Raw samples of the four succeeded requests, s → ms; the failed one is excluded.
	ttft := m[acceptance.MetricTTFT]
	require.Equal(t, MethodRawSamples, ttft.Source.PercentileMethod)
	requireFloats(t, []float64{102.1, 87.3, 231, 154.2}, ttft.Values)
	requireFloats(t, []float64{167.1, 129.3, 342, 173.2}, m[acceptance.MetricE2EL].Values)
	requireFloats(t, []float64{21, 19, 25, 22, 20, 30, 28, 27, 26, 19}, m[acceptance.MetricITL].Values)
	// tpot = (latency − ttft) / (output_len − 1), as vLLM computes it
	tpot := m[acceptance.MetricTPOT]
	requireFloats(t, []float64{65.0 / 3, 42.0 / 2, 111.0 / 4, 19.0 / 1}, tpot.Values)
	var mean float64
	for _, v := range tpot.Values {
		mean += v
	}
	require.InDelta(t, tpot.ToolSummary["mean"], mean/4, 1e-9, "Accord's samples agree with vLLM's own mean")
	require.InDelta(t, 22.354166666666664, tpot.ToolSummary["mean"], 1e-12)
	require.Contains(t, tpot.ToolSummary, "p99.9")
	require.Contains(t, tpot.ToolSummary, "p50")
	require.Contains(t, tpot.ToolSummary, "stddev")

	// With --max-concurrency: client queueing → send_delay and e2el_intended.
	requireFloats(t, []float64{0.4, 1.1, 52, 0.9}, m[acceptance.MetricSendDelay].Values)
	requireFloats(t, []float64{167.5, 130.4, 394, 174.1}, m[acceptance.MetricE2ELIntended].Values)

	require.Equal(t, []float64{4 / 2.5}, m[acceptance.MetricRequestThroughput].Values)
	require.Equal(t, 1.6, m[acceptance.MetricRequestThroughput].ToolSummary["rate"])
	require.Equal(t, []float64{14 / 2.5}, m[acceptance.MetricOutputTokenThroughput].Values)
	require.Equal(t, []float64{(2048 + 14) / 2.5}, m[acceptance.MetricTotalTokenThroughput].Values)
	require.Equal(t, []float64{3 / 2.5}, m[acceptance.MetricGoodput].Values)
	require.Equal(t, []float64{0.2}, m[acceptance.MetricErrorRate].Values)
	for _, x := range got {
		require.Equal(t, ToolVLLM, x.Source.Tool)
		require.Equal(t, "r=8", x.Level)
	}
}

func requireFloats(t *testing.T, want, got []float64) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.InDelta(t, want[i], got[i], 1e-9, "index %d", i)
	}
}

func TestImportVLLMOldFormat(t *testing.T) {
	t.Parallel()
	got, _, err := Import(FormatVLLMBench, readTestdata(t, "vllm-benchmark-serving-old.json"), Options{})
	require.NoError(t, err)
	m := byMetric(t, got)
	require.NotContains(t, m, acceptance.MetricGoodput, `"request_goodput:": null without --goodput`)
	requireFloats(t, []float64{250.1, 249.9, 312}, m[acceptance.MetricTTFT].Values)
	require.Len(t, m[acceptance.MetricITL].Values, 3*127)
	// No latencies in old files: tpot and e2el are vLLM's summary only.
	tpot := m[acceptance.MetricTPOT]
	require.Empty(t, tpot.Values)
	require.Equal(t, MethodToolSummary, tpot.Source.PercentileMethod)
	require.Equal(t, 10.98, tpot.ToolSummary["p99"])
	require.Equal(t, 10.0, tpot.ToolSummary["p50"])
	require.Equal(t, []float64{2}, m[acceptance.MetricRequestThroughput].Values)
	require.Equal(t, []float64{0}, m[acceptance.MetricErrorRate].Values, "from the errors array")
	require.Contains(t, m[acceptance.MetricErrorRate].Source.Field, "errors (non-empty) / requests")

	// The colon key with a value.
	data := bytes.Replace(readTestdata(t, "vllm-benchmark-serving-old.json"), []byte(`"request_goodput:": null`), []byte(`"request_goodput:": 1.5`), 1)
	got, _, err = Import(FormatVLLMBench, data, Options{})
	require.NoError(t, err)
	require.Equal(t, []float64{1.5}, byMetric(t, got)[acceptance.MetricGoodput].Values)
}

func TestImportVLLMSummaryWithLatencies(t *testing.T) {
	t.Parallel()
	got, _, err := Import(FormatVLLMBench, readTestdata(t, "vllm-bench-serve-summary.json"), Options{})
	require.NoError(t, err)
	m := byMetric(t, got)
	// latencies survive without --save-detailed and failed is 0: raw e2el.
	e2el := m[acceptance.MetricE2EL]
	requireFloats(t, []float64{267.1, 229.3, 442, 373.2, 301}, e2el.Values)
	// vLLM's own e2el figures are numpy's over the same latencies.
	figs, err := acceptance.ToolFigures(e2el)
	require.NoError(t, err)
	require.NotEmpty(t, figs)
	for _, f := range figs {
		require.NotNil(t, f.Accord, f.Statistic)
		require.InDelta(t, 0, *f.Difference, 1e-9, f.Statistic)
	}
	require.Empty(t, m[acceptance.MetricTTFT].Values)
	require.NotEmpty(t, m[acceptance.MetricTTFT].ToolSummary)
	require.NotContains(t, m, acceptance.MetricSendDelay, "queue times mean nothing without --max-concurrency")
	require.Equal(t, []float64{0}, m[acceptance.MetricErrorRate].Values)
}

func TestImportVLLMRejectsBadInput(t *testing.T) {
	t.Parallel()
	base := string(readTestdata(t, "vllm-bench-serve-detailed.json"))
	tests := []struct{ name, data, want string }{
		{"truncated", base[:len(base)-40], "truncated JSON"},
		{"NaN mean", strings.Replace(base, `"mean_ttft_ms": 143.65`, `"mean_ttft_ms": NaN`, 1), "mean_ttft_ms: null or not a finite number"},
		{"negative latency", strings.Replace(base, `"latencies": [0.1671`, `"latencies": [-0.1671`, 1), "latencies[0]: negative latency"},
		{"latency over a day", strings.Replace(base, `"latencies": [0.1671`, `"latencies": [90000.1671`, 1), "latencies[0]: latency 9.0000167"},
		{"arrays misaligned", strings.Replace(base, `"ttfts": [0.1021, `, `"ttfts": [`, 1), "has 5 entries, ttfts has 4"},
		{"NaN in a succeeded request", strings.Replace(base, `"ttfts": [0.1021`, `"ttfts": [NaN`, 1), "ttfts[0]: null or not a finite number"},
		{"duration zero", strings.Replace(base, `"duration": 2.5`, `"duration": 0`, 1), "duration: 0 s is not a benchmark duration"},
		{"completed disagrees", strings.Replace(base, `"completed": 4`, `"completed": 5`, 1), "4 requests without an error, but completed says 5"},
		{"appended results", base + "\n" + base, "the file holds 2 JSON documents"},
		{"throughput string", strings.Replace(base, `"request_throughput": 1.6`, `"request_throughput": "fast"`, 1), "request_throughput: must be a number"},
		{"absurd throughput", strings.Replace(base, `"request_throughput": 1.6`, `"request_throughput": 1e12`, 1), "request_throughput: value 1e+12 is absurd"},
		{"not vllm", `{"hello": 1}`, "not a vLLM serving benchmark result"},
		{"fractional count", strings.Replace(base, `"failed": 1`, `"failed": 1.5`, 1), "failed: 1.5 is not a count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.NotEqual(t, base, tt.data, "the test must change the input")
			got, _, err := Import(FormatVLLMBench, []byte(tt.data), Options{Name: "bench.json"})
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, err, "parse bench.json")
			require.Nil(t, got)
		})
	}
}

func TestImportGenAIPerf(t *testing.T) {
	t.Parallel()
	got, warnings, err := Import(FormatGenAIPerf, readTestdata(t, "genai-perf-profile_export_genai_perf.json"), Options{Step: "s"})
	require.NoError(t, err)
	require.Empty(t, warnings)
	m := byMetric(t, got)
	ttft := m[acceptance.MetricTTFT]
	require.Empty(t, ttft.Values)
	require.Equal(t, MethodToolSummary, ttft.Source.PercentileMethod)
	require.Equal(t, 412.5, ttft.ToolSummary["mean"])
	require.Equal(t, 405*(0.7+0.08*8+0.4), ttft.ToolSummary["p99"])
	require.Contains(t, ttft.ToolSummary, "stddev")
	require.Contains(t, ttft.ToolSummary, "min")
	// GenAI-Perf's inter_token_latency is per request: Accord's tpot.
	require.Equal(t, 18.2, m[acceptance.MetricTPOT].ToolSummary["mean"])
	require.Contains(t, m[acceptance.MetricTPOT].Source.Field, "inter_token_latency")
	require.NotContains(t, m, acceptance.MetricITL)
	require.Equal(t, 2734.9, m[acceptance.MetricE2EL].ToolSummary["mean"])
	require.Equal(t, []float64{10.96}, m[acceptance.MetricRequestThroughput].Values)
	require.Equal(t, []float64{1402.7}, m[acceptance.MetricOutputTokenThroughput].Values)
	for _, x := range got {
		require.Equal(t, ToolGenAIPerf, x.Source.Tool)
	}
}

func TestImportAIPerf(t *testing.T) {
	t.Parallel()
	got, _, err := Import(FormatAIPerf, readTestdata(t, "aiperf-profile_export_aiperf.json"), Options{})
	require.NoError(t, err)
	m := byMetric(t, got)
	require.Equal(t, "0.3.0", m[acceptance.MetricTTFT].Source.ToolVersion)
	require.Equal(t, 1588.797775365, m[acceptance.MetricTTFT].ToolSummary["mean"])
	require.Equal(t, 51.9, m[acceptance.MetricITL].ToolSummary["mean"], "inter_chunk_latency is itl")
	require.Equal(t, 51.76, m[acceptance.MetricTPOT].ToolSummary["mean"], "inter_token_latency is tpot")
	require.Equal(t, []float64{11.2}, m[acceptance.MetricGoodput].Values)
	require.Equal(t, []float64{8.0 / 208}, m[acceptance.MetricErrorRate].Values)
	requireFloats(t, []float64{(110000 + 19370) / 15.196591969000002}, m[acceptance.MetricTotalTokenThroughput].Values)

	got, _, err = Import(FormatAIPerf, readTestdata(t, "aiperf-0.1-records.json"), Options{})
	require.NoError(t, err)
	m = byMetric(t, got)
	require.Equal(t, 1588.8, m[acceptance.MetricTTFT].ToolSummary["mean"])
	require.Contains(t, m[acceptance.MetricTTFT].Source.Field, "records.time_to_first_token")
	require.Equal(t, []float64{0}, m[acceptance.MetricErrorRate].Values)
}

func TestImportPerfUnits(t *testing.T) {
	t.Parallel()
	got, _, err := Import(FormatGenAIPerf, []byte(`{"time_to_first_token":{"unit":"ns","avg":2500000,"p99":4000000},"request_throughput":{"unit":"requests/sec","avg":3}}`), Options{})
	require.NoError(t, err)
	m := byMetric(t, got)
	require.Equal(t, 2.5, m[acceptance.MetricTTFT].ToolSummary["mean"])
	require.Equal(t, 4.0, m[acceptance.MetricTTFT].ToolSummary["p99"])

	for _, tt := range []struct{ data, want string }{
		{`{"time_to_first_token":{"unit":"tokens","avg":1}}`, `time_to_first_token.unit: unexpected unit "tokens" (expected ms, us, ns or s)`},
		{`{"time_to_first_token":{"avg":1}}`, "time_to_first_token.unit: missing"},
		{`{"request_throughput":{"unit":"ms","avg":1}}`, `request_throughput.unit: unexpected unit "ms"`},
		{`{"output_token_throughput":{"unit":"ms","avg":1}}`, `unexpected unit "ms" (expected tokens/sec)`},
		{`{"time_to_first_token":{"unit":"ms","avg":-1}}`, "time_to_first_token.avg: negative latency"},
		{`{"time_to_first_token":{"unit":"s","avg":100000}}`, "time_to_first_token.avg: latency 1e+08 ms is over a day"},
		{`{"time_to_first_token":{"unit":"ms","avg":NaN}}`, "no statistics"},
		{`{"time_to_first_token":{"unit":"ms","p99":"x"}}`, "p99 must be a number"},
		{`{"request_throughput":{"unit":"requests/sec"}}`, "request_throughput.avg: missing"},
		{`{"input_config":{}}`, "no known metrics"},
		{`{"time_to_first_token":{"unit":"ms","avg":1}`, "truncated JSON"},
		{`[]`, "the document must be a JSON object, found a JSON array"},
	} {
		got, _, err := Import(FormatGenAIPerf, []byte(tt.data), Options{})
		require.ErrorContains(t, err, tt.want, tt.data)
		require.Nil(t, got)
	}
}

// GenAI-Perf labelled output_token_throughput "requests/sec" from
// September 2024 to April 2025; AIPerf never did.
func TestGenAIPerfMislabelledTokenRate(t *testing.T) {
	t.Parallel()
	data := []byte(`{"output_token_throughput":{"unit":"requests/sec","avg":44.5},"request_throughput":{"unit":"requests/sec","avg":1}}`)
	got, warnings, err := Import(FormatGenAIPerf, data, Options{})
	require.NoError(t, err)
	require.Equal(t, []float64{44.5}, byMetric(t, got)[acceptance.MetricOutputTokenThroughput].Values)
	require.Contains(t, strings.Join(warnings, "\n"), "mislabelling")
	_, _, err = Import(FormatAIPerf, data, Options{})
	require.ErrorContains(t, err, `output_token_throughput.unit: unexpected unit "requests/sec" (expected tokens/sec)`)
}

func TestDetect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want Format
	}{
		{"fio2-randrw.json", FormatFio},
		{"fio-3.33-jsonplus-client-server-two.json", FormatFio},
		{"fio-3.33-json-normal-randrw.txt", FormatFio},
		{"aiperf-0.1-run1-profile_export_aiperf.json", FormatAIPerf},
		{"aiperf-0.1-run1-profile_export.jsonl", FormatAIPerfRecords},
		{"genai-perf-2024-exporter-test.json", FormatGenAIPerf},
		{"vllm-bench-serve-detailed.json", FormatVLLMBench},
		{"vllm-benchmark-serving-old.json", FormatVLLMBench},
		{"vllm-bench-serve-summary.json", FormatVLLMBench},
		{"genai-perf-profile_export_genai_perf.json", FormatGenAIPerf},
		{"aiperf-profile_export_aiperf.json", FormatAIPerf},
		{"aiperf-0.1-records.json", FormatAIPerf},
	}
	for _, tt := range tests {
		f, err := Detect(readTestdata(t, tt.file))
		require.NoError(t, err, tt.file)
		require.Equal(t, tt.want, f, tt.file)
		// and the detected importer takes it
		got, _, err := Import("", readTestdata(t, tt.file), Options{})
		require.NoError(t, err, tt.file)
		require.NotEmpty(t, got)
	}
	f, err := Detect([]byte(`{"id":1,"t_intended":0,"t_sent":5,"t_first_token":9,"t_done":12}` + "\n" + `{"id":2}` + "\n"))
	require.NoError(t, err)
	require.Equal(t, FormatProbeRequests, f)
	f, err = Detect([]byte(`{"t":1000000000,"cpu_pct":12.5,"mem_used":1}`))
	require.NoError(t, err)
	require.Equal(t, FormatProbeTelemetry, f)

	for _, tt := range []struct{ data, want string }{
		{"", "the input is empty"},
		{"hello", "not JSON"},
		{`{"a":1}`, `unrecognised JSON (top-level keys ["a"])`},
		{`{"a":`, "truncated JSON"},
	} {
		_, err := Detect([]byte(tt.data))
		require.ErrorContains(t, err, tt.want)
	}
}

func TestImportAIPerfRecords(t *testing.T) {
	t.Parallel()
	data := readTestdata(t, "aiperf-profile_export.jsonl")
	f, err := Detect(data)
	require.NoError(t, err)
	require.Equal(t, FormatAIPerfRecords, f)
	got, warnings, err := Import(f, data, Options{ToolVersion: "0.3.0"})
	require.NoError(t, err)
	m := byMetric(t, got)
	// warm-up and the cancelled request are excluded from the samples
	require.Equal(t, []float64{255.886568, 210.5}, m[acceptance.MetricTTFT].Values)
	require.Equal(t, []float64{297.525228, 432.9}, m[acceptance.MetricE2EL].Values)
	require.Equal(t, []float64{5.2048325, 111.2}, m[acceptance.MetricTPOT].Values)
	require.Len(t, m[acceptance.MetricITL].Values, 10)
	require.Equal(t, MethodRawSamples, m[acceptance.MetricITL].Source.PercentileMethod)
	require.Equal(t, []float64{1.0 / 3}, m[acceptance.MetricErrorRate].Values)
	// AIPerf's span: the first start to the last start plus its
	// request_latency (not request_end_ns).
	window := float64(1759813207600000000+432900000-1759813207532900363) / 1e9
	requireFloats(t, []float64{2 / window}, m[acceptance.MetricRequestThroughput].Values)
	requireFloats(t, []float64{12 / window}, m[acceptance.MetricOutputTokenThroughput].Values)
	requireFloats(t, []float64{1112 / window}, m[acceptance.MetricTotalTokenThroughput].Values)
	require.Contains(t, strings.Join(warnings, "\n"), "1 of 3 requests failed")

	for _, tt := range []struct{ data, want string }{
		{`{"metadata":{"request_start_ns":1,"request_end_ns":2},"metrics":{"time_to_first_token":{"value":1,"unit":"tokens"}},"error":null}`, `line 1: metrics.time_to_first_token: unexpected unit "tokens"`},
		{`{"metadata":{"request_start_ns":1,"request_end_ns":2},"metrics":{"time_to_first_token":{"value":-1,"unit":"ms"}},"error":null}`, "negative latency"},
		{`{"metadata":{"request_start_ns":5,"request_end_ns":2},"metrics":{},"error":null}`, "metadata.request_end_ns: 2 is before request_start_ns 5"},
		{`{"metadata":{},"metrics":{},"error":null}`, "needs request_start_ns and request_end_ns"},
		{`{"metadata":{"benchmark_phase":"warmup"},"metrics":{}}`, "no profiling-phase records (1 warm-up)"},
		{`{"metadata":{"request_start_ns":1,"request_end_ns":2},"metrics":{"output_sequence_length":{"value":1.5,"unit":"tokens"}},"error":null}`, "metrics.output_sequence_length"},
		{`{"metadata":{"request_start_ns":1,`, "truncated JSON"},
	} {
		got, _, err := Import(FormatAIPerfRecords, []byte(tt.data), Options{})
		require.ErrorContains(t, err, tt.want, tt.data)
		require.Nil(t, got)
	}
}

func TestImportUnknownAndTextFormats(t *testing.T) {
	t.Parallel()
	_, _, err := Import("text", []byte("hello"), Options{})
	require.ErrorContains(t, err, `format "text" carries no measurements`)
	_, _, err = Import("csv", []byte("a,b"), Options{})
	require.ErrorContains(t, err, `unknown format "csv"`)
	_, _, err = Import("", []byte("a,b"), Options{})
	require.ErrorContains(t, err, "detect: not JSON")
}
