package parse

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
)

// runFio runs the real fio for about a second against a file in a temp dir
// and returns its output file's bytes.
func runFio(t *testing.T, format string, extra ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("fio"); err != nil {
		t.Fatalf("fio is required for these tests: %v", err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "fio.json")
	args := append([]string{
		"--name=accord-test", "--filename=" + filepath.Join(dir, "data"), "--size=16M", "--bs=4k",
		"--runtime=1", "--time_based", "--ioengine=psync",
		"--output-format=" + format, "--output=" + out,
	}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "fio", args...)
	cmd.Dir = dir
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "fio: %s", msg)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	return data
}

// fioRaw is fio's output decoded generically, to compare with the import.
type fioRaw struct {
	Version string                      `json:"fio version"`
	Jobs    []map[string]map[string]any `json:"jobs"`
}

func decodeFioRaw(t *testing.T, data []byte) fioRaw {
	t.Helper()
	var raw struct {
		Version string            `json:"fio version"`
		Jobs    []json.RawMessage `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal(data, &raw))
	out := fioRaw{Version: raw.Version}
	for _, j := range raw.Jobs {
		var all map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(j, &all))
		dirs := map[string]map[string]any{}
		for _, d := range []string{"read", "write"} {
			var m map[string]any
			require.NoError(t, json.Unmarshal(all[d], &m))
			dirs[d] = m
		}
		out.Jobs = append(out.Jobs, dirs)
	}
	return out
}

func f64(v any) float64 { return v.(float64) }

// nearestRank is fio's own percentile rule over its bins: the first bin
// where the running count reaches p % of all samples.
func nearestRank(values []float64, counts []int64, p float64) float64 {
	var n int64
	for _, c := range counts {
		n += c
	}
	var sum int64
	for i, c := range counts {
		sum += c
		if float64(sum) >= p/100*float64(n) {
			return values[i]
		}
	}
	return values[len(values)-1]
}

func TestImportFioRealJSONPlus(t *testing.T) {
	t.Parallel()
	data := runFio(t, "json+", "--rw=randrw", "--rwmixread=70")
	raw := decodeFioRaw(t, data)
	got, warnings, err := Import(FormatFio, data, Options{Step: "kv", Repetition: 1})
	require.NoError(t, err)
	require.Empty(t, warnings)
	m := byMetric(t, got)

	for _, dir := range []string{"read", "write"} {
		fio := raw.Jobs[0][dir]
		iops := m[dir+"_iops"]
		require.Equal(t, []float64{f64(fio["iops"])}, iops.Values, dir)
		require.Greater(t, iops.Values[0], 0.0)
		require.Equal(t, "fio-3.33", iops.Source.ToolVersion)
		require.Equal(t, ToolFio, iops.Source.Tool)
		bw := m[dir+"_bw"]
		require.Equal(t, []float64{f64(fio["bw_bytes"])}, bw.Values, dir)
		// bw is KiB/s, rounded by fio
		require.InDelta(t, f64(fio["bw"])*1024, bw.Values[0], 1024)

		clat := m[dir+"_clat"]
		fclat := fio["clat_ns"].(map[string]any)
		require.Equal(t, MethodFioBins, clat.Source.PercentileMethod)
		require.Contains(t, clat.Source.Field, dir+".clat_ns.bins")
		require.True(t, sort.Float64sAreSorted(clat.Values))
		var n int64
		for _, c := range clat.Counts {
			n += c
		}
		require.Equal(t, int64(f64(fclat["N"])), n, "bins hold every sample")
		require.InDelta(t, f64(fclat["mean"])/1000, clat.ToolSummary["mean"], 1e-9, "µs")
		require.InDelta(t, f64(fclat["min"])/1000, clat.ToolSummary["min"], 1e-9)
		// Accord's percentiles from the bins agree with fio's own.
		pcts := fclat["percentile"].(map[string]any)
		require.NotEmpty(t, pcts)
		for k, v := range pcts {
			p, err := strconv.ParseFloat(k, 64)
			require.NoError(t, err)
			fioUs := f64(v) / 1000
			require.Equal(t, fioUs, clat.ToolSummary[percentileKey(p)])
			// fio picks the bin the same way: they agree exactly, not just within a bin.
			require.Equal(t, fioUs, nearestRank(clat.Values, clat.Counts, p), "p%s", k)
		}
		// The mean of the bins is within bin resolution of fio's exact mean.
		var s float64
		for i, v := range clat.Values {
			s += v * float64(clat.Counts[i])
		}
		require.InEpsilon(t, f64(fclat["mean"])/1000, s/float64(n), 1.0/64)

		// psync has no submission latency: no slat.
		require.NotContains(t, m, dir+"_slat")
		lat := m[dir+"_lat"]
		require.Empty(t, lat.Values, "fio writes no bins for lat unless lat_percentiles is set")
		require.Equal(t, MethodToolSummary, lat.Source.PercentileMethod)
		require.InDelta(t, f64(fio["lat_ns"].(map[string]any)["mean"])/1000, lat.ToolSummary["mean"], 1e-9)
	}
}

func TestImportFioRealJSONSeveralJobs(t *testing.T) {
	t.Parallel()
	data := runFio(t, "json", "--rw=randread", "--numjobs=2", "--ioengine=libaio", "--iodepth=4")
	raw := decodeFioRaw(t, data)
	require.Len(t, raw.Jobs, 2)
	got, warnings, err := Import(FormatFio, data, Options{})
	require.NoError(t, err)
	m := byMetric(t, got)
	require.NotContains(t, m, acceptance.MetricWriteIOPS, "no write I/O: no write metrics")

	r0, r1 := raw.Jobs[0]["read"], raw.Jobs[1]["read"]
	require.InDelta(t, f64(r0["iops"])+f64(r1["iops"]), m[acceptance.MetricReadIOPS].Values[0], 1e-6)
	require.InDelta(t, f64(r0["bw_bytes"])+f64(r1["bw_bytes"]), m[acceptance.MetricReadBW].Values[0], 1e-6)
	require.Contains(t, m[acceptance.MetricReadIOPS].Source.Field, "sum of 2 jobs")

	clat := m[acceptance.MetricReadCLat]
	require.Empty(t, clat.Values, "json without bins: summary only")
	require.Equal(t, MethodToolSummary, clat.Source.PercentileMethod)
	c0, c1 := r0["clat_ns"].(map[string]any), r1["clat_ns"].(map[string]any)
	n0, n1 := f64(c0["N"]), f64(c1["N"])
	want := (f64(c0["mean"])*n0 + f64(c1["mean"])*n1) / (n0 + n1) / 1000
	require.InDelta(t, want, clat.ToolSummary["mean"], 1e-6)
	require.Equal(t, math.Max(f64(c0["max"]), f64(c1["max"]))/1000, clat.ToolSummary["max"])
	require.NotContains(t, clat.ToolSummary, "p99", "per-job percentiles do not combine")
	require.Contains(t, strings.Join(warnings, "\n"), "per-job percentiles cannot be combined")

	// libaio measures submission latency.
	slat := m[acceptance.MetricReadSLat]
	require.Greater(t, slat.ToolSummary["mean"], 0.0)
	require.Less(t, slat.ToolSummary["mean"], 1e6, "µs, not ns")
}

func TestImportFioRealJSONPlusMergesBins(t *testing.T) {
	t.Parallel()
	data := runFio(t, "json+", "--rw=randwrite", "--numjobs=2")
	raw := decodeFioRaw(t, data)
	got, _, err := Import(FormatFio, data, Options{})
	require.NoError(t, err)
	m := byMetric(t, got)
	clat := m[acceptance.MetricWriteCLat]
	var n int64
	for _, c := range clat.Counts {
		n += c
	}
	want := f64(raw.Jobs[0]["write"]["clat_ns"].(map[string]any)["N"]) + f64(raw.Jobs[1]["write"]["clat_ns"].(map[string]any)["N"])
	require.Equal(t, int64(want), n)
	require.Equal(t, MethodFioBins, clat.Source.PercentileMethod)
	require.Contains(t, clat.Source.Field, "sum of 2 jobs")
	require.NotContains(t, m, acceptance.MetricReadIOPS)
}

func TestImportFio2Microseconds(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/fio2-randrw.json")
	require.NoError(t, err)
	got, warnings, err := Import(FormatFio, data, Options{Name: "fio2-randrw.json"})
	require.NoError(t, err)
	require.Empty(t, warnings)
	m := byMetric(t, got)
	require.Equal(t, []float64{7168}, m[acceptance.MetricReadIOPS].Values)
	require.Equal(t, []float64{28672 * 1024}, m[acceptance.MetricReadBW].Values, "fio 2 has no bw_bytes: KiB/s × 1024")
	require.Contains(t, m[acceptance.MetricReadBW].Source.Field, "bw (KiB/s) × 1024")
	require.Equal(t, []float64{3072}, m[acceptance.MetricWriteIOPS].Values)

	clat := m[acceptance.MetricReadCLat]
	require.Equal(t, "fio-2.2.10", clat.Source.ToolVersion)
	require.Empty(t, clat.Values)
	// fio 2's clat is already in µs
	require.Equal(t, 131.75, clat.ToolSummary["mean"])
	require.Equal(t, 370.0, clat.ToolSummary["p99"])
	require.Equal(t, 1048.0, clat.ToolSummary["p99.9"])
	require.Equal(t, 4960.0, clat.ToolSummary["p99.99"])
	require.NotContains(t, clat.ToolSummary, "p0", `fio 2's "0.00" padding is not a percentile`)
	require.Equal(t, 4.12, m[acceptance.MetricReadSLat].ToolSummary["mean"])
	require.Equal(t, 49.35, m[acceptance.MetricWriteLat].ToolSummary["mean"])
	require.Contains(t, clat.Source.Field, "read.clat")
}

func TestImportFioRejectsBadInput(t *testing.T) {
	t.Parallel()
	base, err := os.ReadFile("testdata/fio2-randrw.json")
	require.NoError(t, err)
	s := string(base)
	tests := []struct {
		name, data, want string
	}{
		{"truncated", s[:len(s)/2], "truncated JSON"},
		{"job error", strings.Replace(s, `"error" : 0`, `"error" : 5`, 1), `jobs[0].error: job "randrw-4k" reported error 5`},
		{"nan iops", strings.Replace(s, `"iops" : 7168.00`, `"iops" : -nan`, 1), "jobs[0].read.iops: missing, null or not finite"},
		{"negative clat", strings.Replace(s, `"mean" : 131.75`, `"mean" : -131.75`, 1), "jobs[0].read.clat.mean: negative latency"},
		{"absurd clat", strings.Replace(s, `"99.000000" : 370`, `"99.000000" : 370e9`, 1), "read.clat.percentile.99.000000: latency 3.7e+08 ms is over a day"},
		{"string iops", strings.Replace(s, `"iops" : 7168.00`, `"iops" : "fast"`, 1), "jobs[0].read: json: invalid number literal"},
		{"no jobs", `{"fio version" : "fio-3.33", "jobs" : []}`, "jobs: no jobs"},
		{"no I/O", `{"fio version" : "fio-3.33", "jobs" : [{"jobname":"x","error":0,"read":{"iops":0,"total_ios":0}}]}`, "no job did any I/O"},
		{"two documents", s + s, "the file holds 2 JSON documents"},
		{"bad bin key", `{"fio version":"fio-3.33","jobs":[{"jobname":"x","read":{"iops":1,"bw_bytes":4096,"total_ios":1,"clat_ns":{"min":1,"max":1,"mean":1,"stddev":0,"N":1,"bins":{"x":1}}}}]}`, `bins: key "x" is not a latency`},
		{"fractional bin count", `{"fio version":"fio-3.33","jobs":[{"jobname":"x","read":{"iops":1,"bw_bytes":4096,"total_ios":1,"clat_ns":{"min":1,"max":1,"mean":1,"stddev":0,"N":1,"bins":{"1000":0.5}}}}]}`, "0.5 is not a count"},
		{"not json", "fio: failed to open file", "invalid JSON"},
		{"index bins without constants", fio2Indexed(`"FIO_IO_U_PLAT_BITS":6,"FIO_IO_U_PLAT_VAL":64,"0":1`), "need FIO_IO_U_PLAT_BITS, FIO_IO_U_PLAT_VAL and FIO_IO_U_PLAT_NR"},
		{"index beyond the histogram", fio2Indexed(`"FIO_IO_U_PLAT_BITS":6,"FIO_IO_U_PLAT_VAL":64,"FIO_IO_U_PLAT_NR":1216,"1216":1`), `key "1216" is not a bin index below FIO_IO_U_PLAT_NR (1216)`},
		{"index not a number", fio2Indexed(`"FIO_IO_U_PLAT_BITS":6,"FIO_IO_U_PLAT_VAL":64,"FIO_IO_U_PLAT_NR":1216,"12.5":1`), `key "12.5" is not a bin index`},
		{"constants that are no histogram", fio2Indexed(`"FIO_IO_U_PLAT_BITS":6,"FIO_IO_U_PLAT_VAL":60,"FIO_IO_U_PLAT_NR":1216,"1":1`), "do not describe fio's histogram"},
		{"a histogram beyond 32 bits", fio2Indexed(`"FIO_IO_U_PLAT_BITS":6,"FIO_IO_U_PLAT_VAL":64,"FIO_IO_U_PLAT_NR":4096,"1":1`), "do not describe fio's histogram"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, _, err := Import(FormatFio, []byte(tt.data), Options{Name: "fio.json"})
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, err, "parse fio.json")
			require.Nil(t, got)
		})
	}
}

func TestImportFioToleratesTextBeforeJSON(t *testing.T) {
	t.Parallel()
	base, err := os.ReadFile("testdata/fio2-randrw.json")
	require.NoError(t, err)
	data := append([]byte("note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1\n"), base...)
	f, err := Detect(data)
	require.NoError(t, err)
	require.Equal(t, FormatFio, f)
	got, warnings, err := Import("", data, Options{})
	require.NoError(t, err)
	require.NotEmpty(t, got)
	require.Contains(t, strings.Join(warnings, "\n"), "skipped 97 bytes of text before fio's JSON")
}

// fio2Indexed is a fio 2.19-shaped json+ output whose read clat bins are
// the given JSON members.
func fio2Indexed(bins string) string {
	return `{"fio version":"fio-2.19","jobs":[{"jobname":"x","error":0,"read":{"io_bytes":4,"bw":4,"iops":1,"total_ios":1,"clat":{"min":1,"max":1,"mean":1,"stddev":0,"percentile":{"99.000000":1},"bins":{` + bins + `}}}}]}`
}
