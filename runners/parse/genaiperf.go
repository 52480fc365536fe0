package parse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/accordlab/accord/acceptance"
)

// GenAI-Perf (profile_export_genai_perf.json) and AIPerf
// (profile_export_aiperf.json) export one object per metric:
// {"unit": "ms", "avg": …, "p1" … "p99", "min", "max", "std"}; throughputs
// have only "avg". Both compute their percentiles with numpy.percentile.
//
// Their versions, as their exporters' source shows:
//
//   - GenAI-Perf until June 2024: times in "ns"; until early June,
//     inter_token_latency was the gap between responses (an itl), then a
//     per-request (request_latency − ttft) / (output tokens − 1) (a tpot);
//     token counts as num_output_token / num_input_token. Its tests wrote
//     values as JSON strings ("avg": "7").
//   - GenAI-Perf from mid-June 2024: times in "ms", inter_token_latency per
//     request (tpot). From September 2024 to April 2025 every non-time
//     metric was labelled "requests/sec", output_token_throughput too.
//   - GenAI-Perf never leaves out time_to_first_token: without streaming
//     it is the whole request's latency (one response), so it is not
//     imported as TTFT then.
//   - AIPerf 0.1: metrics nested under "records", keyed and tagged by
//     AIPerf's tags (ttft, ttst, inter_token_latency per request,
//     inter_chunk_latency the gaps between chunks, request_latency, …),
//     each with its "count", benchmark_duration in "sec".
//   - AIPerf from October 2025: GenAI-Perf's layout at the top level
//     (time_to_first_token, …) beside input_config, was_cancelled,
//     error_summary and, later, aiperf_version and schema_version.
type perfMetric struct {
	metric string
	kind   string // time, requests, tokens
}

// perfMetrics maps the tools' metric names to the catalog.
var perfMetrics = map[string]perfMetric{
	"time_to_first_token":     {acceptance.MetricTTFT, "time"},
	"ttft":                    {acceptance.MetricTTFT, "time"}, // AIPerf 0.1
	"inter_token_latency":     {acceptance.MetricTPOT, "time"},
	"inter_chunk_latency":     {acceptance.MetricITL, "time"},
	"request_latency":         {acceptance.MetricE2EL, "time"},
	"request_throughput":      {acceptance.MetricRequestThroughput, "requests"},
	"output_token_throughput": {acceptance.MetricOutputTokenThroughput, "tokens"},
	"request_goodput":         {acceptance.MetricGoodput, "requests"}, // GenAI-Perf
	"goodput":                 {acceptance.MetricGoodput, "requests"}, // AIPerf
}

// perfOrder is the order measurements are made in, so that one file always
// gives the same list.
var perfOrder = []string{"time_to_first_token", "ttft", "inter_token_latency", "inter_chunk_latency", "request_latency",
	"request_throughput", "output_token_throughput", "request_goodput", "goodput"}

// Why the tools' other fields are not imported.
var perfReasons = map[string]string{
	"time_to_second_token":                "time to the second token: not a catalog metric",
	"ttst":                                "time to the second token: not a catalog metric",
	"output_token_throughput_per_request": "each request's own token rate: not a catalog metric (tpot is its inverse per request)",
	"output_token_throughput_per_user":    "each request's own token rate: not a catalog metric (tpot is its inverse per request)",
	"output_sequence_length":              "output tokens per request: not a catalog metric",
	"input_sequence_length":               "prompt tokens per request: not a catalog metric",
	"num_output_token":                    "output tokens per request: not a catalog metric",
	"num_input_token":                     "prompt tokens per request: not a catalog metric",
	"output_token_count":                  "output tokens per request: not a catalog metric",
	"reasoning_token_count":               "reasoning tokens per request: not a catalog metric",
	"total_output_tokens":                 "a token total: output_token_throughput is imported",
	"total_reasoning_tokens":              "a token total: not a catalog metric",
	"good_request_count":                  "a request count: goodput is imported",
	"error_isl":                           "prompt tokens of failed requests: not a catalog metric",
	"total_error_isl":                     "prompt tokens of failed requests: not a catalog metric",
	"min_request_timestamp":               "when the first request was sent: the throughputs are the tool's own",
	"max_response_timestamp":              "when the last response arrived: the throughputs are the tool's own",
	"credit_drop_latency":                 "AIPerf's internal scheduling latency: not a measurement of the server",
	"stream_setup_latency":                "an experimental AIPerf metric: not a catalog metric",
	"stream_prefill_latency":              "an experimental AIPerf metric: not a catalog metric",
	"image_throughput":                    "an image benchmark's figure: not a catalog metric",
	"image_latency":                       "an image benchmark's figure: not a catalog metric",
	"input_config":                        "the benchmark's configuration: kept in the stored file (its streaming setting is read)",
	"sessions":                            "per-session statistics: the whole run's are imported",
	"start_time":                          "when the benchmark ran: the run records its own times",
	"end_time":                            "when the benchmark ran: the run records its own times",
	"telemetry_stats":                     "GPU telemetry as the tool saw it: the probe samples GPUs itself",
	"gpu_*":                               "GPU telemetry as the tool saw it: the probe samples GPUs itself",
	"thinking_efficiency":                 "reasoning efficiency: not a catalog metric",
	"overall_thinking_efficiency":         "reasoning efficiency: not a catalog metric",
	"benchmark_token_count":               "a token total: output_token_throughput is imported",
	"request_count":                       "a request count: without error_request_count no error rate can be computed",
	"error_request_count":                 "a failed-request count: without request_count no error rate can be computed",
	"total_isl":                           "a token total: with total_osl and benchmark_duration it gives the total token throughput",
	"total_osl":                           "a token total: with total_isl and benchmark_duration it gives the total token throughput",
	"benchmark_duration":                  "the benchmark's duration: the throughputs are the tool's own",
	"time_to_first_output_token":          "time to the first non-reasoning token (AIPerf's TTFO): not a catalog metric; time_to_first_token is imported as ttft",
	"e2e_output_token_throughput":         "each request's output tokens over its whole latency: not a catalog metric",
	"prefill_throughput_per_user":         "each request's prompt tokens over its TTFT: not a catalog metric",
	"http_req_*":                          "AIPerf's HTTP timing breakdown of each request: not catalog metrics (request_latency is imported as e2el)",
	"telemetry_data":                      "GPU telemetry as the tool saw it: the probe samples GPUs itself",
	"benchmark_id":                        "the tool's id of the run: kept in the stored file",
	"run_info":                            "the tool's description of the run: kept in the stored file",
}

// Units accepted per kind, with the factor to the canonical unit.
var timeUnits = map[string]float64{"ms": 1, "us": 1e-3, "µs": 1e-3, "ns": 1e-6, "s": 1e3, "sec": 1e3}
var requestRateUnits = map[string]float64{"requests/sec": 1, "requests/s": 1, "req/s": 1, "requests per second": 1, "per sec": 1, "request per sec": 1}
var tokenRateUnits = map[string]float64{"tokens/sec": 1, "tokens/s": 1, "tok/s": 1, "tokens per second": 1, "per sec": 1, "tokens per sec": 1}

// ImportGenAIPerf reads GenAI-Perf's profile_export_genai_perf.json. It is a
// summary: distributions get an empty Values and the tool's statistics in
// ToolSummary (avg → mean, std → stddev, pNN, min, max), rates one value.
func ImportGenAIPerf(data []byte, opts Options) ([]acceptance.Measurement, []string, error) {
	r, err := importPerfSummary(data, opts, ToolGenAIPerf, "profile_export_genai_perf.json")
	if err != nil {
		return nil, nil, err
	}
	return r.Measurements, r.Report.Warnings, nil
}

// ImportAIPerf reads AIPerf's profile_export_aiperf.json, like
// ImportGenAIPerf, and also error_rate (error_request_count over all
// requests) and total_token_throughput ((total_isl + total_osl) /
// benchmark_duration) when AIPerf wrote them.
func ImportAIPerf(data []byte, opts Options) ([]acceptance.Measurement, []string, error) {
	r, err := importPerfSummary(data, opts, ToolAIPerf, "profile_export_aiperf.json")
	if err != nil {
		return nil, nil, err
	}
	return r.Measurements, r.Report.Warnings, nil
}

// perfStat is one metric object, its statistics by the tool's names.
type perfStat struct {
	unit    *string
	stats   map[string]float64 // avg, min, max, std, pNN (canonical "p99.9"), count
	strings bool               // some values were JSON strings
}

// perfDoc is one export being read.
type perfDoc struct {
	tool, in, prefix string
	metrics          map[string]json.RawMessage
	led              *objectLedger
	rep              *Report
	strings          bool
}

func importPerfSummary(data []byte, opts Options, tool, defName string) (Result, error) {
	in := opts.name(defName)
	format := FormatGenAIPerf
	if tool == ToolAIPerf {
		format = FormatAIPerf
	}
	rep := newReport(in, format, tool)
	if int64(len(data)) > opts.limit(MaxToolJSONBytes) {
		return Result{}, tooLarge(in, int64(len(data)), opts.limit(MaxToolJSONBytes))
	}
	body, nulls := nullNonFinite(data)
	if nulls > 0 {
		rep.warn("%d non-finite numbers (NaN, Infinity) in the export were treated as missing", nulls)
	}
	var top map[string]json.RawMessage
	if err := decodeOne(body, &top); err != nil {
		return Result{}, &Error{Input: in, Err: err}
	}
	if top == nil {
		return Result{}, errf(in, 0, "", "not a JSON object")
	}
	d := &perfDoc{tool: tool, in: in, metrics: top, rep: rep}
	topLed := newLedger("", top)
	d.led = topLed
	if raw, ok := top["records"]; ok && len(raw) > 0 && raw[0] == '{' {
		var nested map[string]json.RawMessage
		if err := json.Unmarshal(raw, &nested); err != nil {
			return Result{}, errf(in, 0, "records", "%v", jsonErr(err))
		}
		topLed.use("records")
		rep.read("records", "", "AIPerf 0.1's metrics, one per tag")
		d.metrics, d.prefix = nested, "records."
		d.led = newLedger("records.", nested)
	}
	version := opts.ToolVersion
	for _, k := range []string{"aiperf_version", "genai_perf_version", "version"} {
		if raw, ok := top[k]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil && s != "" {
				version = s
				topLed.use(k)
				rep.read(k, "", "the tool version of every measurement")
				break
			}
		}
	}
	if _, ok := top["schema_version"]; ok {
		topLed.use("schema_version")
		rep.ignore("schema_version", "the export's schema version: the layout is recognised from its fields")
	}
	rep.ToolVersion = version
	if raw, ok := top["was_cancelled"]; ok {
		topLed.use("was_cancelled")
		rep.read("was_cancelled", "", "a warning when the benchmark was cancelled")
		if string(raw) == "true" {
			rep.warn("%s says the benchmark was cancelled before it completed", toolName(tool))
		}
	}
	if raw, ok := top["error_summary"]; ok {
		topLed.use("error_summary")
		rep.read("error_summary", "", "a warning with the count of failed requests")
		var errs []struct {
			Count int `json:"count"`
		}
		if json.Unmarshal(raw, &errs) == nil {
			n := 0
			for _, e := range errs {
				n += e.Count
			}
			if n > 0 {
				rep.warn("%s counted %d failed requests (error_summary)", toolName(tool), n)
			}
		}
	}

	streaming, how := perfStreaming(top)
	var out []acceptance.Measurement
	seen := map[string]bool{}
	for _, key := range perfOrder {
		pm := perfMetrics[key]
		raw, ok := d.metrics[key]
		if !ok {
			continue
		}
		d.led.use(key)
		field := d.prefix + key
		if string(raw) == "null" {
			rep.ignore(field, "null: the tool had no value")
			continue
		}
		st, err := d.stat(raw, field)
		if err != nil {
			return Result{}, err
		}
		if reason := d.skipReason(key, pm, st, streaming, how); reason != "" {
			rep.ignore(field, reason)
			continue
		}
		factor, err := d.unit(key, pm.kind, st)
		if err != nil {
			return Result{}, errf(in, 0, field+".unit", "%v", err)
		}
		if seen[pm.metric] {
			rep.ignore(field, "the same metric under another name was imported first")
			continue
		}
		seen[pm.metric] = true
		m, err := d.measurement(pm, st, factor, field, version, opts)
		if err != nil {
			return Result{}, err
		}
		out = append(out, m)
	}
	if tool == ToolAIPerf {
		ms, err := d.aiperfDerived(version, opts)
		if err != nil {
			return Result{}, err
		}
		out = append(out, ms...)
	} else if _, ok := d.metrics["request_count"]; ok {
		d.led.use("request_count")
		rep.ignore(d.prefix+"request_count", "GenAI-Perf counts no failed requests, so no error rate can be computed from it")
	}
	if len(out) == 0 {
		return Result{}, errf(in, 0, "", "no known metrics (time_to_first_token, request_latency, request_throughput, …) in the export")
	}
	if !seen[acceptance.MetricTTFT] {
		rep.warn("%s", d.noTTFT(streaming, how))
	}
	if d.strings {
		rep.warn("%s wrote some values as JSON strings (as GenAI-Perf's 2024 exporter could); they were read as numbers", toolName(tool))
	}
	if d.led != topLed {
		d.led.close(rep, perfReasons, "not a metric Accord reads from this export: kept in the stored file")
	}
	topLed.use("input_config")
	if _, ok := top["input_config"]; ok {
		rep.ignore("input_config", perfReasons["input_config"])
	}
	topLed.close(rep, perfReasons, "not a field Accord reads from this export: kept in the stored file")
	if err := rep.finish(out); err != nil {
		return Result{}, err
	}
	return Result{Measurements: out, Report: *rep}, nil
}

func toolName(tool string) string {
	if tool == ToolAIPerf {
		return "AIPerf"
	}
	return "GenAI-Perf"
}

// perfStreaming reads whether the benchmark streamed: GenAI-Perf 2024's
// input_config.streaming, GenAI-Perf's config file and AIPerf's
// input_config.endpoint.streaming. ok is false when the export does not
// say.
func perfStreaming(top map[string]json.RawMessage) (streaming bool, ok bool) {
	raw, has := top["input_config"]
	if !has {
		return false, false
	}
	var cfg struct {
		Streaming *bool `json:"streaming"`
		Endpoint  struct {
			Streaming *bool `json:"streaming"`
		} `json:"endpoint"`
	}
	if json.Unmarshal(raw, &cfg) != nil {
		return false, false
	}
	switch {
	case cfg.Streaming != nil:
		return *cfg.Streaming, true
	case cfg.Endpoint.Streaming != nil:
		return *cfg.Endpoint.Streaming, true
	}
	return false, false
}

// streamingMetrics only mean something when the responses streamed.
var streamingMetrics = map[string]bool{"time_to_first_token": true, "ttft": true, "inter_token_latency": true, "inter_chunk_latency": true}

// skipReason says why a known metric is not imported, or "".
func (d *perfDoc) skipReason(key string, pm perfMetric, st *perfStat, streaming, known bool) string {
	if streamingMetrics[key] {
		if known && !streaming {
			return "the benchmark did not stream (input_config says streaming is off): without streaming the first response is the whole response, so this is the request latency, not a " + pm.metric
		}
		if !known && (key == "time_to_first_token" || key == "ttft") && d.sameAsRequestLatency(st) {
			return "equal to request_latency in every statistic: a benchmark without streaming, whose first response is the whole response, so it is not a time to first token"
		}
	}
	if key == "inter_token_latency" && d.tool == ToolGenAIPerf && st.unit != nil && strings.TrimSpace(*st.unit) == "ns" {
		return "this export's times are in ns, which dates it to GenAI-Perf before mid-June 2024, when inter_token_latency changed from the gap between responses (an itl) to a per-request average (a tpot); which of the two this file holds cannot be told from it"
	}
	return ""
}

// noTTFT says why an export gave no TTFT: the line every import without
// one carries, so that its absence is never silent.
func (d *perfDoc) noTTFT(streaming, known bool) string {
	key := ""
	for _, k := range []string{"time_to_first_token", "ttft"} {
		if _, ok := d.metrics[k]; ok {
			key = k
		}
	}
	_, anySucceeded := d.metrics["request_count"]
	_, anyFailed := d.metrics["error_request_count"]
	switch {
	case anyFailed && !anySucceeded:
		return "no TTFT: every request failed (the export counts only error_request_count), so no request had a first token"
	case known && !streaming:
		return "no TTFT: the benchmark did not stream (input_config says streaming is off), so its first response was the whole response"
	case key != "":
		return "no TTFT: the benchmark did not stream (" + d.prefix + key + " equals request_latency in every statistic)"
	case known && streaming:
		return "no TTFT: the export has no time_to_first_token although input_config says the benchmark streamed"
	}
	if d.tool == ToolAIPerf {
		// AIPerf computes no streaming-only metric (TTFT among them)
		// unless --streaming is given, and writes input_config with only
		// the options that were set.
		return "no TTFT: the benchmark did not stream (the export has no time_to_first_token, which AIPerf writes only for streamed responses, and input_config does not turn streaming on)"
	}
	// GenAI-Perf's JSON keeps time_to_first_token without streaming (its
	// tables drop it): a file without it does not say why.
	return "no TTFT: the export has no time_to_first_token, which a benchmark that did not stream has none of, and it does not say whether the benchmark streamed"
}

func (d *perfDoc) sameAsRequestLatency(ttft *perfStat) bool {
	raw, ok := d.metrics["request_latency"]
	if !ok {
		return false
	}
	rl, err := d.stat(raw, d.prefix+"request_latency")
	if err != nil || len(rl.stats) == 0 {
		return false
	}
	n := 0
	for k, v := range ttft.stats {
		if k == "count" {
			continue
		}
		w, ok := rl.stats[k]
		if !ok || math.Abs(v-w) > 1e-9*math.Max(math.Abs(v), 1) {
			return false
		}
		n++
	}
	return n > 0
}

// stat decodes one metric object. Numbers may be JSON strings (GenAI-Perf
// 2024); AIPerf 0.1's tag and header are labels.
func (d *perfDoc) stat(raw json.RawMessage, field string) (*perfStat, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, errf(d.in, 0, field, "must be an object with unit and statistics: %v", jsonErr(err))
	}
	st := &perfStat{stats: map[string]float64{}}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := all[k]
		switch {
		case k == "unit":
			var u string
			if err := json.Unmarshal(v, &u); err != nil {
				return nil, errf(d.in, 0, field+".unit", "unit must be a string")
			}
			st.unit = &u
		case k == "tag" || k == "header":
		case k == "avg" || k == "min" || k == "max" || k == "std" || k == "count" || isPercentileName(k):
			x, ok, isString, err := perfNumber(v)
			if err != nil {
				return nil, errf(d.in, 0, field+"."+k, "%s must be a number, got %.40s", k, v)
			}
			if !ok { // null: the tool had no value
				continue
			}
			if isString {
				st.strings, d.strings = true, true
			}
			name := k
			if isPercentileName(k) {
				name = canonicalPercentile(k)
			}
			st.stats[name] = x
		default:
			d.rep.ignore(field+"."+k, "not a statistic Accord reads")
		}
	}
	return st, nil
}

// perfNumber reads a JSON number, or a string holding one; ok is false
// for null.
func perfNumber(raw json.RawMessage) (x float64, ok, isString bool, err error) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return 0, false, false, nil
	}
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, false, true, err
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, false, true, fmt.Errorf("not a number")
		}
		return v, true, true, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, false, false, err
	}
	v, err := num(&n)
	return v, err == nil, false, err
}

func (d *perfDoc) unit(key, kind string, st *perfStat) (float64, error) {
	if st.unit == nil {
		return 0, fmt.Errorf("missing: Accord will not guess the unit")
	}
	u := strings.ToLower(strings.TrimSpace(*st.unit))
	var table map[string]float64
	var want string
	switch kind {
	case "time":
		table, want = timeUnits, "ms, us, ns or s"
	case "requests":
		table, want = requestRateUnits, "requests/sec"
	default:
		table, want = tokenRateUnits, "tokens/sec"
		if d.tool == ToolGenAIPerf && key == "output_token_throughput" && requestRateUnits[u] != 0 {
			// GenAI-Perf from September 2024 to April 2025 labelled every
			// non-time metric "requests/sec" (its unit assignment tested
			// `key == "request_throughput" or "request_goodput"`, always
			// true); the value is still tokens per second.
			d.rep.warn("GenAI-Perf labels output_token_throughput %q (a mislabelling in its 2024 exporter); its value is tokens per second", *st.unit)
			return 1, nil
		}
	}
	f, ok := table[u]
	if !ok {
		return 0, fmt.Errorf("unexpected unit %q (expected %s)", *st.unit, want)
	}
	return f, nil
}

func (d *perfDoc) measurement(pm perfMetric, st *perfStat, factor float64, field, version string, opts Options) (acceptance.Measurement, error) {
	src := acceptance.Source{Tool: d.tool, ToolVersion: version, Field: d.in + ": " + field, PercentileDefinition: definitionGenAIPerf}
	if d.tool == ToolAIPerf {
		src.PercentileDefinition = definitionAIPerf
	}
	m := opts.measurement(pm.metric, src)
	if pm.kind != "time" {
		x, ok := st.stats["avg"]
		if !ok {
			return m, errf(d.in, 0, field+".avg", "missing, null or not finite")
		}
		x *= factor
		max := maxRequestRate
		if pm.kind == "tokens" {
			max = maxTokenRate
		}
		if err := checkRate(x, max); err != nil {
			return m, errf(d.in, 0, field+".avg", "%v", err)
		}
		m.Values = []float64{x}
		m.ToolSummary = map[string]float64{"rate": x}
		d.rep.read(field+".avg", pm.metric, toolName(d.tool)+"'s own figure")
		if st.unit != nil {
			d.rep.read(field+".unit", pm.metric, "the figure's unit, converted from")
		}
		return m, nil
	}
	summary := map[string]float64{}
	names := make([]string, 0, len(st.stats))
	for k := range st.stats {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		x := st.stats[name]
		key := name
		switch name {
		case "avg":
			key = "mean"
		case "std":
			key = "stddev"
		case "count":
			if x < 0 || x != math.Trunc(x) || x > 1e15 {
				return m, errf(d.in, 0, field+".count", "%g is not a count", x)
			}
			summary["n"] = x
			continue
		}
		x *= factor
		var err error
		if key == "stddev" {
			err = checkRate(x, maxLatencyMs)
		} else {
			err = checkLatency(x)
		}
		if err != nil {
			return m, errf(d.in, 0, field+"."+name, "%v", err)
		}
		summary[key] = x
	}
	if len(summary) == 0 || (len(summary) == 1 && summary["n"] > 0) {
		return m, errf(d.in, 0, field, "no statistics")
	}
	m.ToolSummary = summary
	m.Source.PercentileMethod = MethodToolSummary
	d.rep.read(field, pm.metric, toolName(d.tool)+"'s own summary (numpy percentiles); no per-request samples in this file")
	return m, nil
}

// aiperfDerived computes error_rate and total_token_throughput from AIPerf's
// counts, when it wrote them.
func (d *perfDoc) aiperfDerived(version string, opts Options) ([]acceptance.Measurement, error) {
	scalar := func(key string) (float64, bool, error) {
		raw, ok := d.metrics[key]
		if !ok || string(raw) == "null" {
			return 0, false, nil
		}
		st, err := d.stat(raw, d.prefix+key)
		if err != nil {
			return 0, false, err
		}
		x, ok := st.stats["avg"]
		if !ok {
			return 0, false, errf(d.in, 0, d.prefix+key+".avg", "missing, null or not finite")
		}
		if x < 0 || x > 1e15 {
			return 0, false, errf(d.in, 0, d.prefix+key+".avg", "%g is not a plausible value", x)
		}
		return x, true, nil
	}
	var out []acceptance.Measurement
	src := func(field string) acceptance.Source {
		return acceptance.Source{Tool: ToolAIPerf, ToolVersion: version, Field: d.in + ": " + field}
	}
	good, hasGood, err := scalar("request_count")
	if err != nil {
		return nil, err
	}
	bad, hasBad, err := scalar("error_request_count")
	if err != nil {
		return nil, err
	}
	if (hasGood || hasBad) && good+bad > 0 {
		d.led.use("request_count", "error_request_count")
		field := d.prefix + "error_request_count / (request_count + error_request_count)"
		d.rep.read(field, acceptance.MetricErrorRate, "")
		for _, k := range []string{"request_count", "error_request_count"} {
			if _, ok := d.metrics[k]; ok {
				d.rep.read(d.prefix+k, acceptance.MetricErrorRate, "a request count for the error rate")
			}
		}
		m := opts.measurement(acceptance.MetricErrorRate, src(field))
		m.Values = []float64{bad / (good + bad)}
		m.Trials = int64(good + bad)
		out = append(out, m)
	}
	isl, hasISL, err := scalar("total_isl")
	if err != nil {
		return nil, err
	}
	osl, hasOSL, err := scalar("total_osl")
	if err != nil {
		return nil, err
	}
	dur, hasDur, err := scalar("benchmark_duration")
	if err != nil {
		return nil, err
	}
	if hasISL && hasOSL && hasDur {
		st, _ := d.stat(d.metrics["benchmark_duration"], d.prefix+"benchmark_duration")
		factor, err := d.unit("benchmark_duration", "time", st)
		if err != nil {
			return nil, errf(d.in, 0, d.prefix+"benchmark_duration.unit", "%v", err)
		}
		sec := dur * factor / 1000
		if sec <= 0 || math.IsInf(sec, 0) {
			return nil, errf(d.in, 0, d.prefix+"benchmark_duration", "%g is not a duration", dur)
		}
		x := (isl + osl) / sec
		if err := checkRate(x, maxTokenRate); err != nil {
			return nil, errf(d.in, 0, d.prefix+"total_isl", "%v", err)
		}
		d.led.use("total_isl", "total_osl", "benchmark_duration")
		field := d.prefix + "(total_isl + total_osl) / benchmark_duration"
		d.rep.read(field, acceptance.MetricTotalTokenThroughput, "recomputed by Accord from AIPerf's totals")
		for _, k := range []string{"total_isl", "total_osl", "benchmark_duration"} {
			d.rep.read(d.prefix+k, acceptance.MetricTotalTokenThroughput, "a total for the total token throughput")
		}
		m := opts.measurement(acceptance.MetricTotalTokenThroughput, src(field))
		m.Values = []float64{x}
		if own, ok, err := d.ownTotalTokenRate(); err != nil {
			return nil, err
		} else if ok {
			// AIPerf 0.8 writes its own figure: kept beside Accord's.
			m.ToolSummary = map[string]float64{"rate": own}
			d.rep.read(d.prefix+"total_token_throughput", acceptance.MetricTotalTokenThroughput, "AIPerf's own figure, beside Accord's recomputation from the totals")
		}
		out = append(out, m)
	} else if own, ok, err := d.ownTotalTokenRate(); err != nil {
		return nil, err
	} else if ok {
		field := d.prefix + "total_token_throughput.avg"
		d.rep.read(field, acceptance.MetricTotalTokenThroughput, "AIPerf's own figure (the totals to recompute it are not in the file)")
		m := opts.measurement(acceptance.MetricTotalTokenThroughput, src(field))
		m.Values, m.ToolSummary = []float64{own}, map[string]float64{"rate": own}
		out = append(out, m)
	}
	return out, nil
}

// ownTotalTokenRate reads AIPerf's own total_token_throughput (tokens per
// second), when the export has it.
func (d *perfDoc) ownTotalTokenRate() (float64, bool, error) {
	const key = "total_token_throughput"
	raw, ok := d.metrics[key]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	d.led.use(key)
	st, err := d.stat(raw, d.prefix+key)
	if err != nil {
		return 0, false, err
	}
	x, ok := st.stats["avg"]
	if !ok {
		return 0, false, errf(d.in, 0, d.prefix+key+".avg", "missing, null or not finite")
	}
	factor, err := d.unit(key, "tokens", st)
	if err != nil {
		return 0, false, errf(d.in, 0, d.prefix+key+".unit", "%v", err)
	}
	x *= factor
	if err := checkRate(x, maxTokenRate); err != nil {
		return 0, false, errf(d.in, 0, d.prefix+key+".avg", "%v", err)
	}
	return x, true, nil
}

func isPercentileName(k string) bool {
	if len(k) < 2 || k[0] != 'p' || k[1] < '0' || k[1] > '9' {
		return false
	}
	p, err := strconv.ParseFloat(strings.ReplaceAll(k[1:], "_", "."), 64)
	return err == nil && p > 0 && p <= 100
}

// canonicalPercentile writes "p99_9" or "p99.90" as "p99.9".
func canonicalPercentile(k string) string {
	p, _ := strconv.ParseFloat(strings.ReplaceAll(k[1:], "_", "."), 64)
	return percentileKey(p)
}

// isPerfDoc says whether a top level looks like GenAI-Perf's or AIPerf's
// export, and which.
func isPerfDoc(top map[string]json.RawMessage) (Format, bool) {
	metrics := top
	nested := false
	if raw, ok := top["records"]; ok && len(raw) > 0 && raw[0] == '{' {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) == nil {
			metrics, nested = m, true
		}
	}
	found := false
	if _, ok := top["aiperf_version"]; ok {
		// AIPerf from 0.3 names itself; an export of a run whose requests
		// all failed has only the error counts.
		for _, raw := range top {
			if len(raw) > 0 && raw[0] == '{' && strings.Contains(string(raw), `"unit"`) {
				return FormatAIPerf, true
			}
		}
	}
	for _, k := range []string{"time_to_first_token", "ttft", "request_latency", "request_throughput", "inter_token_latency"} {
		raw, ok := metrics[k]
		if ok && strings.Contains(string(raw), `"unit"`) {
			found = true
			break
		}
	}
	if !found {
		return "", false
	}
	for _, k := range []string{"aiperf_version", "was_cancelled", "error_summary", "start_time", "benchmark_duration"} {
		if _, ok := top[k]; ok {
			return FormatAIPerf, true
		}
	}
	if nested {
		return FormatAIPerf, true
	}
	return FormatGenAIPerf, true
}
