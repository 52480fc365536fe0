package parse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/stats"
)

// The tests in this file hold the recorded and transcribed fixtures (see
// testdata/README.md) to what the tools themselves report.

// toolAgreement is the largest relative difference allowed between a
// tool's own percentile and Accord's under the tool's definition.
const toolAgreement = 0.1 // percent

// importReal imports a fixture and checks what every import owes: known
// metrics, a report that accounts for the file's fields, and Accord's
// figures under the tool's definition agreeing with the tool's.
func importReal(t *testing.T, name string, format Format) Result {
	t.Helper()
	data := readTestdata(t, name)
	if format == "" {
		f, err := Detect(data)
		require.NoError(t, err, name)
		format = f
	}
	r, err := ImportWithReport(format, data, Options{Name: name, Step: "imported", Repetition: 1})
	require.NoError(t, err, name)
	checkMeasurements(t, r.Measurements)
	require.Equal(t, name, r.Report.Input)
	require.Equal(t, format, r.Report.Format)
	compared := requireToolAgreement(t, r)
	t.Logf("%s: %d measurements, %d figures compared, %d fields read, %d ignored", name, len(r.Measurements), compared, len(r.Report.Read), len(r.Report.Ignored))
	return r
}

// requireToolAgreement checks every figure that has both numbers, and
// returns how many there were.
func requireToolAgreement(t *testing.T, r Result) int {
	t.Helper()
	n := 0
	check := func(where string, mf MeasurementFigures) {
		for _, f := range mf.Figures {
			if f.Accord == nil || f.Note != "" {
				continue // a tool's summary only, or a mean of bin values
			}
			n++
			if f.Tool == 0 {
				require.InDelta(t, 0, *f.Accord, 1e-9, "%s %s %s", where, mf.Metric, f.Statistic)
				continue
			}
			require.LessOrEqual(t, math.Abs(*f.Difference), toolAgreement,
				"%s %s %s: tool %v, Accord %v under %s", where, mf.Metric, f.Statistic, f.Tool, *f.Accord, f.Definition)
		}
	}
	for _, mf := range r.Report.Figures {
		check("", mf)
	}
	for _, j := range r.Report.Jobs {
		for _, mf := range j.Figures {
			check(j.Name+" "+j.Client, mf)
		}
	}
	return n
}

// requireAccounted checks that each field is in the report, read or
// ignored (a field is accounted for by a line about it or about a field
// inside it).
func requireAccounted(t *testing.T, rep Report, fields ...string) {
	t.Helper()
	for _, f := range fields {
		found := false
		for _, r := range rep.Read {
			found = found || r.Field == f || strings.HasPrefix(r.Field, f+".") || strings.HasPrefix(r.Field, f+" ")
		}
		for _, ig := range rep.Ignored {
			found = found || ig.Field == f || strings.HasPrefix(ig.Field, f+".")
		}
		require.True(t, found, "field %q is neither read nor reported as ignored\nread: %v\nignored: %v", f, rep.Read, rep.Ignored)
	}
}

func topKeys(t *testing.T, data []byte) []string {
	t.Helper()
	var top map[string]json.RawMessage
	body, _ := fioJSONStart(data)
	body, _ = nullNonFinite(body)
	dec := json.NewDecoder(bytes.NewReader(body))
	require.NoError(t, dec.Decode(&top))
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// fioFields lists a fio output's fields down to its directions with I/O,
// as the report names them (jobs[].read.iops).
func fioFields(t *testing.T, data []byte) []string {
	t.Helper()
	body, _ := fioJSONStart(data)
	var doc map[string]json.RawMessage
	require.NoError(t, json.NewDecoder(bytes.NewReader(body)).Decode(&doc))
	fields := topKeys(t, data)
	where := "jobs"
	if _, ok := doc["client_stats"]; ok {
		where = "client_stats"
	}
	var entries []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(doc[where], &entries))
	for _, e := range entries {
		for k, v := range e {
			fields = append(fields, where+"[]."+k)
			if k != "read" && k != "write" && k != "mixed" {
				continue
			}
			var dir map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(v, &dir))
			if string(dir["total_ios"]) == "0" || dir["total_ios"] == nil && string(dir["io_bytes"]) == "0" {
				continue // no I/O (fio before 2.1.14 has no total_ios)
			}
			for dk := range dir {
				fields = append(fields, where+"[]."+k+"."+dk)
			}
		}
	}
	return fields
}

func TestRealFioModesImportWithFiosNumbers(t *testing.T) {
	t.Parallel()
	for _, name := range append([]string{
		"fio-3.33-json-randrw.json", "fio-3.33-jsonplus-randrw.json", "fio-3.33-json-normal-randrw.txt",
		"fio-3.33-json-unified-rw.json", "fio-3.33-jsonplus-unified-rw.json", "fio-3.33-jsonplus-unified-rw-both.json",
		"fio-3.33-json-group-reporting.json", "fio-3.33-jsonplus-group-reporting.json",
		"fio-3.33-json-two-jobs.json", "fio-3.33-jsonplus-two-jobs.json",
		"fio-3.33-json-client-server-one.json", "fio-3.33-jsonplus-client-server-one.json",
		"fio-3.33-json-client-server-two.json", "fio-3.33-jsonplus-client-server-two.json",
		"fio-3.1-fioplot-randread.json", "fio-2.2.10-storperf.json", "fio-3.33-jsonplus-hundred-ios.json",
	}, fio2Recordings...) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := importReal(t, name, "")
			require.Equal(t, FormatFio, r.Report.Format)
			requireAccounted(t, r.Report, fioFields(t, readTestdata(t, name))...)
			want := stats.FioBins
			if strings.HasPrefix(name, "fio-2.") || strings.HasPrefix(name, "fio-3.1-") {
				want = stats.FioBinsDouble // fio before 3.14
			}
			for _, m := range r.Measurements {
				require.Equal(t, want, m.Source.PercentileDefinition)
			}
		})
	}
}

// fio2Recordings are the fio 2 outputs recorded on the development
// machine (testdata/README.md): fio 2.19 (json+ bins keyed by index) and
// 2.21 (bins keyed by value) in every mode, 2.20 (bins by value, io_bytes
// in KiB) and 2.1.10 (json only: before total_ios, integer iops, no json+
// and no json,normal).
var fio2Recordings = func() []string {
	var out []string
	for _, v := range []string{"2.19", "2.21"} {
		for _, mode := range []string{"json-randrw.json", "jsonplus-randrw.json", "json-normal-randrw.txt",
			"json-unified-rw.json", "jsonplus-unified-rw.json", "json-group-reporting.json", "jsonplus-group-reporting.json",
			"json-two-jobs.json", "jsonplus-two-jobs.json", "json-client-server-one.json", "jsonplus-client-server-one.json",
			"json-client-server-two.json", "jsonplus-client-server-two.json", "jsonplus-direct-randread.json",
			"jsonplus-hundred-ios.json", "jsonplus-thousand-ios.json", "jsonplus-two-thousand-ios.json"} {
			out = append(out, "fio-"+v+"-"+mode)
		}
	}
	out = append(out, "fio-2.20-json-randrw.json", "fio-2.20-jsonplus-randrw.json")
	for _, mode := range []string{"json-randrw.json", "json-unified-rw.json", "json-group-reporting.json", "json-two-jobs.json",
		"json-client-server-one.json", "json-client-server-two.json"} {
		out = append(out, "fio-2.1.10-"+mode)
	}
	return out
}()

// fioDirOf decodes one direction of one entry.
func fioDirOf(t *testing.T, name, where string, entry int, dir string) map[string]any {
	t.Helper()
	body, _ := fioJSONStart(readTestdata(t, name))
	var doc map[string][]map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw map[string]json.RawMessage
	require.NoError(t, dec.Decode(&raw))
	var entries []map[string]any
	require.NoError(t, json.Unmarshal(raw[where], &entries))
	_ = doc
	return entries[entry][dir].(map[string]any)
}

func TestRealFioJSONPlusBinsGiveFiosPercentiles(t *testing.T) {
	t.Parallel()
	r := importReal(t, "fio-3.33-jsonplus-randrw.json", FormatFio)
	m := byMetric(t, r.Measurements)
	for _, dir := range []string{"read", "write"} {
		fio := fioDirOf(t, "fio-3.33-jsonplus-randrw.json", "jobs", 0, dir)
		clat := m[dir+"_clat"]
		require.Equal(t, MethodFioBins, clat.Source.PercentileMethod)
		require.Equal(t, fio["iops"], m[dir+"_iops"].Values[0])
		require.Equal(t, fio["bw_bytes"], m[dir+"_bw"].Values[0])
		s, err := stats.NewSample(clat.Values, clat.Counts)
		require.NoError(t, err)
		pct := fio["clat_ns"].(map[string]any)["percentile"].(map[string]any)
		require.Len(t, pct, 17)
		for k, v := range pct {
			p := mustFloat(t, k)
			got, err := s.Percentile(stats.FioBins, p)
			require.NoError(t, err)
			// fio's rule over fio's bins: exactly fio's number.
			require.Equal(t, v.(float64)/1000, got, "%s p%s", dir, k)
		}
	}
	// The same numbers in the report's figures, labelled with the rule.
	var n int
	for _, mf := range r.Report.Figures {
		for _, f := range mf.Figures {
			if f.Accord != nil && strings.HasPrefix(f.Statistic, "p") {
				require.Equal(t, stats.FioBins, f.Definition)
				require.Equal(t, 0.0, *f.Difference, "%s %s", mf.Metric, f.Statistic)
				n++
			}
		}
	}
	require.Equal(t, 2*17, n)
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	var f float64
	_, err := fmt.Sscan(s, &f)
	require.NoError(t, err)
	return f
}

func TestRealFioUnifiedRWReportingIsMixed(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"fio-3.33-json-unified-rw.json", "fio-3.33-jsonplus-unified-rw.json"} {
		r := importReal(t, name, FormatFio)
		m := byMetric(t, r.Measurements)
		require.NotContains(t, m, acceptance.MetricReadIOPS, name)
		fio := fioDirOf(t, name, "jobs", 0, "mixed")
		require.Equal(t, fio["iops"], m[acceptance.MetricMixedIOPS].Values[0], name)
		require.Equal(t, fio["bw_bytes"], m[acceptance.MetricMixedBW].Values[0], name)
		clat := m[acceptance.MetricMixedCLat]
		require.InDelta(t, fio["clat_ns"].(map[string]any)["mean"].(float64)/1000, clat.ToolSummary["mean"], 1e-9)
		require.Contains(t, clat.Source.Field, "jobs[].mixed.clat_ns")
	}
	r := importReal(t, "fio-3.33-jsonplus-unified-rw-both.json", FormatFio)
	m := byMetric(t, r.Measurements)
	for _, id := range []string{acceptance.MetricReadIOPS, acceptance.MetricWriteIOPS, acceptance.MetricMixedIOPS} {
		require.Contains(t, m, id)
	}
	require.InDelta(t, m[acceptance.MetricReadIOPS].Values[0]+m[acceptance.MetricWriteIOPS].Values[0], m[acceptance.MetricMixedIOPS].Values[0], 1,
		"mixed is reads and writes together")
}

func TestRealFioJSONNormalHasTextAroundTheJSON(t *testing.T) {
	t.Parallel()
	data := readTestdata(t, "fio-3.33-json-normal-randrw.txt")
	require.True(t, bytes.HasPrefix(data, []byte("randrw: (g=0)")))
	r := importReal(t, "fio-3.33-json-normal-randrw.txt", "")
	w := strings.Join(r.Report.Warnings, "\n")
	require.Regexp(t, `skipped \d+ bytes of text before fio's JSON`, w)
	require.Regexp(t, `skipped \d+ bytes of text after fio's JSON \(fio's normal output`, w)
	m := byMetric(t, r.Measurements)
	require.Equal(t, fioDirOf(t, "fio-3.33-json-normal-randrw.txt", "jobs", 0, "read")["iops"], m[acceptance.MetricReadIOPS].Values[0])
}

func TestRealFioGroupReportingAndPerJobView(t *testing.T) {
	t.Parallel()
	// group_reporting: one entry, fio's own percentiles for the group.
	g := importReal(t, "fio-3.33-jsonplus-group-reporting.json", FormatFio)
	require.Empty(t, g.Report.Jobs, "one reporting group: the sum is the job")
	gm := byMetric(t, g.Measurements)
	require.Contains(t, gm[acceptance.MetricReadCLat].ToolSummary, "p99")

	// Two jobs without group_reporting: the sum, and each job beside it.
	for _, name := range []string{"fio-3.33-json-two-jobs.json", "fio-3.33-jsonplus-two-jobs.json"} {
		r := importReal(t, name, FormatFio)
		m := byMetric(t, r.Measurements)
		j0 := fioDirOf(t, name, "jobs", 0, "read")
		j1 := fioDirOf(t, name, "jobs", 1, "read")
		require.InDelta(t, j0["iops"].(float64)+j1["iops"].(float64), m[acceptance.MetricReadIOPS].Values[0], 1e-6)
		require.Contains(t, m[acceptance.MetricReadIOPS].Source.Field, "sum of 2 jobs")
		require.Len(t, r.Report.Jobs, 2, name)
		for i, j := range r.Report.Jobs {
			fio := []map[string]any{j0, j1}[i]
			require.Equal(t, "nogrp", j.Name)
			byM := map[string]MeasurementFigures{}
			for _, mf := range j.Figures {
				byM[mf.Metric] = mf
			}
			require.Equal(t, fio["iops"], byM[acceptance.MetricReadIOPS].Figures[0].Tool)
			var p99 *acceptance.ToolFigure
			for k, f := range byM[acceptance.MetricReadCLat].Figures {
				if f.Statistic == "p99" {
					p99 = &byM[acceptance.MetricReadCLat].Figures[k]
				}
			}
			require.NotNil(t, p99, "each job keeps fio's own p99 in the per-job view")
			require.Equal(t, fio["clat_ns"].(map[string]any)["percentile"].(map[string]any)["99.000000"].(float64)/1000, p99.Tool)
			if strings.Contains(name, "jsonplus") {
				require.NotNil(t, p99.Accord, "json+: Accord's p99 from the job's own bins")
				require.Equal(t, 0.0, *p99.Difference)
			}
		}
		clat := m[acceptance.MetricReadCLat]
		require.NotContains(t, clat.ToolSummary, "p99", "per-job percentiles do not combine")
		if strings.Contains(name, "jsonplus") {
			require.Equal(t, MethodFioBins, clat.Source.PercentileMethod, "the jobs' bins merge")
		} else {
			require.Equal(t, MethodToolSummary, clat.Source.PercentileMethod)
			require.Contains(t, strings.Join(r.Report.Warnings, "\n"), "per-job percentiles cannot be combined")
		}
	}
}

func TestRealFioClientServer(t *testing.T) {
	t.Parallel()
	// Two clients: "All clients" is fio's sum, without percentiles or bins;
	// the clients' bins give Accord's.
	name := "fio-3.33-jsonplus-client-server-two.json"
	r := importReal(t, name, FormatFio)
	m := byMetric(t, r.Measurements)
	all := fioDirOf(t, name, "client_stats", 2, "read")
	c0 := fioDirOf(t, name, "client_stats", 0, "read")
	c1 := fioDirOf(t, name, "client_stats", 1, "read")
	require.Equal(t, all["iops"], m[acceptance.MetricReadIOPS].Values[0])
	require.Contains(t, m[acceptance.MetricReadIOPS].Source.Field, `fio's "All clients" sum of 2 clients`)
	clat := m[acceptance.MetricReadCLat]
	require.Equal(t, MethodFioBins, clat.Source.PercentileMethod)
	var n int64
	for _, c := range clat.Counts {
		n += c
	}
	require.Equal(t, int64(all["clat_ns"].(map[string]any)["N"].(float64)), n, "the clients' bins hold every I/O of the sum")
	require.InDelta(t, all["clat_ns"].(map[string]any)["mean"].(float64)/1000, clat.ToolSummary["mean"], 1e-9, "fio's own mean of the sum")
	require.NotContains(t, clat.ToolSummary, "p99", "fio wrote no percentiles for All clients")
	require.Len(t, r.Report.Jobs, 3)
	require.Equal(t, "127.0.0.1:8917", r.Report.Jobs[0].Client)
	require.Equal(t, "127.0.0.1:8918", r.Report.Jobs[1].Client)
	require.Equal(t, "All clients", r.Report.Jobs[2].Name)
	for i, c := range []map[string]any{c0, c1} {
		var found bool
		for _, mf := range r.Report.Jobs[i].Figures {
			if mf.Metric != acceptance.MetricReadCLat {
				continue
			}
			for _, f := range mf.Figures {
				if f.Statistic == "p99.9" {
					found = true
					require.Equal(t, c["clat_ns"].(map[string]any)["percentile"].(map[string]any)["99.900000"].(float64)/1000, f.Tool)
					require.Equal(t, f.Tool, *f.Accord, "client %d: fio's rule on the client's bins", i)
				}
			}
		}
		require.True(t, found)
	}

	// Without json+: the sum's rates and mean, no percentiles anywhere but
	// in the per-client view.
	r = importReal(t, "fio-3.33-json-client-server-two.json", FormatFio)
	m = byMetric(t, r.Measurements)
	require.Equal(t, MethodToolSummary, m[acceptance.MetricReadCLat].Source.PercentileMethod)
	require.Len(t, r.Report.Jobs, 3)

	// One client: no "All clients"; the client's own percentiles.
	r = importReal(t, "fio-3.33-jsonplus-client-server-one.json", FormatFio)
	m = byMetric(t, r.Measurements)
	require.Contains(t, m[acceptance.MetricReadCLat].ToolSummary, "p99")
	require.Empty(t, r.Report.Jobs)
}

func TestRealFioPublicFiles(t *testing.T) {
	t.Parallel()
	r := importReal(t, "fio-3.1-fioplot-randread.json", FormatFio)
	m := byMetric(t, r.Measurements)
	require.Equal(t, 6614.073099, m[acceptance.MetricReadIOPS].Values[0])
	require.Equal(t, 26456.0*1024, float64(int64(m[acceptance.MetricReadBW].Values[0]/1024))*1024, "fio 3.1 has no bw_bytes: bw KiB/s × 1024")
	require.Equal(t, 142.336, m[acceptance.MetricReadCLat].ToolSummary["p99"])
	require.Equal(t, "fio-3.1", m[acceptance.MetricReadCLat].Source.ToolVersion)
	require.NotContains(t, m, acceptance.MetricWriteIOPS, "the write direction did no I/O")

	r = importReal(t, "fio-2.2.10-storperf.json", FormatFio)
	m = byMetric(t, r.Measurements)
	require.Equal(t, 68.99, m[acceptance.MetricReadIOPS].Values[0])
	require.Equal(t, 275.0*1024, m[acceptance.MetricReadBW].Values[0], "fio 2: bw in KiB/s")
	require.NotContains(t, m, acceptance.MetricReadSLat, "an all-zero slat is not measured")
	var slat *IgnoredField
	for i, ig := range r.Report.Ignored {
		if ig.Field == "jobs[].read.slat" {
			slat = &r.Report.Ignored[i]
		}
	}
	require.NotNil(t, slat, "the all-zero slat is reported, not dropped")
	require.Contains(t, slat.Reason, "all zero")
}

func TestRealVLLMSummaryOnly(t *testing.T) {
	t.Parallel()
	name := "vllm-benchmark_serving-llmd-10qps.json"
	r := importReal(t, name, "")
	require.Equal(t, FormatVLLMBench, r.Report.Format)
	requireAccounted(t, r.Report, topKeys(t, readTestdata(t, name))...)
	m := byMetric(t, r.Measurements)
	ttft := m[acceptance.MetricTTFT]
	require.Empty(t, ttft.Values)
	require.Equal(t, stats.NumpyLinear, ttft.Source.PercentileDefinition)
	require.Equal(t, 89.76647855975897, ttft.ToolSummary["p99"])
	require.Equal(t, 52.999333499883505, ttft.ToolSummary["p50"])
	// vLLM's own rates agree with Accord's recomputation from its counts.
	rt := m[acceptance.MetricRequestThroughput]
	require.InEpsilon(t, rt.ToolSummary["rate"], rt.Values[0], 1e-9)
	ot := m[acceptance.MetricOutputTokenThroughput]
	require.InEpsilon(t, ot.ToolSummary["rate"], ot.Values[0], 1e-9)
	tt := m[acceptance.MetricTotalTokenThroughput]
	require.InEpsilon(t, tt.ToolSummary["rate"], tt.Values[0], 1e-9)
	require.NotContains(t, m, acceptance.MetricGoodput)
	var good *IgnoredField
	for i, ig := range r.Report.Ignored {
		if ig.Field == "request_goodput:" {
			good = &r.Report.Ignored[i]
		}
	}
	require.NotNil(t, good)
	require.Contains(t, good.Reason, "without --goodput")
}

func TestRealGenAIPerfStreaming(t *testing.T) {
	t.Parallel()
	name := "genai-perf-pa298-streaming.json"
	r := importReal(t, name, "")
	require.Equal(t, FormatGenAIPerf, r.Report.Format)
	requireAccounted(t, r.Report, topKeys(t, readTestdata(t, name))...)
	m := byMetric(t, r.Measurements)
	require.Equal(t, 425.02943662, m[acceptance.MetricTTFT].ToolSummary["p99"])
	require.Equal(t, stats.NumpyLinear, m[acceptance.MetricTTFT].Source.PercentileDefinition)
	require.Equal(t, 2.2631232999999997, m[acceptance.MetricTPOT].ToolSummary["p99"], "GenAI-Perf's inter_token_latency is per request")
	require.Equal(t, []float64{44190.56002502682}, m[acceptance.MetricOutputTokenThroughput].Values)
}

func TestGenAIPerfNonStreamingHasNoTTFT(t *testing.T) {
	t.Parallel()
	r := importReal(t, "genai-perf-nonstreaming-handmade.json", FormatGenAIPerf)
	m := byMetric(t, r.Measurements)
	require.NotContains(t, m, acceptance.MetricTTFT, "request latency is never imported as TTFT")
	require.Contains(t, m, acceptance.MetricE2EL)
	reason := ignoredReason(t, r.Report, "time_to_first_token")
	require.Contains(t, reason, "did not stream")
	require.Contains(t, r.Report.Warnings, "no TTFT: the benchmark did not stream (input_config says streaming is off), so its first response was the whole response")

	// Without input_config: TTFT equal to the request latency gives it away.
	var doc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(readTestdata(t, "genai-perf-nonstreaming-handmade.json"), &doc))
	delete(doc, "input_config")
	data, err := json.Marshal(doc)
	require.NoError(t, err)
	r, err = ImportWithReport(FormatGenAIPerf, data, Options{})
	require.NoError(t, err)
	require.NotContains(t, byMetric(t, r.Measurements), acceptance.MetricTTFT)
	require.Contains(t, ignoredReason(t, r.Report, "time_to_first_token"), "equal to request_latency")
	require.Contains(t, r.Report.Warnings, "no TTFT: the benchmark did not stream (time_to_first_token equals request_latency in every statistic)")
}

func ignoredReason(t *testing.T, rep Report, field string) string {
	t.Helper()
	for _, ig := range rep.Ignored {
		if ig.Field == field {
			return ig.Reason
		}
	}
	t.Fatalf("%s is not reported as ignored: %v", field, rep.Ignored)
	return ""
}

func TestGenAIPerf2024Exporter(t *testing.T) {
	t.Parallel()
	name := "genai-perf-2024-exporter-test.json"
	r := importReal(t, name, "")
	require.Equal(t, FormatGenAIPerf, r.Report.Format)
	requireAccounted(t, r.Report, topKeys(t, readTestdata(t, name))...)
	m := byMetric(t, r.Measurements)
	// Strings, in ns, read as numbers in ms.
	require.InDelta(t, 29.04731652, m[acceptance.MetricTTFT].ToolSummary["p99"], 1e-9)
	require.InDelta(t, 81.6942623143508, m[acceptance.MetricE2EL].ToolSummary["mean"], 1e-9)
	require.Equal(t, []float64{12.222026283281268}, m[acceptance.MetricRequestThroughput].Values, `"request per sec"`)
	require.Equal(t, []float64{217.1010500160076}, m[acceptance.MetricOutputTokenThroughput].Values, `"tokens per sec"`)
	require.Contains(t, strings.Join(r.Report.Warnings, "\n"), "JSON strings")
	// Its inter_token_latency may be either of two metrics: not imported, and said why.
	require.NotContains(t, m, acceptance.MetricTPOT)
	require.NotContains(t, m, acceptance.MetricITL)
	require.Contains(t, ignoredReason(t, r.Report, "inter_token_latency"), "cannot be told")
}

func TestRealAIPerf01RecordsAgreeWithItsSummary(t *testing.T) {
	t.Parallel()
	rec := importReal(t, "aiperf-0.1-run1-profile_export.jsonl", "")
	require.Equal(t, FormatAIPerfRecords, rec.Report.Format)
	sum := importReal(t, "aiperf-0.1-run1-profile_export_aiperf.json", "")
	require.Equal(t, FormatAIPerf, sum.Report.Format)
	requireAccounted(t, sum.Report, topKeys(t, readTestdata(t, "aiperf-0.1-run1-profile_export_aiperf.json"))...)
	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(readTestdata(t, "aiperf-0.1-run1-profile_export_aiperf.json"), &top))
	var nested map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(top["records"], &nested))
	var fields []string
	for k := range nested {
		fields = append(fields, "records."+k)
	}
	requireAccounted(t, sum.Report, fields...)

	rm, sm := byMetric(t, rec.Measurements), byMetric(t, sum.Measurements)
	// The records' samples under numpy's rule give AIPerf's own summary:
	// the two files of one run agree.
	compared := 0
	for _, id := range []string{acceptance.MetricTTFT, acceptance.MetricE2EL, acceptance.MetricTPOT, acceptance.MetricITL} {
		raw, summary := rm[id], sm[id]
		require.NotEmpty(t, raw.Values, id)
		require.Equal(t, float64(len(raw.Values)), summary.ToolSummary["n"], "%s: AIPerf's count", id)
		s, err := stats.NewSample(raw.Values, nil)
		require.NoError(t, err)
		for k, tool := range summary.ToolSummary {
			p, ok := acceptance.ToolPercentile(k)
			if !ok {
				continue
			}
			got, err := s.Percentile(stats.NumpyLinear, p)
			require.NoError(t, err)
			require.InEpsilon(t, tool, got, toolAgreement/100, "%s %s", id, k)
			compared++
		}
		require.InEpsilon(t, summary.ToolSummary["mean"], s.Mean(), 1e-12, id)
	}
	require.Equal(t, 4*8, compared)
	require.Equal(t, 89, len(rm[acceptance.MetricTTFT].Values), "11 cancelled requests left out")
	require.Equal(t, []float64{11.0 / 100}, rm[acceptance.MetricErrorRate].Values)
	require.Equal(t, []float64{11.0 / 100}, sm[acceptance.MetricErrorRate].Values)
	// Throughput over the span AIPerf uses: the same number as its own.
	require.InEpsilon(t, sm[acceptance.MetricRequestThroughput].Values[0], rm[acceptance.MetricRequestThroughput].Values[0], 1e-12)
	require.InEpsilon(t, sm[acceptance.MetricOutputTokenThroughput].Values[0], rm[acceptance.MetricOutputTokenThroughput].Values[0], 1e-12)
	require.Equal(t, "metrics.ttft of succeeded requests", strings.TrimPrefix(rm[acceptance.MetricTTFT].Source.Field, "aiperf-0.1-run1-profile_export.jsonl: "))

	// Every metric of the records is accounted for.
	f, err := os.Open("testdata/aiperf-0.1-run1-profile_export.jsonl")
	require.NoError(t, err)
	defer f.Close()
	keys := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct {
			Metrics map[string]json.RawMessage `json:"metrics"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		for k := range r.Metrics {
			keys["metrics."+k] = true
		}
	}
	require.NoError(t, sc.Err())
	var ks []string
	for k := range keys {
		ks = append(ks, k)
	}
	requireAccounted(t, rec.Report, ks...)
}

// GenAI-Perf's and AIPerf's summaries account for every field of every
// metric object, not only for the objects: a throughput's unit (which the
// import converts from) is listed beside its avg.
func TestSummaryExportsAccountForEveryMetricField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		format Format
	}{
		{"genai-perf-pa298-streaming.json", FormatGenAIPerf},
		{"genai-perf-2024-exporter-test.json", FormatGenAIPerf},
		{"genai-perf-profile_export_genai_perf.json", FormatGenAIPerf},
		{"aiperf-profile_export_aiperf.json", FormatAIPerf},
	} {
		data := readTestdata(t, c.name)
		r, err := ImportWithReport(c.format, data, Options{Step: "serve", Repetition: 1, Name: c.name})
		require.NoError(t, err, c.name)
		var doc map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(data, &doc))
		var fields []string
		for k, raw := range doc {
			var obj map[string]json.RawMessage
			if json.Unmarshal(raw, &obj) != nil || k == "input_config" {
				continue
			}
			for f := range obj {
				fields = append(fields, k+"."+f)
			}
		}
		sort.Strings(fields)
		for _, f := range fields {
			parent, _, _ := strings.Cut(f, ".")
			accounted := false
			for _, rd := range r.Report.Read {
				accounted = accounted || rd.Field == f || rd.Field == parent
			}
			for _, ig := range r.Report.Ignored {
				accounted = accounted || ig.Field == f || ig.Field == parent
			}
			require.True(t, accounted, "%s: %s is neither read nor reported as ignored", c.name, f)
		}
	}
}

// fioPrinted is one percentile fio printed: where, and its value in µs.
type fioPrinted struct {
	entry   int // index among the entries that are not "All clients"
	metric  string
	key     string // p99.9
	value   float64
	hasBins bool
	field   string
}

// fioPrintedPercentiles walks a fio output the way a reader of it would,
// independently of the importer: every percentile of every latency block
// of every direction that did I/O, in every job or client entry.
func fioPrintedPercentiles(t *testing.T, data []byte) (printed []fioPrinted, entries int, hasAll bool) {
	t.Helper()
	body, _ := fioJSONStart(data)
	var doc map[string]json.RawMessage
	require.NoError(t, json.NewDecoder(bytes.NewReader(body)).Decode(&doc))
	where := "jobs"
	if _, ok := doc["client_stats"]; ok {
		where = "client_stats"
	}
	var raw []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(doc[where], &raw))
	for _, e := range raw {
		var name string
		_ = json.Unmarshal(e["jobname"], &name)
		if name == "All clients" {
			hasAll = true
			continue
		}
		for _, d := range fioDirections {
			rawDir, ok := e[d.name]
			if !ok {
				continue
			}
			var dir map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(rawDir, &dir))
			var ios, ioBytes float64
			_ = json.Unmarshal(dir["total_ios"], &ios)
			_ = json.Unmarshal(dir["io_bytes"], &ioBytes)
			if ios == 0 && ioBytes == 0 {
				continue
			}
			for _, b := range []struct {
				name, metric string
				div          float64
			}{{"clat_ns", d.clat, 1000}, {"slat_ns", d.slat, 1000}, {"lat_ns", d.lat, 1000}, {"clat", d.clat, 1}, {"slat", d.slat, 1}, {"lat", d.lat, 1}} {
				var block struct {
					Percentile map[string]float64 `json:"percentile"`
					Bins       map[string]float64 `json:"bins"`
				}
				rawBlock, ok := dir[b.name]
				if !ok {
					continue
				}
				require.NoError(t, json.Unmarshal(rawBlock, &block))
				for k, v := range block.Percentile {
					p := mustFloat(t, k)
					if p == 0 {
						continue // fio's "0.00" padding
					}
					printed = append(printed, fioPrinted{entry: entries, metric: b.metric, key: percentileKey(p), value: v / b.div,
						hasBins: len(block.Bins) > 0, field: fmt.Sprintf("%s[%d].%s.%s.percentile.%s", where, entries, d.name, b.name, k)})
				}
			}
		}
		entries++
	}
	return printed, entries, hasAll
}

// Every percentile fio printed, in every recorded and public fio file,
// lands in the import with fio's own value: in the measurement's tool
// summary when the file has one job or client, in the per-job view when it
// has several. Where fio also wrote its bins (json+), Accord's figure from
// those bins under fio's rule for that release equals fio's within 0.1 %.
func TestRealFioEveryPrintedPercentileAgrees(t *testing.T) {
	t.Parallel()
	names := append([]string{
		"fio-3.33-json-randrw.json", "fio-3.33-jsonplus-randrw.json", "fio-3.33-json-normal-randrw.txt",
		"fio-3.33-json-unified-rw.json", "fio-3.33-jsonplus-unified-rw.json", "fio-3.33-jsonplus-unified-rw-both.json",
		"fio-3.33-json-group-reporting.json", "fio-3.33-jsonplus-group-reporting.json",
		"fio-3.33-json-two-jobs.json", "fio-3.33-jsonplus-two-jobs.json",
		"fio-3.33-json-client-server-one.json", "fio-3.33-jsonplus-client-server-one.json",
		"fio-3.33-json-client-server-two.json", "fio-3.33-jsonplus-client-server-two.json",
		"fio-3.1-fioplot-randread.json", "fio-2.2.10-storperf.json", "fio-3.33-jsonplus-hundred-ios.json",
	}, fio2Recordings...)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data := readTestdata(t, name)
			r := importReal(t, name, FormatFio)
			printed, entries, hasAll := fioPrintedPercentiles(t, data)
			figures := func(entry int) []MeasurementFigures {
				if entries == 1 && !hasAll {
					return r.Report.Figures
				}
				require.Greater(t, len(r.Report.Jobs), entry, "a per-job view for every entry")
				return r.Report.Jobs[entry].Figures
			}
			compared, maxDiff := 0, 0.0
			for _, pr := range printed {
				var found *acceptance.ToolFigure
				for _, mf := range figures(pr.entry) {
					if mf.Metric != pr.metric {
						continue
					}
					for i, f := range mf.Figures {
						if f.Statistic == pr.key {
							found = &mf.Figures[i]
						}
					}
				}
				require.NotNil(t, found, "%s: fio printed %s, the import has no %s %s", name, pr.field, pr.metric, pr.key)
				require.InDelta(t, pr.value, found.Tool, 1e-12*math.Abs(pr.value), "%s: %s lands with fio's value", name, pr.field)
				if !pr.hasBins {
					require.Nil(t, found.Accord, "%s: no bins, no figure of Accord's", pr.field)
					continue
				}
				require.NotNil(t, found.Accord, "%s: fio wrote bins, Accord reads its own figure off them", pr.field)
				d := math.Abs(*found.Difference)
				require.LessOrEqual(t, d, toolAgreement, "%s: fio %v, Accord %v under %s", pr.field, pr.value, *found.Accord, found.Definition)
				compared++
				maxDiff = max(maxDiff, d)
			}
			t.Logf("%s: fio printed %d percentiles, all in the import with fio's value; %d compared with Accord's from the bins, largest difference %.4g %%", name, len(printed), compared, maxDiff)
		})
	}
}

// fio reads a percentile off its bins at the first running count that
// reaches p · (N · 0.01): double precision before fio 3.14, long double
// from 3.14, in the order gcc computes it under fio's -ffast-math. These
// recordings have whole-count thresholds where that order decides between
// two neighbouring samples in different bins, so only the rule of the
// file's own release gives fio's number.
func TestRealFioPercentileRuleOfEachRelease(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		def     stats.Definition
		key     string  // the percentile fio printed
		p       float64 // and its percentage
		rank    int64   // the sample fio's rule picks (1-based)
		literal int64   // the sample p / 100 · N in the source's order would pick
	}{
		{"fio-3.33-jsonplus-hundred-ios.json", stats.FioBins, "30.000000", 30, 30, 31},
		{"fio-2.19-jsonplus-thousand-ios.json", stats.FioBinsDouble, "99.900000", 99.9, 999, 1000},
		{"fio-2.19-jsonplus-two-thousand-ios.json", stats.FioBinsDouble, "99.900000", 99.9, 1998, 1999},
		{"fio-2.21-jsonplus-thousand-ios.json", stats.FioBinsDouble, "99.900000", 99.9, 999, 1000},
		{"fio-2.21-jsonplus-two-thousand-ios.json", stats.FioBinsDouble, "99.900000", 99.9, 1998, 1999},
	} {
		r := importReal(t, c.name, FormatFio)
		clat := byMetric(t, r.Measurements)[acceptance.MetricReadCLat]
		require.Equal(t, c.def, clat.Source.PercentileDefinition, c.name)
		s, err := stats.NewSample(clat.Values, clat.Counts)
		require.NoError(t, err)
		block := fioDirOf(t, c.name, "jobs", 0, "read")["clat"]
		div := 1.0
		if block == nil {
			block, div = fioDirOf(t, c.name, "jobs", 0, "read")["clat_ns"], 1000
		}
		fio := block.(map[string]any)["percentile"].(map[string]any)[c.key].(float64) / div
		// The recording is one where the order matters: the two samples
		// sit in different bins, and fio printed the first.
		require.Equal(t, fio, s.At(c.rank), "%s: fio's p%v is sample %d", c.name, c.p, c.rank)
		require.NotEqual(t, s.At(c.rank), s.At(c.literal), "%s: samples %d and %d share a bin", c.name, c.rank, c.literal)
		got, err := s.Percentile(c.def, c.p)
		require.NoError(t, err)
		require.Equal(t, fio, got, "%s: %s gives fio's p%v", c.name, c.def, c.p)
	}
}

// fio 2.2.12 to 2.19 key json+ bins by index and add the histogram's
// constants; Accord reads each index as the value fio's plat_idx_to_val
// gives it. fio 2.21 keys the same histogram by those values: every key it
// wrote is a value the conversion makes, and the two releases' percentiles
// come out of their bins the same way.
func TestRealFio2IndexKeyedBins(t *testing.T) {
	t.Parallel()
	name := "fio-2.19-jsonplus-randrw.json"
	r := importReal(t, name, FormatFio)
	m := byMetric(t, r.Measurements)
	for _, dir := range []string{"read", "write"} {
		fio := fioDirOf(t, name, "jobs", 0, dir)
		bins := fio["clat"].(map[string]any)["bins"].(map[string]any)
		require.Equal(t, 6.0, bins["FIO_IO_U_PLAT_BITS"])
		require.Equal(t, 64.0, bins["FIO_IO_U_PLAT_VAL"])
		require.Equal(t, 1216.0, bins["FIO_IO_U_PLAT_NR"])
		require.Len(t, bins, 1216+3, "every bin, empty or not, and the three constants")
		clat := m[dir+"_clat"]
		require.Equal(t, MethodFioBins, clat.Source.PercentileMethod)
		var n int64
		for _, c := range clat.Counts {
			n += c
		}
		require.Equal(t, int64(fio["total_ios"].(float64)), n, "%s: the bins hold every I/O", dir)
		require.Less(t, len(clat.Values), 1216, "empty bins add no value")
	}
	var note string
	for _, rd := range r.Report.Read {
		if rd.Field == "jobs[].read.clat.bins" {
			note = rd.Note
		}
	}
	require.Contains(t, note, "keyed by index (fio 2.2.12–2.19)")
	require.Contains(t, note, "FIO_IO_U_PLAT_BITS 6, FIO_IO_U_PLAT_VAL 64, FIO_IO_U_PLAT_NR 1216")

	// fio 2.21's keys are plat_idx_to_val's values: each one is the
	// conversion of some index, and the values rise with the index.
	plat := fioPlat{bits: 6, val: 64, nr: 1216}
	byValue := map[uint32]uint32{}
	for i := uint32(0); i < plat.nr; i++ {
		v := plat.value(i)
		if i > 0 {
			require.Greater(t, v, plat.value(i-1), "index %d", i)
		}
		byValue[v] = i
	}
	keys := 0
	for _, f := range fio2Recordings {
		if !strings.HasPrefix(f, "fio-2.21-jsonplus") {
			continue
		}
		body, _ := fioJSONStart(readTestdata(t, f))
		var doc map[string]json.RawMessage
		require.NoError(t, json.NewDecoder(bytes.NewReader(body)).Decode(&doc))
		where := "jobs"
		if _, ok := doc["client_stats"]; ok {
			where = "client_stats"
		}
		var entries []map[string]map[string]any
		var raw []map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(doc[where], &raw))
		for _, e := range raw {
			ent := map[string]map[string]any{}
			for _, d := range []string{"read", "write", "mixed"} {
				if e[d] != nil {
					var dm map[string]any
					require.NoError(t, json.Unmarshal(e[d], &dm))
					ent[d] = dm
				}
			}
			entries = append(entries, ent)
		}
		for _, e := range entries {
			for _, d := range e {
				bins, _ := d["clat"].(map[string]any)["bins"].(map[string]any)
				for k := range bins {
					v, err := strconv.ParseUint(k, 10, 32)
					require.NoError(t, err)
					_, ok := byValue[uint32(v)]
					require.True(t, ok, "%s: fio 2.21's bin %s is no value of plat_idx_to_val", f, k)
					keys++
				}
			}
		}
	}
	require.Greater(t, keys, 1000)
	t.Logf("%d bin keys of fio 2.21 are all values of fio 2's plat_idx_to_val", keys)

	// A few of fio's own values (stat.c of 2.19): exact below 128, the
	// middle of a bin above.
	for idx, want := range map[uint32]uint32{0: 0, 127: 127, 128: 129, 129: 131, 191: 255, 192: 258, 1215: 16711680} {
		require.Equal(t, want, plat.value(idx), "index %d", idx)
	}
}

// io_bytes is KiB before fio 2.21 (which added io_kbytes) and bytes from
// 2.21 on; the report says which.
func TestRealFioIOBytesUnitByRelease(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, field, want string
	}{
		{"fio-2.2.10-storperf.json", "jobs[].read.io_bytes", "KiB moved (fio before 2.21 writes io_bytes in KiB and has no io_kbytes): the rate (bw) is imported"},
		{"fio-2.19-json-randrw.json", "jobs[].read.io_bytes", "KiB moved (fio before 2.21"},
		{"fio-2.21-json-randrw.json", "jobs[].read.io_bytes", "bytes moved: the rate (bw) is imported"},
		{"fio-2.21-json-randrw.json", "jobs[].read.io_kbytes", "KiB moved: the rate (bw) is imported"},
		{"fio-3.33-json-randrw.json", "jobs[].read.io_bytes", "bytes moved: the rate (bw_bytes) is imported"},
	} {
		r := importReal(t, c.name, FormatFio)
		require.Contains(t, ignoredReason(t, r.Report, c.field), c.want, c.name)
	}
	// The storperf file's own numbers: 7116 KiB over 25.788 s is its 275 KiB/s.
	fio := fioDirOf(t, "fio-2.2.10-storperf.json", "jobs", 0, "read")
	require.InDelta(t, fio["bw"].(float64), fio["io_bytes"].(float64)/(fio["runtime"].(float64)/1000), 1)
}

// fio 2.1 knows neither json+ nor json,normal and writes its normal text
// for them: the import says so and what to run instead.
func TestRealFioNormalTextIsRefusedWithAWayOut(t *testing.T) {
	t.Parallel()
	data := readTestdata(t, "fio-2.1.10-jsonplus-randrw-normal-text.txt")
	_, err := Detect(data)
	require.ErrorContains(t, err, "fio's normal (text) output, with no JSON in it: run fio with --output-format=json")
	_, _, err = Import(FormatFio, data, Options{Name: "fio.txt"})
	require.ErrorContains(t, err, "parse fio.txt: this is fio's normal (text) output")
	require.ErrorContains(t, err, "fio before 2.2.12 has no json+")
	// The same run's JSON, with the same text after it, is read.
	_, err = Detect(readTestdata(t, "fio-2.21-json-normal-randrw.txt"))
	require.NoError(t, err)
}

// publicStatistic is one statistic a public file holds, read straight
// from the file, and where Accord should have put it.
type publicStatistic struct {
	field  string // the file's field, as the report names it
	metric string // the catalog metric, "" for one Accord has none for
	key    string // the tool summary's key (p99, mean, stddev, …)
	value  float64
}

var vllmStatField = regexp.MustCompile(`^(mean|median|std|p[0-9]+(?:\.[0-9]+)?)_(ttft|tpot|itl|e2el)_ms$`)

// vllmStatistics lists every statistic of a vLLM result's top level.
func vllmStatistics(t *testing.T, data []byte) []publicStatistic {
	t.Helper()
	var doc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &doc))
	metrics := map[string]string{"ttft": acceptance.MetricTTFT, "tpot": acceptance.MetricTPOT, "itl": acceptance.MetricITL, "e2el": acceptance.MetricE2EL}
	var out []publicStatistic
	for k, raw := range doc {
		m := vllmStatField.FindStringSubmatch(k)
		if m == nil {
			continue
		}
		var v float64
		require.NoError(t, json.Unmarshal(raw, &v), k)
		key := map[string]string{"mean": "mean", "median": "p50", "std": "stddev"}[m[1]]
		if key == "" {
			key = m[1]
		}
		out = append(out, publicStatistic{field: k, metric: metrics[m[2]], key: key, value: v})
	}
	return out
}

// perfStatistics lists every statistic of every metric object of a
// GenAI-Perf or AIPerf summary (AIPerf 0.1's nested under "records").
func perfStatistics(t *testing.T, data []byte) []publicStatistic {
	t.Helper()
	var doc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &doc))
	prefix := ""
	if raw, ok := doc["records"]; ok {
		doc, prefix = nil, "records."
		require.NoError(t, json.Unmarshal(raw, &doc))
	}
	var out []publicStatistic
	for name, raw := range doc {
		var obj map[string]any
		if json.Unmarshal(raw, &obj) != nil || obj["unit"] == nil {
			continue
		}
		factor := map[string]float64{"ms": 1, "ns": 1e-6, "sec": 1000}[obj["unit"].(string)]
		pm, known := perfMetrics[name]
		for k, v := range obj {
			var x float64
			switch v := v.(type) {
			case float64:
				x = v
			case string: // GenAI-Perf 2024 wrote numbers as strings
				var err error
				if x, err = strconv.ParseFloat(v, 64); err != nil {
					continue
				}
			default:
				continue
			}
			key := map[string]string{"avg": "mean", "std": "stddev", "min": "min", "max": "max"}[k]
			if isPercentileName(k) {
				key = canonicalPercentile(k)
			}
			if key == "" {
				continue
			}
			metric := ""
			switch {
			case known && pm.kind == "time":
				metric = pm.metric
				x *= factor
			case known && key == "mean": // a rate: its avg
				metric, key = pm.metric, "rate"
			}
			out = append(out, publicStatistic{field: prefix + name, metric: metric, key: key, value: x})
		}
	}
	return out
}

// Every statistic of every public file lands in the import with the
// tool's value (the percentiles and means in the tool summary, in the
// catalog's unit), or the report says why its metric is not imported: no
// hand-picked few. The fio files are held to the same in
// TestRealFioEveryPrintedPercentileAgrees.
func TestRealPublicFilesEveryStatisticLands(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		stats func(*testing.T, []byte) []publicStatistic
	}{
		{"vllm-benchmark_serving-llmd-10qps.json", vllmStatistics},
		{"genai-perf-pa298-streaming.json", perfStatistics},
		{"aiperf-0.1-run1-profile_export_aiperf.json", perfStatistics},
		{"genai-perf-2024-exporter-test.json", perfStatistics},
		{"aiperf-0.8-profile_export_aiperf.json", perfStatistics},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			data := readTestdata(t, c.name)
			r := importReal(t, c.name, "")
			m := byMetric(t, r.Measurements)
			landed, ignored, percentiles, landedP := 0, 0, 0, 0
			for _, st := range c.stats(t, data) {
				_, isP := acceptance.ToolPercentile(st.key)
				if isP {
					percentiles++
				}
				if mm, ok := m[st.metric]; ok && st.metric != "" {
					if isP {
						landedP++
					}
					got, has := mm.ToolSummary[st.key]
					require.True(t, has, "%s: %s %s is not in %s's summary", c.name, st.field, st.key, st.metric)
					require.InDelta(t, st.value, got, 1e-9*math.Abs(st.value), "%s: %s %s", c.name, st.field, st.key)
					landed++
					continue
				}
				// Not imported as itself: the report says why, or what
				// Accord computed from it (AIPerf's counts and totals).
				found := false
				for _, ig := range r.Report.Ignored {
					found = found || ig.Field == st.field || strings.HasPrefix(ig.Field, st.field+".")
				}
				for _, rd := range r.Report.Read {
					found = found || rd.Field == st.field && rd.Metric != ""
				}
				require.True(t, found, "%s: %s (%s) is neither imported nor reported as ignored", c.name, st.field, st.key)
				ignored++
			}
			require.NotZero(t, landed)
			t.Logf("%s: %d statistics (%d percentiles): %d (%d percentiles) in the import with the tool's value, %d of fields the report accounts for otherwise (ignored with a reason, or read into a metric Accord computes)", c.name, landed+ignored, percentiles, landed, landedP, ignored)
		})
	}
}

// AIPerf 0.8's two files of one recorded run (a public repository's
// artifacts, testdata/README.md): the records' samples under numpy's rule
// give AIPerf's own summary, and the throughputs come out as AIPerf's.
func TestRealAIPerf08RecordsAgreeWithItsSummary(t *testing.T) {
	t.Parallel()
	rec := importReal(t, "aiperf-0.8-profile_export.jsonl", "")
	require.Equal(t, FormatAIPerfRecords, rec.Report.Format)
	sum := importReal(t, "aiperf-0.8-profile_export_aiperf.json", "")
	require.Equal(t, FormatAIPerf, sum.Report.Format)
	require.Equal(t, "0.8.0", sum.Report.ToolVersion)
	requireAccounted(t, sum.Report, topKeys(t, readTestdata(t, "aiperf-0.8-profile_export_aiperf.json"))...)
	for _, r := range []Result{rec, sum} {
		for _, w := range r.Report.Warnings {
			require.NotContains(t, w, "no TTFT", "the run streamed")
		}
	}

	rm, sm := byMetric(t, rec.Measurements), byMetric(t, sum.Measurements)
	compared := 0
	for _, id := range []string{acceptance.MetricTTFT, acceptance.MetricE2EL, acceptance.MetricTPOT, acceptance.MetricITL} {
		raw, summary := rm[id], sm[id]
		require.NotEmpty(t, raw.Values, id)
		s, err := stats.NewSample(raw.Values, nil)
		require.NoError(t, err)
		for k, tool := range summary.ToolSummary {
			p, ok := acceptance.ToolPercentile(k)
			if !ok {
				continue
			}
			got, err := s.Percentile(stats.NumpyLinear, p)
			require.NoError(t, err)
			require.InEpsilon(t, tool, got, 1e-12, "%s %s", id, k)
			compared++
		}
		require.InEpsilon(t, summary.ToolSummary["mean"], s.Mean(), 1e-12, id)
		require.Equal(t, summary.ToolSummary["max"], s.Max(), id)
	}
	require.Equal(t, 4*9, compared)
	require.Len(t, rm[acceptance.MetricTTFT].Values, 10, "10 of 20 requests timed out")
	require.Len(t, rm[acceptance.MetricITL].Values, 110, "every gap between chunks of the succeeded requests")
	require.Equal(t, []float64{0.5}, rm[acceptance.MetricErrorRate].Values)
	require.Equal(t, []float64{0.5}, sm[acceptance.MetricErrorRate].Values)
	require.Contains(t, strings.Join(rec.Report.Warnings, "\n"), "10 of 20 requests failed")
	// AIPerf's span is the first start to the last start plus its latency:
	// Accord's rates from the records are AIPerf's own.
	for _, id := range []string{acceptance.MetricRequestThroughput, acceptance.MetricOutputTokenThroughput, acceptance.MetricTotalTokenThroughput} {
		require.InEpsilon(t, sm[id].Values[0], rm[id].Values[0], 1e-9, id)
	}
	// AIPerf 0.8 writes total_token_throughput itself: Accord's from the
	// totals stands beside it and agrees.
	tt := sm[acceptance.MetricTotalTokenThroughput]
	require.Equal(t, 1.0719726000087824, tt.ToolSummary["rate"])
	require.InEpsilon(t, tt.ToolSummary["rate"], tt.Values[0], 1e-12)
	t.Logf("AIPerf 0.8: %d percentiles of 4 metrics from 10 records equal AIPerf's own", compared)

	// Every metric of the records is accounted for.
	keys := map[string]bool{}
	for _, line := range bytes.Split(bytes.TrimSpace(readTestdata(t, "aiperf-0.8-profile_export.jsonl")), []byte("\n")) {
		var r struct {
			Metrics map[string]json.RawMessage `json:"metrics"`
		}
		require.NoError(t, json.Unmarshal(line, &r))
		for k := range r.Metrics {
			keys["metrics."+k] = true
		}
	}
	var ks []string
	for k := range keys {
		ks = append(ks, k)
	}
	requireAccounted(t, rec.Report, ks...)
	require.Contains(t, ignoredReason(t, rec.Report, "metrics.http_req_waiting"), "HTTP timing breakdown")
}

// A non-streaming AIPerf run's export has no time_to_first_token at all
// (AIPerf computes no streaming-only metric without --streaming, and its
// input_config leaves the unset option out): the import says there is no
// TTFT and why, and never takes the request latency for it.
func TestAIPerfNonStreamingExportSaysNoTTFT(t *testing.T) {
	t.Parallel()
	const line = "no TTFT: the benchmark did not stream"
	sum := importReal(t, "aiperf-0.8-nonstreaming-handmade-profile_export_aiperf.json", "")
	require.Equal(t, FormatAIPerf, sum.Report.Format)
	m := byMetric(t, sum.Measurements)
	require.NotContains(t, m, acceptance.MetricTTFT)
	require.NotContains(t, m, acceptance.MetricTPOT)
	require.NotContains(t, m, acceptance.MetricITL)
	require.Equal(t, 584.203521, m[acceptance.MetricE2EL].ToolSummary["p50"], "request latency is e2el, as it was")
	w := strings.Join(sum.Report.Warnings, "\n")
	require.Contains(t, w, line+" (the export has no time_to_first_token, which AIPerf writes only for streamed responses, and input_config does not turn streaming on)")
	require.Contains(t, sum.Report.Lines(), sum.Report.Warnings[slices.IndexFunc(sum.Report.Warnings, func(s string) bool { return strings.HasPrefix(s, line) })],
		"the line reaches the run's notes")

	rec := importReal(t, "aiperf-0.8-nonstreaming-handmade-profile_export.jsonl", "")
	rm := byMetric(t, rec.Measurements)
	require.NotContains(t, rm, acceptance.MetricTTFT)
	require.Len(t, rm[acceptance.MetricE2EL].Values, 10)
	require.Contains(t, strings.Join(rec.Report.Warnings, "\n"), line+" (no succeeded record has time_to_first_token")

	// input_config saying streaming was on, with no TTFT: said, but not
	// as "did not stream".
	var doc map[string]any
	require.NoError(t, json.Unmarshal(readTestdata(t, "aiperf-0.8-nonstreaming-handmade-profile_export_aiperf.json"), &doc))
	doc["input_config"].(map[string]any)["endpoint"].(map[string]any)["streaming"] = true
	data, err := json.Marshal(doc)
	require.NoError(t, err)
	r, err := ImportWithReport(FormatAIPerf, data, Options{})
	require.NoError(t, err)
	require.Contains(t, r.Report.Warnings, "no TTFT: the export has no time_to_first_token although input_config says the benchmark streamed")

	// GenAI-Perf's layout without time_to_first_token says the same.
	var gp map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(readTestdata(t, "genai-perf-pa298-streaming.json"), &gp))
	delete(gp, "time_to_first_token")
	delete(gp, "inter_token_latency")
	delete(gp, "input_config")
	data, err = json.Marshal(gp)
	require.NoError(t, err)
	r, err = ImportWithReport(FormatGenAIPerf, data, Options{})
	require.NoError(t, err)
	require.Contains(t, r.Report.Warnings, "no TTFT: the export has no time_to_first_token, which a benchmark that did not stream has none of, and it does not say whether the benchmark streamed")
	// … and with input_config saying it did not stream, that it did not.
	gp["input_config"] = json.RawMessage(`{"streaming": false}`)
	data, err = json.Marshal(gp)
	require.NoError(t, err)
	r, err = ImportWithReport(FormatGenAIPerf, data, Options{})
	require.NoError(t, err)
	require.Contains(t, strings.Join(r.Report.Warnings, "\n"), line+" (input_config says streaming is off)")
}

// A recorded AIPerf 0.8 run whose 20 requests all timed out: an error
// rate of 1 from AIPerf's own count, and a line saying why there is no
// TTFT.
func TestRealAIPerf08AllRequestsFailed(t *testing.T) {
	t.Parallel()
	name := "aiperf-0.8-all-failed-profile_export_aiperf.json"
	r := importReal(t, name, "")
	require.Equal(t, FormatAIPerf, r.Report.Format)
	requireAccounted(t, r.Report, topKeys(t, readTestdata(t, name))...)
	m := byMetric(t, r.Measurements)
	require.Len(t, m, 1)
	require.Equal(t, []float64{1}, m[acceptance.MetricErrorRate].Values)
	require.Equal(t, int64(20), m[acceptance.MetricErrorRate].Trials)
	w := strings.Join(r.Report.Warnings, "\n")
	require.Contains(t, w, "AIPerf counted 20 failed requests (error_summary)")
	require.Contains(t, w, "no TTFT: every request failed")
}
