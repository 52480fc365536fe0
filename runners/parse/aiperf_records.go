package parse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/accordlab/accord/acceptance"
)

// AIPerf's per-request export (profile_export.jsonl): one record per line,
// {"metadata": {...}, "metrics": {"<tag>": {"value": x or [x, …], "unit":
// "ms"}, …}, "error": null or {"code", "type", "message"}}. Two schemas:
//
//   - AIPerf 0.1 (October 2025): metadata carries timestamp_ns (the
//     request's start, wall clock) and credit_phase (warmup or profiling);
//     TTFT is tagged "ttft"; the span AIPerf divides by comes from the
//     min_request_timestamp and max_response_timestamp metrics.
//   - later: metadata carries request_start_ns, request_end_ns and
//     benchmark_phase; TTFT is "time_to_first_token".
//
// Both: inter_token_latency is per request (a tpot), inter_chunk_latency
// the gaps between chunks (itl), and AIPerf computes request_throughput
// as succeeded requests over (last response − first request) of the
// succeeded ones.
type aiperfRecord struct {
	Metadata struct {
		StartNS     *int64 `json:"request_start_ns"`
		EndNS       *int64 `json:"request_end_ns"`
		Phase       string `json:"benchmark_phase"`
		TimestampNS *int64 `json:"timestamp_ns"`
		CreditPhase string `json:"credit_phase"`
	} `json:"metadata"`
	Metrics map[string]json.RawMessage `json:"metrics"`
	Error   json.RawMessage            `json:"error"`
}

type aiperfValue struct {
	Value json.RawMessage `json:"value"`
	Unit  string          `json:"unit"`
}

// aiperfRecordMetrics are the per-request metrics Accord imports.
var aiperfRecordMetrics = []struct {
	keys   []string // AIPerf's tags, newest first
	metric string
	note   string
}{
	{[]string{"time_to_first_token", "ttft"}, acceptance.MetricTTFT, ""},
	{[]string{"request_latency"}, acceptance.MetricE2EL, ""},
	{[]string{"inter_token_latency"}, acceptance.MetricTPOT, "AIPerf's inter_token_latency is per request: Accord's tpot"},
	{[]string{"inter_chunk_latency"}, acceptance.MetricITL, "the gaps between chunks: Accord's itl"},
}

// ImportAIPerfRecords reads AIPerf's profile_export.jsonl: raw per-request
// ttft, e2el (request_latency), tpot (inter_token_latency, per request)
// and itl (inter_chunk_latency, every gap) in ms over succeeded
// profiling-phase requests; error_rate; and request, output-token and
// total-token throughput over the span from the first request's start to
// the last response, as AIPerf computes its own.
func ImportAIPerfRecords(r io.Reader, opts Options) ([]acceptance.Measurement, []string, error) {
	res, err := importAIPerfRecords(r, opts)
	if err != nil {
		return nil, nil, err
	}
	return res.Measurements, res.Report.Warnings, nil
}

// aiperfRecordReasons say why the records' other metrics are not imported.
var aiperfRecordReasons = map[string]string{
	"input_sequence_length":            "prompt tokens per request: summed for the total token throughput",
	"output_sequence_length":           "output tokens per request: summed for the token throughputs",
	"time_to_second_token":             "time to the second token: not a catalog metric",
	"ttst":                             "time to the second token: not a catalog metric",
	"output_token_throughput_per_user": "each request's own token rate: not a catalog metric (tpot is its inverse)",
	"output_token_count":               "output tokens per request: output_sequence_length is used",
	"reasoning_token_count":            "reasoning tokens per request: not a catalog metric",
	"request_count":                    "1 per request: the records are counted",
	"error_request_count":              "1 per failed request: records with an error are counted",
	"min_request_timestamp":            "the request's start: used for the span of the throughputs",
	"max_response_timestamp":           "the last response's arrival: used for the span of the throughputs",
	"credit_drop_latency":              "AIPerf's internal scheduling latency: not a measurement of the server",
	"stream_setup_latency":             "an experimental AIPerf metric: not a catalog metric",
	"stream_prefill_latency":           "an experimental AIPerf metric: not a catalog metric",
	"error_isl":                        "prompt tokens of a failed request: not a catalog metric",
	"thinking_efficiency":              "reasoning efficiency: not a catalog metric",
	"good_request_count":               "1 per request meeting AIPerf's goodput limits: Accord judges its own",
	"time_to_first_output_token":       "time to the first non-reasoning token (AIPerf's TTFO): not a catalog metric; time_to_first_token is imported as ttft",
	"e2e_output_token_throughput":      "the request's output tokens over its whole latency: not a catalog metric",
	"prefill_throughput_per_user":      "the request's prompt tokens over its TTFT: not a catalog metric",
	"http_req_*":                       "AIPerf's HTTP timing breakdown of the request: not catalog metrics (request_latency is imported as e2el)",
}

func importAIPerfRecords(r io.Reader, opts Options) (Result, error) {
	in := opts.name("profile_export.jsonl")
	rep := newReport(in, FormatAIPerfRecords, ToolAIPerf)
	rep.ToolVersion = opts.ToolVersion
	br := bufio.NewReaderSize(&limitedReader{r: r, limit: opts.limit(MaxRecordBytes), input: in}, 256<<10)
	values := make([][]float64, len(aiperfRecordMetrics))
	var all, failed, warmup int64
	var outTok, inTok float64
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	schema01, schemaNew := false, false
	otherMetrics := map[string]bool{}
	foundKey := make([]string, len(aiperfRecordMetrics)) // the tag each metric was found under
	lineNo := 0
	var buf []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// AIPerf lines can be long (chunk latencies): assemble them, bounded.
			buf = append(buf[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(buf) <= 64*MaxLineBytes {
				line, err = br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				return Result{}, errf(in, lineNo+1, "", "line longer than %d bytes", 64*MaxLineBytes)
			}
			line = buf
		}
		if len(line) > 0 || err == nil {
			lineNo++
		}
		if err != nil && !errors.Is(err, io.EOF) {
			var pe *Error
			if errors.As(err, &pe) {
				return Result{}, pe
			}
			return Result{}, &Error{Input: in, Line: lineNo, Err: err}
		}
		if !blank(line) {
			var rec aiperfRecord
			dec := json.NewDecoder(bytes.NewReader(line))
			if derr := dec.Decode(&rec); derr != nil {
				return Result{}, &Error{Input: in, Line: lineNo, Err: jsonErr(derr)}
			}
			if dec.InputOffset() != int64(len(bytes.TrimRight(line, " \t\r\n"))) {
				return Result{}, errf(in, lineNo, "", "unexpected data after the record")
			}
			md := rec.Metadata
			phase := md.Phase
			if md.TimestampNS != nil || md.CreditPhase != "" {
				schema01 = true
				if phase == "" {
					phase = md.CreditPhase
				}
			}
			if md.StartNS != nil || md.Phase != "" {
				schemaNew = true
			}
			if phase != "" && phase != "profiling" {
				warmup++
			} else {
				all++
				if len(rec.Error) > 0 && string(rec.Error) != "null" {
					failed++
				} else {
					s, e, err := aiperfSpan(rec, in, lineNo)
					if err != nil {
						return Result{}, err
					}
					first, last = min(first, s), max(last, e)
					for i, f := range aiperfRecordMetrics {
						for _, key := range f.keys {
							xs, ok, err := aiperfTimes(rec.Metrics, key)
							if err != nil {
								return Result{}, &Error{Input: in, Line: lineNo, Field: "metrics." + key, Err: err}
							}
							if ok {
								values[i] = append(values[i], xs...)
								foundKey[i] = key
								break
							}
						}
					}
					for _, f := range []struct {
						key string
						dst *float64
					}{{"output_sequence_length", &outTok}, {"input_sequence_length", &inTok}} {
						raw, ok := rec.Metrics[f.key]
						if !ok {
							continue
						}
						var v aiperfValue
						var n float64
						if json.Unmarshal(raw, &v) != nil || json.Unmarshal(v.Value, &n) != nil || n < 0 || n > maxTokensPerRequest || n != math.Trunc(n) {
							return Result{}, errf(in, lineNo, "metrics."+f.key, "must be {\"value\": a token count}")
						}
						*f.dst += n
					}
				}
				for k := range rec.Metrics {
					otherMetrics[k] = true
				}
			}
		}
		if err != nil {
			break
		}
	}
	if all == 0 {
		return Result{}, errf(in, 0, "", "no profiling-phase records (%d warm-up)", warmup)
	}
	if schema01 && schemaNew {
		rep.warn("the records mix AIPerf 0.1's metadata (timestamp_ns, credit_phase) with the later one (request_start_ns, benchmark_phase)")
	}
	rep.read("metadata.phase and times", "", "credit_phase/benchmark_phase picks the profiling records; request_start_ns/request_end_ns (or timestamp_ns and the timestamp metrics) give the span of the throughputs")
	rep.ignore("metadata (ids)", "request, conversation, worker and record processor ids: not measurements")
	if warmup > 0 {
		rep.ignore("records with phase warmup", fmt.Sprintf("%d warm-up records: AIPerf leaves them out of its own statistics too", warmup))
	}
	var out []acceptance.Measurement
	src := func(field, method string) acceptance.Source {
		return acceptance.Source{Tool: ToolAIPerf, ToolVersion: opts.ToolVersion, Field: in + ": " + field, PercentileMethod: method, PercentileDefinition: definitionAIPerf}
	}
	for i, d := range aiperfRecordMetrics {
		for _, k := range d.keys {
			delete(otherMetrics, k)
		}
		if len(values[i]) == 0 {
			continue
		}
		m := opts.measurement(d.metric, src("metrics."+foundKey[i]+" of succeeded requests", MethodRawSamples))
		m.Values = values[i]
		note := "per-request samples of succeeded profiling requests"
		if d.note != "" {
			note += " (" + d.note + ")"
		}
		rep.read("metrics."+foundKey[i], d.metric, note)
		out = append(out, m)
	}
	succeeded := all - failed
	if succeeded > 0 && last > first {
		window := float64(last-first) / 1e9
		span := " / (last response − first request of the succeeded requests)"
		for _, r := range []struct {
			metric, field string
			v, max        float64
		}{
			{acceptance.MetricRequestThroughput, "succeeded requests", float64(succeeded) / window, maxRequestRate},
			{acceptance.MetricOutputTokenThroughput, "output_sequence_length", outTok / window, maxTokenRate},
			{acceptance.MetricTotalTokenThroughput, "input_sequence_length + output_sequence_length", (inTok + outTok) / window, maxTokenRate},
		} {
			if err := checkRate(r.v, r.max); err != nil {
				return Result{}, errf(in, 0, r.field, "%v", err)
			}
			m := opts.measurement(r.metric, src(r.field+span, ""))
			m.Source.PercentileDefinition = ""
			m.Values = []float64{r.v}
			rep.read(r.field+span, r.metric, "computed by Accord as AIPerf computes its own")
			out = append(out, m)
		}
	} else {
		rep.warn("no succeeded requests with a time span: no throughputs")
	}
	if len(values[0]) == 0 && len(values[1]) > 0 {
		// AIPerf measures TTFT only on streamed responses.
		rep.warn("no TTFT: the benchmark did not stream (no succeeded record has time_to_first_token, which AIPerf measures only on streamed responses)")
	}
	m := opts.measurement(acceptance.MetricErrorRate, src("records with an error / profiling records", ""))
	m.Source.PercentileDefinition = ""
	m.Values = []float64{float64(failed) / float64(all)}
	m.Trials = int64(all)
	rep.read("error", acceptance.MetricErrorRate, "records with an error / profiling records")
	out = append(out, m)
	if failed > 0 {
		rep.warn("%d of %d requests failed", failed, all)
	}
	others := make([]string, 0, len(otherMetrics))
	for k := range otherMetrics {
		others = append(others, k)
	}
	sort.Strings(others)
	for _, k := range others {
		reason, ok := aiperfRecordReasons[k]
		if !ok && strings.HasPrefix(k, "http_req_") {
			reason, ok = aiperfRecordReasons["http_req_*"]
		}
		if !ok {
			reason = "not a metric Accord reads from AIPerf's records: kept in the stored file"
		}
		rep.ignore("metrics."+k, reason)
	}
	if err := rep.finish(out); err != nil {
		return Result{}, err
	}
	return Result{Measurements: out, Report: *rep}, nil
}

// aiperfSpan returns a succeeded record's start and end in ns, as AIPerf
// takes them for its benchmark_duration (max_response_metric.py: the
// request's start plus its request_latency): the later schema's
// request_start_ns plus request_latency (request_end_ns without it, which
// AIPerf stamps a little after the last response), or AIPerf 0.1's
// min_request_timestamp and max_response_timestamp metrics (timestamp_ns
// plus request_latency without them).
func aiperfSpan(rec aiperfRecord, in string, lineNo int) (int64, int64, error) {
	md := rec.Metadata
	var s, e int64
	switch {
	case md.StartNS != nil && md.EndNS != nil:
		s, e = *md.StartNS, *md.EndNS
		if lat, ok, err := aiperfTimes(rec.Metrics, "request_latency"); err == nil && ok && len(lat) == 1 {
			e = s + int64(math.Round(lat[0]*nsPerMs))
		}
	case md.TimestampNS != nil:
		s = *md.TimestampNS
		if v, ok := aiperfInt(rec.Metrics, "min_request_timestamp"); ok {
			s = v
		}
		if v, ok := aiperfInt(rec.Metrics, "max_response_timestamp"); ok {
			e = v
		} else if lat, ok, err := aiperfTimes(rec.Metrics, "request_latency"); err == nil && ok && len(lat) == 1 {
			e = s + int64(math.Round(lat[0]*nsPerMs))
		} else {
			return 0, 0, errf(in, lineNo, "metrics.max_response_timestamp", "a succeeded request needs its end: max_response_timestamp or request_latency")
		}
	default:
		return 0, 0, errf(in, lineNo, "metadata.request_start_ns", "a succeeded request needs request_start_ns and request_end_ns (or AIPerf 0.1's timestamp_ns)")
	}
	if s < 0 || e < s {
		return 0, 0, errf(in, lineNo, "metadata.request_end_ns", "%d is before request_start_ns %d", e, s)
	}
	if err := checkLatency(float64(e-s) / nsPerMs); err != nil {
		return 0, 0, errf(in, lineNo, "metadata.request_end_ns", "%v", err)
	}
	return s, e, nil
}

// aiperfInt reads a timestamp metric {"value": ns, "unit": "ns"}.
func aiperfInt(metrics map[string]json.RawMessage, key string) (int64, bool) {
	raw, ok := metrics[key]
	if !ok {
		return 0, false
	}
	var v struct {
		Value *int64 `json:"value"`
		Unit  string `json:"unit"`
	}
	if json.Unmarshal(raw, &v) != nil || v.Value == nil || v.Unit != "ns" {
		return 0, false
	}
	return *v.Value, true
}

// aiperfTimes reads a time metric {"value": x or [x...], "unit": "ms"} in ms.
func aiperfTimes(metrics map[string]json.RawMessage, key string) ([]float64, bool, error) {
	raw, ok := metrics[key]
	if !ok || string(raw) == "null" {
		return nil, false, nil
	}
	var v aiperfValue
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, false, fmt.Errorf("must be {\"value\": …, \"unit\": …}: %v", jsonErr(err))
	}
	factor, ok := timeUnits[v.Unit]
	if !ok {
		return nil, false, fmt.Errorf("unexpected unit %q (expected ms, us, ns or s)", v.Unit)
	}
	var xs []float64
	if len(v.Value) > 0 && v.Value[0] == '[' {
		if err := json.Unmarshal(v.Value, &xs); err != nil {
			return nil, false, fmt.Errorf("value must be a list of numbers")
		}
	} else {
		var x float64
		if err := json.Unmarshal(v.Value, &x); err != nil {
			return nil, false, fmt.Errorf("value must be a number")
		}
		xs = []float64{x}
	}
	for i := range xs {
		xs[i] *= factor
		if err := checkLatency(xs[i]); err != nil {
			return nil, false, err
		}
	}
	return xs, true, nil
}
