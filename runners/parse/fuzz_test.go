package parse

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// checkMeasurements holds every import to what the rest of Accord relies on:
// catalog metrics only, finite non-negative numbers, histograms that line
// up, one value per rate.
func checkMeasurements(t *testing.T, ms []acceptance.Measurement) {
	t.Helper()
	for _, m := range ms {
		metric, ok := acceptance.LookupMetric(m.Metric)
		require.True(t, ok, "unknown metric %q", m.Metric)
		require.NotEmpty(t, m.Source.Tool)
		for _, v := range m.Values {
			require.False(t, math.IsNaN(v) || math.IsInf(v, 0), "%s: non-finite value", m.Metric)
			require.GreaterOrEqual(t, v, 0.0, "%s: negative value", m.Metric)
		}
		for k, v := range m.ToolSummary {
			require.False(t, math.IsNaN(v) || math.IsInf(v, 0), "%s: non-finite %s", m.Metric, k)
		}
		if m.Counts != nil {
			require.Len(t, m.Counts, len(m.Values))
			for i, c := range m.Counts {
				require.Greater(t, c, int64(0))
				if i > 0 {
					require.Greater(t, m.Values[i], m.Values[i-1], "%s: histogram values ascending", m.Metric)
				}
			}
		}
		if metric.Unit == acceptance.UnitRatio {
			for _, v := range m.Values {
				require.LessOrEqual(t, v, 1.0, "%s: a share is at most 1", m.Metric)
			}
		}
		require.GreaterOrEqual(t, m.Trials, int64(0), "%s: a request count is not negative", m.Metric)
		if m.Trials > 0 {
			require.Equal(t, acceptance.UnitRatio, metric.Unit, "%s: only a share has a request count", m.Metric)
		}
		if metric.Kind == acceptance.KindRate {
			require.Len(t, m.Values, 1, "%s: a rate has one value", m.Metric)
		} else {
			require.True(t, len(m.Values) > 0 || len(m.ToolSummary) > 0, "%s: neither samples nor a summary", m.Metric)
		}
	}
}

// checkReport holds an import's report to its promises: it encodes, its
// lists are there, its figures are finite and its warnings are what
// Import returns.
func checkReport(t *testing.T, format Format, data []byte, opts Options) {
	t.Helper()
	r, err := ImportWithReport(format, data, opts)
	require.NoError(t, err)
	require.NotNil(t, r.Report.Read)
	require.NotNil(t, r.Report.Ignored)
	_, err = r.Report.JSON()
	require.NoError(t, err)
	for _, mf := range r.Report.Figures {
		for _, f := range mf.Figures {
			require.False(t, math.IsNaN(f.Tool) || math.IsInf(f.Tool, 0))
			if f.Accord != nil {
				require.False(t, math.IsNaN(*f.Accord) || math.IsInf(*f.Accord, 0), "%s %s", mf.Metric, f.Statistic)
			}
		}
	}
	ms, warnings, err := Import(format, data, opts)
	require.NoError(t, err)
	require.Equal(t, r.Measurements, ms)
	require.Equal(t, r.Report.Warnings, warnings)
}

// addTestdataHead adds the first n lines of a JSON-lines fixture.
func addTestdataHead(f *testing.F, name string, n int) {
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		f.Fatal(err)
	}
	lines := bytes.SplitAfterN(data, []byte("\n"), n+1)
	f.Add(bytes.Join(lines[:min(n, len(lines))], nil))
}

func addTestdata(f *testing.F, names ...string) {
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

var recordSeeds = []string{
	`{"id":2,"t_intended":100000000,"t_sent":101000000,"t_first_chunk":150000000,"t_first_token":201000000,"t_first_content":221000000,"t_last_token":1100000000,"t_done":1101000000,"prompt_tokens":100,"output_tokens":11,"chunks":11}`,
	`{"id":7,"t_intended":600000000,"t_sent":600000000,"t_first_chunk":0,"t_first_token":0,"t_first_content":0,"t_last_token":0,"t_done":650000000,"prompt_tokens":0,"output_tokens":0,"chunks":0,"error_kind":"http","error":"503","http_status":503}`,
	`{"id":1,"warmup":true,"t_sent":1,"t_done":2,"usage_counted":true}`,
	"{\"t_done\" : 30000000, \"extra\": {\"a\": [1, 2.5e3, \"x\\\"y\", null, true, {}], \"b\": []}, \"T_SENT\": 10000000, \"t\\u0069ntended\": null}",
	`{"t_sent":-0,"error":"\ud83d\ude00 \u00e9"}`,
	`{"t_sent":9223372036854775807,"t_done":-9223372036854775808}`,
	`{"t_sent":1.5}`,
	`{"t_sent":1e9}`,
	`[{"t_sent":1}]`,
	`null`,
	`{"t_sent":1,}`,
}

// FuzzRecordLine holds the hand-written record decoder to encoding/json:
// whatever one accepts the other accepts, with the same values.
func FuzzRecordLine(f *testing.F) {
	for _, s := range recordSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var want wire.RequestRecord
		jsonErr := json.Unmarshal(line, &want)
		var got recordLine
		ourErr := decodeRecordLine(line, &got)
		if bytes.Equal(bytes.TrimSpace(line), []byte("null")) {
			require.Error(t, ourErr, "a record is an object")
			return
		}
		if jsonErr != nil {
			require.Error(t, ourErr, "encoding/json rejects %q: %v", line, jsonErr)
			return
		}
		require.NoError(t, ourErr, "encoding/json accepts %q", line)
		gotRec := got.RequestRecord
		require.Equal(t, want.ErrorKind != "", len(got.errorKind) > 0)
		require.Equal(t, want.Error != "", got.errorText)
		gotRec.ErrorKind, gotRec.Error = want.ErrorKind, want.Error
		require.Equal(t, want, gotRec)
	})
}

func fuzzResult() *wire.StepResult {
	r := stepResult(3, 5)
	r.Inference.ITL = []wire.HistogramBucket{{Value: 10, Count: 3}, {Value: 12, Count: 1}}
	r.PromDelta = map[string]float64{"vllm:prefix_cache_hits_total": 1, "vllm:prefix_cache_queries_total": 4}
	return r
}

func FuzzProbeRecords(f *testing.F) {
	for _, s := range recordSeeds {
		f.Add([]byte(s + "\n" + recordSeeds[0] + "\n"))
	}
	f.Add([]byte(recordSeeds[0] + "\n" + recordSeeds[1] + "\n" + recordSeeds[2]))
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := Options{Result: fuzzResult(), SLO: acceptance.SLO{TTFTMs: 100, TPOTMs: 20}}
		ms, warnings, err := Import(FormatProbeRequests, data, opts)
		if err != nil {
			require.Nil(t, ms)
			require.Nil(t, warnings)
			return
		}
		checkMeasurements(t, ms)
		// Streaming the same bytes gives the same answer.
		ms2, _, err := ImportProbeRecords(bytes.NewReader(data), opts)
		require.NoError(t, err)
		require.Equal(t, ms, ms2)
	})
}

func FuzzTelemetry(f *testing.F) {
	f.Add([]byte(`{"t":1000000000,"cpu_pct":12.5,"mem_used":1,"disk_read_bps":1,"disk_write_bps":2,"disk_busy_pct":3,"nic_rx_bps":4,"nic_tx_bps":5,"gpu_pct":50}` + "\n" + `{"t":2000000000,"cpu_pct":13}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, _, err := Import(FormatProbeTelemetry, data, Options{})
		if err != nil {
			require.Nil(t, ms)
			return
		}
		checkMeasurements(t, ms)
	})
}

func FuzzFio(f *testing.F) {
	addTestdata(f, "fio2-randrw.json", "fio-3.33-jsonplus-client-server-two.json", "fio-3.33-json-normal-randrw.txt",
		"fio-3.33-jsonplus-unified-rw-both.json", "fio-3.33-json-two-jobs.json", "fio-2.2.10-storperf.json",
		"fio-2.19-jsonplus-unified-rw.json", "fio-2.19-json-client-server-two.json", "fio-2.21-jsonplus-client-server-two.json",
		"fio-2.21-json-normal-randrw.txt", "fio-2.19-jsonplus-thousand-ios.json", "fio-2.1.10-json-client-server-one.json",
		"fio-2.1.10-jsonplus-randrw-normal-text.txt")
	f.Add([]byte(fio2Indexed(`"FIO_IO_U_PLAT_BITS":6,"FIO_IO_U_PLAT_VAL":64,"FIO_IO_U_PLAT_NR":1216,"0":0,"1":1,"1215":2`)))
	f.Add([]byte(fio2Indexed(`"FIO_IO_U_PLAT_BITS":1,"FIO_IO_U_PLAT_VAL":2,"FIO_IO_U_PLAT_NR":64,"63":1`)))
	f.Add([]byte(`{"fio version":"fio-3.33","jobs":[{"jobname":"x","error":0,"read":{"iops":1,"bw_bytes":4096,"total_ios":1,"clat_ns":{"min":1000,"max":1000,"mean":1000,"stddev":0,"N":1,"percentile":{"99.000000":1000},"bins":{"1000":1}},"slat_ns":{"min":0,"max":0,"mean":0,"stddev":0,"N":0},"lat_ns":{"min":1,"max":1,"mean":1,"stddev":-nan,"N":1}}}]}`))
	f.Add([]byte("note: something\n{\"fio version\":\"fio-3.33\",\"jobs\":[]}"))
	f.Add([]byte(`{"jobs":[{"jobname":"a","read":{"iops":2,"bw":8,"clat":{"min":1,"max":3,"mean":2,"percentile":{"50.000000":2,"0.00":0}},"slat":{"min":0,"max":0,"mean":0}}},{"jobname":"b","read":{"iops":2,"bw":8,"clat":{"min":1,"max":3,"mean":2}}}]}`))
	f.Add([]byte(`{"client_stats":[{"jobname":"All clients","write":{"iops":5,"bw_bytes":5,"lat_ns":{"min":1,"max":2,"mean":1.5,"N":2,"bins":{"1":1,"2":1}}}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, _, err := Import(FormatFio, data, Options{})
		if err != nil {
			require.Nil(t, ms)
			return
		}
		require.NotEmpty(t, ms)
		checkMeasurements(t, ms)
		checkReport(t, FormatFio, data, Options{})
	})
}

func FuzzVLLM(f *testing.F) {
	addTestdata(f, "vllm-bench-serve-detailed.json", "vllm-benchmark-serving-old.json", "vllm-bench-serve-summary.json",
		"vllm-benchmark_serving-llmd-10qps.json")
	f.Add([]byte(`{"request_throughput":2,"duration":1,"completed":2,"failed":1,"errors":["","x",""],"latencies":[0.1,0,0.2],"queue_times":[0,0,0],"mean_client_queue_time_ms":0,"mean_e2el_including_client_queue_ms":1}`))
	f.Add([]byte(`{"request_throughput":1,"mean_e2el_ms":5,"p99_e2el_ms":6,"request_goodput:":null}`))
	f.Add([]byte(`{"request_throughput":1,"duration":1,"completed":1,"failed":0,"ttfts":[0.1],"latencies":[0.2],"output_lens":[3],"itls":[[0.05,0.05]],"errors":[""],"mean_ttft_ms":100,"p99.9_ttft_ms":NaN}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, _, err := Import(FormatVLLMBench, data, Options{})
		if err != nil {
			require.Nil(t, ms)
			return
		}
		require.NotEmpty(t, ms)
		checkMeasurements(t, ms)
		checkReport(t, FormatVLLMBench, data, Options{})
	})
}

func FuzzGenAIPerf(f *testing.F) {
	addTestdata(f, "genai-perf-profile_export_genai_perf.json", "aiperf-profile_export_aiperf.json", "aiperf-0.1-records.json",
		"genai-perf-2024-exporter-test.json", "genai-perf-pa298-streaming.json", "genai-perf-nonstreaming-handmade.json",
		"aiperf-0.1-run1-profile_export_aiperf.json", "aiperf-0.8-profile_export_aiperf.json", "aiperf-0.8-all-failed-profile_export_aiperf.json",
		"aiperf-0.8-nonstreaming-handmade-profile_export_aiperf.json")
	f.Add([]byte(`{"time_to_first_token":{"unit":"ns","avg":2500000,"p99_9":4000000},"request_throughput":{"unit":"requests/sec","avg":3}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, format := range []Format{FormatGenAIPerf, FormatAIPerf} {
			ms, _, err := Import(format, data, Options{})
			if err != nil {
				require.Nil(t, ms)
				continue
			}
			require.NotEmpty(t, ms)
			checkMeasurements(t, ms)
			checkReport(t, format, data, Options{})
		}
	})
}

// FuzzAIPerfRecords holds AIPerf's per-request export (JSON lines, read
// as a stream) to the same rules as every import, and the whole-file and
// streaming paths to the same answer.
func FuzzAIPerfRecords(f *testing.F) {
	addTestdata(f, "aiperf-profile_export.jsonl")
	addTestdataHead(f, "aiperf-0.1-run1-profile_export.jsonl", 4)
	addTestdataHead(f, "aiperf-0.8-profile_export.jsonl", 4)
	addTestdataHead(f, "aiperf-0.8-nonstreaming-handmade-profile_export.jsonl", 3)
	f.Add([]byte(`{"metadata":{"worker_id":"w","benchmark_phase":"profiling"},"metrics":{"time_to_first_token":{"value":12.5,"unit":"ms"},"request_latency":{"value":40,"unit":"ms"}}}` + "\n"))
	f.Add([]byte(`{"metadata":{"benchmark_phase":"warmup"},"metrics":{}}` + "\n" + `{"error":{"code":500,"message":"x"},"metadata":{"benchmark_phase":"profiling"}}`))
	f.Add([]byte("{}\n\n[1]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, _, err := Import(FormatAIPerfRecords, data, Options{})
		if err != nil {
			require.Nil(t, ms)
			return
		}
		checkMeasurements(t, ms)
		ms2, _, err := ImportAIPerfRecords(bytes.NewReader(data), Options{})
		require.NoError(t, err)
		require.Equal(t, ms, ms2)
		checkReport(t, FormatAIPerfRecords, data, Options{})
	})
}

func FuzzDetect(f *testing.F) {
	addTestdata(f, "fio-2.1.10-json-client-server-two.json", "fio-2.1.10-jsonplus-randrw-normal-text.txt", "aiperf-0.8-all-failed-profile_export_aiperf.json")
	addTestdata(f, "fio2-randrw.json", "fio-3.33-jsonplus-client-server-two.json", "vllm-bench-serve-detailed.json",
		"vllm-benchmark-serving-old.json", "genai-perf-profile_export_genai_perf.json", "aiperf-profile_export_aiperf.json",
		"aiperf-profile_export.jsonl")
	f.Add([]byte(recordSeeds[0] + "\n" + recordSeeds[1] + "\n"))
	f.Add([]byte(`{"t":1,"cpu_pct":1}`))
	f.Add([]byte("garbage\n{\"fio version\":\"x\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		format, err := Detect(data)
		if err != nil {
			require.Empty(t, format)
			return
		}
		require.Contains(t, Formats, format)
		ms, _, err := Import(format, data, Options{Result: fuzzResult()})
		if err != nil {
			require.Nil(t, ms)
			return
		}
		checkMeasurements(t, ms)
		checkReport(t, format, data, Options{Result: fuzzResult()})
	})
}

// A stream read with its format detected (an uploaded result file, a run
// folder's file) agrees with Detect on the whole input: a format that
// cannot be told is a DetectError exactly when Detect fails, and
// anything imported is well formed.
func FuzzImportReaderDetects(f *testing.F) {
	addTestdata(f, "fio-2.1.10-jsonplus-randrw-normal-text.txt", "vllm-bench-serve-detailed.json", "aiperf-profile_export.jsonl",
		"genai-perf-profile_export_genai_perf.json")
	f.Add([]byte(recordSeeds[0] + "\n" + recordSeeds[1] + "\n"))
	f.Add([]byte(`{"truncated": `))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 60<<10 { // detection reads a 64 KiB head; Detect reads all
			return
		}
		_, detectErr := Detect(data)
		res, err := ImportReaderWithReport("", bytes.NewReader(data), int64(len(data)), Options{Result: fuzzResult()})
		var undetected *DetectError
		require.Equal(t, detectErr != nil, errors.As(err, &undetected), "Detect: %v; streamed: %v", detectErr, err)
		if err == nil {
			checkMeasurements(t, res.Measurements)
		}
	})
}
