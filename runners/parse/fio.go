package parse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/stats"
)

// fio's JSON, as far as Accord reads it. Every release writes one object:
// "fio version", then "jobs" (one entry per job, or per reporting group
// with group_reporting) or, in client/server mode, "client_stats" (one
// entry per job per client, and with two or more clients an "All clients"
// entry that sums them but carries neither percentiles nor bins). Each
// entry has a direction object per data direction that did I/O: "read",
// "write", "trim", "sync" (fsync), and with unified_rw_reporting a
// "mixed" one instead of (or, with =both, beside) read and write.
//
// Units: fio ≥ 3 writes slat_ns/clat_ns/lat_ns in nanoseconds and bw_bytes
// in B/s; fio 2 writes slat/clat/lat in microseconds and only bw in KiB/s.
// Both write bw in KiB/s. io_bytes is KiB before fio 2.21 and bytes from
// 2.21 on, which added io_kbytes beside it.
//
// json+ adds "bins" to clat (and, in fio 3, to slat and lat when their
// percentiles are on). fio 2.2.12 to 2.19 key every bin, empty or not, by
// its index in fio's histogram and add the histogram's constants
// (FIO_IO_U_PLAT_BITS, _VAL, _NR); from 2.20 the keys are the bins'
// values (µs in fio 2, ns in fio 3) and only filled bins are listed.
//
// Percentiles: fio reads them off its bins with the first bin whose
// running count reaches p/100 · N; before 3.14 that product is a double,
// from 3.14 a long double (stats.FioBinsDouble, stats.FioBins).
type fioOutput struct {
	Version     string            `json:"fio version"`
	Jobs        []json.RawMessage `json:"jobs"`
	ClientStats []json.RawMessage `json:"client_stats"`
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

// fioDirections are the directions Accord imports, with their metrics.
var fioDirections = []struct {
	name                      string
	iops, bw, clat, slat, lat string
}{
	{"read", acceptance.MetricReadIOPS, acceptance.MetricReadBW, acceptance.MetricReadCLat, acceptance.MetricReadSLat, acceptance.MetricReadLat},
	{"write", acceptance.MetricWriteIOPS, acceptance.MetricWriteBW, acceptance.MetricWriteCLat, acceptance.MetricWriteSLat, acceptance.MetricWriteLat},
	{"mixed", acceptance.MetricMixedIOPS, acceptance.MetricMixedBW, acceptance.MetricMixedCLat, acceptance.MetricMixedSLat, acceptance.MetricMixedLat},
}

// Why fio's other fields are not imported.
var fioTopReasons = map[string]string{
	"timestamp":      "when fio ran: the run records its own times",
	"timestamp_ms":   "when fio ran: the run records its own times",
	"time":           "when fio ran: the run records its own times",
	"global options": "fio's job configuration: kept in the stored file",
	"disk_util":      "device utilisation as fio saw it: the probe's telemetry measures disk utilisation",
}

var fioEntryReasons = map[string]string{
	"groupid":            "fio's reporting group (shown in the per-job view)",
	"eta":                "fio's progress estimate",
	"elapsed":            "wall time of the job in seconds: rates are fio's own",
	"job options":        "fio's job configuration: kept in the stored file",
	"job_runtime":        "fio's job run time: rates are fio's own",
	"usr_cpu":            "fio's own CPU use: the probe's telemetry measures the host's CPU",
	"sys_cpu":            "fio's own CPU use: the probe's telemetry measures the host's CPU",
	"ctx":                "fio's context switches: not a catalog metric",
	"majf":               "fio's page faults: not a catalog metric",
	"minf":               "fio's page faults: not a catalog metric",
	"iodepth_level":      "queue depth distribution: not a catalog metric",
	"iodepth_submit":     "queue depth distribution: not a catalog metric",
	"iodepth_complete":   "queue depth distribution: not a catalog metric",
	"latency_ns":         "fio's coarse latency buckets: Accord reads the clat percentiles or bins instead",
	"latency_us":         "fio's coarse latency buckets: Accord reads the clat percentiles or bins instead",
	"latency_ms":         "fio's coarse latency buckets: Accord reads the clat percentiles or bins instead",
	"latency_depth":      "latency_target settings: not a measurement",
	"latency_target":     "latency_target settings: not a measurement",
	"latency_percentile": "latency_target settings: not a measurement",
	"latency_window":     "latency_target settings: not a measurement",
	"hostname":           "the client's host (shown in the per-client view)",
	"port":               "the client's port (shown in the per-client view)",
	"trim":               "trim I/O: Accord's catalog has no trim metrics",
	"sync":               "fsync latency: Accord's catalog has no fsync metrics",
	"steadystate":        "fio's steady-state detection: not a catalog metric",
	"desc":               "the job's description",
	"error":              "fio's error code (0: the job succeeded)",
}

var fioDirReasons = map[string]string{
	"runtime":      "the direction's run time in ms: rates are fio's own",
	"total_ios":    "I/Os completed: the rate (iops) is imported",
	"short_ios":    "short I/Os: not a catalog metric",
	"drop_ios":     "dropped I/Os: not a catalog metric",
	"bw_min":       "per-interval bandwidth samples: Accord imports the whole-run rate",
	"bw_max":       "per-interval bandwidth samples: Accord imports the whole-run rate",
	"bw_agg":       "per-interval bandwidth samples: Accord imports the whole-run rate",
	"bw_mean":      "per-interval bandwidth samples: Accord imports the whole-run rate",
	"bw_dev":       "per-interval bandwidth samples: Accord imports the whole-run rate",
	"bw_samples":   "per-interval bandwidth samples: Accord imports the whole-run rate",
	"iops_min":     "per-interval IOPS samples: Accord imports the whole-run rate",
	"iops_max":     "per-interval IOPS samples: Accord imports the whole-run rate",
	"iops_mean":    "per-interval IOPS samples: Accord imports the whole-run rate",
	"iops_stddev":  "per-interval IOPS samples: Accord imports the whole-run rate",
	"iops_samples": "per-interval IOPS samples: Accord imports the whole-run rate",
}

// fioLatStats is one latency block of one entry, in µs.
type fioLatStats struct {
	field                     string // clat_ns, clat, …
	n                         float64
	hasN                      bool
	mean, min, max, stddev    float64
	pct                       map[string]float64 // p99 → µs
	bins                      map[float64]int64  // µs → count
	hasBins                   bool
	indexed                   *fioPlat // bins keyed by index (fio 2.2.12–2.19)
	binTotal                  float64
	notMeasured, allZeroBlock bool
}

// fioDirStats is one direction of one entry.
type fioDirStats struct {
	iops, bw float64
	bwField  string
	lat      map[string]*fioLatStats // clat, slat, lat
}

// fioEntry is one entry of jobs or client_stats.
type fioEntry struct {
	index   int
	name    string
	client  string
	groupID int
	dirs    map[string]*fioDirStats
}

// ImportFio reads fio's JSON output (json or json+, fio 2 or 3, also with
// text around it as --output-format=json,normal writes): per direction
// with I/O (read, write, and "mixed" with unified_rw_reporting), IOPS and
// bandwidth (summed over jobs; in client/server mode fio's "All clients"
// sum), and clat, slat and lat in µs. With json+ bins, a latency's samples
// are the merged bins (Values + Counts); without, Values is empty and
// ToolSummary holds fio's own mean and percentiles (percentiles only where
// one job or group holds them all). Each job's own figures go to the
// report's per-job view.
func ImportFio(data []byte, opts Options) ([]acceptance.Measurement, []string, error) {
	r, err := importFio(data, opts)
	if err != nil {
		return nil, nil, err
	}
	return r.Measurements, r.Report.Warnings, nil
}

func importFio(data []byte, opts Options) (Result, error) {
	in := opts.name("fio.json")
	rep := newReport(in, FormatFio, ToolFio)
	if int64(len(data)) > opts.limit(MaxToolJSONBytes) {
		return Result{}, tooLarge(in, int64(len(data)), opts.limit(MaxToolJSONBytes))
	}
	if isFioNormalText(data) {
		return Result{}, errf(in, 0, "", "%s", fioNormalTextError)
	}
	body, before := fioJSONStart(data)
	body, nulls := nullNonFinite(body)
	var top map[string]json.RawMessage
	after, err := decodeFirst(body, &top)
	if err != nil {
		return Result{}, &Error{Input: in, Err: err}
	}
	if before > 0 {
		rep.warn("skipped %d bytes of text before fio's JSON", before)
	}
	if after > 0 {
		rep.warn("skipped %d bytes of text after fio's JSON (fio's normal output, as --output-format=json,normal writes it)", after)
	}
	if nulls > 0 {
		rep.warn("%d non-finite numbers (nan, inf) in fio's output were treated as missing", nulls)
	}
	if top == nil {
		return Result{}, errf(in, 0, "", "not a JSON object")
	}
	var doc fioOutput
	if _, err := decodeFirst(body, &doc); err != nil {
		return Result{}, &Error{Input: in, Err: err}
	}
	topLedger := newLedger("", top)
	topLedger.use("fio version", "jobs", "client_stats")
	if _, ok := top["fio version"]; ok {
		rep.read("fio version", "", "the tool version of every measurement")
	}
	version := doc.Version
	if version == "" {
		version = opts.ToolVersion
		rep.warn("fio's output does not say its version (\"fio version\")")
	}
	if _, known := fioRelease(version); !known {
		rep.warn("fio's version %q is not one Accord can read: its percentiles are taken to follow fio ≥ 3.14's rule (long double)", version)
	}
	rep.ToolVersion = version

	raw, where := doc.Jobs, "jobs"
	if len(doc.ClientStats) > 0 {
		raw, where = doc.ClientStats, "client_stats"
		if len(doc.Jobs) > 0 {
			rep.ignore("jobs", "the file has client_stats (client/server mode): those are imported")
		}
	}
	if len(raw) == 0 {
		return Result{}, errf(in, 0, "jobs", "no jobs in fio's output")
	}
	rep.read(where, "", fmt.Sprintf("%d entries", len(raw)))
	var entries []*fioEntry
	var all *fioEntry
	for i, rj := range raw {
		e, err := parseFioEntry(rj, i, where, in, rep)
		if err != nil {
			return Result{}, err
		}
		if where == "client_stats" && e.name == "All clients" {
			all = e
			continue
		}
		entries = append(entries, e)
	}
	topLedger.close(rep, fioTopReasons, "not a field Accord reads from fio's output")

	var out []acceptance.Measurement
	anyIO := false
	for _, d := range fioDirections {
		var members []*fioDirStats
		for _, e := range entries {
			if ds := e.dirs[d.name]; ds != nil {
				members = append(members, ds)
			}
		}
		var sum *fioDirStats
		if all != nil {
			sum = all.dirs[d.name]
		}
		if len(members) == 0 && sum == nil {
			continue
		}
		anyIO = true
		ms, err := fioDirection(d.name, d.iops, d.bw, [3]string{d.clat, d.slat, d.lat}, members, sum, where, in, version, opts, rep)
		if err != nil {
			return Result{}, err
		}
		out = append(out, ms...)
	}
	if !anyIO {
		return Result{}, errf(in, 0, where, "no job did any I/O")
	}
	if groups := fioGroups(entries); len(groups) > 1 {
		rep.warn("fio reported %d reporting groups (groupid %s): their rates are summed as if they ran at the same time; if they ran one after another (stonewall), read each group in the per-job view", len(groups), strings.Join(groups, ", "))
	}
	if len(entries) > 1 || all != nil {
		if err := fioJobViews(entries, all, in, version, opts, rep); err != nil {
			return Result{}, err
		}
	}
	if err := rep.finish(out); err != nil {
		return Result{}, err
	}
	return Result{Measurements: out, Report: *rep}, nil
}

// fioNormalTextError says why fio's text output is refused, and what to
// run instead.
const fioNormalTextError = "this is fio's normal (text) output, with no JSON in it: run fio with --output-format=json, or json+ for its latency bins (fio before 2.2.12 has no json+ and writes this text when asked for json+ or json,normal)"

// isFioNormalText says whether data is fio's normal output alone: its
// per-job summary lines and no JSON document.
func isFioNormalText(data []byte) bool {
	return !bytes.Contains(data, []byte(`"fio version"`)) &&
		bytes.Contains(data, []byte(": (groupid=")) && bytes.Contains(data, []byte("Run status group"))
}

// fioJSONStart skips text fio or a wrapper printed before the JSON document
// (the job summary lines of json,normal, warnings, "note: ..." lines, the
// "<host>" lines of client/server mode, and fio 2.1's progress line, which
// the client's JSON follows on the same line: "Jobs: 0 (f=0){") and
// returns the JSON and how much it skipped. The document is the first "{"
// that only whitespace separates from "fio version"; failing that, the
// first "{" at the start of a line.
func fioJSONStart(data []byte) ([]byte, int) {
	t := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(t) == 0 || t[0] == '{' {
		return t, 0
	}
	key := []byte(`"fio version"`)
	for off := 0; ; {
		i := bytes.Index(data[off:], key)
		if i < 0 {
			break
		}
		i += off
		j := i - 1
		for j >= 0 && (data[j] == ' ' || data[j] == '\t' || data[j] == '\r' || data[j] == '\n') {
			j--
		}
		if j >= 0 && data[j] == '{' {
			return data[j:], j
		}
		off = i + len(key)
	}
	if i := bytes.Index(data, []byte("\n{")); i >= 0 {
		return data[i+1:], i + 1
	}
	return t, 0
}

func parseFioEntry(raw json.RawMessage, i int, where, in string, rep *Report) (*fioEntry, error) {
	var obj map[string]json.RawMessage
	if err := decodeOne(raw, &obj); err != nil {
		return nil, &Error{Input: in, Field: fmt.Sprintf("%s[%d]", where, i), Err: err}
	}
	if obj == nil {
		return nil, errf(in, 0, fmt.Sprintf("%s[%d]", where, i), "not a JSON object")
	}
	e := &fioEntry{index: i, dirs: map[string]*fioDirStats{}}
	l := newLedger(where+"[].", obj)
	l.use("jobname")
	rep.read(where+"[].jobname", "", "names the job in the per-job view")
	if s, ok := stringField(obj, "jobname"); ok {
		e.name = s
	}
	host, _ := stringField(obj, "hostname")
	if port, ok := obj["port"]; ok && host != "" {
		e.client = host + ":" + strings.Trim(string(port), `"`)
	} else {
		e.client = host
	}
	if g, ok := obj["groupid"]; ok {
		e.groupID, _ = strconv.Atoi(string(g))
	}
	if raw, ok := obj["error"]; ok {
		l.use("error")
		rep.read(where+"[].error", "", "0: the job succeeded (any other value refuses the import)")
		var n *json.Number
		if err := decodeOne(raw, &n); err != nil {
			return nil, &Error{Input: in, Field: fmt.Sprintf("%s[%d].error", where, i), Err: err}
		}
		if n != nil {
			v, err := num(n)
			if err != nil {
				return nil, errf(in, 0, fmt.Sprintf("%s[%d].error", where, i), "%v", err)
			}
			if v != 0 {
				return nil, errf(in, 0, fmt.Sprintf("%s[%d].error", where, i), "job %q reported error %g: its results are not trustworthy", e.name, v)
			}
		}
	}
	for _, d := range fioDirections {
		raw, ok := obj[d.name]
		if !ok || string(raw) == "null" {
			continue
		}
		l.use(d.name)
		idle := where + "[]." + d.name
		field := fmt.Sprintf("%s[%d].%s", where, i, d.name)
		ds, err := parseFioDir(raw, field, where+"[]."+d.name+".", in, rep)
		if err != nil {
			return nil, err
		}
		if ds != nil {
			e.dirs[d.name] = ds
		} else {
			rep.ignore(idle, "no I/O in this direction")
		}
	}
	if raw, ok := obj["trim"]; ok {
		// Trim is reported as ignored only when it did I/O; an idle trim
		// block is in every fio ≥ 3 output.
		var d fioDir
		if decodeOne(raw, &d) == nil {
			if had, _ := d.hadIO(); had {
				rep.warn("fio reported trim I/O: Accord's catalog has no trim metrics, ignored")
			} else {
				l.use("trim")
				rep.ignore(where+"[].trim", "no I/O in this direction")
			}
		}
	}
	if raw, ok := obj["sync"]; ok {
		var s struct {
			TotalIOs *json.Number `json:"total_ios"`
			Lat      *fioLat      `json:"lat_ns"`
		}
		if decodeOne(raw, &s) == nil && (s.Lat == nil || s.Lat.N == nil || string(*s.Lat.N) == "0") && (s.TotalIOs == nil || string(*s.TotalIOs) == "0") {
			l.use("sync")
			rep.ignore(where+"[].sync", "no fsync calls")
		}
	}
	l.close(rep, fioEntryReasons, "not a field Accord reads from fio's jobs")
	return e, nil
}

func stringField(obj map[string]json.RawMessage, k string) (string, bool) {
	raw, ok := obj[k]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// parseFioDir reads one direction block; nil when it did no I/O.
func parseFioDir(raw json.RawMessage, field, ledgerPrefix, in string, rep *Report) (*fioDirStats, error) {
	var d fioDir
	if err := decodeOne(raw, &d); err != nil {
		return nil, &Error{Input: in, Field: field, Err: err}
	}
	had, err := d.hadIO()
	if err != nil {
		return nil, &Error{Input: in, Field: field, Err: err}
	}
	if !had {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(raw, &obj) // decoded above
	l := newLedger(ledgerPrefix, obj)
	l.use("iops", "bw_bytes", "bw", "slat_ns", "clat_ns", "lat_ns", "slat", "clat", "lat")

	ds := &fioDirStats{lat: map[string]*fioLatStats{}}
	if ds.iops, err = num(d.IOPS); err != nil {
		return nil, errf(in, 0, field+".iops", "%v", err)
	}
	if err := checkRate(ds.iops, maxIOPS); err != nil {
		return nil, errf(in, 0, field+".iops", "%v", err)
	}
	b, ok, err := optNum(d.BWBytes)
	if err != nil {
		return nil, errf(in, 0, field+".bw_bytes", "%v", err)
	}
	ds.bwField = "bw_bytes"
	if ok && d.BW != nil {
		rep.ignore(ledgerPrefix+"bw", "the same rate in KiB/s, rounded: bw_bytes is imported")
	}
	if !ok {
		kib, err := num(d.BW)
		if err != nil {
			return nil, errf(in, 0, field+".bw", "%v", err)
		}
		b = kib * 1024
		ds.bwField = "bw (KiB/s) × 1024"
	}
	if err := checkRate(b, maxBandwidth); err != nil {
		return nil, errf(in, 0, field+".bw", "%v", err)
	}
	ds.bw = b
	rate := strings.Fields(ds.bwField)[0]
	if _, ok := obj["io_bytes"]; ok {
		l.use("io_bytes")
		if _, kb := obj["io_kbytes"]; kb {
			rep.ignore(ledgerPrefix+"io_bytes", "bytes moved: the rate ("+rate+") is imported")
		} else {
			// fio before 2.21 wrote io_bytes >> 10 and had no io_kbytes.
			rep.ignore(ledgerPrefix+"io_bytes", "KiB moved (fio before 2.21 writes io_bytes in KiB and has no io_kbytes): the rate ("+rate+") is imported")
		}
	}
	if _, ok := obj["io_kbytes"]; ok {
		l.use("io_kbytes")
		rep.ignore(ledgerPrefix+"io_kbytes", "KiB moved: the rate ("+rate+") is imported")
	}
	for _, lt := range []struct {
		name   string
		ns, us *fioLat
		nsName string
	}{{"clat", d.ClatNS, d.Clat, "clat_ns"}, {"slat", d.SlatNS, d.Slat, "slat_ns"}, {"lat", d.LatNS, d.Lat, "lat_ns"}} {
		l, fname, div := lt.us, lt.name, 1.0
		if lt.ns != nil {
			l, fname, div = lt.ns, lt.nsName, 1000
		}
		if l == nil {
			continue
		}
		st, err := parseFioLat(l, fname, div, field, in)
		if err != nil {
			return nil, err
		}
		switch {
		case st.notMeasured:
			rep.ignore(ledgerPrefix+fname, "all zero: fio did not measure it (as for slat with a synchronous engine)")
		case st.hasN && st.n == 0:
			rep.ignore(ledgerPrefix+fname, "no samples (N = 0)")
		default:
			ds.lat[lt.name] = st
		}
	}
	l.close(rep, fioDirReasons, "not a field Accord reads from fio's directions")
	return ds, nil
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

const maxLatencyUs = maxLatencyMs * 1000

// parseFioLat reads one latency block into µs.
func parseFioLat(l *fioLat, fname string, div float64, field, in string) (*fioLatStats, error) {
	fieldAt := func(f string) string { return field + "." + fname + "." + f }
	st := &fioLatStats{field: fname, pct: map[string]float64{}, bins: map[float64]int64{}}
	n, hasN, err := optNum(l.N)
	if err != nil {
		return nil, errf(in, 0, fieldAt("N"), "%v", err)
	}
	if hasN && (n < 0 || n > 1e15 || n != math.Trunc(n)) {
		return nil, errf(in, 0, fieldAt("N"), "%g is not a sample count", n)
	}
	st.n, st.hasN = n, hasN
	for _, f := range []struct {
		name string
		n    *json.Number
		dst  *float64
	}{{"min", l.Min, &st.min}, {"max", l.Max, &st.max}, {"mean", l.Mean, &st.mean}, {"stddev", l.Stddev, &st.stddev}} {
		if *f.dst, err = num(f.n); err != nil {
			if f.name == "stddev" && f.n == nil { // some fio versions omit it
				continue
			}
			return nil, errf(in, 0, fieldAt(f.name), "%v", err)
		}
		*f.dst /= div
		if e := checkLatency(*f.dst / 1000); e != nil {
			return nil, errf(in, 0, fieldAt(f.name), "%v", e)
		}
	}
	if !hasN && st.max == 0 && st.mean == 0 {
		// fio 2 has no N: an all-zero block means "not measured".
		st.notMeasured = true
		return st, nil
	}
	for k, v := range l.Percentile {
		p, perr := strconv.ParseFloat(k, 64)
		if perr != nil || math.IsNaN(p) || p < 0 || p > 100 {
			return nil, errf(in, 0, fieldAt("percentile"), "key %q is not a percentile", k)
		}
		if p == 0 { // fio pads the list with "0.00": 0 entries
			continue
		}
		x, err := num(v)
		if err != nil {
			return nil, errf(in, 0, fieldAt("percentile."+k), "%v", err)
		}
		x /= div
		if e := checkLatency(x / 1000); e != nil {
			return nil, errf(in, 0, fieldAt("percentile."+k), "%v", e)
		}
		st.pct[percentileKey(p)] = x
	}
	plat, err := parseFioPlat(l.Bins)
	if err != nil {
		return nil, errf(in, 0, fieldAt("bins"), "%v", err)
	}
	st.indexed = plat
	for k, v := range l.Bins {
		if plat != nil && fioPlatKeys[k] {
			continue
		}
		st.hasBins = true
		var val float64
		if plat != nil {
			idx, perr := strconv.ParseUint(k, 10, 32)
			if perr != nil || idx >= uint64(plat.nr) {
				return nil, errf(in, 0, fieldAt("bins"), "key %q is not a bin index below FIO_IO_U_PLAT_NR (%d)", k, plat.nr)
			}
			val = float64(plat.value(uint32(idx)))
		} else {
			var perr error
			val, perr = strconv.ParseFloat(k, 64)
			if perr != nil || math.IsNaN(val) || math.IsInf(val, 0) {
				return nil, errf(in, 0, fieldAt("bins"), "key %q is not a latency", k)
			}
		}
		val /= div
		if e := checkLatency(val / 1000); e != nil {
			return nil, errf(in, 0, fieldAt("bins."+k), "%v", e)
		}
		c, err := num(v)
		if err != nil {
			return nil, errf(in, 0, fieldAt("bins."+k), "%v", err)
		}
		if c < 0 || c != math.Trunc(c) || c > 1e15 {
			return nil, errf(in, 0, fieldAt("bins."+k), "%g is not a count", c)
		}
		st.binTotal += c
		if st.binTotal > 1e15 {
			return nil, errf(in, 0, fieldAt("bins"), "the bins hold more than 1e15 samples: not a real run")
		}
		if c == 0 {
			continue // fio lists only filled bins; an empty one adds no sample
		}
		st.bins[val] += int64(c)
	}
	return st, nil
}

// fioPlat is the layout of fio's latency histogram, as fio 2.2.12–2.19
// write it beside bins keyed by index (stat.h: FIO_IO_U_PLAT_BITS 6,
// FIO_IO_U_PLAT_VAL 64, FIO_IO_U_PLAT_NR 1216 in every one of them).
type fioPlat struct {
	bits, val, nr uint32
}

var fioPlatKeys = map[string]bool{"FIO_IO_U_PLAT_BITS": true, "FIO_IO_U_PLAT_VAL": true, "FIO_IO_U_PLAT_NR": true}

// parseFioPlat reads the histogram constants of index-keyed bins: nil when
// the bins are keyed by value (none of the three keys), an error when
// they are incomplete or describe no histogram fio builds.
func parseFioPlat(bins map[string]*json.Number) (*fioPlat, error) {
	var got [3]uint32
	n := 0
	for i, k := range []string{"FIO_IO_U_PLAT_BITS", "FIO_IO_U_PLAT_VAL", "FIO_IO_U_PLAT_NR"} {
		v, ok := bins[k]
		if !ok {
			continue
		}
		n++
		if v == nil {
			return nil, fmt.Errorf("%s is null", k)
		}
		x, err := strconv.ParseUint(string(*v), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s = %s is not a whole number", k, string(*v))
		}
		got[i] = uint32(x)
	}
	switch {
	case n == 0:
		return nil, nil
	case n < 3:
		return nil, fmt.Errorf("bins keyed by index need FIO_IO_U_PLAT_BITS, FIO_IO_U_PLAT_VAL and FIO_IO_U_PLAT_NR")
	}
	p := &fioPlat{bits: got[0], val: got[1], nr: got[2]}
	// fio's groups double the value range each: the last group's base,
	// 1 << (groups - 2 + bits), must fit fio's unsigned int.
	if p.bits < 1 || p.bits > 16 || p.val != 1<<p.bits || p.nr == 0 || p.nr%p.val != 0 || p.nr/p.val < 2 || p.nr/p.val-2+p.bits > 31 {
		return nil, fmt.Errorf("FIO_IO_U_PLAT_BITS %d, _VAL %d, _NR %d do not describe fio's histogram", p.bits, p.val, p.nr)
	}
	return p, nil
}

// value is the latency fio stands for bin idx: stat.c's plat_idx_to_val
// of fio 2, the middle of the bin's range, in the block's unit (µs in
// fio 2). Indices below 2·VAL are exact values; above, each group of VAL
// bins covers twice the range of the one before.
func (p *fioPlat) value(idx uint32) uint32 {
	if idx < p.val<<1 {
		return idx
	}
	errorBits := idx>>p.bits - 1
	base := uint32(1) << (errorBits + p.bits)
	k := idx % p.val
	// fio: base + ((k + 0.5) * (1 << error_bits)), a double converted back
	// to unsigned int; error_bits ≥ 1 here, so it is a whole number.
	return base + uint32((float64(k)+0.5)*float64(uint32(1)<<errorBits))
}

func sumNote(n int) string {
	if n > 1 {
		return fmt.Sprintf(" (sum of %d jobs)", n)
	}
	return ""
}

// fioDirection builds one direction's measurements: from members (the
// jobs, or the clients' entries), and from sum when fio wrote one (the
// "All clients" entry of client/server mode).
func fioDirection(dir, iopsMetric, bwMetric string, latMetrics [3]string, members []*fioDirStats, sum *fioDirStats,
	where, in, version string, opts Options, rep *Report) ([]acceptance.Measurement, error) {
	src := func(f, method string) acceptance.Source {
		return acceptance.Source{Tool: ToolFio, ToolVersion: version, Field: f, PercentileMethod: method, PercentileDefinition: fioDefinition(version)}
	}
	field := func(f string) string { return in + ": " + where + "[]." + dir + "." + f }
	var iops, bw float64
	bwField := "bw_bytes"
	note := sumNote(len(members))
	if sum != nil {
		iops, bw, bwField = sum.iops, sum.bw, sum.bwField
		note = fmt.Sprintf(" (fio's \"All clients\" sum of %d clients)", len(members))
	} else {
		for _, d := range members {
			iops += d.iops
			bw += d.bw
			if d.bwField != "bw_bytes" {
				bwField = d.bwField
			}
		}
	}
	iopsM := opts.measurement(iopsMetric, src(field("iops")+note, ""))
	iopsM.Values = []float64{iops}
	iopsM.ToolSummary = map[string]float64{"rate": iops}
	bwM := opts.measurement(bwMetric, src(field(bwField)+note, ""))
	bwM.Values = []float64{bw}
	bwM.ToolSummary = map[string]float64{"rate": bw}
	rep.read(where+"[]."+dir+".iops", iopsMetric, strings.TrimSpace(note))
	rep.read(where+"[]."+dir+"."+strings.Fields(bwField)[0], bwMetric, strings.TrimSpace(note))
	out := []acceptance.Measurement{iopsM, bwM}

	for i, name := range []string{"clat", "slat", "lat"} {
		var lats []*fioLatStats
		for _, d := range members {
			if st := d.lat[name]; st != nil {
				lats = append(lats, st)
			}
		}
		var total *fioLatStats
		if sum != nil {
			total = sum.lat[name]
		}
		if len(lats) == 0 && total == nil {
			continue
		}
		m, err := fioLatency(latMetrics[i], dir, lats, total, where, in, version, opts, rep)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// fioLatency builds one latency measurement (µs) from the members' stats
// (and fio's own sum of them, in client/server mode).
func fioLatency(metric, dir string, lats []*fioLatStats, total *fioLatStats, where, in, version string, opts Options, rep *Report) (acceptance.Measurement, error) {
	name := ""
	for _, st := range append(lats, total) {
		if st != nil {
			name = st.field
		}
	}
	count := len(lats)
	f := in + ": " + where + "[]." + dir + "." + name + sumNote(count)
	m := opts.measurement(metric, acceptance.Source{Tool: ToolFio, ToolVersion: version, Field: f, PercentileDefinition: fioDefinition(version)})
	readField := where + "[]." + dir + "." + name

	summary := map[string]float64{}
	switch {
	case total != nil:
		// fio's "All clients" entry: its mean, min and max are fio's own
		// over every client; it writes no percentiles for the sum.
		summary["mean"], summary["min"], summary["max"], summary["stddev"] = total.mean, total.min, total.max, total.stddev
		if total.hasN {
			summary["n"] = total.n
		}
		m.Source.Field = in + ": " + where + "[All clients]." + dir + "." + name
	case count == 1:
		st := lats[0]
		summary["mean"], summary["min"], summary["max"], summary["stddev"] = st.mean, st.min, st.max, st.stddev
		if st.hasN {
			summary["n"] = st.n
		}
		for k, v := range st.pct {
			summary[k] = v
		}
	default:
		// Several jobs without group_reporting: the mean, min and max
		// combine exactly; fio's per-job percentiles do not (they are in
		// the per-job view).
		var wsum, mean, n float64
		haveN := true
		mn, mx := math.Inf(1), math.Inf(-1)
		for _, st := range lats {
			w := st.n
			if !st.hasN {
				w, haveN = 1, false
			}
			wsum += w
			n += st.n
			mean += w * st.mean
			mn, mx = math.Min(mn, st.min), math.Max(mx, st.max)
		}
		summary["mean"], summary["min"], summary["max"] = mean/wsum, mn, mx
		if haveN {
			summary["n"] = n
		} else {
			rep.warn("%s: fio gave no sample counts, the mean over %d jobs is unweighted", metric, count)
		}
	}
	m.ToolSummary = summary

	allBins := len(lats) > 0
	var binTotal, nTotal float64
	bins := map[float64]int64{}
	for _, st := range lats {
		allBins = allBins && st.hasBins
		for v, c := range st.bins {
			bins[v] += c
		}
		binTotal += st.binTotal
		nTotal += st.n
	}
	if allBins && len(bins) > 0 {
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
		m.Source.Field = in + ": " + where + "[]." + dir + "." + name + sumNote(count) + ".bins"
		binNote := "latency bins: Accord's percentiles come from them"
		if p := lats[0].indexed; p != nil {
			binNote = fmt.Sprintf("latency bins keyed by index (fio 2.2.12–2.19), each read as the value fio's own plat_idx_to_val gives it (FIO_IO_U_PLAT_BITS %d, FIO_IO_U_PLAT_VAL %d, FIO_IO_U_PLAT_NR %d): Accord's percentiles come from them", p.bits, p.val, p.nr)
		}
		rep.read(where+"[]."+dir+"."+name+".bins", metric, binNote+strings.TrimRight(" "+strings.TrimSpace(sumNote(count)), " "))
		if lats[0].hasN && binTotal != nTotal {
			rep.warn("%s: fio's bins hold %g samples, its N says %g", metric, binTotal, nTotal)
		}
		if total != nil && total.hasN && binTotal != total.n {
			rep.warn("%s: the clients' bins hold %g samples, fio's \"All clients\" N says %g", metric, binTotal, total.n)
		}
		if total != nil && total.hasBins {
			// fio 2 writes bins for "All clients" too: the clients' merged.
			if maps.Equal(total.bins, bins) {
				rep.read(where+"[All clients]."+dir+"."+name+".bins", metric, "fio's own sum of the clients' bins: the same as the clients' bins merged")
			} else {
				rep.warn("%s: fio's \"All clients\" bins differ from the clients' bins merged; Accord's figures come from the clients' bins", metric)
			}
		}
	} else {
		m.Source.PercentileMethod = MethodToolSummary
		why := ""
		switch {
		case total != nil:
			why = "fio's \"All clients\" sum has no percentiles and the clients' outputs have no bins (use json+ for Accord's own percentiles)"
		case count > 1:
			why = fmt.Sprintf("%d jobs without json+ bins or group_reporting: fio's per-job percentiles cannot be combined, only mean/min/max are kept (each job's percentiles are in the per-job view)", count)
			rep.warn("%s: %s", metric, why)
		}
		note := "fio's summary only (no bins)"
		if why != "" {
			note += ": " + why
		}
		rep.read(readField, metric, note)
		return m, nil
	}
	if total != nil {
		rep.read(readField, metric, "fio's own mean of the sum, kept beside Accord's (fio writes no percentiles for it)")
	} else {
		rep.read(readField, metric, "fio's own mean and percentiles, kept beside Accord's")
	}
	return m, nil
}

// fioJobViews lays out each job's (or client's) own figures beside the
// sums, with Accord's figures from that job's bins under fio's rule.
func fioJobViews(entries []*fioEntry, all *fioEntry, in, version string, opts Options, rep *Report) error {
	view := func(e *fioEntry, name string) (JobView, error) {
		jv := JobView{Name: name, Client: e.client, GroupID: e.groupID}
		var ms []acceptance.Measurement
		for _, d := range fioDirections {
			ds := e.dirs[d.name]
			if ds == nil {
				continue
			}
			jobOpts := opts
			src := acceptance.Source{Tool: ToolFio, ToolVersion: version, PercentileDefinition: fioDefinition(version)}
			for _, r := range []struct {
				metric string
				v      float64
			}{{d.iops, ds.iops}, {d.bw, ds.bw}} {
				m := jobOpts.measurement(r.metric, src)
				m.Values, m.ToolSummary = []float64{r.v}, map[string]float64{"rate": r.v}
				ms = append(ms, m)
			}
			for i, lname := range []string{"clat", "slat", "lat"} {
				st := ds.lat[lname]
				if st == nil {
					continue
				}
				m := jobOpts.measurement([]string{d.clat, d.slat, d.lat}[i], src)
				m.ToolSummary = map[string]float64{"mean": st.mean}
				for k, v := range st.pct {
					m.ToolSummary[k] = v
				}
				if st.hasBins && len(st.bins) > 0 {
					for v := range st.bins {
						m.Values = append(m.Values, v)
					}
					sort.Float64s(m.Values)
					m.Counts = make([]int64, len(m.Values))
					for j, v := range m.Values {
						m.Counts[j] = st.bins[v]
					}
				}
				ms = append(ms, m)
			}
		}
		figs, err := figuresOf(ms)
		if err != nil {
			return jv, err
		}
		jv.Figures = figs
		return jv, nil
	}
	for _, e := range entries {
		name := e.name
		if name == "" {
			name = fmt.Sprintf("job %d", e.index)
		}
		jv, err := view(e, name)
		if err != nil {
			return err
		}
		rep.Jobs = append(rep.Jobs, jv)
	}
	if all != nil {
		jv, err := view(all, "All clients")
		if err != nil {
			return err
		}
		rep.Jobs = append(rep.Jobs, jv)
	}
	return nil
}

func fioGroups(entries []*fioEntry) []string {
	seen := map[int]bool{}
	var out []string
	for _, e := range entries {
		if !seen[e.groupID] {
			seen[e.groupID] = true
			out = append(out, strconv.Itoa(e.groupID))
		}
	}
	return out
}

// fioRelease parses fio's version string ("fio-3.33", "fio-2.2.10",
// "fio-3.14-12-g1a2b3c", "3.28"): major and minor.
func fioRelease(version string) ([2]int, bool) {
	v := strings.TrimPrefix(strings.TrimSpace(version), "fio-")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minorText := parts[1]
	if i := strings.IndexFunc(minorText, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorText = minorText[:i]
	}
	minor, err2 := strconv.Atoi(minorText)
	if err1 != nil || err2 != nil || major < 1 {
		return [2]int{}, false
	}
	return [2]int{major, minor}, true
}

// fioDefinition is the percentile rule of a fio release: double precision
// before 3.14, long double from 3.14 (and for a version Accord cannot
// read, the current rule).
func fioDefinition(version string) stats.Definition {
	r, ok := fioRelease(version)
	if ok && (r[0] < 3 || r[0] == 3 && r[1] < 14) {
		return stats.FioBinsDouble
	}
	return stats.FioBins
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
