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

// fio's JSON, as far as Accord reads it. Numbers are json.Number so that
// null (a non-finite value cleaned by nullNonFinite) and absence can be told
// apart from zero.
type fioOutput struct {
	Version     string   `json:"fio version"`
	Jobs        []fioJob `json:"jobs"`
	ClientStats []fioJob `json:"client_stats"`
}

type fioJob struct {
	JobName  string          `json:"jobname"`
	Hostname string          `json:"hostname"`
	Error    *json.Number    `json:"error"`
	Read     json.RawMessage `json:"read"`
	Write    json.RawMessage `json:"write"`
	Trim     json.RawMessage `json:"trim"`
}

type fioDir struct {
	IOBytes  *json.Number `json:"io_bytes"`
	BWBytes  *json.Number `json:"bw_bytes"`
	BW       *json.Number `json:"bw"`
	IOPS     *json.Number `json:"iops"`
	TotalIOs *json.Number `json:"total_ios"`
	// fio ≥ 3: nanoseconds.
	SlatNS *fioLat `json:"slat_ns"`
	ClatNS *fioLat `json:"clat_ns"`
	LatNS  *fioLat `json:"lat_ns"`
	// fio 2: microseconds.
	Slat *fioLat `json:"slat"`
	Clat *fioLat `json:"clat"`
	Lat  *fioLat `json:"lat"`
}

type fioLat struct {
	Min        *json.Number            `json:"min"`
	Max        *json.Number            `json:"max"`
	Mean       *json.Number            `json:"mean"`
	Stddev     *json.Number            `json:"stddev"`
	N          *json.Number            `json:"N"`
	Percentile map[string]*json.Number `json:"percentile"`
	Bins       map[string]*json.Number `json:"bins"`
}

// ImportFio reads fio's --output-format=json or json+ output (fio 2 or 3):
// per direction with I/O, read/write iops and bandwidth (summed over jobs;
// fio's bw is KiB/s, bw_bytes B/s) and clat, slat and lat in µs (fio 3's
// *_ns fields are nanoseconds, fio 2's are microseconds). With json+ bins the
// latency samples are the merged bins (Values + Counts); without, Values is
// empty and ToolSummary holds fio's own mean and percentiles. In
// client/server mode the client_stats are read (the "All clients" entry when
// fio wrote one).
func ImportFio(data []byte, opts Options) ([]acceptance.Measurement, []string, error) {
	in := opts.name("fio.json")
	if int64(len(data)) > opts.limit(MaxToolJSONBytes) {
		return nil, nil, tooLarge(in, int64(len(data)), opts.limit(MaxToolJSONBytes))
	}
	var warnings []string
	body, skipped := fioJSONStart(data)
	if skipped > 0 {
		warnings = append(warnings, fmt.Sprintf("skipped %d bytes of text before fio's JSON", skipped))
	}
	body, nulls := nullNonFinite(body)
	if nulls > 0 {
		warnings = append(warnings, fmt.Sprintf("%d non-finite numbers (nan, inf) in fio's output were treated as missing", nulls))
	}
	var doc fioOutput
	if err := decodeOne(body, &doc); err != nil {
		return nil, nil, &Error{Input: in, Err: err}
	}
	version := doc.Version
	if version == "" {
		version = opts.ToolVersion
		warnings = append(warnings, "fio's output does not say its version (\"fio version\")")
	}

	jobs, where := doc.Jobs, "jobs"
	if len(doc.ClientStats) > 0 {
		jobs, where = doc.ClientStats, "client_stats"
		for _, j := range doc.ClientStats {
			if j.JobName == "All clients" {
				jobs = []fioJob{j}
				break
			}
		}
	}
	if len(jobs) == 0 {
		return nil, nil, errf(in, 0, "jobs", "no jobs in fio's output")
	}
	for i, j := range jobs {
		if j.Error != nil {
			e, err := num(j.Error)
			if err != nil {
				return nil, nil, errf(in, 0, fmt.Sprintf("%s[%d].error", where, i), "%v", err)
			}
			if e != 0 {
				return nil, nil, errf(in, 0, fmt.Sprintf("%s[%d].error", where, i), "job %q reported error %g: its results are not trustworthy", j.JobName, e)
			}
		}
	}

	var out []acceptance.Measurement
	anyIO := false
	for _, dir := range []string{"read", "write", "trim"} {
		dirs := make([]*fioDir, 0, len(jobs))
		for i, j := range jobs {
			raw := map[string]json.RawMessage{"read": j.Read, "write": j.Write, "trim": j.Trim}[dir]
			if len(raw) == 0 || string(raw) == "null" {
				continue
			}
			var d fioDir
			if err := decodeOne(raw, &d); err != nil {
				return nil, nil, &Error{Input: in, Field: fmt.Sprintf("%s[%d].%s", where, i, dir), Err: err}
			}
			had, err := d.hadIO()
			if err != nil {
				return nil, nil, &Error{Input: in, Field: fmt.Sprintf("%s[%d].%s", where, i, dir), Err: err}
			}
			if had {
				dirs = append(dirs, &d)
			}
		}
		if len(dirs) == 0 {
			continue
		}
		anyIO = true
		if dir == "trim" {
			warnings = append(warnings, "fio reported trim I/O: Accord's catalog has no trim metrics, ignored")
			continue
		}
		ms, w, err := fioDirection(dir, dirs, where, in, version, opts)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, ms...)
		warnings = append(warnings, w...)
	}
	if !anyIO {
		return nil, nil, errf(in, 0, where, "no job did any I/O")
	}
	return out, warnings, nil
}

// fioJSONStart skips text fio or a wrapper printed before the JSON document
// (warnings, "note: ..." lines) and returns the JSON and how much it skipped.
func fioJSONStart(data []byte) ([]byte, int) {
	t := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(t) == 0 || t[0] == '{' {
		return t, 0
	}
	if i := bytes.Index(data, []byte("\n{")); i >= 0 {
		return data[i+1:], i + 1
	}
	return t, 0
}

func num(n *json.Number) (float64, error) {
	if n == nil {
		return 0, fmt.Errorf("missing, null or not finite")
	}
	v, err := strconv.ParseFloat(string(*n), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a finite number", string(*n))
	}
	return v, nil
}

// optNum reads an optional number: ok is false when absent.
func optNum(n *json.Number) (v float64, ok bool, err error) {
	if n == nil {
		return 0, false, nil
	}
	v, err = num(n)
	return v, err == nil, err
}

func (d *fioDir) hadIO() (bool, error) {
	for _, f := range []struct {
		name string
		n    *json.Number
	}{{"total_ios", d.TotalIOs}, {"io_bytes", d.IOBytes}, {"iops", d.IOPS}} {
		v, ok, err := optNum(f.n)
		if err != nil {
			return false, fmt.Errorf("%s: %w", f.name, err)
		}
		if ok && v < 0 {
			return false, fmt.Errorf("%s: negative value %g", f.name, v)
		}
		if ok && v > 0 {
			return true, nil
		}
	}
	return false, nil
}

func fioDirection(dir string, dirs []*fioDir, where, in, version string, opts Options) ([]acceptance.Measurement, []string, error) {
	var warnings []string
	var out []acceptance.Measurement
	field := func(f string) string { return in + ": " + where + "[]." + dir + "." + f }
	src := func(f, method string) acceptance.Source {
		return acceptance.Source{Tool: ToolFio, ToolVersion: version, Field: f, PercentileMethod: method}
	}

	var iops, bw float64
	bwField := "bw_bytes"
	for i, d := range dirs {
		v, err := num(d.IOPS)
		if err != nil {
			return nil, nil, errf(in, 0, fmt.Sprintf("%s[%d].%s.iops", where, i, dir), "%v", err)
		}
		if err := checkRate(v, maxIOPS); err != nil {
			return nil, nil, errf(in, 0, fmt.Sprintf("%s[%d].%s.iops", where, i, dir), "%v", err)
		}
		iops += v
		b, ok, err := optNum(d.BWBytes)
		if err != nil {
			return nil, nil, errf(in, 0, fmt.Sprintf("%s[%d].%s.bw_bytes", where, i, dir), "%v", err)
		}
		if !ok {
			kib, err := num(d.BW)
			if err != nil {
				return nil, nil, errf(in, 0, fmt.Sprintf("%s[%d].%s.bw", where, i, dir), "%v", err)
			}
			b = kib * 1024
			bwField = "bw (KiB/s) × 1024"
		}
		if err := checkRate(b, maxBandwidth); err != nil {
			return nil, nil, errf(in, 0, fmt.Sprintf("%s[%d].%s.bw", where, i, dir), "%v", err)
		}
		bw += b
	}
	iopsM := opts.measurement(dir+"_iops", src(field("iops")+sumNote(len(dirs)), ""))
	iopsM.Values = []float64{iops}
	iopsM.ToolSummary = map[string]float64{"rate": iops}
	bwM := opts.measurement(dir+"_bw", src(field(bwField)+sumNote(len(dirs)), ""))
	bwM.Values = []float64{bw}
	bwM.ToolSummary = map[string]float64{"rate": bw}
	out = append(out, iopsM, bwM)

	for _, lt := range []struct {
		metric string
		pick   func(*fioDir) (*fioLat, string, float64) // stats, field name, divisor to µs
	}{
		{dir + "_clat", func(d *fioDir) (*fioLat, string, float64) {
			if d.ClatNS != nil {
				return d.ClatNS, "clat_ns", 1000
			}
			return d.Clat, "clat", 1
		}},
		{dir + "_slat", func(d *fioDir) (*fioLat, string, float64) {
			if d.SlatNS != nil {
				return d.SlatNS, "slat_ns", 1000
			}
			return d.Slat, "slat", 1
		}},
		{dir + "_lat", func(d *fioDir) (*fioLat, string, float64) {
			if d.LatNS != nil {
				return d.LatNS, "lat_ns", 1000
			}
			return d.Lat, "lat", 1
		}},
	} {
		m, w, err := fioLatency(lt.metric, dirs, lt.pick, where, dir, in, version, opts)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, w...)
		if m != nil {
			out = append(out, *m)
		}
	}
	return out, warnings, nil
}

func sumNote(n int) string {
	if n > 1 {
		return fmt.Sprintf(" (sum of %d jobs)", n)
	}
	return ""
}

const maxLatencyUs = maxLatencyMs * 1000

// fioLatency builds one latency measurement (µs) from the jobs' stats.
func fioLatency(metric string, dirs []*fioDir, pick func(*fioDir) (*fioLat, string, float64),
	where, dir, in, version string, opts Options) (*acceptance.Measurement, []string, error) {
	type jobStats struct {
		n, mean, min, max, stddev float64
		pct                       map[string]float64
	}
	var stats []jobStats
	bins := map[float64]int64{}
	var binTotal, nTotal float64
	haveBins, haveN := false, true
	name := ""
	for i, d := range dirs {
		l, fname, div := pick(d)
		if l == nil {
			continue
		}
		name = fname
		fieldAt := func(f string) string { return fmt.Sprintf("%s[%d].%s.%s.%s", where, i, dir, fname, f) }
		st := jobStats{pct: map[string]float64{}}
		var err error
		n, hasN, err := optNum(l.N)
		if err != nil {
			return nil, nil, errf(in, 0, fieldAt("N"), "%v", err)
		}
		if hasN && (n < 0 || n > 1e15) {
			return nil, nil, errf(in, 0, fieldAt("N"), "%g is not a sample count", n)
		}
		for _, f := range []struct {
			name string
			n    *json.Number
			dst  *float64
		}{{"min", l.Min, &st.min}, {"max", l.Max, &st.max}, {"mean", l.Mean, &st.mean}, {"stddev", l.Stddev, &st.stddev}} {
			if *f.dst, err = num(f.n); err != nil {
				if f.name == "stddev" && f.n == nil { // some fio versions omit it
					continue
				}
				return nil, nil, errf(in, 0, fieldAt(f.name), "%v", err)
			}
			*f.dst /= div
			if e := checkLatency(*f.dst / 1000); e != nil {
				return nil, nil, errf(in, 0, fieldAt(f.name), "%v", e)
			}
		}
		if !hasN {
			// fio 2 has no N: an all-zero block means "not measured" (slat of a sync engine).
			haveN = false
			if st.max == 0 && st.mean == 0 {
				continue
			}
		} else if n == 0 {
			continue
		}
		st.n = n
		nTotal += n
		for k, v := range l.Percentile {
			p, perr := strconv.ParseFloat(k, 64)
			if perr != nil || math.IsNaN(p) || p < 0 || p > 100 {
				return nil, nil, errf(in, 0, fieldAt("percentile"), "key %q is not a percentile", k)
			}
			if p == 0 { // fio 2 pads the list with "0.00": 0 entries
				continue
			}
			x, err := num(v)
			if err != nil {
				return nil, nil, errf(in, 0, fieldAt("percentile."+k), "%v", err)
			}
			x /= div
			if e := checkLatency(x / 1000); e != nil {
				return nil, nil, errf(in, 0, fieldAt("percentile."+k), "%v", e)
			}
			st.pct[percentileKey(p)] = x
		}
		for k, v := range l.Bins {
			haveBins = true
			val, perr := strconv.ParseFloat(k, 64)
			if perr != nil || math.IsNaN(val) || math.IsInf(val, 0) {
				return nil, nil, errf(in, 0, fieldAt("bins"), "key %q is not a latency", k)
			}
			val /= div
			if e := checkLatency(val / 1000); e != nil {
				return nil, nil, errf(in, 0, fieldAt("bins."+k), "%v", e)
			}
			c, err := num(v)
			if err != nil {
				return nil, nil, errf(in, 0, fieldAt("bins."+k), "%v", err)
			}
			if c < 0 || c != math.Trunc(c) || c > 1e15 {
				return nil, nil, errf(in, 0, fieldAt("bins."+k), "%g is not a count", c)
			}
			binTotal += c
			if binTotal > 1e15 {
				return nil, nil, errf(in, 0, fieldAt("bins"), "the bins hold more than 1e15 samples: not a real run")
			}
			bins[val] += int64(c)
		}
		stats = append(stats, st)
	}
	if len(stats) == 0 {
		return nil, nil, nil
	}
	var warnings []string
	f := in + ": " + where + "[]." + dir + "." + name + sumNote(len(stats))
	m := opts.measurement(metric, acceptance.Source{Tool: ToolFio, ToolVersion: version, Field: f})

	summary := map[string]float64{}
	if len(stats) == 1 {
		st := stats[0]
		summary["mean"], summary["min"], summary["max"], summary["stddev"] = st.mean, st.min, st.max, st.stddev
		for k, v := range st.pct {
			summary[k] = v
		}
	} else {
		// Several jobs without group_reporting: the mean, min and max combine
		// exactly; fio's per-job percentiles do not, so they are left out.
		var wsum, mean float64
		mn, mx := math.Inf(1), math.Inf(-1)
		for _, st := range stats {
			w := st.n
			if !haveN {
				w = 1
			}
			wsum += w
			mean += w * st.mean
			mn, mx = math.Min(mn, st.min), math.Max(mx, st.max)
		}
		summary["mean"], summary["min"], summary["max"] = mean/wsum, mn, mx
		if !haveN {
			warnings = append(warnings, fmt.Sprintf("%s: fio gave no sample counts, the mean over %d jobs is unweighted", metric, len(stats)))
		}
		if !haveBins {
			warnings = append(warnings, fmt.Sprintf("%s: %d jobs without json+ bins or group_reporting: fio's per-job percentiles cannot be combined, only mean/min/max are kept", metric, len(stats)))
		}
	}
	m.ToolSummary = summary

	if haveBins && len(bins) > 0 {
		values := make([]float64, 0, len(bins))
		for v := range bins {
			values = append(values, v)
		}
		sort.Float64s(values)
		counts := make([]int64, len(values))
		for i, v := range values {
			counts[i] = bins[v]
		}
		m.Values, m.Counts = values, counts
		m.Source.PercentileMethod = MethodFioBins
		m.Source.Field += ".bins"
		if haveN && binTotal != nTotal {
			warnings = append(warnings, fmt.Sprintf("%s: fio's bins hold %g samples, its N says %g", metric, binTotal, nTotal))
		}
	} else {
		m.Source.PercentileMethod = MethodToolSummary
	}
	return &m, warnings, nil
}

// isFioDoc says whether a decoded top level looks like fio's output.
func isFioDoc(top map[string]json.RawMessage) bool {
	if _, ok := top["fio version"]; ok {
		return true
	}
	raw, ok := top["jobs"]
	if !ok {
		raw, ok = top["client_stats"]
	}
	return ok && strings.Contains(string(raw), `"jobname"`)
}
