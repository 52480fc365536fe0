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

// GenAI-Perf (profile_export_genai_perf.json) and AIPerf
// (profile_export_aiperf.json) export one object per metric:
// {"unit": "ms", "avg": …, "p1" … "p99", "min", "max", "std"}; throughputs
// have only "avg". AIPerf 0.1 nested them under "records"; later versions
// put them at the top level beside error_summary, was_cancelled and
// (newer) aiperf_version.
//
// Both tools' inter_token_latency is per request (request_latency − ttft) /
// (output tokens − 1): that is Accord's tpot. AIPerf's inter_chunk_latency is
// the gap between chunks: Accord's itl.
var perfMetrics = []struct {
	key    string
	metric string
	kind   string // time, requests, tokens
}{
	{"time_to_first_token", acceptance.MetricTTFT, "time"},
	{"inter_token_latency", acceptance.MetricTPOT, "time"},
	{"inter_chunk_latency", acceptance.MetricITL, "time"},
	{"request_latency", acceptance.MetricE2EL, "time"},
	{"request_throughput", acceptance.MetricRequestThroughput, "requests"},
	{"output_token_throughput", acceptance.MetricOutputTokenThroughput, "tokens"},
	{"request_goodput", acceptance.MetricGoodput, "requests"}, // GenAI-Perf
	{"goodput", acceptance.MetricGoodput, "requests"},         // AIPerf
}

// Units accepted per kind, with the factor to the canonical unit.
var timeUnits = map[string]float64{"ms": 1, "us": 1e-3, "µs": 1e-3, "ns": 1e-6, "s": 1e3, "sec": 1e3}
var requestRateUnits = map[string]float64{"requests/sec": 1, "requests/s": 1, "req/s": 1, "requests per second": 1, "per sec": 1}
var tokenRateUnits = map[string]float64{"tokens/sec": 1, "tokens/s": 1, "tok/s": 1, "tokens per second": 1, "per sec": 1}

// ImportGenAIPerf reads GenAI-Perf's profile_export_genai_perf.json. It is a
// summary: distributions get an empty Values and the tool's statistics in
// ToolSummary (avg → mean, std → stddev, pNN, min, max), rates one value.
func ImportGenAIPerf(data []byte, opts Options) ([]acceptance.Measurement, []string, error) {
	return importPerfSummary(data, opts, ToolGenAIPerf, "profile_export_genai_perf.json")
}

// ImportAIPerf reads AIPerf's profile_export_aiperf.json, like
// ImportGenAIPerf, and also error_rate (error_request_count over all
// requests) and total_token_throughput ((total_isl + total_osl) /
// benchmark_duration) when AIPerf wrote them.
func ImportAIPerf(data []byte, opts Options) ([]acceptance.Measurement, []string, error) {
	return importPerfSummary(data, opts, ToolAIPerf, "profile_export_aiperf.json")
}

type perfStat struct {
	Unit *string                 `json:"unit"`
	Avg  *json.Number            `json:"avg"`
	Min  *json.Number            `json:"min"`
	Max  *json.Number            `json:"max"`
	Std  *json.Number            `json:"std"`
	Rest map[string]*json.Number `json:"-"`
}

func importPerfSummary(data []byte, opts Options, tool, defName string) ([]acceptance.Measurement, []string, error) {
	in := opts.name(defName)
	if int64(len(data)) > opts.limit(MaxToolJSONBytes) {
		return nil, nil, tooLarge(in, int64(len(data)), opts.limit(MaxToolJSONBytes))
	}
	var warnings []string
	body, nulls := nullNonFinite(data)
	if nulls > 0 {
		warnings = append(warnings, fmt.Sprintf("%d non-finite numbers (NaN, Infinity) in the export were treated as missing", nulls))
	}
	var top map[string]json.RawMessage
	if err := decodeOne(body, &top); err != nil {
		return nil, nil, &Error{Input: in, Err: err}
	}
	if top == nil {
		return nil, nil, errf(in, 0, "", "not a JSON object")
	}
	metrics := top
	prefix := ""
	if raw, ok := top["records"]; ok && len(raw) > 0 && raw[0] == '{' {
		var nested map[string]json.RawMessage
		if err := json.Unmarshal(raw, &nested); err != nil {
			return nil, nil, errf(in, 0, "records", "%v", jsonErr(err))
		}
		metrics, prefix = nested, "records."
	}
	version := opts.ToolVersion
	for _, k := range []string{"aiperf_version", "genai_perf_version", "version"} {
		if raw, ok := top[k]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil && s != "" {
				version = s
				break
			}
		}
	}
	if tool == ToolAIPerf {
		if raw, ok := top["was_cancelled"]; ok && string(raw) == "true" {
			warnings = append(warnings, "AIPerf says the benchmark was cancelled before it completed")
		}
	}

	var out []acceptance.Measurement
	seen := map[string]bool{}
	for _, pm := range perfMetrics {
		raw, ok := metrics[pm.key]
		if !ok || string(raw) == "null" {
			continue
		}
		field := prefix + pm.key
		st, err := decodePerfStat(raw)
		if err != nil {
			return nil, nil, errf(in, 0, field, "%v", err)
		}
		factor, err := perfUnit(st, pm.kind)
		if err != nil {
			return nil, nil, errf(in, 0, field+".unit", "%v", err)
		}
		if seen[pm.metric] {
			continue // goodput under both names: the first wins
		}
		seen[pm.metric] = true
		src := acceptance.Source{Tool: tool, ToolVersion: version, Field: in + ": " + field}
		m := opts.measurement(pm.metric, src)
		if pm.kind == "time" {
			summary := map[string]float64{}
			stats := st.all()
			for _, name := range sortedStatNames(stats) {
				n := stats[name]
				x, err := num(n)
				if err != nil {
					return nil, nil, errf(in, 0, field+"."+name, "%v", err)
				}
				x *= factor
				key := name
				switch name {
				case "avg":
					key = "mean"
				case "std":
					key = "stddev"
				}
				if key == "stddev" {
					err = checkRate(x, maxLatencyMs)
				} else {
					err = checkLatency(x)
				}
				if err != nil {
					return nil, nil, errf(in, 0, field+"."+name, "%v", err)
				}
				summary[key] = x
			}
			if len(summary) == 0 {
				return nil, nil, errf(in, 0, field, "no statistics")
			}
			m.ToolSummary = summary
			m.Source.PercentileMethod = MethodToolSummary
		} else {
			x, err := num(st.Avg)
			if err != nil {
				return nil, nil, errf(in, 0, field+".avg", "%v", err)
			}
			x *= factor
			max := maxRequestRate
			if pm.kind == "tokens" {
				max = maxTokenRate
			}
			if err := checkRate(x, max); err != nil {
				return nil, nil, errf(in, 0, field+".avg", "%v", err)
			}
			m.Values = []float64{x}
			m.ToolSummary = map[string]float64{"rate": x}
		}
		out = append(out, m)
	}

	if tool == ToolAIPerf {
		ms, err := aiperfDerived(metrics, prefix, in, version, opts)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, ms...)
	}
	if len(out) == 0 {
		return nil, nil, errf(in, 0, "", "no known metrics (time_to_first_token, request_latency, request_throughput, …) in the export")
	}
	return out, warnings, nil
}

func decodePerfStat(raw json.RawMessage) (*perfStat, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("must be an object with unit and statistics: %v", jsonErr(err))
	}
	st := &perfStat{Rest: map[string]*json.Number{}}
	for k, v := range all {
		switch {
		case k == "unit":
			var u string
			if err := json.Unmarshal(v, &u); err != nil {
				return nil, fmt.Errorf("unit must be a string")
			}
			st.Unit = &u
		case k == "avg" || k == "min" || k == "max" || k == "std" || isPercentileName(k):
			var n *json.Number
			if err := json.Unmarshal(v, &n); err != nil {
				return nil, fmt.Errorf("%s must be a number, got %.40s", k, v)
			}
			if n == nil { // null: the tool had no value
				continue
			}
			switch k {
			case "avg":
				st.Avg = n
			case "min":
				st.Min = n
			case "max":
				st.Max = n
			case "std":
				st.Std = n
			default:
				st.Rest[k] = n
			}
		}
	}
	return st, nil
}

// all returns every statistic present, keyed by the tool's name.
func (s *perfStat) all() map[string]*json.Number {
	m := map[string]*json.Number{}
	for k, v := range s.Rest {
		m[canonicalPercentile(k)] = v
	}
	for _, f := range []struct {
		k string
		v *json.Number
	}{{"avg", s.Avg}, {"min", s.Min}, {"max", s.Max}, {"std", s.Std}} {
		if f.v != nil {
			m[f.k] = f.v
		}
	}
	return m
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

func perfUnit(st *perfStat, kind string) (float64, error) {
	if st.Unit == nil {
		return 0, fmt.Errorf("missing: Accord will not guess the unit")
	}
	u := strings.TrimSpace(*st.Unit)
	var table map[string]float64
	var want string
	switch kind {
	case "time":
		table, want = timeUnits, "ms, us, ns or s"
	case "requests":
		table, want = requestRateUnits, "requests/sec"
	default:
		table, want = tokenRateUnits, "tokens/sec"
	}
	f, ok := table[strings.ToLower(u)]
	if !ok {
		return 0, fmt.Errorf("unexpected unit %q (expected %s)", u, want)
	}
	return f, nil
}

// aiperfDerived computes error_rate and total_token_throughput from AIPerf's
// counts, when it wrote them.
func aiperfDerived(metrics map[string]json.RawMessage, prefix, in, version string, opts Options) ([]acceptance.Measurement, error) {
	scalar := func(key string) (float64, bool, error) {
		raw, ok := metrics[key]
		if !ok || string(raw) == "null" {
			return 0, false, nil
		}
		st, err := decodePerfStat(raw)
		if err != nil {
			return 0, false, errf(in, 0, prefix+key, "%v", err)
		}
		x, err := num(st.Avg)
		if err != nil {
			return 0, false, errf(in, 0, prefix+key+".avg", "%v", err)
		}
		if x < 0 || x > 1e15 {
			return 0, false, errf(in, 0, prefix+key+".avg", "%g is not a plausible value", x)
		}
		return x, true, nil
	}
	var out []acceptance.Measurement
	src := func(field string) acceptance.Source {
		return acceptance.Source{Tool: ToolAIPerf, ToolVersion: version, Field: in + ": " + field}
	}
	good, hasGood, err := scalar("request_count")
	if err != nil {
		return nil, err
	}
	bad, hasBad, err := scalar("error_request_count")
	if err != nil {
		return nil, err
	}
	if hasGood || hasBad {
		if good+bad > 0 {
			m := opts.measurement(acceptance.MetricErrorRate, src(prefix+"error_request_count / (request_count + error_request_count)"))
			m.Values = []float64{bad / (good + bad)}
			m.Trials = int64(good + bad)
			out = append(out, m)
		}
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
		raw := metrics["benchmark_duration"]
		st, _ := decodePerfStat(raw)
		factor, err := perfUnit(st, "time")
		if err != nil {
			return nil, errf(in, 0, prefix+"benchmark_duration.unit", "%v", err)
		}
		sec := dur * factor / 1000
		if sec <= 0 || math.IsInf(sec, 0) {
			return nil, errf(in, 0, prefix+"benchmark_duration", "%g is not a duration", dur)
		}
		x := (isl + osl) / sec
		if err := checkRate(x, maxTokenRate); err != nil {
			return nil, errf(in, 0, prefix+"total_isl", "%v", err)
		}
		m := opts.measurement(acceptance.MetricTotalTokenThroughput, src(prefix+"(total_isl + total_osl) / benchmark_duration"))
		m.Values = []float64{x}
		out = append(out, m)
	}
	return out, nil
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
	for _, k := range []string{"time_to_first_token", "request_latency", "request_throughput", "inter_token_latency"} {
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

func sortedStatNames(m map[string]*json.Number) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
