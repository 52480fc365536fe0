package parse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/accordlab/accord/acceptance"
)

// AIPerf's per-request export (profile_export.jsonl): one record per line,
// {"metadata": {"request_start_ns", "request_end_ns", "benchmark_phase",
// ...}, "metrics": {"time_to_first_token": {"value": 255.9, "unit": "ms"},
// ...}, "error": null or {"code", "type", "message"}}.
type aiperfRecord struct {
	Metadata struct {
		StartNS *int64 `json:"request_start_ns"`
		EndNS   *int64 `json:"request_end_ns"`
		Phase   string `json:"benchmark_phase"`
	} `json:"metadata"`
	Metrics map[string]json.RawMessage `json:"metrics"`
	Error   json.RawMessage            `json:"error"`
}

type aiperfValue struct {
	Value json.RawMessage `json:"value"`
	Unit  string          `json:"unit"`
}

// ImportAIPerfRecords reads AIPerf's profile_export.jsonl: raw per-request
// ttft (time_to_first_token), e2el (request_latency), tpot
// (inter_token_latency, per request) and itl (inter_chunk_latency, every
// gap) in ms over succeeded profiling-phase requests; error_rate; and
// request, output-token and total-token throughput over the span from the
// first request's start to the last one's end.
func ImportAIPerfRecords(r io.Reader, opts Options) ([]acceptance.Measurement, []string, error) {
	in := opts.name("profile_export.jsonl")
	br := bufio.NewReaderSize(&limitedReader{r: r, limit: opts.limit(MaxRecordBytes), input: in}, 256<<10)
	var ttft, e2el, tpot, itl []float64
	var all, failed, warmup int64
	var outTok, inTok float64
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	version := opts.ToolVersion
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
				return nil, nil, errf(in, lineNo+1, "", "line longer than %d bytes", 64*MaxLineBytes)
			}
			line = buf
		}
		if len(line) > 0 || err == nil {
			lineNo++
		}
		if err != nil && !errors.Is(err, io.EOF) {
			var pe *Error
			if errors.As(err, &pe) {
				return nil, nil, pe
			}
			return nil, nil, &Error{Input: in, Line: lineNo, Err: err}
		}
		if !blank(line) {
			var rec aiperfRecord
			dec := json.NewDecoder(bytes.NewReader(line))
			if derr := dec.Decode(&rec); derr != nil {
				return nil, nil, &Error{Input: in, Line: lineNo, Err: jsonErr(derr)}
			}
			if dec.InputOffset() != int64(len(bytes.TrimRight(line, " \t\r\n"))) {
				return nil, nil, errf(in, lineNo, "", "unexpected data after the record")
			}
			if rec.Metadata.Phase != "" && rec.Metadata.Phase != "profiling" {
				warmup++
			} else {
				all++
				if len(rec.Error) > 0 && string(rec.Error) != "null" {
					failed++
				} else {
					if rec.Metadata.StartNS == nil || rec.Metadata.EndNS == nil {
						return nil, nil, errf(in, lineNo, "metadata.request_start_ns", "a succeeded request needs request_start_ns and request_end_ns")
					}
					s, e := *rec.Metadata.StartNS, *rec.Metadata.EndNS
					if s < 0 || e < s {
						return nil, nil, errf(in, lineNo, "metadata.request_end_ns", "%d is before request_start_ns %d", e, s)
					}
					if err := checkLatency(float64(e-s) / nsPerMs); err != nil {
						return nil, nil, errf(in, lineNo, "metadata.request_end_ns", "%v", err)
					}
					first, last = min(first, s), max(last, e)
					for _, f := range []struct {
						key string
						dst *[]float64
					}{{"time_to_first_token", &ttft}, {"request_latency", &e2el}, {"inter_token_latency", &tpot}, {"inter_chunk_latency", &itl}} {
						xs, ok, err := aiperfTimes(rec.Metrics, f.key)
						if err != nil {
							return nil, nil, &Error{Input: in, Line: lineNo, Field: "metrics." + f.key, Err: err}
						}
						if ok {
							*f.dst = append(*f.dst, xs...)
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
							return nil, nil, errf(in, lineNo, "metrics."+f.key, "must be {\"value\": a token count}")
						}
						*f.dst += n
					}
				}
			}
		}
		if err != nil {
			break
		}
	}
	if all == 0 {
		return nil, nil, errf(in, 0, "", "no profiling-phase records (%d warm-up)", warmup)
	}
	var out []acceptance.Measurement
	var warnings []string
	src := func(field, method string) acceptance.Source {
		return acceptance.Source{Tool: ToolAIPerf, ToolVersion: version, Field: in + ": " + field, PercentileMethod: method}
	}
	for _, d := range []struct {
		metric, field string
		values        []float64
	}{
		{acceptance.MetricTTFT, "metrics.time_to_first_token", ttft},
		{acceptance.MetricE2EL, "metrics.request_latency", e2el},
		{acceptance.MetricTPOT, "metrics.inter_token_latency (per request)", tpot},
		{acceptance.MetricITL, "metrics.inter_chunk_latency", itl},
	} {
		if len(d.values) == 0 {
			continue
		}
		m := opts.measurement(d.metric, src(d.field+" of succeeded requests", MethodRawSamples))
		m.Values = d.values
		out = append(out, m)
	}
	succeeded := all - failed
	if succeeded > 0 && last > first {
		window := float64(last-first) / 1e9
		span := " / (last request_end_ns − first request_start_ns)"
		for _, r := range []struct {
			metric, field string
			v, max        float64
		}{
			{acceptance.MetricRequestThroughput, "succeeded requests", float64(succeeded) / window, maxRequestRate},
			{acceptance.MetricOutputTokenThroughput, "output_sequence_length", outTok / window, maxTokenRate},
			{acceptance.MetricTotalTokenThroughput, "input_sequence_length + output_sequence_length", (inTok + outTok) / window, maxTokenRate},
		} {
			if err := checkRate(r.v, r.max); err != nil {
				return nil, nil, errf(in, 0, r.field, "%v", err)
			}
			m := opts.measurement(r.metric, src(r.field+span, ""))
			m.Values = []float64{r.v}
			out = append(out, m)
		}
	} else {
		warnings = append(warnings, "no succeeded requests with a time span: no throughputs")
	}
	m := opts.measurement(acceptance.MetricErrorRate, src("records with an error / profiling records", ""))
	m.Values = []float64{float64(failed) / float64(all)}
	m.Trials = int64(all)
	out = append(out, m)
	if failed > 0 {
		warnings = append(warnings, fmt.Sprintf("%d of %d requests failed", failed, all))
	}
	return out, warnings, nil
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
