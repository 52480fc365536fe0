package jobs

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/stats"
	"github.com/accordlab/accord/runners/parse"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/charts"
)

// RunFiles are a run folder's files by path (relative to the folder),
// for the aggregates that need raw records: the send time of every
// request, the telemetry samples.
type RunFiles interface {
	Names() []string
	Open(name string) (io.ReadCloser, error)
}

type collectionFiles struct{ c *sshrun.Collection }

// CollectionFiles reads a collected run folder: files stay where the
// collection keeps them (in memory or in a temporary file) and are
// streamed.
func CollectionFiles(c *sshrun.Collection) RunFiles { return collectionFiles{c} }

func (f collectionFiles) Names() []string {
	names := make([]string, len(f.c.Files))
	for i, x := range f.c.Files {
		names[i] = x.Name
	}
	return names
}

func (f collectionFiles) Open(name string) (io.ReadCloser, error) {
	x, ok := f.c.File(name)
	if !ok {
		return nil, fmt.Errorf("%s is not in the run folder", name)
	}
	return x.Open()
}

// precomputeCharts stores a run's chart aggregates at ingest (in the
// ingest transaction), so that pages never recompute them.
func precomputeCharts(ctx context.Context, tx *store.Store, run store.Run, ms []acceptance.Measurement, c *sshrun.Collection) error {
	return PrecomputeCharts(ctx, tx, run, ms, CollectionFiles(c))
}

// PrecomputeCharts computes every chart aggregate of a run (store/charts.go
// lists them) from its measurements, its raw request and telemetry
// records, its baseline's measurements and its host facts, and replaces
// the run's stored aggregates with them. What cannot be computed from the
// data is noted in the aggregates' meta, never an error: a chart must not
// cost a run its results. Errors are the database's.
func PrecomputeCharts(ctx context.Context, tx *store.Store, run store.Run, ms []acceptance.Measurement, files RunFiles) error {
	docs, err := computeCharts(ctx, tx, run, ms, files)
	if err != nil {
		return fmt.Errorf("charts of run %d: %w", run.ID, err)
	}
	return tx.SaveRunCharts(ctx, run.ID, docs)
}

// Chart parameters.
const (
	// cdfBody and cdfTail are the points of a CDF curve below and above
	// p99 (plus the exact percentiles): within charts' DefaultCDFPoints, so
	// the builder draws them all, and few enough that a page with four
	// curves stays small. A curve is a line through exact points: a
	// thousand of them are smooth at any zoom a page offers.
	cdfBody = 400
	cdfTail = 600
	// overRunQuantile is the rolling line's percentile.
	overRunQuantile = 0.99
	// pctConfidence is the two-sided confidence of the percentile
	// intervals: each is the pair of one-sided 97.5 % bounds of the gate
	// engine.
	pctConfidence = 0.95
	// maxRunSeconds bounds the per-second series (a week).
	maxRunSeconds = 7 * 24 * 3600
	// timeSeriesPoints bounds a per-second line (LTTB keeps its shape and
	// peaks; a chart is about a thousand pixels wide).
	timeSeriesPoints = 1000
)

// cdfMetrics are drawn as distributions; pctMetrics compared with the
// baseline percentile by percentile; histMetrics kept as log histograms
// for the compare page.
var (
	cdfMetrics  = []string{acceptance.MetricTTFT, acceptance.MetricE2EL}
	pctMetrics  = []string{acceptance.MetricTTFT, acceptance.MetricE2EL, acceptance.MetricTPOT, acceptance.MetricITL, acceptance.MetricReadCLat, acceptance.MetricWriteCLat}
	pctStats    = []acceptance.Statistic{acceptance.StatP50, acceptance.StatP90, acceptance.StatP95, acceptance.StatP99, acceptance.StatP999}
	histMetrics = pctMetrics
)

func computeCharts(ctx context.Context, tx *store.Store, run store.Run, ms []acceptance.Measurement, files RunFiles) (map[string]json.RawMessage, error) {
	meta := store.ChartMeta{Version: store.ChartsVersion, BaselineRunID: run.BaselineRunID}
	docs := map[string]json.RawMessage{}
	put := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode %s: %w", key, err)
		}
		docs[key] = b
		return nil
	}

	var profile acceptance.ProfileSpec
	if run.ProfileVersionID != nil {
		pv, err := tx.GetSpecVersionByID(ctx, store.KindProfile, run.ProgramID, *run.ProfileVersionID)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(pv.Spec, &profile); err != nil {
			meta.Notes = append(meta.Notes, "the profile could not be read: "+err.Error())
		}
	}
	results, notes := readStepResults(files)
	meta.Notes = append(meta.Notes, notes...)
	meta.Steps = chartSteps(profile, results, ms)

	groups := groupMeasurements(ms)
	summary := make([]store.SeriesStats, 0, len(groups))
	for _, g := range groups {
		st, err := seriesStats(g)
		if err != nil {
			meta.Notes = append(meta.Notes, fmt.Sprintf("%s in %s: %v", g.metric, seriesName(g.step, g.level), err))
			continue
		}
		summary = append(summary, st)
	}
	if err := put(store.ChartKeySummary, summary); err != nil {
		return nil, err
	}

	// Distributions of each series.
	cdfs := map[string]map[string]store.CDFCurve{}
	for _, g := range groups {
		if !slices.Contains(cdfMetrics, g.metric) {
			continue
		}
		values := pooledValues(g.ms)
		if len(values) == 0 {
			continue
		}
		key := store.ChartKeyCDF(g.step, g.level)
		if cdfs[key] == nil {
			cdfs[key] = map[string]store.CDFCurve{}
		}
		cdfs[key][g.metric] = cdfCurve(values)
	}
	for key, m := range cdfs {
		if err := put(key, m); err != nil {
			return nil, err
		}
	}

	// Log histograms for comparisons between runs.
	var hists []store.LogHistogram
	for _, m := range ms {
		if slices.Contains(histMetrics, m.Metric) && len(m.Values) > 0 {
			if h, ok := logHistogram(m); ok {
				hists = append(hists, h)
			}
		}
	}
	if len(hists) > 0 {
		if err := put(store.ChartKeyHist, hists); err != nil {
			return nil, err
		}
	}

	// Records: latency over the run, throughput and telemetry per second.
	rec := newRecordAggregates(results)
	meta.Notes = append(meta.Notes, rec.readAll(ctx, files)...)
	meta.Requests = rec.requests
	for _, step := range meta.Steps {
		or, ok, err := rec.overRun(step.Name)
		if err != nil {
			meta.Notes = append(meta.Notes, fmt.Sprintf("step %s: latency over the run: %v", step.Name, err))
			continue
		}
		if ok {
			if err := put(store.ChartKeyOverRun(step.Name), or); err != nil {
				return nil, err
			}
		}
	}
	if ts := rec.timeSeries(); len(ts) > 0 {
		if err := put(store.ChartKeyTimeSeries, ts); err != nil {
			return nil, err
		}
	}

	// Candidate against baseline, percentile by percentile.
	if run.BaselineRunID != nil {
		base, err := tx.LoadMeasurements(ctx, *run.BaselineRunID)
		if err != nil {
			return nil, err
		}
		cmp, err := comparePercentiles(ms, base)
		if err != nil {
			meta.Notes = append(meta.Notes, "the comparison with the baseline could not be computed: "+err.Error())
		}
		for key, rows := range cmp {
			if err := put(key, rows); err != nil {
				return nil, err
			}
		}
	}

	if f, ok, err := comparableFactsOf(ctx, tx, run.ID); err != nil {
		return nil, err
	} else if ok {
		if err := put(store.ChartKeyFacts, f); err != nil {
			return nil, err
		}
	}
	if err := put(store.ChartKeyMeta, meta); err != nil {
		return nil, err
	}
	return docs, nil
}

func seriesName(step, level string) string {
	if level == "" {
		return "step " + step
	}
	return "step " + step + " at " + level
}

// ---- step results and steps ----

// stepResult is a result.json of the run folder with its start on the
// run's clock.
type stepResult struct {
	wire.StepResult
	dir    string
	start  time.Time
	offset float64 // seconds from the run's first step start
}

// readStepResults reads every step result of the run folder, ordered by
// start, with offsets from the first start.
func readStepResults(files RunFiles) ([]stepResult, []string) {
	var out []stepResult
	var notes []string
	for _, name := range files.Names() {
		if path.Base(name) != wire.StepResultFile || !strings.HasPrefix(name, wire.OutputDir+"/") {
			continue
		}
		var res wire.StepResult
		if err := readJSON(files, name, &res); err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		sr := stepResult{StepResult: res, dir: path.Dir(name)}
		if t, err := time.Parse(time.RFC3339Nano, res.StartedAt); err == nil {
			sr.start = t
		}
		out = append(out, sr)
	}
	slices.SortStableFunc(out, func(a, b stepResult) int {
		if c := a.start.Compare(b.start); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Repetition, b.Repetition), cmp.Compare(a.Index, b.Index))
	})
	var origin time.Time
	for _, r := range out {
		if !r.start.IsZero() && (origin.IsZero() || r.start.Before(origin)) {
			origin = r.start
		}
	}
	for i := range out {
		if !out[i].start.IsZero() {
			out[i].offset = out[i].start.Sub(origin).Seconds()
		}
	}
	return out, notes
}

func readJSON(files RunFiles, name string, v any) error {
	r, err := files.Open(name)
	if err != nil {
		return err
	}
	defer r.Close()
	return json.NewDecoder(io.LimitReader(r, 64<<20)).Decode(v)
}

// chartSteps lists the steps with results, in the profile's order, each
// with its levels in the order they ran; steps known only from
// measurements (an imported run) follow.
func chartSteps(profile acceptance.ProfileSpec, results []stepResult, ms []acceptance.Measurement) []store.ChartStep {
	levels := map[string][]string{}
	add := func(step, level string) {
		if !slices.Contains(levels[step], level) {
			levels[step] = append(levels[step], level)
		}
	}
	for _, r := range results {
		if r.Error == "" {
			add(r.Step, r.Level)
		}
	}
	for _, m := range ms {
		add(m.Step, m.Level)
	}
	var out []store.ChartStep
	seen := map[string]bool{}
	for _, s := range profile.Steps {
		lv, ok := levels[s.Name]
		if !ok || seen[s.Name] {
			continue
		}
		seen[s.Name] = true
		cs := store.ChartStep{Name: s.Name, Kind: string(s.Kind), Levels: lv}
		if s.Inference != nil {
			cs.SLOTTFT = s.Inference.SLO.TTFTMs
		}
		out = append(out, cs)
	}
	var rest []string
	for name := range levels {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range rest {
		out = append(out, store.ChartStep{Name: name, Kind: kindFromMeasurements(name, ms), Levels: levels[name]})
	}
	return out
}

func kindFromMeasurements(step string, ms []acceptance.Measurement) string {
	for _, m := range ms {
		if m.Step != step {
			continue
		}
		if meta, ok := acceptance.LookupMetric(m.Metric); ok {
			switch meta.Group {
			case acceptance.GroupInference:
				return string(acceptance.StepInference)
			case acceptance.GroupIO:
				return string(acceptance.StepFio)
			}
		}
	}
	return ""
}

// ---- statistics of each series ----

type measurementGroup struct {
	metric, step, level string
	ms                  []acceptance.Measurement
}

// groupMeasurements groups by metric and series, in a stable order.
func groupMeasurements(ms []acceptance.Measurement) []measurementGroup {
	idx := map[[3]string]int{}
	var out []measurementGroup
	for _, m := range ms {
		k := [3]string{m.Metric, m.Step, m.Level}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, measurementGroup{metric: m.Metric, step: m.Step, level: m.Level})
		}
		out[i].ms = append(out[i].ms, m)
	}
	for i := range out {
		slices.SortStableFunc(out[i].ms, func(a, b acceptance.Measurement) int { return cmp.Compare(a.Repetition, b.Repetition) })
	}
	return out
}

func seriesStats(g measurementGroup) (store.SeriesStats, error) {
	st := store.SeriesStats{Metric: g.metric, Step: g.step, Level: g.level, Repetitions: len(g.ms)}
	meta, known := acceptance.LookupMetric(g.metric)
	if known && meta.Kind == acceptance.KindRate {
		st.Rate = true
		for _, m := range g.ms {
			if len(m.Values) == 1 && finite(m.Values[0]) {
				st.PerRepetition = append(st.PerRepetition, m.Values[0])
			}
		}
		if len(st.PerRepetition) == 0 {
			return st, errors.New("no repetition has a value")
		}
		st.N = int64(len(st.PerRepetition))
		st.Mean = meanOf(st.PerRepetition)
		st.Min, st.Max = slices.Min(st.PerRepetition), slices.Max(st.PerRepetition)
		return st, nil
	}
	var samples []stats.Sample
	for _, m := range g.ms {
		if len(m.Values) == 0 {
			continue
		}
		s, err := stats.NewSample(m.Values, m.Counts)
		if err != nil {
			return st, fmt.Errorf("repetition %d: %w", m.Repetition, err)
		}
		if s.N() > 0 {
			samples = append(samples, s)
		}
	}
	if len(samples) == 0 {
		// The tool's own summary, averaged over repetitions.
		st.Summary = true
		get := func(k string) float64 {
			var v []float64
			for _, m := range g.ms {
				if x, ok := m.ToolSummary[k]; ok && finite(x) {
					v = append(v, x)
				}
			}
			if len(v) == 0 {
				return math.NaN()
			}
			return meanOf(v)
		}
		for _, f := range []struct {
			name string
			to   *float64
		}{{"p50", &st.P50}, {"p90", &st.P90}, {"p95", &st.P95}, {"p99", &st.P99}, {"p99.9", &st.P999}, {"mean", &st.Mean}, {"max", &st.Max}, {"min", &st.Min}} {
			// Unknown figures are named in Missing and stored as 0 (JSON
			// has no NaN); Stat never returns them.
			if v := get(f.name); math.IsNaN(v) {
				st.Missing = append(st.Missing, f.name)
			} else {
				*f.to = v
			}
		}
		if slices.Contains(st.Missing, "p99") && slices.Contains(st.Missing, "mean") {
			return st, errors.New("no samples and no tool summary")
		}
		return st, nil
	}
	p := stats.Merge(samples...)
	st.N = p.N()
	st.Min, st.Max, st.Mean = p.Min(), p.Max(), p.Mean()
	st.P50, st.P90, st.P95 = p.Quantile(0.5), p.Quantile(0.9), p.Quantile(0.95)
	st.P99, st.P999 = p.Quantile(0.99), p.Quantile(0.999)
	return st, nil
}

func meanOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// pooledValues returns all raw samples of the repetitions, sorted (nil
// when a repetition is a histogram: curves are drawn from raw samples).
func pooledValues(ms []acceptance.Measurement) []float64 {
	n := 0
	for _, m := range ms {
		if m.Counts != nil {
			return nil
		}
		n += len(m.Values)
	}
	out := make([]float64, 0, n)
	for _, m := range ms {
		for _, v := range m.Values {
			if finite(v) {
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return out
}

// ---- CDF curves ----

// cdfQuantiles are exact points of every curve.
var cdfQuantiles = []float64{0.5, 0.9, 0.95, 0.99, 0.999}

// cdfCurve reduces sorted samples to a curve whose every point is exact
// (see store.CDFCurve): every sample when they fit; otherwise ranks spaced
// evenly up to p99, every rank above p99 when they fit (else the last half
// of the tail's share exact and the rest spaced geometrically towards p99),
// and the ranks of the minimum, maximum and percentiles.
func cdfCurve(sorted []float64) store.CDFCurve {
	n := len(sorted)
	if n <= cdfBody+cdfTail {
		return store.CDFCurve{N: int64(n), Values: slices.Clone(sorted)}
	}
	p99 := int(stats.Rank(0.99, int64(n))) // 1-based
	ranks := make([]int, 0, cdfBody+cdfTail+len(cdfQuantiles)+2)
	ranks = append(ranks, 1, n)
	for _, q := range cdfQuantiles {
		ranks = append(ranks, int(stats.Rank(q, int64(n))))
	}
	for k := range cdfBody {
		ranks = append(ranks, 1+k*(p99-1)/(cdfBody-1))
	}
	tail := n - p99
	if tail <= cdfTail {
		for r := p99 + 1; r <= n; r++ {
			ranks = append(ranks, r)
		}
	} else {
		exact := cdfTail / 2
		for r := n - exact + 1; r <= n; r++ {
			ranks = append(ranks, r)
		}
		spaced := cdfTail - exact
		far, near := float64(tail-1), float64(exact)
		for k := range spaced {
			f := float64(k) / float64(spaced-1)
			d := int(math.Round(far * math.Pow(near/far, f)))
			ranks = append(ranks, n-d)
		}
	}
	// Each rank moves to the last rank of its value, where the share at or
	// below the value is exact.
	for i, r := range ranks {
		v := sorted[r-1]
		j, _ := slices.BinarySearchFunc(sorted, v, func(e, t float64) int {
			if e <= t {
				return -1
			}
			return 1
		})
		ranks[i] = j
	}
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	c := store.CDFCurve{N: int64(n), Points: make([][2]float64, 0, len(ranks))}
	prev := 0
	for _, r := range ranks {
		c.Points = append(c.Points, [2]float64{sorted[r-1], float64(r - prev)})
		prev = r
	}
	return c
}

// ---- log histograms ----

var (
	histGamma    = (1 + stats.HistogramRelativeError) / (1 - stats.HistogramRelativeError)
	histLogGamma = math.Log(histGamma)
)

// maxHistBuckets bounds one histogram (six decades at ≤ 0.1 % error).
const maxHistBuckets = 8000

// logHistogram buckets one repetition on acceptance/stats' log grid: the
// bucket of v > 0 is ⌈ln v / ln γ⌉, γ = (1+ε)/(1−ε).
func logHistogram(m acceptance.Measurement) (store.LogHistogram, bool) {
	h := store.LogHistogram{Metric: m.Metric, Step: m.Step, Level: m.Level, Repetition: m.Repetition}
	lo, hi := math.MaxInt, math.MinInt
	for _, v := range m.Values {
		if v > 0 && finite(v) {
			b := int(math.Ceil(math.Log(v) / histLogGamma))
			lo, hi = min(lo, b), max(hi, b)
		}
	}
	if lo > hi {
		lo, hi = 0, -1
	}
	if hi-lo+1 > maxHistBuckets {
		return h, false
	}
	h.Lo = lo
	h.Counts = make([]int64, hi-lo+1)
	for i, v := range m.Values {
		c := int64(1)
		if m.Counts != nil {
			c = m.Counts[i]
		}
		switch {
		case !finite(v) || c <= 0:
		case v <= 0:
			h.Zero += c
		default:
			h.Counts[int(math.Ceil(math.Log(v)/histLogGamma))-lo] += c
		}
	}
	return h, true
}

// LogHistogramMeasurement turns a stored log histogram back into a
// histogram measurement (each bucket at its representative value, within
// 0.1 % of every sample in it), for the gate engine.
func LogHistogramMeasurement(h store.LogHistogram) acceptance.Measurement {
	m := acceptance.Measurement{Metric: h.Metric, Step: h.Step, Level: h.Level, Repetition: h.Repetition,
		Source: acceptance.Source{Tool: "accord", PercentileMethod: "log-bucketed histogram (≤ 0.1 % relative error)"}}
	if h.Zero > 0 {
		m.Values = append(m.Values, 0)
		m.Counts = append(m.Counts, h.Zero)
	}
	for i, c := range h.Counts {
		if c > 0 {
			m.Values = append(m.Values, 2*math.Exp(float64(h.Lo+i)*histLogGamma)/(histGamma+1))
			m.Counts = append(m.Counts, c)
		}
	}
	return m
}

// ---- request and telemetry records ----

// recordAggregates reads requests.jsonl and telemetry.jsonl of every step
// result, keeping per request only what the charts need.
type recordAggregates struct {
	results  []stepResult
	requests int64
	steps    map[string]*stepRecords
	// Per second of the run: output tokens (spread over each request's
	// decoding) and completed requests. Whole seconds inside a request's
	// decoding go to tokenRate as differences (added up at the end), so a
	// request costs the same however long it lasted.
	tokens, tokenRate, done []float64
	last                    int // highest second with data, -1 when none
	telemetry               map[string]*telemetrySeries
}

type stepRecords struct {
	points, warmup []charts.Point
	failed         int64
}

type telemetrySeries struct {
	name, unit string
	points     []charts.Point
}

func newRecordAggregates(results []stepResult) *recordAggregates {
	return &recordAggregates{results: results, steps: map[string]*stepRecords{}, last: -1, telemetry: map[string]*telemetrySeries{}}
}

// readAll reads the records of every result; problems become notes.
func (a *recordAggregates) readAll(ctx context.Context, files RunFiles) []string {
	names := map[string]bool{}
	for _, n := range files.Names() {
		names[n] = true
	}
	var notes []string
	for _, r := range a.results {
		if ctx.Err() != nil {
			return append(notes, ctx.Err().Error())
		}
		if name := path.Join(r.dir, wire.RequestsFile); r.Format == "probe-requests" && names[name] {
			if err := a.readRequests(files, name, r); err != nil {
				notes = append(notes, fmt.Sprintf("%s: %v", name, err))
			}
		}
		if name := path.Join(r.dir, wire.TelemetryFile); names[name] {
			if err := a.readTelemetry(files, name, r); err != nil {
				notes = append(notes, fmt.Sprintf("%s: %v", name, err))
			}
		}
	}
	return notes
}

func (a *recordAggregates) readRequests(files RunFiles, name string, r stepResult) error {
	f, err := files.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	sr := a.steps[r.Step]
	if sr == nil {
		sr = &stepRecords{}
		a.steps[r.Step] = sr
	}
	br := bufio.NewReaderSize(f, 256<<10)
	lineNo := 0
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return fmt.Errorf("line %d is longer than %d bytes", lineNo+1, br.Size())
		}
		if len(line) > 0 {
			lineNo++
			if len(bytes.TrimSpace(line)) > 0 {
				var rec wire.RequestRecord
				failed, derr := parse.DecodeRequestRecord(line, &rec)
				if derr != nil {
					return fmt.Errorf("line %d: %w", lineNo, derr)
				}
				a.addRequest(sr, r.offset, &rec, failed)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func (a *recordAggregates) addRequest(sr *stepRecords, offset float64, rec *wire.RequestRecord, failed bool) {
	a.requests++
	if failed || rec.Done == 0 || rec.Sent == 0 {
		if !rec.Warmup {
			sr.failed++
		}
		return
	}
	if rec.FirstToken >= rec.Sent && rec.FirstToken > 0 {
		p := charts.Point{X: offset + float64(rec.Sent)/1e9, Y: float64(rec.FirstToken-rec.Sent) / 1e6}
		if finite(p.X) && finite(p.Y) {
			if rec.Warmup {
				sr.warmup = append(sr.warmup, p)
			} else {
				sr.points = append(sr.points, p)
			}
		}
	}
	// Throughput per second of the run.
	end := offset + float64(rec.Done)/1e9
	if !(end >= 0 && end < maxRunSeconds) {
		return
	}
	a.grow(int(end))
	a.done[int(end)]++
	if rec.OutputTokens <= 0 {
		return
	}
	start := end
	if rec.FirstToken > 0 && rec.FirstToken <= rec.Done {
		start = offset + float64(rec.FirstToken)/1e9
	}
	spreadOver(a.tokens, a.tokenRate, start, end, float64(rec.OutputTokens))
}

func (a *recordAggregates) grow(sec int) {
	if sec > a.last {
		a.last = sec
	}
	if sec >= len(a.done) {
		n := max(sec+1, 2*len(a.done), 64)
		a.done = append(a.done, make([]float64, n-len(a.done))...)
		a.tokens = append(a.tokens, make([]float64, n-len(a.tokens))...)
		a.tokenRate = append(a.tokenRate, make([]float64, n+1-len(a.tokenRate))...)
	}
}

// spreadOver adds amount over [start, end] seconds into per-second bins,
// in proportion to the time spent in each (all into end's bin when the
// interval is empty): the partial first and last seconds directly, the
// whole seconds between as a rate in the difference array diff (bin s gets
// the sum of diff[0..s]; diff has a slot more than bins).
func spreadOver(bins, diff []float64, start, end, amount float64) {
	if end-start <= 1e-9 {
		bins[int(end)] += amount
		return
	}
	rate := amount / (end - start)
	first, last := int(start), int(end)
	if first == last {
		bins[first] += amount
		return
	}
	bins[first] += rate * (float64(first+1) - start)
	bins[last] += rate * (end - float64(last))
	if first+1 < last {
		diff[first+1] += rate
		diff[last] -= rate
	}
}

// tokenSeconds adds the whole seconds' rates into the per-second tokens.
func (a *recordAggregates) tokenSeconds() {
	var rate float64
	for s := range a.tokens {
		rate += a.tokenRate[s]
		a.tokens[s] += rate
		a.tokenRate[s] = 0
	}
}

// telemetryFields are the charted telemetry quantities, in order.
var telemetryFields = []struct {
	key, name, unit string
	get             func(s *wire.TelemetrySample) (float64, bool)
}{
	{"cpu", "CPU busy", "%", func(s *wire.TelemetrySample) (float64, bool) { return s.CPUBusyPct, true }},
	{"gpu", "GPU", "%", func(s *wire.TelemetrySample) (float64, bool) {
		if s.GPUUtilPct == nil {
			return 0, false
		}
		return *s.GPUUtilPct, true
	}},
	{"disk", "Disk busy", "%", func(s *wire.TelemetrySample) (float64, bool) { return s.DiskBusyPct, true }},
	{"disk_read", "Disk read", "MB/s", func(s *wire.TelemetrySample) (float64, bool) { return s.DiskReadBps / 1e6, true }},
	{"disk_write", "Disk write", "MB/s", func(s *wire.TelemetrySample) (float64, bool) { return s.DiskWriteBps / 1e6, true }},
	{"nic_rx", "NIC receive", "MB/s", func(s *wire.TelemetrySample) (float64, bool) { return s.NICRxBps / 1e6, true }},
	{"nic_tx", "NIC send", "MB/s", func(s *wire.TelemetrySample) (float64, bool) { return s.NICTxBps / 1e6, true }},
}

func (a *recordAggregates) readTelemetry(files RunFiles, name string, r stepResult) error {
	f, err := files.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReader(f))
	for {
		var s wire.TelemetrySample
		if err := dec.Decode(&s); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		x := r.offset + float64(s.T)/1e9
		if !finite(x) {
			continue
		}
		for _, fld := range telemetryFields {
			v, ok := fld.get(&s)
			if !ok || !finite(v) {
				continue
			}
			ts := a.telemetry[fld.key]
			if ts == nil {
				ts = &telemetrySeries{name: fld.name, unit: fld.unit}
				a.telemetry[fld.key] = ts
			}
			ts.points = append(ts.points, charts.Point{X: x, Y: v})
		}
	}
}

// overRun is a step's TTFT per request over the run: the scatter reduced
// with charts.MinMaxSampled, the rolling p99 from every request.
func (a *recordAggregates) overRun(step string) (store.OverRun, bool, error) {
	sr := a.steps[step]
	if sr == nil || len(sr.points)+len(sr.warmup) == 0 {
		return store.OverRun{}, false, nil
	}
	sortPoints(sr.points)
	sortPoints(sr.warmup)
	window, rolling, err := charts.RollingQuantile(sr.points, 0, overRunQuantile)
	if err != nil {
		return store.OverRun{}, false, err
	}
	or := store.OverRun{Metric: acceptance.MetricTTFT, Window: window, Quantile: overRunQuantile, Requests: int64(len(sr.points)),
		Points: pairs(charts.MinMaxSampled(sr.points, charts.DefaultScatterPoints), 5), Rolling: pairs(rolling, 7),
		Warmup: pairs(charts.MinMaxSampled(sr.warmup, charts.DefaultScatterPoints/4), 5), WarmupCount: int64(len(sr.warmup)), Failed: sr.failed}
	if or.Points == nil {
		or.Points = [][2]float64{}
	}
	if or.Rolling == nil {
		or.Rolling = [][2]float64{}
	}
	return or, true, nil
}

// timeSeries lists throughput (per second of the run, from the requests)
// and telemetry, each reduced with LTTB.
func (a *recordAggregates) timeSeries() []store.TimeSeriesAgg {
	var out []store.TimeSeriesAgg
	if a.last >= 0 {
		a.tokenSeconds()
		first := 0
		for first < a.last && a.done[first] == 0 && a.tokens[first] == 0 {
			first++
		}
		tok := make([]charts.Point, 0, a.last-first+1)
		req := make([]charts.Point, 0, a.last-first+1)
		for s := first; s <= a.last; s++ {
			tok = append(tok, charts.Point{X: float64(s) + 0.5, Y: a.tokens[s]})
			req = append(req, charts.Point{X: float64(s) + 0.5, Y: a.done[s]})
		}
		out = append(out, timeSeriesAgg("throughput", "Output tokens/s", "tok/s", tok), timeSeriesAgg("throughput", "Requests/s", "req/s", req))
	}
	for _, fld := range telemetryFields {
		ts := a.telemetry[fld.key]
		if ts == nil {
			continue
		}
		sortPoints(ts.points)
		out = append(out, timeSeriesAgg("telemetry", ts.name, ts.unit, ts.points))
	}
	return out
}

// timeSeriesAgg reduces a series for drawing and keeps its exact summary.
func timeSeriesAgg(group, name, unit string, pts []charts.Point) store.TimeSeriesAgg {
	ts := store.TimeSeriesAgg{Group: group, Name: name, Unit: unit, N: int64(len(pts))}
	if len(pts) == 0 {
		return ts
	}
	ts.Min, ts.Max = math.Inf(1), math.Inf(-1)
	var sum float64
	for _, p := range pts {
		ts.Min, ts.Max = min(ts.Min, p.Y), max(ts.Max, p.Y)
		sum += p.Y
	}
	ts.Mean = sum / float64(len(pts))
	reduced := charts.LTTB(pts, timeSeriesPoints)
	ts.Points = make([][2]float64, len(reduced))
	for i, p := range reduced {
		ts.Points[i] = [2]float64{roundSig(p.X, 7), roundSig(p.Y, 5)}
	}
	return ts
}

func sortPoints(pts []charts.Point) {
	slices.SortStableFunc(pts, func(a, b charts.Point) int { return cmp.Compare(a.X, b.X) })
}

// pairs keeps points as [x, y]: x (seconds of the run) to 7 significant
// digits, y to ySig (a dot needs fewer than a table).
func pairs(pts []charts.Point, ySig int) [][2]float64 {
	if len(pts) == 0 {
		return nil
	}
	out := make([][2]float64, len(pts))
	for i, p := range pts {
		out[i] = [2]float64{roundSig(p.X, 7), roundSig(p.Y, ySig)}
	}
	return out
}

// roundSig rounds to sig significant digits (keeps the documents small).
func roundSig(v float64, sig int) float64 {
	if v == 0 || !finite(v) {
		return v
	}
	p := math.Pow(10, float64(sig)-math.Ceil(math.Log10(math.Abs(v))))
	r := math.Round(v*p) / p
	if !finite(r) {
		return v
	}
	return r
}

// ---- candidate against baseline ----

// comparePercentiles compares every percentile of the latency metrics with
// the baseline by the gate engine's own rules for a relative criterion
// (acceptance.Evaluate): the relative difference of the pooled
// nearest-rank percentile, with a percentile-bootstrap interval (two
// stages: repetitions, then samples; 10,000 resamples, seeded by the
// inputs). Each criterion asks for one-sided bounds at 97.5 %, so the
// pair is a two-sided 95 % interval.
func comparePercentiles(cand, base []acceptance.Measurement) (map[string][]store.PercentileComparison, error) {
	gates, ok := ComparisonGates(cand, base, pctMetrics, pctStats)
	if !ok {
		return nil, nil
	}
	ev, err := acceptance.Evaluate(acceptance.EvaluationInput{Gates: gates, Candidate: cand, Baseline: base, Resamples: acceptance.DefaultResamples})
	if err != nil {
		return nil, err
	}
	out := map[string][]store.PercentileComparison{}
	for _, cr := range ev.Criteria {
		for _, s := range cr.Series {
			key := store.ChartKeyPercentiles(s.Step, s.Level)
			out[key] = append(out[key], ComparisonOf(cr, s))
		}
	}
	return out, nil
}

// ComparisonGates is a gate set of relative, advisory "≤ +0 %" criteria
// for each metric and statistic both sides have, made only to obtain the
// engine's estimates and intervals.
func ComparisonGates(cand, base []acceptance.Measurement, metrics []string, statistics []acceptance.Statistic) (acceptance.GateSetSpec, bool) {
	has := func(ms []acceptance.Measurement, metric string) bool {
		return slices.ContainsFunc(ms, func(m acceptance.Measurement) bool { return m.Metric == metric })
	}
	g := acceptance.GateSetSpec{SchemaVersion: acceptance.GateSchemaVersion, Name: "comparison", Correction: "none"}
	for _, metric := range metrics {
		meta, known := acceptance.LookupMetric(metric)
		if !known || !has(cand, metric) || !has(base, metric) {
			continue
		}
		for _, st := range statistics {
			if !st.AppliesTo(meta) {
				continue
			}
			g.Criteria = append(g.Criteria, acceptance.Criterion{
				Name:   strings.NewReplacer(".", "_").Replace(metric + "-" + string(st)),
				Metric: metric, Statistic: st, Mode: acceptance.Relative, Comparator: acceptance.LessOrEqual,
				Threshold: 0, Unit: "%", Confidence: 1 - (1-pctConfidence)/2, Severity: acceptance.Advisory,
			})
		}
	}
	return g.Normalized(), len(g.Criteria) > 0
}

// ComparisonOf reads one series of a comparison criterion.
func ComparisonOf(cr acceptance.CriterionResult, s acceptance.SeriesResult) store.PercentileComparison {
	pc := store.PercentileComparison{Metric: cr.Metric, Statistic: string(cr.Statistic), Confidence: pctConfidence, Interval: s.Interval,
		DiffPct: s.Estimate, LowerPct: s.Lower, UpperPct: s.Upper}
	pc.Candidate = s.Candidate.Value
	if s.Baseline != nil {
		pc.Baseline = s.Baseline.Value
	}
	if s.Lower == nil || s.Upper == nil {
		pc.LowerPct, pc.UpperPct = nil, nil
		pc.Why = s.Explanation
	}
	return pc
}

// comparableFactsOf reads the run's comparable host facts (false when the
// run has none).
func comparableFactsOf(ctx context.Context, tx *store.Store, runID int64) (map[string]string, bool, error) {
	hf, err := tx.RunFacts(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var f facts.Facts
	if err := json.Unmarshal(hf.Facts, &f); err != nil {
		return nil, false, nil
	}
	return f.Comparable(), true, nil
}
