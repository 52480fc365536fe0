package chartdata

import (
	"fmt"
	"slices"

	"github.com/accordlab/accord/acceptance"
)

// Chart parameters.
const (
	// cdfBody and cdfTail are the points of a CDF curve below and above
	// p99 (plus the exact percentiles): within web/charts'
	// DefaultCDFPoints, so the builder draws them all, and few enough that
	// a page with four curves stays small. A curve is a line through exact
	// points: a thousand of them are smooth at any zoom a page offers.
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

// cdfMetrics are drawn as distributions; PercentileMetrics compared with
// the baseline percentile by percentile; histMetrics kept as log
// histograms for the compare page.
var (
	cdfMetrics = []string{acceptance.MetricTTFT, acceptance.MetricE2EL}
	// PercentileMetrics and PercentileStatistics are what a run is
	// compared with its baseline on.
	PercentileMetrics    = []string{acceptance.MetricTTFT, acceptance.MetricE2EL, acceptance.MetricTPOT, acceptance.MetricITL, acceptance.MetricReadCLat, acceptance.MetricWriteCLat}
	PercentileStatistics = []acceptance.Statistic{acceptance.StatP50, acceptance.StatP90, acceptance.StatP95, acceptance.StatP99, acceptance.StatP999}
	histMetrics          = PercentileMetrics
)

// Input is what a run's chart data are made of.
type Input struct {
	// Profile is the run's profile (zero when unknown: an imported run's
	// steps are then named by their measurements).
	Profile      acceptance.ProfileSpec
	Measurements []acceptance.Measurement
	// BaselineRunID and Baseline are the run compared with (nil: none).
	BaselineRunID *int64
	Baseline      []acceptance.Measurement
	// Facts are the run's comparable host facts (nil: none).
	Facts map[string]string
	// Steps are the run folder's step results in run order (OrderSteps).
	Steps []StepRun
	// Records are the run folder's request and telemetry records (nil:
	// none, as for an imported file).
	Records *Records
	// Notes are what the caller could not read, in plain words.
	Notes []string
}

// Compute makes a run's chart data. What cannot be computed from the
// data is noted in the meta's notes, never an error: a chart must not
// cost a run its results. It runs the gate engine's bootstrap for the
// comparison with the baseline, so the ingest calls it outside its
// transaction.
func Compute(in Input) Aggregates {
	a := newAggregates()
	a.Meta = Meta{Version: Version, BaselineRunID: in.BaselineRunID}
	a.Meta.Notes = append(a.Meta.Notes, in.Notes...)
	a.Meta.Steps = chartSteps(in.Profile, in.Steps, in.Measurements)

	ms := in.Measurements
	groups := groupMeasurements(ms)
	a.Summary = make([]SeriesStats, 0, len(groups))
	for _, g := range groups {
		st, err := seriesStats(g)
		if err != nil {
			a.Meta.Notes = append(a.Meta.Notes, fmt.Sprintf("%s in %s: %v", g.metric, seriesName(g.step, g.level), err))
			continue
		}
		a.Summary = append(a.Summary, st)
	}

	// Distributions of each series.
	for _, g := range groups {
		if !slices.Contains(cdfMetrics, g.metric) {
			continue
		}
		curve, ok, err := pooledCurve(g.ms)
		if err != nil {
			a.Meta.Notes = append(a.Meta.Notes, fmt.Sprintf("distribution of %s in %s: %v", g.metric, seriesName(g.step, g.level), err))
			continue
		}
		if !ok {
			continue
		}
		key := KeyCDF(g.step, g.level)
		if a.CDF[key] == nil {
			a.CDF[key] = map[string]CDFCurve{}
		}
		a.CDF[key][g.metric] = curve
	}

	// Log histograms for comparisons between runs.
	for _, m := range ms {
		if slices.Contains(histMetrics, m.Metric) && m.HasSamples() {
			if h, ok := logHistogram(m); ok {
				a.Hist = append(a.Hist, h)
			}
		}
	}

	// Records: latency over the run, throughput and telemetry per second.
	rec := in.Records
	if rec == nil {
		rec = NewRecords(nil)
	}
	a.Meta.Notes = append(a.Meta.Notes, rec.notes...)
	a.Meta.Requests = rec.requests
	for _, step := range a.Meta.Steps {
		or, ok, err := rec.overRun(step.Name)
		if err != nil {
			a.Meta.Notes = append(a.Meta.Notes, fmt.Sprintf("step %s: latency over the run: %v", step.Name, err))
			continue
		}
		if ok {
			a.OverRun[step.Name] = or
			if or.Windowed != "" {
				a.Meta.Notes = append(a.Meta.Notes, or.Windowed)
			}
		}
	}
	a.TimeSeries = rec.timeSeries()

	// Candidate against baseline, percentile by percentile.
	if in.BaselineRunID != nil {
		cmp, err := comparePercentiles(ms, in.Baseline)
		if err != nil {
			a.Meta.Notes = append(a.Meta.Notes, "the comparison with the baseline could not be computed: "+err.Error())
		}
		for key, rows := range cmp {
			a.Percentiles[key] = rows
		}
	}
	a.Facts = in.Facts
	return a
}

func seriesName(step, level string) string {
	if level == "" {
		return "step " + step
	}
	return "step " + step + " at " + level
}

// chartSteps lists the steps with results, in the profile's order, each
// with its levels as numbers (c=1, c=4, c=16: acceptance.CompareLevels,
// whatever order they ran or were stored in); steps known only from
// measurements (an imported run) follow.
func chartSteps(profile acceptance.ProfileSpec, results []StepRun, ms []acceptance.Measurement) []Step {
	levels := map[string][]string{}
	add := func(step, level string) {
		if !slices.Contains(levels[step], level) {
			levels[step] = append(levels[step], level)
		}
	}
	for _, r := range results {
		if !r.Failed {
			add(r.Step, r.Level)
		}
	}
	for _, m := range ms {
		add(m.Step, m.Level)
	}
	for _, lv := range levels {
		slices.SortStableFunc(lv, acceptance.CompareLevels)
	}
	var out []Step
	seen := map[string]bool{}
	for _, s := range profile.Steps {
		lv, ok := levels[s.Name]
		if !ok || seen[s.Name] {
			continue
		}
		seen[s.Name] = true
		cs := Step{Name: s.Name, Kind: string(s.Kind), Levels: lv}
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
		out = append(out, Step{Name: name, Kind: kindFromMeasurements(name, ms), Levels: levels[name]})
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
