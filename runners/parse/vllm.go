package parse

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/accordlab/accord/acceptance"
)

// vLLM's serving benchmark (benchmarks/benchmark_serving.py, `vllm bench
// serve --save-result [--save-detailed]`) writes one JSON object: rates
// (request_throughput, output_throughput, total_token_throughput,
// request_goodput — "request_goodput:" with a colon in older versions — null
// without --goodput), counts (completed, failed, total_input_tokens,
// total_output_tokens, duration in s), per metric mean_/median_/std_/pNN_
// <metric>_ms, and per request (with --save-detailed, always for
// latencies and queue_times in newer versions) ttfts, itls (lists), latencies
// and queue_times in seconds, input_lens, output_lens and errors ("" when the
// request succeeded).
var vllmMetrics = []struct {
	key    string // as in mean_<key>_ms
	metric string
}{
	{"ttft", acceptance.MetricTTFT},
	{"tpot", acceptance.MetricTPOT},
	{"itl", acceptance.MetricITL},
	{"e2el", acceptance.MetricE2EL},
	// With --max-concurrency: the wait between a request's scheduled arrival
	// and its send, and the end-to-end latency including that wait.
	{"client_queue_time", acceptance.MetricSendDelay},
	{"e2el_including_client_queue", acceptance.MetricE2ELIntended},
}

// ImportVLLM reads vLLM's serving benchmark result. Latency distributions
// come from the per-request arrays when they were saved (ttfts, itls,
// latencies → ttft, itl, e2el, and tpot = (latency − ttft) / (output_len − 1)
// per request, all over succeeded requests, in ms); otherwise Values is
// empty and ToolSummary holds vLLM's mean, median (p50), std (stddev) and
// percentiles. Rates are recomputed from the counts over the duration where
// present, vLLM's own figure kept as ToolSummary["rate"].
func ImportVLLM(data []byte, opts Options) ([]acceptance.Measurement, []string, error) {
	r, err := importVLLM(data, opts)
	if err != nil {
		return nil, nil, err
	}
	return r.Measurements, r.Report.Warnings, nil
}

// Why vLLM's other fields are not imported.
var vllmReasons = map[string]string{
	"date":                      "when the benchmark ran: the run records its own times",
	"backend":                   "the benchmark's configuration: kept in the stored file",
	"endpoint_type":             "the benchmark's configuration: kept in the stored file",
	"label":                     "the benchmark's configuration: kept in the stored file",
	"model_id":                  "the benchmark's configuration: kept in the stored file",
	"tokenizer_id":              "the benchmark's configuration: kept in the stored file",
	"num_prompts":               "the number of prompts asked for: completed and failed say how many ran",
	"request_rate":              "the configured arrival rate (\"inf\": all requests at once): the measured rates are imported",
	"burstiness":                "the configured arrival pattern: kept in the stored file",
	"max_concurrency":           "the configured concurrency limit: kept in the stored file",
	"input_lens":                "prompt lengths per request: total_input_tokens is used for the token throughput",
	"generated_texts":           "the responses' text: not a measurement",
	"start_times":               "send times on the client's clock: latencies and queue_times are used",
	"max_output_tokens_per_s":   "vLLM's peak output rate over one-second windows: not a catalog metric",
	"max_concurrent_requests":   "vLLM's peak concurrency: not a catalog metric",
	"rtfx":                      "inverse real-time factor of audio benchmarks: not a catalog metric",
	"rps_change_events":         "ramp-up steps: the measured rates are imported",
	"spec_decode_*":             "speculative decoding counters: not catalog metrics",
	"diffusion_*":               "diffusion decoding counters: not catalog metrics",
	"probe_*":                   "vLLM's probe requests: not part of the measured load",
	"total_input_sequences":     "an embedding benchmark's figure: not a catalog metric",
	"input_sequence_throughput": "an embedding benchmark's figure: not a catalog metric",
}

func importVLLM(data []byte, opts Options) (Result, error) {
	in := opts.name("vllm-bench.json")
	rep := newReport(in, FormatVLLMBench, ToolVLLM)
	rep.ToolVersion = opts.ToolVersion
	if int64(len(data)) > opts.limit(MaxToolJSONBytes) {
		return Result{}, tooLarge(in, int64(len(data)), opts.limit(MaxToolJSONBytes))
	}
	body, nulls := nullNonFinite(data)
	if nulls > 0 {
		rep.warn("%d non-finite numbers (NaN, Infinity) in the result were treated as missing", nulls)
	}
	var top map[string]json.RawMessage
	if err := decodeOne(body, &top); err != nil {
		return Result{}, &Error{Input: in, Err: err}
	}
	if top == nil {
		return Result{}, errf(in, 0, "", "not a JSON object")
	}
	if !isVLLMDoc(top) {
		return Result{}, errf(in, 0, "", "not a vLLM serving benchmark result (no request_throughput with mean_*_ms or completed/duration)")
	}
	ms, err := vllmMeasurements(top, in, opts, rep)
	if err != nil {
		return Result{}, err
	}
	if err := rep.finish(ms); err != nil {
		return Result{}, err
	}
	return Result{Measurements: ms, Report: *rep}, nil
}

func vllmMeasurements(top map[string]json.RawMessage, in string, opts Options, rep *Report) ([]acceptance.Measurement, error) {
	v := vllmDoc{top: top, in: in}
	led := newLedger("", top)
	defer led.close(rep, vllmReasons, "not a field Accord reads from vLLM's result (its --metadata, or a field of a newer vLLM): kept in the stored file")
	src := func(field, method string) acceptance.Source {
		return acceptance.Source{Tool: ToolVLLM, ToolVersion: opts.ToolVersion, Field: in + ": " + field, PercentileMethod: method, PercentileDefinition: definitionVLLM}
	}
	var out []acceptance.Measurement

	duration, hasDur, err := v.number("duration")
	if err != nil {
		return nil, err
	}
	if hasDur && (duration <= 0 || duration > 366*24*3600) {
		return nil, errf(in, 0, "duration", "%g s is not a benchmark duration", duration)
	}
	completed, hasCompleted, err := v.count("completed")
	if err != nil {
		return nil, err
	}
	failed, hasFailed, err := v.count("failed")
	if err != nil {
		return nil, err
	}

	// Per-request arrays, when saved.
	pr, err := v.perRequest(hasFailed, failed, hasCompleted, completed)
	if err != nil {
		return nil, err
	}
	if pr.warning != "" {
		rep.warn("%s", pr.warning)
	}
	for _, k := range pr.unused {
		if _, ok := top[k]; ok {
			reason := pr.warning
			if reason == "" {
				reason = pr.unusedWhy[k]
			}
			rep.ignore(k, reason)
			led.use(k)
		}
	}

	// TTFT is the tool's own definition: its client's clock from sending to
	// the first streamed chunk it counts, which for a chat stream can be the
	// role-only chunk; Accord's probe stops at the first content token. The
	// source says so, so that imported and probed TTFTs are not mistaken
	// for the same measure.
	const ttftDefinition = " (vLLM's TTFT: to the first chunk its client counts, possibly the role-only chunk of a chat stream; Accord's probe measures to the first content token)"
	for _, mm := range vllmMetrics {
		summary, keys, err := v.summary(mm.key)
		if err != nil {
			return nil, err
		}
		raw, rawField, arrays := pr.values(mm.metric)
		if len(summary) == 0 && len(raw) == 0 {
			continue
		}
		led.use(keys...)
		for _, k := range keys {
			rep.read(k, mm.metric, "vLLM's own figure (numpy), kept beside Accord's")
		}
		if len(raw) > 0 {
			led.use(arrays...)
			for _, k := range arrays {
				rep.read(k, mm.metric, "per-request samples: Accord's percentiles come from them")
			}
		}
		if mm.metric == acceptance.MetricTTFT {
			rawField += ttftDefinition
		}
		if len(raw) > 0 {
			m := opts.measurement(mm.metric, src(rawField, MethodRawSamples))
			m.Values = raw
			if len(summary) > 0 {
				m.ToolSummary = summary
			}
			out = append(out, m)
			continue
		}
		field := "mean_/median_/std_/pNN_" + mm.key + "_ms"
		if mm.metric == acceptance.MetricTTFT {
			field += ttftDefinition
		}
		m := opts.measurement(mm.metric, src(field, MethodToolSummary))
		m.ToolSummary = summary
		out = append(out, m)
	}

	// Rates.
	rate := func(metric, key string, recomputed float64, canRecompute bool, how string, max float64) error {
		tool, has, err := v.number(key)
		if err != nil {
			return err
		}
		if has {
			if err := checkRate(tool, max); err != nil {
				return errf(in, 0, key, "%v", err)
			}
		}
		if !has && !canRecompute {
			return nil
		}
		led.use(key)
		if has {
			rep.read(key, metric, "vLLM's own figure, kept beside Accord's")
		}
		if canRecompute {
			if err := checkRate(recomputed, max); err != nil {
				return errf(in, 0, how, "%v", err)
			}
		}
		m := opts.measurement(metric, src(key, ""))
		if canRecompute {
			m.Values = []float64{recomputed}
			m.Source.Field = in + ": " + how
			rep.read(how, metric, "recomputed by Accord from vLLM's counts")
		} else {
			m.Values = []float64{tool}
		}
		if has {
			m.ToolSummary = map[string]float64{"rate": tool}
		}
		out = append(out, m)
		return nil
	}
	inTok, hasIn, err := v.count("total_input_tokens")
	if err != nil {
		return nil, err
	}
	outTok, hasOut, err := v.count("total_output_tokens")
	if err != nil {
		return nil, err
	}
	if err := rate(acceptance.MetricRequestThroughput, "request_throughput", completed/duration, hasDur && hasCompleted, "completed / duration", maxRequestRate); err != nil {
		return nil, err
	}
	if err := rate(acceptance.MetricOutputTokenThroughput, "output_throughput", outTok/duration, hasDur && hasOut, "total_output_tokens / duration", maxTokenRate); err != nil {
		return nil, err
	}
	if err := rate(acceptance.MetricTotalTokenThroughput, "total_token_throughput", (inTok+outTok)/duration, hasDur && hasOut && hasIn, "(total_input_tokens + total_output_tokens) / duration", maxTokenRate); err != nil {
		return nil, err
	}
	for _, k := range []string{"duration", "completed", "failed", "total_input_tokens", "total_output_tokens"} {
		if _, ok := top[k]; ok {
			led.use(k)
			rep.read(k, "", "a count or the duration: Accord recomputes the rates and the error rate from them")
		}
	}
	goodKey := "request_goodput"
	if _, ok := top[goodKey]; !ok {
		goodKey = "request_goodput:"
	}
	if raw, ok := top[goodKey]; ok && string(raw) == "null" {
		led.use(goodKey)
		rep.ignore(goodKey, "null: vLLM ran without --goodput, so it measured no goodput")
	}
	if err := rate(acceptance.MetricGoodput, goodKey, 0, false, "", maxRequestRate); err != nil {
		return nil, err
	}

	// Error rate: failed / all requests.
	switch {
	case hasFailed && hasCompleted && completed+failed > 0:
		rep.read("failed / (completed + failed)", acceptance.MetricErrorRate, "")
		m := opts.measurement(acceptance.MetricErrorRate, src("failed / (completed + failed)", ""))
		m.Values = []float64{failed / (completed + failed)}
		m.Trials = int64(completed + failed)
		out = append(out, m)
	case pr.n > 0 && pr.hasErrors:
		led.use("errors")
		rep.read("errors", acceptance.MetricErrorRate, "requests with a non-empty error")
		m := opts.measurement(acceptance.MetricErrorRate, src("errors (non-empty) / requests", ""))
		m.Values = []float64{float64(pr.n-pr.succeeded) / float64(pr.n)}
		m.Trials = int64(pr.n)
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, errf(in, 0, "", "no metrics found in the result")
	}
	if !hasFailed && pr.n == 0 {
		rep.warn("the result has no failed count and no per-request errors: no error rate")
	}
	return out, nil
}

func isVLLMDoc(top map[string]json.RawMessage) bool {
	if _, ok := top["request_throughput"]; !ok {
		return false
	}
	for _, k := range []string{"mean_ttft_ms", "mean_e2el_ms", "mean_tpot_ms", "mean_itl_ms"} {
		if _, ok := top[k]; ok {
			return true
		}
	}
	_, c := top["completed"]
	_, d := top["duration"]
	return c && d
}

type vllmDoc struct {
	top map[string]json.RawMessage
	in  string
}

// number reads an optional finite number; null counts as absent only for
// keys vLLM writes as null (goodput without --goodput).
func (v vllmDoc) number(key string) (float64, bool, error) {
	raw, ok := v.top[key]
	if !ok {
		return 0, false, nil
	}
	if string(raw) == "null" {
		if strings.HasPrefix(key, "request_goodput") {
			return 0, false, nil
		}
		return 0, false, errf(v.in, 0, key, "null or not a finite number")
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, false, errf(v.in, 0, key, "must be a number, got %.40s", raw)
	}
	x, err := num(&n)
	if err != nil {
		return 0, false, errf(v.in, 0, key, "%v", err)
	}
	return x, true, nil
}

func (v vllmDoc) count(key string) (float64, bool, error) {
	x, ok, err := v.number(key)
	if err != nil || !ok {
		return 0, ok, err
	}
	if x < 0 || x != math.Trunc(x) || x > 1e13 {
		return 0, false, errf(v.in, 0, key, "%g is not a count", x)
	}
	return x, true, nil
}

// summary gathers vLLM's statistics of one metric, in ms.
func (v vllmDoc) summary(key string) (map[string]float64, []string, error) {
	s := map[string]float64{}
	var keys []string
	suffix := "_" + key + "_ms"
	for _, k := range sortedKeys(v.top) {
		if !strings.HasSuffix(k, suffix) {
			continue
		}
		stat := strings.TrimSuffix(k, suffix)
		var name string
		switch {
		case stat == "mean":
			name = "mean"
		case stat == "median":
			name = "p50"
		case stat == "std":
			name = "stddev"
		case len(stat) > 1 && stat[0] == 'p':
			p, err := strconv.ParseFloat(stat[1:], 64)
			if err != nil || math.IsNaN(p) || p < 0 || p > 100 || stat[1] == '+' || stat[1] == '-' {
				continue // another metric whose name ends like this one
			}
			name = percentileKey(p)
		default:
			continue
		}
		x, _, err := v.number(k)
		if err != nil {
			return nil, nil, err
		}
		if name == "stddev" {
			if err := checkRate(x, maxLatencyMs); err != nil {
				return nil, nil, errf(v.in, 0, k, "%v", err)
			}
		} else if err := checkLatency(x); err != nil {
			return nil, nil, errf(v.in, 0, k, "%v", err)
		}
		s[name] = x
		keys = append(keys, k)
	}
	return s, keys, nil
}

// vllmRequests holds the per-request samples of succeeded requests, in ms.
type vllmRequests struct {
	n, succeeded int
	hasErrors    bool
	ttft, e2el   []float64
	tpot, itl    []float64
	queue, e2elQ []float64
	warning      string
	// unused are the per-request arrays present but not imported, with
	// the reason (warning, when the arrays could not be used at all).
	unused    []string
	unusedWhy map[string]string
}

// values returns a metric's samples, the field they say they came from,
// and the arrays read for them.
func (p *vllmRequests) values(metric string) ([]float64, string, []string) {
	switch metric {
	case acceptance.MetricTTFT:
		return p.ttft, "ttfts (s) of succeeded requests × 1000", []string{"ttfts", "errors"}
	case acceptance.MetricE2EL:
		return p.e2el, "latencies (s) of succeeded requests × 1000", []string{"latencies", "errors"}
	case acceptance.MetricTPOT:
		return p.tpot, "(latencies − ttfts) / (output_lens − 1) of succeeded requests × 1000", []string{"latencies", "ttfts", "output_lens", "errors"}
	case acceptance.MetricITL:
		return p.itl, "itls (s) of succeeded requests × 1000", []string{"itls", "errors"}
	case acceptance.MetricSendDelay:
		return p.queue, "queue_times (s) of succeeded requests × 1000", []string{"queue_times", "errors"}
	case acceptance.MetricE2ELIntended:
		return p.e2elQ, "latencies + queue_times (s) of succeeded requests × 1000", []string{"latencies", "queue_times", "errors"}
	}
	return nil, "", nil
}

func (v vllmDoc) floats(key string) ([]*float64, bool, error) {
	raw, ok := v.top[key]
	if !ok || string(raw) == "null" {
		return nil, false, nil
	}
	var xs []*float64
	if err := json.Unmarshal(raw, &xs); err != nil {
		return nil, false, errf(v.in, 0, key, "must be a list of numbers: %v", jsonErr(err))
	}
	return xs, true, nil
}

func (v vllmDoc) perRequest(hasFailed bool, failed float64, hasCompleted bool, completed float64) (*vllmRequests, error) {
	p := &vllmRequests{}
	ttfts, hasTTFT, err := v.floats("ttfts")
	if err != nil {
		return nil, err
	}
	lats, hasLat, err := v.floats("latencies")
	if err != nil {
		return nil, err
	}
	queues, hasQueue, err := v.floats("queue_times")
	if err != nil {
		return nil, err
	}
	outLens, hasOut, err := v.floats("output_lens")
	if err != nil {
		return nil, err
	}
	var itls [][]*float64
	hasITL := false
	if raw, ok := v.top["itls"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &itls); err != nil {
			return nil, errf(v.in, 0, "itls", "must be a list of lists of numbers: %v", jsonErr(err))
		}
		hasITL = true
	}
	var errs []*string
	if raw, ok := v.top["errors"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &errs); err != nil {
			return nil, errf(v.in, 0, "errors", "must be a list of strings: %v", jsonErr(err))
		}
		p.hasErrors = true
	}
	// Every per-request array must have one entry per request.
	n := -1
	lengths := []struct {
		name string
		has  bool
		n    int
	}{{"ttfts", hasTTFT, len(ttfts)}, {"latencies", hasLat, len(lats)}, {"queue_times", hasQueue, len(queues)},
		{"output_lens", hasOut, len(outLens)}, {"itls", hasITL, len(itls)}, {"errors", p.hasErrors, len(errs)}}
	first := ""
	for _, l := range lengths {
		if !l.has {
			continue
		}
		if n < 0 {
			n, first = l.n, l.name
		} else if l.n != n {
			return nil, errf(v.in, 0, l.name, "has %d entries, %s has %d: the per-request arrays must line up", l.n, first, n)
		}
	}
	if n <= 0 {
		return p, nil
	}
	p.n = n
	// Which requests succeeded: from errors, or all of them when vLLM says
	// none failed. Otherwise the arrays cannot be used (failed requests
	// carry zeros).
	ok := make([]bool, n)
	switch {
	case p.hasErrors:
		for i, e := range errs {
			ok[i] = e == nil || *e == ""
		}
	case (hasFailed && failed == 0) || (!hasFailed && hasCompleted && int(completed) == n):
		for i := range ok {
			ok[i] = true
		}
	default:
		p.warning = "per-request arrays without errors while some requests failed: succeeded requests cannot be told apart, vLLM's summary is used"
		p.n = 0
		p.unused = []string{"ttfts", "latencies", "queue_times", "output_lens", "itls"}
		return p, nil
	}
	for _, s := range ok {
		if s {
			p.succeeded++
		}
	}
	if hasCompleted && p.succeeded != int(completed) {
		return nil, errf(v.in, 0, "errors", "%d requests without an error, but completed says %g", p.succeeded, completed)
	}
	get := func(key string, xs []*float64, i int) (float64, error) {
		if xs[i] == nil {
			return 0, errf(v.in, 0, fmt.Sprintf("%s[%d]", key, i), "null or not a finite number in a succeeded request")
		}
		ms := *xs[i] * 1000
		if err := checkLatency(ms); err != nil {
			return 0, errf(v.in, 0, fmt.Sprintf("%s[%d]", key, i), "%v", err)
		}
		return ms, nil
	}
	for i := 0; i < n; i++ {
		if !ok[i] {
			continue
		}
		var ttft, lat float64
		if hasTTFT {
			if ttft, err = get("ttfts", ttfts, i); err != nil {
				return nil, err
			}
			p.ttft = append(p.ttft, ttft)
		}
		if hasLat {
			if lat, err = get("latencies", lats, i); err != nil {
				return nil, err
			}
			p.e2el = append(p.e2el, lat)
		}
		if hasQueue {
			q, err := get("queue_times", queues, i)
			if err != nil {
				return nil, err
			}
			p.queue = append(p.queue, q)
			if hasLat {
				p.e2elQ = append(p.e2elQ, lat+q)
			}
		}
		if hasITL {
			for j := range itls[i] {
				x, err := get(fmt.Sprintf("itls[%d]", i), itls[i], j)
				if err != nil {
					return nil, err
				}
				p.itl = append(p.itl, x)
			}
		}
		if hasTTFT && hasLat && hasOut {
			if outLens[i] == nil {
				return nil, errf(v.in, 0, fmt.Sprintf("output_lens[%d]", i), "null")
			}
			o := *outLens[i]
			if o < 0 || o != math.Trunc(o) || o > maxTokensPerRequest {
				return nil, errf(v.in, 0, fmt.Sprintf("output_lens[%d]", i), "%g is not a token count", o)
			}
			if lat < ttft {
				return nil, errf(v.in, 0, fmt.Sprintf("latencies[%d]", i), "%g ms is shorter than its ttft %g ms", lat, ttft)
			}
			if o > 1 {
				p.tpot = append(p.tpot, (lat-ttft)/(o-1))
			}
		}
	}
	// vLLM's queue summaries only exist with --max-concurrency; without it
	// queue_times measure nothing but task scheduling.
	p.unusedWhy = map[string]string{}
	if _, ok := v.top["mean_client_queue_time_ms"]; !ok {
		p.queue, p.e2elQ = nil, nil
		p.unused = append(p.unused, "queue_times")
		p.unusedWhy["queue_times"] = "without --max-concurrency vLLM's queue times measure only its task scheduling, not client queueing"
	}
	if _, ok := v.top["mean_e2el_including_client_queue_ms"]; !ok {
		p.e2elQ = nil
	}
	if hasOut && !(hasTTFT && hasLat) {
		p.unused = append(p.unused, "output_lens")
		p.unusedWhy["output_lens"] = "output lengths per request: without both ttfts and latencies no per-request TPOT can be computed"
	}
	return p, nil
}

// sortedKeys gives a stable order, so that the same bad file always gets
// the same error.
func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
