package parse

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/parse/spill"
	"github.com/accordlab/accord/runners/probe/wire"
)

const nsPerMs = 1e6

// Bounds on one request record, to catch corrupt or hostile input.
const (
	maxTokensPerRequest = 100_000_000
	maxChunksPerRequest = 1_000_000_000
)

// ImportProbeRecords reads the probe's requests.jsonl for one level from r
// and computes every request metric from the raw timestamps, together with
// the level's StepResult in opts.Result:
//
//   - ttft = first_token − sent, ttft_content = first_content − sent,
//     e2el = done − sent, and from the intended send time ttft_intended,
//     e2el_intended and send_delay = sent − intended; tpot = (e2el − ttft) /
//     (output_tokens − 1) for requests with more than one output token; all
//     in ms, over succeeded non-warm-up requests;
//   - itl from the probe's histogram (Values + Counts);
//   - request_throughput, output_token_throughput and total_token_throughput
//     over the measured window; goodput when opts.SLO sets a limit; error_rate
//     = failed / all non-warm-up requests; cache_hit_ratio from the vLLM
//     prefix cache counters in PromDelta (see CacheHitRatio).
//
// The reader is streamed: only the per-request latencies are kept.
func ImportProbeRecords(r io.Reader, opts Options) ([]acceptance.Measurement, []string, error) {
	return importProbeRecords(r, -1, opts)
}

// probeAcc accumulates one level's records.
type probeAcc struct {
	// Each latency's samples, with the second of the step's clock each
	// value's request was sent in (what drift criteria cut windows by):
	// past stats.InMemoryLimit they are kept in segments in a temporary
	// file (spill), not in memory, and without their seconds.
	ttft, ttftContent, e2el, tpot         *spill.Samples
	ttftIntended, e2elIntended, sendDelay *spill.Samples
	// The first second a request of the level was sent in.
	firstSec int32

	all, succeeded, failed, warmup int64
	outputTokens, promptTokens     int64
	good                           int64
	usageCounted                   int64
	noToken, noContent             int64
	errorKinds                     map[string]int64
}

func importProbeRecords(r io.Reader, size int64, opts Options) ([]acceptance.Measurement, []string, error) {
	in := opts.name(wire.RequestsFile)
	resName := opts.ResultName
	if resName == "" {
		resName = wire.StepResultFile
	}
	res := opts.Result
	if res == nil {
		return nil, nil, errf(in, 0, "", "the level's step result (%s) is required: it holds the measured window", resName)
	}
	sum := res.Inference
	if sum == nil {
		return nil, nil, errf(resName, 0, "inference", "missing: an inference step's result must carry the load generator's summary")
	}
	if math.IsNaN(sum.WindowSec) || math.IsInf(sum.WindowSec, 0) || sum.WindowSec < 1e-3 || sum.WindowSec > 366*24*3600 {
		return nil, nil, errf(resName, 0, "inference.window_sec", "must be a positive number of seconds (at least 1 ms, at most a year), got %v", sum.WindowSec)
	}
	openLoop := sum.OfferedRate > 0
	if math.IsNaN(sum.OfferedRate) || math.IsInf(sum.OfferedRate, 0) || sum.OfferedRate < 0 {
		return nil, nil, errf(resName, 0, "inference.offered_rate", "must be a finite number ≥ 0, got %v", sum.OfferedRate)
	}
	slo := opts.SLO
	for _, v := range []struct {
		name string
		v    float64
	}{{"ttft_ms", slo.TTFTMs}, {"tpot_ms", slo.TPOTMs}, {"e2el_ms", slo.E2ELMs}} {
		if math.IsNaN(v.v) || math.IsInf(v.v, 0) || v.v < 0 {
			return nil, nil, fmt.Errorf("parse %s: SLO %s must be a finite number ≥ 0, got %v", in, v.name, v.v)
		}
	}
	hasSLO := slo.TTFTMs > 0 || slo.TPOTMs > 0 || slo.E2ELMs > 0

	// Size the sample slices once: the summary says how many requests ran,
	// bounded by what the input could possibly hold.
	hint := sum.Requests
	bound := int64(4 << 20)
	if size >= 0 {
		bound = size/40 + 1
	}
	if hint <= 0 || hint > bound {
		hint = min(bound, 1<<16)
	}
	acc := probeAcc{errorKinds: map[string]int64{}, firstSec: math.MaxInt32}
	// The samples past stats.InMemoryLimit: the file lives on with the
	// measurements (ingest.Release closes it), or goes with a failed
	// import.
	file := spill.NewFile(opts.TempDir)
	imported := false
	defer func() {
		if imported {
			file.Done()
		} else {
			file.Close()
		}
	}()
	acc.ttft = file.NewSamples(int(hint))
	acc.ttftContent = file.NewSamples(int(hint))
	acc.e2el = file.NewSamples(int(hint))
	acc.tpot = file.NewSamples(int(hint))
	n := 0
	if openLoop {
		n = int(hint)
	}
	acc.ttftIntended = file.NewSamples(n)
	acc.e2elIntended = file.NewSamples(n)
	acc.sendDelay = file.NewSamples(n)

	limit := opts.limit(MaxRecordBytes)
	br := bufio.NewReaderSize(&limitedReader{r: r, limit: limit, input: in}, 256<<10)
	var rec recordLine
	lineNo := 0
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 || err == nil {
			lineNo++
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, nil, errf(in, lineNo, "", "line longer than %d bytes", br.Size())
		}
		if err != nil && !errors.Is(err, io.EOF) {
			var pe *Error
			if errors.As(err, &pe) {
				return nil, nil, pe
			}
			return nil, nil, &Error{Input: in, Line: lineNo, Err: err}
		}
		if len(line) > 0 && !blank(line) {
			rec = recordLine{}
			if derr := decodeRecordLine(line, &rec); derr != nil {
				var se *scanError
				if errors.As(derr, &se) {
					return nil, nil, &Error{Input: in, Line: lineNo, Field: se.field, Err: errors.New(se.msg)}
				}
				return nil, nil, &Error{Input: in, Line: lineNo, Err: derr}
			}
			if f, verr := acc.add(&rec, openLoop, hasSLO, slo); verr != nil {
				return nil, nil, &Error{Input: in, Line: lineNo, Field: f, Err: verr}
			}
		}
		if err != nil { // io.EOF
			break
		}
	}
	if acc.all == 0 {
		if acc.warmup > 0 {
			return nil, nil, errf(in, 0, "", "all %d requests were sent during warm-up: nothing was measured", acc.warmup)
		}
		return nil, nil, errf(in, 0, "", "no request records")
	}
	ms, warnings, err := acc.measurements(res, in, resName, hasSLO, opts)
	imported = err == nil
	return ms, warnings, err
}

func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// add validates one record and accumulates it. It returns the field at
// fault with the error.
func (a *probeAcc) add(r *recordLine, openLoop, hasSLO bool, slo acceptance.SLO) (string, error) {
	// The OR of the times is negative when any one is: one test per record.
	if r.Intended|r.Sent|r.FirstChunk|r.FirstToken|r.FirstContent|r.LastToken|r.Done < 0 {
		for _, t := range []struct {
			name string
			v    int64
		}{{"t_intended", r.Intended}, {"t_sent", r.Sent}, {"t_first_chunk", r.FirstChunk}, {"t_first_token", r.FirstToken},
			{"t_first_content", r.FirstContent}, {"t_last_token", r.LastToken}, {"t_done", r.Done}} {
			if t.v < 0 {
				return t.name, fmt.Errorf("negative time %d ns", t.v)
			}
		}
	}
	if r.PromptTokens < 0 || r.PromptTokens > maxTokensPerRequest {
		return "prompt_tokens", fmt.Errorf("%d is not a plausible token count", r.PromptTokens)
	}
	if r.OutputTokens < 0 || r.OutputTokens > maxTokensPerRequest {
		return "output_tokens", fmt.Errorf("%d is not a plausible token count", r.OutputTokens)
	}
	if r.Chunks < 0 || r.Chunks > maxChunksPerRequest {
		return "chunks", fmt.Errorf("%d is not a plausible chunk count", r.Chunks)
	}
	if r.HTTPStatus < 0 || r.HTTPStatus > 999 {
		return "http_status", fmt.Errorf("%d is not an HTTP status", r.HTTPStatus)
	}
	if r.Warmup {
		a.warmup++
		return "", nil
	}
	a.all++
	if len(r.errorKind) > 0 || r.errorText || r.HTTPStatus >= 400 {
		a.failed++
		kind := string(r.errorKind)
		if kind == "" {
			kind = "unspecified"
			if r.HTTPStatus >= 400 {
				kind = "http"
			}
		}
		if len(a.errorKinds) < 32 || a.errorKinds[kind] > 0 {
			a.errorKinds[kind]++
		} else {
			a.errorKinds["other"]++
		}
		return "", nil
	}

	// A succeeded request: every time it reports must be in order.
	if r.Sent == 0 {
		return "t_sent", errors.New("missing (0) in a succeeded request")
	}
	if r.Done == 0 {
		return "t_done", errors.New("missing (0) in a succeeded request")
	}
	if r.Done < r.Sent {
		return "t_done", fmt.Errorf("%d ns is before t_sent %d ns", r.Done, r.Sent)
	}
	e2el := float64(r.Done-r.Sent) / nsPerMs
	if err := checkLatency(e2el); err != nil {
		return "t_done", fmt.Errorf("end-to-end latency: %w", err)
	}
	if r.UsageCounted {
		a.usageCounted++
	}
	a.succeeded++
	a.outputTokens += int64(r.OutputTokens)
	a.promptTokens += int64(r.PromptTokens)
	if r.Sent/1e9 > math.MaxInt32 {
		return "t_sent", fmt.Errorf("%d ns is more than 68 years into the step", r.Sent)
	}
	sec := int32(r.Sent / 1e9)
	a.firstSec = min(a.firstSec, sec)
	a.e2el.Add(e2el, sec)

	ttft := math.NaN()
	if r.FirstToken == 0 {
		a.noToken++
	} else {
		if r.FirstToken < r.Sent || r.FirstToken > r.Done {
			return "t_first_token", fmt.Errorf("%d ns is outside t_sent %d .. t_done %d", r.FirstToken, r.Sent, r.Done)
		}
		ttft = float64(r.FirstToken-r.Sent) / nsPerMs
		a.ttft.Add(ttft, sec)
	}
	if r.FirstContent == 0 {
		a.noContent++
	} else {
		if r.FirstContent < r.Sent || r.FirstContent > r.Done {
			return "t_first_content", fmt.Errorf("%d ns is outside t_sent %d .. t_done %d", r.FirstContent, r.Sent, r.Done)
		}
		a.ttftContent.Add(float64(r.FirstContent-r.Sent)/nsPerMs, sec)
	}
	tpot := 0.0 // as vLLM: a request with one output token meets any TPOT limit
	if r.OutputTokens > 1 && r.FirstToken != 0 {
		tpot = float64(r.Done-r.FirstToken) / nsPerMs / float64(r.OutputTokens-1)
		a.tpot.Add(tpot, sec)
	}
	// Open loop: every request has an intended send time (the first may be
	// 0, the level's start). Closed loop: only where the probe wrote one.
	if openLoop || r.Intended != 0 {
		if r.Intended > r.Sent {
			return "t_intended", fmt.Errorf("%d ns is after t_sent %d ns", r.Intended, r.Sent)
		}
		e2elInt := float64(r.Done-r.Intended) / nsPerMs
		if err := checkLatency(e2elInt); err != nil {
			return "t_intended", fmt.Errorf("latency from the intended send time: %w", err)
		}
		a.sendDelay.Add(float64(r.Sent-r.Intended)/nsPerMs, sec)
		a.e2elIntended.Add(e2elInt, sec)
		if r.FirstToken != 0 {
			a.ttftIntended.Add(float64(r.FirstToken-r.Intended)/nsPerMs, sec)
		}
	}
	if hasSLO {
		good := (slo.E2ELMs == 0 || e2el <= slo.E2ELMs) && (slo.TPOTMs == 0 || tpot <= slo.TPOTMs)
		if slo.TTFTMs > 0 {
			good = good && !math.IsNaN(ttft) && ttft <= slo.TTFTMs
		}
		if good {
			a.good++
		}
	}
	return "", nil
}

func (a *probeAcc) measurements(res *wire.StepResult, in, resName string, hasSLO bool, opts Options) ([]acceptance.Measurement, []string, error) {
	sum := res.Inference
	var warnings []string
	var out []acceptance.Measurement
	src := func(field, method string) acceptance.Source {
		return acceptance.Source{Tool: ToolProbe, ToolVersion: opts.ToolVersion, Field: field, PercentileMethod: method}
	}
	var spillErr error
	dist := func(metric string, samples *spill.Samples, field string) {
		values, secs, segs, err := samples.Finish()
		if err != nil {
			spillErr = cmp.Or(spillErr, err)
			return
		}
		if len(values) == 0 && len(segs) == 0 {
			return
		}
		method := MethodRawSamples
		if len(segs) > 0 {
			method = MethodSegmentedSamples
		}
		m := opts.measurement(metric, src(in+": "+field, method))
		if len(segs) > 0 {
			m.Segments = segs
		} else {
			m.Values, m.SentIndex = bySendSecond(values, secs, a.firstSec)
		}
		out = append(out, m)
	}
	dist(acceptance.MetricTTFT, a.ttft, "t_first_token − t_sent")
	dist(acceptance.MetricTTFTContent, a.ttftContent, "t_first_content − t_sent")
	dist(acceptance.MetricE2EL, a.e2el, "t_done − t_sent")
	dist(acceptance.MetricTPOT, a.tpot, "(t_done − t_first_token) / (output_tokens − 1)")
	dist(acceptance.MetricTTFTIntended, a.ttftIntended, "t_first_token − t_intended")
	dist(acceptance.MetricE2ELIntended, a.e2elIntended, "t_done − t_intended")
	dist(acceptance.MetricSendDelay, a.sendDelay, "t_sent − t_intended")
	if spillErr != nil {
		return nil, nil, &Error{Input: in, Err: fmt.Errorf("keeping the samples in a temporary file: %w", spillErr)}
	}

	if a.succeeded == 0 {
		warnings = append(warnings, fmt.Sprintf("all %d measured requests failed: no latency distributions", a.all))
	}
	if a.noToken > 0 {
		warnings = append(warnings, fmt.Sprintf("%d succeeded requests had no token-carrying chunk: they count in e2el but not in ttft or tpot", a.noToken))
	}
	if a.noContent > a.noToken {
		warnings = append(warnings, fmt.Sprintf("%d succeeded requests had no visible content (reasoning or tool calls only): not in ttft_content", a.noContent-a.noToken))
	}
	if a.usageCounted > 0 {
		warnings = append(warnings, fmt.Sprintf("%d of %d succeeded requests had token counts counted from chunks because the server sent no usage: tpot and token throughputs rely on those counts", a.usageCounted, a.succeeded))
	}

	// ITL from the probe's histogram.
	if len(sum.ITL) > 0 {
		values, counts, err := histogram(sum.ITL)
		if err != nil {
			return nil, nil, &Error{Input: resName, Field: "inference.itl", Err: err}
		}
		if len(values) > 0 {
			m := opts.measurement(acceptance.MetricITL, src(resName+": inference.itl", MethodHistogram))
			m.Values, m.Counts = values, counts
			out = append(out, m)
		}
	} else if a.succeeded > 0 && a.tpot.Len() > 0 {
		warnings = append(warnings, "the step result has no ITL histogram: no itl")
	}

	w := sum.WindowSec
	rate := func(metric string, v float64, field string) {
		m := opts.measurement(metric, src(field, ""))
		m.Values = []float64{v}
		out = append(out, m)
	}
	window := fmt.Sprintf(" / %s window_sec %s", resName, strconv.FormatFloat(w, 'g', -1, 64))
	rate(acceptance.MetricRequestThroughput, float64(a.succeeded)/w, in+": succeeded requests"+window)
	rate(acceptance.MetricOutputTokenThroughput, float64(a.outputTokens)/w, in+": output_tokens of succeeded requests"+window)
	rate(acceptance.MetricTotalTokenThroughput, float64(a.outputTokens+a.promptTokens)/w, in+": prompt_tokens + output_tokens of succeeded requests"+window)
	if hasSLO {
		rate(acceptance.MetricGoodput, float64(a.good)/w, in+": succeeded requests meeting "+sloText(opts.SLO)+window)
	} else {
		warnings = append(warnings, "no SLO set for the step: no goodput")
	}
	rate(acceptance.MetricErrorRate, float64(a.failed)/float64(a.all), in+": failed / all non-warm-up requests")
	out[len(out)-1].Trials = int64(a.all)
	if a.failed > 0 {
		warnings = append(warnings, fmt.Sprintf("%d of %d requests failed (%s)", a.failed, a.all, kindsText(a.errorKinds)))
	}

	if sum.Requests > 0 && sum.Requests != a.all+a.warmup && sum.Requests != a.all {
		warnings = append(warnings, fmt.Sprintf("%s says %d requests, %s holds %d (%d warm-up)", resName, sum.Requests, in, a.all+a.warmup, a.warmup))
	}
	if sum.Succeeded > 0 && sum.Succeeded != a.succeeded {
		warnings = append(warnings, fmt.Sprintf("%s says %d succeeded, %s holds %d: Accord's figures come from the records", resName, sum.Succeeded, in, a.succeeded))
	}

	if sc := sum.SelfCheck; sc != nil {
		ms, w, err := selfCheckMeasurements(sc, resName, opts)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, ms...)
		warnings = append(warnings, w...)
	} else {
		warnings = append(warnings, "the step result has no self-check of the load generator (a probe older than this server): whether the client kept up is unknown")
	}

	if len(res.PromDelta) > 0 {
		ratio, field, ok, warn := CacheHitRatio(res.PromDelta)
		if warn != "" {
			warnings = append(warnings, warn)
		}
		if ok {
			rate(acceptance.MetricCacheHitRatio, ratio, resName+": prom_delta "+field)
		}
	}
	return out, warnings, nil
}

func sloText(s acceptance.SLO) string {
	var parts []string
	if s.TTFTMs > 0 {
		parts = append(parts, "ttft ≤ "+strconv.FormatFloat(s.TTFTMs, 'g', -1, 64)+" ms")
	}
	if s.TPOTMs > 0 {
		parts = append(parts, "tpot ≤ "+strconv.FormatFloat(s.TPOTMs, 'g', -1, 64)+" ms")
	}
	if s.E2ELMs > 0 {
		parts = append(parts, "e2el ≤ "+strconv.FormatFloat(s.E2ELMs, 'g', -1, 64)+" ms")
	}
	return strings.Join(parts, ", ")
}

func kindsText(kinds map[string]int64) string {
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, strconv.Quote(k)+": "+strconv.FormatInt(kinds[k], 10))
	}
	return strings.Join(parts, ", ")
}

// histogram validates the probe's ITL buckets (ms) and returns them sorted,
// with duplicate values merged and empty buckets dropped.
func histogram(buckets []wire.HistogramBucket) ([]float64, []int64, error) {
	b := make([]wire.HistogramBucket, 0, len(buckets))
	for i, x := range buckets {
		if err := checkLatency(x.Value); err != nil {
			return nil, nil, fmt.Errorf("bucket %d: value: %w", i, err)
		}
		if x.Count < 0 {
			return nil, nil, fmt.Errorf("bucket %d: negative count %d", i, x.Count)
		}
		if x.Count > 0 {
			b = append(b, x)
		}
	}
	sort.Slice(b, func(i, j int) bool { return b[i].Value < b[j].Value })
	var values []float64
	var counts []int64
	for _, x := range b {
		if n := len(values); n > 0 && values[n-1] == x.Value {
			if counts[n-1] > math.MaxInt64-x.Count {
				return nil, nil, errors.New("bucket counts overflow")
			}
			counts[n-1] += x.Count
			continue
		}
		values = append(values, x.Value)
		counts = append(counts, x.Count)
	}
	return values, counts, nil
}

// Prometheus counters for the prefix cache, newest names first. vLLM V1
// counts hits and queries in tokens: vllm:prefix_cache_{hits,queries}
// (exposed with _total); vLLM 0.7–0.10 named them
// vllm:gpu_prefix_cache_{hits,queries}. SGLang counts every prompt token
// in sglang:prompt_tokens_total and the ones its radix cache served in
// sglang:cached_tokens_total (python/sglang/srt/metrics/collector.py,
// TokenizerMetricsCollector; newer releases split it by a cache_source
// label, summed here): the same tokens-based ratio. vLLM V0's
// vllm:gpu_prefix_cache_hit_rate and SGLang's sglang:cache_hit_rate are
// gauges: a delta of a gauge is no ratio, so they are reported as
// unsupported.
var cacheCounters = []struct{ hits, queries string }{
	{"vllm:prefix_cache_hits", "vllm:prefix_cache_queries"},
	{"vllm:gpu_prefix_cache_hits", "vllm:gpu_prefix_cache_queries"},
	{"sglang:cached_tokens", "sglang:prompt_tokens"},
}

var cacheGauges = []string{"vllm:gpu_prefix_cache_hit_rate", "vllm:cpu_prefix_cache_hit_rate", "sglang:cache_hit_rate"}

// CacheHitRatio computes hits / queries from counter increases keyed by
// Prometheus series (`name` or `name{labels}`, with or without the _total
// suffix); the series of one name are summed over their labels. It returns
// the ratio, the counter names used, whether a ratio could be computed, and
// a warning when it could not although cache counters were present.
func CacheHitRatio(delta map[string]float64) (ratio float64, field string, ok bool, warning string) {
	sums := map[string]float64{}
	for k, v := range delta {
		name := k
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		name = strings.TrimSuffix(strings.TrimSpace(name), "_total")
		sums[name] += v
	}
	for _, c := range cacheCounters {
		hits, okH := sums[c.hits]
		queries, okQ := sums[c.queries]
		if !okH && !okQ {
			continue
		}
		field = c.hits + "_total / " + c.queries + "_total"
		switch {
		case !okH || !okQ:
			return 0, field, false, "prefix cache counters incomplete (" + field + "; SGLang before cached_tokens_total has only the cache_hit_rate gauge): no cache_hit_ratio"
		case math.IsNaN(hits) || math.IsNaN(queries) || math.IsInf(hits, 0) || math.IsInf(queries, 0):
			return 0, field, false, "prefix cache counter deltas are not finite: no cache_hit_ratio"
		case hits < 0 || queries < 0:
			return 0, field, false, "prefix cache counters went down during the step (server restarted?): no cache_hit_ratio"
		case queries == 0:
			return 0, field, false, "no prefix cache queries during the step (prefix caching off?): no cache_hit_ratio"
		case hits > queries:
			return 0, field, false, fmt.Sprintf("prefix cache hits (%g) exceed queries (%g): no cache_hit_ratio", hits, queries)
		}
		return hits / queries, field, true, ""
	}
	for _, g := range cacheGauges {
		if _, has := sums[g]; has {
			return 0, "", false, g + " is a gauge, not a counter: Accord needs the hit and query counters (vLLM V1) for cache_hit_ratio"
		}
	}
	return 0, "", false, ""
}

// selfCheckMeasurements turns the load generator's self-check into
// measurements, so that the evaluation, the pages and the signed report
// judge the client from the same stored numbers (acceptance.ClientFlags).
func selfCheckMeasurements(sc *wire.SelfCheck, resName string, opts Options) ([]acceptance.Measurement, []string, error) {
	var out []acceptance.Measurement
	var warnings []string
	src := func(field, method string) acceptance.Source {
		return acceptance.Source{Tool: ToolProbe, ToolVersion: opts.ToolVersion, Field: resName + ": inference.self_check." + field, PercentileMethod: method}
	}
	for _, h := range []struct {
		metric, field string
		buckets       []wire.HistogramBucket
	}{{acceptance.MetricClientLateness, "lateness", sc.Lateness}, {acceptance.MetricClientTickDelay, "tick_delay", sc.TickDelay}} {
		if len(h.buckets) == 0 {
			continue
		}
		values, counts, err := histogram(h.buckets)
		if err != nil {
			return nil, nil, &Error{Input: resName, Field: "inference.self_check." + h.field, Err: err}
		}
		if len(values) > 0 {
			m := opts.measurement(h.metric, src(h.field, MethodHistogram))
			m.Values, m.Counts = values, counts
			out = append(out, m)
		}
	}
	for _, r := range []struct {
		metric, field string
		v             *float64
	}{{acceptance.MetricClientCPU, "probe_cpu_pct", &sc.ProbeCPUPct}, {acceptance.MetricClientRunQueue, "probe_run_queue_pct", sc.ProbeRunQueuePct},
		{acceptance.MetricHostCPUPressure, "host_cpu_pressure_pct", sc.HostCPUPressurePct}} {
		if r.v == nil {
			continue
		}
		if err := checkRate(*r.v, 1e4); err != nil {
			return nil, nil, errf(resName, 0, "inference.self_check."+r.field, "%v", err)
		}
		m := opts.measurement(r.metric, src(r.field, ""))
		m.Values = []float64{*r.v}
		out = append(out, m)
	}
	if len(sc.Missing) > 0 {
		warnings = append(warnings, "the load generator's self-check could not read "+strings.Join(sc.Missing, ", "))
	}
	if sc.Flagged {
		warnings = append(warnings, "the load generator flagged this level: "+strings.Join(sc.Reasons, "; "))
	}
	return out, warnings, nil
}

// bySendSecond orders values by the second their requests were sent in
// (stable: the file's order within a second) and returns them with their
// send-time index (acceptance.Measurement.SentIndex): index[s] is where
// the values of second first+s start. A counting sort: records are
// written as requests end, close to but not in send order.
func bySendSecond(values []float64, secs []int32, first int32) ([]float64, []int64) {
	if len(secs) != len(values) || len(values) == 0 {
		return values, nil
	}
	last := first
	for _, s := range secs {
		last = max(last, s)
	}
	index := make([]int64, int(last-first)+1)
	for _, s := range secs {
		if s+1-first < int32(len(index)) {
			index[s+1-first]++
		}
	}
	for i := 1; i < len(index); i++ {
		index[i] += index[i-1]
	}
	pos := slices.Clone(index)
	out := make([]float64, len(values))
	for i, v := range values {
		k := secs[i] - first
		out[pos[k]] = v
		pos[k]++
	}
	return out, index
}
