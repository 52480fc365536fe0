package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
	"github.com/accordlab/accord/web/charts"
)

// ---- the run page's charts ----

// loadAggregates reads and decodes the aggregates whose keys match the
// patterns. ok is false when the run has none of this build's version.
func (s *Server) loadAggregates(ctx context.Context, runID int64, patterns ...string) (chartdata.Aggregates, bool, error) {
	docs, err := s.store.RunCharts(ctx, runID, patterns...)
	if err != nil {
		return chartdata.Aggregates{}, false, err
	}
	a, ok, err := chartdata.Decode(docs)
	if err != nil {
		return a, false, fmt.Errorf("charts of run %d: %w", runID, err)
	}
	return a, ok, nil
}

// gateLimit is an absolute criterion of a gate set, in the metric's
// canonical unit.
type gateLimit struct {
	metric     string
	statistic  string
	step       string
	comparator acceptance.Comparator
	value      float64
	gate       string
}

func (g gateLimit) appliesTo(metric, step string) bool {
	return g.metric == metric && (g.step == "" || g.step == step)
}

// label reads "p99 TTFT ≤ 2000 ms".
func (g gateLimit) label() string {
	unit := ""
	if m, ok := acceptance.LookupMetric(g.metric); ok {
		unit = " " + string(m.Unit)
	}
	op := "≤"
	if g.comparator == acceptance.GreaterOrEqual {
		op = "≥"
	}
	return fmt.Sprintf("%s %s %s %s%s", g.statistic, shortMetric(g.metric), op, plainNum(g.value), unit)
}

// plainNum writes a threshold as people write it: 50, 0.25, 1500.
func plainNum(v float64) string {
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// gateLimits reads the absolute criteria of a gate set version.
func (s *Server) gateLimits(ctx context.Context, programID int64, versionID *int64) ([]gateLimit, error) {
	if versionID == nil {
		return nil, nil
	}
	gv, err := s.store.GetSpecVersionByID(ctx, store.KindGateSet, programID, *versionID)
	if err != nil {
		return nil, err
	}
	var gates acceptance.GateSetSpec
	if err := json.Unmarshal(gv.Spec, &gates); err != nil {
		return nil, fmt.Errorf("gate set version %d: %w", gv.ID, err)
	}
	var out []gateLimit
	for _, c := range gates.Criteria {
		m, ok := acceptance.LookupMetric(c.Metric)
		if !ok || c.Mode != acceptance.Absolute {
			continue
		}
		v, err := acceptance.ConvertToCanonical(c.Threshold, c.Unit, m)
		if err != nil {
			continue
		}
		out = append(out, gateLimit{metric: c.Metric, statistic: string(c.Statistic), step: c.Step, comparator: c.Comparator, value: v,
			gate: fmt.Sprintf("%s v%d", gates.Name, gv.Version)})
	}
	return out, nil
}

// latencyLimits are the chart limits of a latency metric in a step: its
// percentile and max criteria.
func latencyLimits(limits []gateLimit, metric, step string) []charts.Limit {
	var out []charts.Limit
	for _, g := range limits {
		if g.appliesTo(metric, step) && g.comparator == acceptance.LessOrEqual && g.statistic != "mean" {
			out = append(out, charts.Limit{Value: g.value, Label: g.label()})
		}
	}
	return out
}

var shortMetrics = map[string]string{
	acceptance.MetricTTFT: "TTFT", acceptance.MetricE2EL: "E2E", acceptance.MetricTPOT: "TPOT", acceptance.MetricITL: "ITL",
	acceptance.MetricTTFTContent: "TTFT (content)", acceptance.MetricTTFTIntended: "TTFT (intended)", acceptance.MetricE2ELIntended: "E2E (intended)",
	acceptance.MetricOutputTokenThroughput: "output tok/s", acceptance.MetricRequestThroughput: "requests/s",
	acceptance.MetricReadCLat: "read clat", acceptance.MetricWriteCLat: "write clat",
}

func shortMetric(id string) string {
	if s, ok := shortMetrics[id]; ok {
		return s
	}
	if m, ok := acceptance.LookupMetric(id); ok {
		return m.Name
	}
	return id
}

func unitOf(metric string) string {
	if m, ok := acceptance.LookupMetric(metric); ok {
		return string(m.Unit)
	}
	return ""
}

func toPoints(p [][2]float64) []charts.Point {
	out := make([]charts.Point, len(p))
	for i, x := range p {
		out[i] = charts.Point{X: x[0], Y: x[1]}
	}
	return out
}

// cdfSeries makes a chart series of a stored curve.
func cdfSeries(name string, role charts.Role, line string, c chartdata.CDFCurve) charts.CDFSeries {
	s := charts.CDFSeries{Name: name, Role: role, LineType: line}
	if c.Values != nil {
		s.Values = c.Values
		return s
	}
	s.Buckets = make([]charts.Bucket, len(c.Points))
	for i, p := range c.Points {
		s.Buckets[i] = charts.Bucket{Value: p[0], Count: int64(p[1])}
	}
	if s.Buckets == nil {
		s.Values = []float64{}
	}
	return s
}

func chartTable(t charts.Table) *web.ChartTable {
	return &web.ChartTable{Head: t.Head, Rows: t.Rows}
}

func runName(id int64) string { return fmt.Sprintf("run #%d", id) }

// chartID makes an element id from a prefix and a position.
func chartID(prefix string, i int) string { return fmt.Sprintf("chart-%s-%d", prefix, i) }

// worstLevel is the level of a step whose p99 TTFT (E2E, clat when there
// is no TTFT) is highest: the one a gate on tail latency is decided by.
func worstLevel(a chartdata.Aggregates, step chartdata.Step) string {
	best, bestV := step.Levels[len(step.Levels)-1], math.Inf(-1)
	for _, metric := range []string{acceptance.MetricTTFT, acceptance.MetricE2EL, acceptance.MetricReadCLat, acceptance.MetricWriteCLat} {
		found := false
		for _, lv := range step.Levels {
			if v, ok := a.Stat(metric, step.Name, lv, "p99"); ok {
				found = true
				if v > bestV {
					best, bestV = lv, v
				}
			}
		}
		if found {
			return best
		}
	}
	return best
}

// runCharts returns the run page's charts, from the aggregates
// precomputed at ingest, the baseline's aggregates (for overlays) and the
// gate set version's limits. Nothing is recomputed from samples here.
func (s *Server) runCharts(r *http.Request, run store.Run) ([]web.ChartBlock, error) {
	ctx := r.Context()
	a, ok, err := s.loadAggregates(ctx, run.ID, "meta", "summary", "cdf:%", "overrun:%", "timeseries", "pct:%")
	if err != nil || !ok {
		return nil, err
	}
	var base chartdata.Aggregates
	hasBase := false
	var baseRun store.Run
	if run.BaselineRunID != nil {
		if base, hasBase, err = s.loadAggregates(ctx, *run.BaselineRunID, "meta", "summary", "cdf:%"); err != nil {
			return nil, err
		}
		if baseRun, err = s.store.GetRun(ctx, run.ProgramID, *run.BaselineRunID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
	}
	limits, err := s.gateLimits(ctx, run.ProgramID, run.GateSetVersionID)
	if err != nil {
		return nil, err
	}
	b := runChartBuilder{run: run, a: a, base: base, hasBase: hasBase, baseRun: baseRun, limits: limits}
	return b.build()
}

type runChartBuilder struct {
	run     store.Run
	a, base chartdata.Aggregates
	hasBase bool
	baseRun store.Run // the baseline run (zero: none, or not found)
	limits  []gateLimit
	blocks  []web.ChartBlock
	err     error
}

// baselineGap says why the run's baseline has no figures of a metric in
// a series, for the charts that draw them side by side: "" when it has
// them, or when the run has no baseline (its charts show the run alone,
// and say so in their help).
func (b *runChartBuilder) baselineGap(metric, step, level string) string {
	if b.run.BaselineRunID == nil {
		return ""
	}
	name := b.baseName()
	if !b.hasBase {
		switch {
		case b.baseRun.ID == 0:
			return name + " is not in this program any more"
		case b.baseRun.State != store.RunDone:
			return fmt.Sprintf("%s ended %s and kept no results", name, store.RunStateLabel(b.baseRun.State))
		}
		return name + " has no chart data (its results were kept before charts were made at ingest)"
	}
	var levels []string
	found := false
	for _, st := range b.base.Meta.Steps {
		if st.Name == step {
			found, levels = true, st.Levels
		}
	}
	switch {
	case !found:
		return fmt.Sprintf("%s has no step %s", name, step)
	case !slices.Contains(levels, level):
		return fmt.Sprintf("%s did not measure step %s at %s (its levels: %s)", name, step, level, strings.Join(levels, ", "))
	}
	if _, ok := b.base.Stats(metric, step, level); !ok {
		if _, curve := b.base.CDF[chartdata.KeyCDF(step, level)][metric]; !curve {
			return fmt.Sprintf("%s has no %s in %s", name, shortMetric(metric), seriesLabelText(step, level))
		}
	}
	return ""
}

// noBaselineNote is a chart's note when the baseline lacks figures it
// would draw: "No baseline figures for TTFT, step chat at c=16: …".
func noBaselineNote(what, step, level, why string) string {
	return fmt.Sprintf("No baseline figures for %s, %s: %s.", what, seriesLabelText(step, level), why)
}

// add appends a chart built by a charts function; a builder's error is
// the server's (the aggregates were validated when they were made).
func (b *runChartBuilder) add(block web.ChartBlock, build func() (json.RawMessage, charts.Table, error)) {
	if b.err != nil {
		return
	}
	opt, table, err := build()
	if err != nil {
		b.err = fmt.Errorf("run %d: chart %s: %w", b.run.ID, block.ID, err)
		return
	}
	block.Option, block.Table = opt, chartTable(table)
	b.blocks = append(b.blocks, block)
}

func (b *runChartBuilder) baseName() string {
	if b.run.BaselineRunID == nil {
		return "baseline"
	}
	return "baseline " + runName(*b.run.BaselineRunID)
}

func (b *runChartBuilder) build() ([]web.ChartBlock, error) {
	var fioSteps []chartdata.Step
	for i, step := range b.a.Meta.Steps {
		if len(step.Levels) == 0 {
			continue
		}
		switch acceptance.StepKind(step.Kind) {
		case acceptance.StepFio:
			fioSteps = append(fioSteps, step)
		case acceptance.StepPause, acceptance.StepDropCaches, acceptance.StepFault:
		default: // inference, a command's tool output, an imported run
			b.inferenceCharts(i, step)
		}
	}
	b.fioCharts(fioSteps)
	b.timeCharts()
	return b.blocks, b.err
}

func (b *runChartBuilder) inferenceCharts(i int, step chartdata.Step) {
	level := worstLevel(b.a, step)
	where := "step " + step.Name
	if level != "" {
		where += " at " + level
		if len(step.Levels) > 1 {
			where += " (the sweep level with the highest p99)"
		}
	}
	cdfKey := chartdata.KeyCDF(step.Name, level)
	if curves := b.a.CDF[cdfKey]; len(curves) > 0 {
		var series []charts.CDFSeries
		var lim []charts.Limit
		baseCurves := b.base.CDF[cdfKey]
		for _, m := range []struct{ id, line string }{{acceptance.MetricTTFT, "solid"}, {acceptance.MetricE2EL, "dashed"}} {
			c, ok := curves[m.id]
			if !ok {
				continue
			}
			series = append(series, cdfSeries(shortMetric(m.id)+" "+runName(b.run.ID), charts.RoleCandidate, m.line, c))
			if bc, ok := baseCurves[m.id]; ok {
				series = append(series, cdfSeries(shortMetric(m.id)+" "+b.baseName(), charts.RoleBaseline, m.line, bc))
			}
			lim = append(lim, latencyLimits(b.limits, m.id, step.Name)...)
		}
		help := "Share of requests answered within each latency, on a log axis: solid TTFT, dashed end-to-end; blue this run"
		if len(baseCurves) > 0 {
			help += ", grey the baseline"
		}
		help += ". Red lines are the gate set's limits; dotted lines mark p50, p99 and p99.9. Percentiles in the table are exact (nearest rank over every request)."
		var note string
		for _, m := range []string{acceptance.MetricTTFT, acceptance.MetricE2EL} {
			if _, ok := curves[m]; !ok {
				continue
			}
			if _, ok := baseCurves[m]; !ok {
				if why := b.baselineGap(m, step.Name, level); why != "" {
					note = noBaselineNote(shortMetric(m), step.Name, level, why)
					break
				}
			}
		}
		title := "Latency distribution, " + where
		// The prefix cache decides how much prefill a TTFT includes: its
		// hit ratio over the step (the server's counters) stands beside it.
		if ratio, ok := b.a.Stat(acceptance.MetricCacheHitRatio, step.Name, level, "rate"); ok {
			title += fmt.Sprintf(" · prefix cache hit ratio %.1f %%", ratio*100)
			help += " The prefix cache hit ratio is the server's hits over queries (in tokens) between its Prometheus scrapes before and after the level, the mean over repetitions."
		}
		b.add(web.ChartBlock{ID: chartID("cdf", i), Title: title, Help: help, Note: note}, func() (json.RawMessage, charts.Table, error) {
			return charts.LatencyCDF(charts.CDFInput{Unit: "ms", Series: series, Limits: lim, Guides: []float64{50, 99, 99.9}})
		})
	}
	b.percentileCharts(i, step.Name, level, where, []string{acceptance.MetricTTFT, acceptance.MetricE2EL})
	if or, ok := b.a.OverRun[step.Name]; ok {
		b.overRunChart(i, step, or)
	}
	if chartdata.IsReuseSweep(step) {
		b.hitRatioChart(i, step)
	} else if len(step.Levels) > 1 {
		b.kneeChart(i, step)
	}
}

// percentileCharts draws candidate against baseline for each metric with
// a comparison.
func (b *runChartBuilder) percentileCharts(i int, step, level, where string, metrics []string) {
	rows := b.a.Percentiles[chartdata.KeyPercentiles(step, level)]
	for k, metric := range metrics {
		var pr []charts.PercentileRow
		why, noBase := "", true
		for _, c := range rows {
			if c.Metric != metric {
				continue
			}
			pr = append(pr, charts.PercentileRow{Label: c.Statistic, Candidate: orNaN(c.Candidate), Baseline: orNaN(c.Baseline),
				RelDiff: orNaN(c.DiffPct) / 100, Lower: orNaN(c.LowerPct) / 100, Upper: orNaN(c.UpperPct) / 100})
			noBase = noBase && c.Baseline == nil
			if why == "" {
				why = strings.TrimSuffix(c.Why, ".")
			}
		}
		if len(pr) == 0 {
			continue
		}
		var note string
		if noBase {
			if gap := b.baselineGap(metric, step, level); gap != "" {
				why = gap
			}
			note = noBaselineNote(shortMetric(metric), step, level, why)
		}
		unit := unitOf(metric)
		b.add(web.ChartBlock{ID: chartID(fmt.Sprintf("pct%d", k), i), Tall: true, Note: note,
			Title: fmt.Sprintf("%s percentiles against the baseline, %s", shortMetric(metric), where),
			Help: "Above: each percentile of this run (blue) and of the baseline (grey). Below: the relative difference with its 95 % interval " +
				"(the gate engine's percentile bootstrap of (run − baseline) / baseline, repetitions then requests resampled). " +
				"An interval clear of 0 is a real difference; a missing interval means too few requests for that percentile."},
			func() (json.RawMessage, charts.Table, error) {
				return charts.PercentileBars(charts.PercentileInput{Unit: unit, CandidateName: runName(b.run.ID), BaselineName: b.baseName(), Confidence: 0.95, Rows: pr,
					NoBaselineWhy: why})
			})
	}
}

func orNaN(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}

func (b *runChartBuilder) overRunChart(i int, step chartdata.Step, or chartdata.OverRun) {
	series := []charts.OverRunSeries{{Name: shortMetric(or.Metric), Role: charts.RoleCandidate, Points: toPoints(or.Points), Rolling: toPoints(or.Rolling)}}
	if len(or.Warmup) > 0 {
		series = append(series, charts.OverRunSeries{Name: shortMetric(or.Metric) + " in warm-up (not measured)", Points: toPoints(or.Warmup)})
	}
	help := fmt.Sprintf("Each dot is a request at the time it was sent (%s measured requests", web.Num(float64(or.Requests)))
	if len(or.Points) < int(or.Requests) {
		help += fmt.Sprintf(", %d drawn, keeping the slowest and fastest of every stretch", len(or.Points))
	}
	help += fmt.Sprintf("); the line is the p99 of every request in each %s s window. ", web.Num(or.Window))
	if or.WarmupCount > 0 {
		help += fmt.Sprintf("%d warm-up requests are shown apart. ", or.WarmupCount)
	}
	if or.Failed > 0 {
		help += fmt.Sprintf("%d failed requests have no TTFT. ", or.Failed)
	}
	help += "Spikes, drift and warm-up show here."
	lim := latencyLimits(b.limits, or.Metric, step.Name)
	b.add(web.ChartBlock{ID: chartID("overrun", i), Title: shortMetric(or.Metric) + " over the run, step " + step.Name, Help: help},
		func() (json.RawMessage, charts.Table, error) {
			return charts.LatencyOverRun(charts.OverRunInput{Unit: "ms", Series: series, Window: or.Window, Quantile: or.Quantile, Limits: lim})
		})
}

// kneeSeries lists a sweep's levels: throughput against p99 TTFT.
func kneeSeries(a chartdata.Aggregates, step chartdata.Step, name string, role charts.Role) (charts.KneeSeries, string) {
	ks := charts.KneeSeries{Name: name, Role: role}
	tp := acceptance.MetricOutputTokenThroughput
	if _, ok := a.Stat(tp, step.Name, step.Levels[0], "rate"); !ok {
		tp = acceptance.MetricRequestThroughput
	}
	for _, lv := range step.Levels {
		t, ok1 := a.Stat(tp, step.Name, lv, "rate")
		l, ok2 := a.Stat(acceptance.MetricTTFT, step.Name, lv, "p99")
		if !ok1 || !ok2 {
			continue
		}
		c, _ := strconv.Atoi(strings.TrimPrefix(lv, "c="))
		ks.Points = append(ks.Points, charts.KneePoint{Concurrency: c, Label: lv, Throughput: t, Latency: l})
	}
	return ks, tp
}

func (b *runChartBuilder) kneeChart(i int, step chartdata.Step) {
	cand, tp := kneeSeries(b.a, step, runName(b.run.ID), charts.RoleCandidate)
	if len(cand.Points) < 2 {
		return
	}
	series := []charts.KneeSeries{cand}
	if b.hasBase {
		for _, bs := range b.base.Meta.Steps {
			if bs.Name == step.Name && len(bs.Levels) > 0 {
				if ks, _ := kneeSeries(b.base, bs, b.baseName(), charts.RoleBaseline); len(ks.Points) > 0 {
					series = append(series, ks)
				}
			}
		}
	}
	var note string
	if len(series) == 1 && b.run.BaselineRunID != nil {
		why := b.baselineGap(acceptance.MetricTTFT, step.Name, step.Levels[0])
		if why == "" {
			why = b.baseName() + " has no load level with both a throughput and a p99 TTFT"
		}
		note = fmt.Sprintf("No baseline figures for the sweep of step %s: %s.", step.Name, why)
	}
	slo, sloLabel := step.SLOTTFT, fmt.Sprintf("TTFT SLO %s ms (the profile's)", plainNum(step.SLOTTFT))
	for _, g := range b.limits {
		if g.appliesTo(acceptance.MetricTTFT, step.Name) && g.statistic == "p99" && g.comparator == acceptance.LessOrEqual {
			slo, sloLabel = g.value, g.label()+" (gate)"
			break
		}
	}
	var lo, hi float64 = math.Inf(1), 0
	for _, s := range series {
		for _, p := range s.Points {
			lo, hi = min(lo, p.Latency), max(hi, p.Latency)
		}
	}
	tpName, tpUnit := "Output tokens/s", "tok/s"
	if tp == acceptance.MetricRequestThroughput {
		tpName, tpUnit = "Requests/s", "req/s"
	}
	b.add(web.ChartBlock{ID: chartID("knee", i), Title: "Throughput against p99 TTFT across the sweep, step " + step.Name, Note: note,
		Help: "Each point is one load level (its throughput over the measured window, and the p99 TTFT of its requests). The knee is where the line turns up; the usable capacity is the highest throughput under the line."},
		func() (json.RawMessage, charts.Table, error) {
			return charts.Knee(charts.KneeInput{ThroughputName: tpName, ThroughputUnit: tpUnit, LatencyName: "p99 TTFT", LatencyUnit: "ms",
				Series: series, SLO: slo, SLOLabel: sloLabel, LogY: lo > 0 && hi/lo > 20})
		})
}

func (b *runChartBuilder) fioCharts(steps []chartdata.Step) {
	var jobsIn []charts.FioJob
	fromTool := false // some percentiles are fio's own (no latency bins were kept)
	for _, step := range steps {
		for _, lv := range step.Levels {
			for _, dir := range []struct{ name, clat, bw, iops string }{
				{"read", acceptance.MetricReadCLat, acceptance.MetricReadBW, acceptance.MetricReadIOPS},
				{"write", acceptance.MetricWriteCLat, acceptance.MetricWriteBW, acceptance.MetricWriteIOPS},
			} {
				bw, okBW := b.a.Stat(dir.bw, step.Name, lv, "rate")
				iops, _ := b.a.Stat(dir.iops, step.Name, lv, "rate")
				lat, okLat := b.a.Stats(dir.clat, step.Name, lv)
				if !okBW && !okLat {
					continue
				}
				job := charts.FioJob{Job: step.Name, Direction: dir.name, Bandwidth: bw, IOPS: iops}
				if lv != "" {
					job.Job += " " + lv
				}
				if okLat {
					for _, p := range []string{"p50", "p90", "p99", "p99.9"} {
						if v, ok := lat.Stat(p); ok {
							job.Percentiles = append(job.Percentiles, charts.FioPercentile{Label: p, Value: v})
						}
					}
					fromTool = fromTool || (lat.Summary && len(job.Percentiles) > 0)
				}
				jobsIn = append(jobsIn, job)
			}
		}
	}
	if len(jobsIn) == 0 {
		return
	}
	in := charts.FioInput{LatencyUnit: "us", Jobs: jobsIn}
	hasLat := slices.ContainsFunc(jobsIn, func(j charts.FioJob) bool { return len(j.Percentiles) > 0 })
	if hasLat {
		help := "fio's completion latency (clat) of each job and direction, computed by Accord from fio's latency bins, all repetitions pooled."
		if fromTool {
			help = "fio's completion latency (clat) of each job and direction. Where fio's output had no latency bins, the percentiles are fio's own (clat_ns.percentile), the mean over repetitions; a percentile fio did not report is left out."
		}
		b.add(web.ChartBlock{ID: "chart-fio-latency", Title: "I/O completion latency percentiles per fio job", Help: help},
			func() (json.RawMessage, charts.Table, error) { return charts.FioLatency(in) })
	}
	b.add(web.ChartBlock{ID: "chart-fio-bandwidth", Title: "Bandwidth per fio job", Help: "Mean bandwidth over the repetitions; the table adds IOPS."},
		func() (json.RawMessage, charts.Table, error) { return charts.FioBandwidth(in) })
	for k, step := range steps {
		for _, lv := range step.Levels {
			b.percentileCharts(100+k, step.Name, lv, "step "+step.Name, []string{acceptance.MetricReadCLat, acceptance.MetricWriteCLat})
		}
	}
}

func (b *runChartBuilder) timeCharts() {
	if tl := chartdata.Timeline(b.a); len(tl) > 0 {
		b.timeChart(tl, chartdata.GroupTimeline, "chart-timeline", "GPU utilisation, storage latency and TTFT over the run",
			"One time axis for what explains a slow first token: the accelerators' mean utilisation (vendor tools or exporters), the NVMe namespaces' read and write latency per second, and each inference step's rolling TTFT percentile (the line of its latency-over-the-run chart).")
	}
	groups := []struct{ group, id, title, help string }{
		{chartdata.GroupThroughput, "chart-throughput", "Throughput over the run",
			"Output tokens per second (spread over each request's decoding) and completed requests per second, warm-up included, per second of the run."},
		{chartdata.GroupTelemetry, "chart-telemetry", "Host telemetry over the run",
			"Sampled every second on the lab host during each step: CPU, GPU and disk busy share, disk and NIC bandwidth."},
		{chartdata.GroupStorage, "chart-storage-latency", "NVMe namespace latency over the run",
			"Mean time per read and per write completed in each second over the NVMe namespaces (/sys/block/*/stat: ticks over I/Os)."},
		{chartdata.GroupFabric, "chart-fabric", "Fabric and NIC counters over the run",
			"The RDMA ports' retransmits, sequence errors, congestion notifications (CNPs), ECN marks and discards, and the physical NICs' errors, drops and pause frames, as rates per second of each step; a counter the host does not have draws no line. The same rates are gate metrics."},
	}
	for _, g := range groups {
		var group []chartdata.TimeSeries
		for _, ts := range b.a.TimeSeries {
			if ts.Group == g.group {
				group = append(group, ts)
			}
		}
		b.timeChart(group, g.group, g.id, g.title, g.help)
	}
}

// timeChart draws per-second series on one time axis, with their exact
// summaries as the table.
func (b *runChartBuilder) timeChart(group []chartdata.TimeSeries, name, id, title, help string) {
	var series []charts.TimeSeries
	for _, ts := range group {
		series = append(series, charts.TimeSeries{Name: ts.Name, Unit: ts.Unit, Role: charts.RoleNone, Points: toPoints(ts.Points)})
	}
	if len(series) == 0 {
		return
	}
	b.add(web.ChartBlock{ID: id, Title: title, Help: help},
		func() (json.RawMessage, charts.Table, error) {
			opt, _, err := charts.OverTime(charts.TimeSeriesInput{Series: series})
			return opt, exactSeriesTable(group, name), err
		})
}

// exactSeriesTable summarises each per-second series over every second
// (the chart draws a reduced line).
func exactSeriesTable(all []chartdata.TimeSeries, group string) charts.Table {
	t := charts.Table{Head: []string{"Series", "Unit", "Seconds", "min", "mean", "max"}}
	for _, ts := range all {
		if ts.Group == group {
			t.Rows = append(t.Rows, []string{ts.Name, ts.Unit, strconv.FormatInt(ts.N, 10), web.Num(ts.Min), web.Num(ts.Mean), web.Num(ts.Max)})
		}
	}
	return t
}

// ---- the compare page ----

// compareRow is one line of the compare table: a statistic of a metric.
type compareRow struct {
	metric    string
	statistic acceptance.Statistic
}

// compareRows are the statistics compared, in order; rows whose metric
// the chosen series lacks are left out.
var compareRows = []compareRow{
	{acceptance.MetricTTFT, acceptance.StatP50}, {acceptance.MetricTTFT, acceptance.StatP99}, {acceptance.MetricTTFT, acceptance.StatP999},
	{acceptance.MetricTPOT, acceptance.StatP99}, {acceptance.MetricITL, acceptance.StatP99}, {acceptance.MetricE2EL, acceptance.StatP99},
	{acceptance.MetricOutputTokenThroughput, acceptance.StatRate}, {acceptance.MetricRequestThroughput, acceptance.StatRate},
	{acceptance.MetricGoodput, acceptance.StatRate}, {acceptance.MetricErrorRate, acceptance.StatRate},
	{acceptance.MetricReadCLat, acceptance.StatP50}, {acceptance.MetricReadCLat, acceptance.StatP99}, {acceptance.MetricReadCLat, acceptance.StatP999},
	{acceptance.MetricReadIOPS, acceptance.StatRate}, {acceptance.MetricReadBW, acceptance.StatRate},
	{acceptance.MetricWriteCLat, acceptance.StatP99}, {acceptance.MetricWriteIOPS, acceptance.StatRate}, {acceptance.MetricWriteBW, acceptance.StatRate},
}

const (
	minCompare = 2
	maxCompare = 6
)

// compareRun is one chosen run with its aggregates.
type compareRun struct {
	run  store.Run
	agg  chartdata.Aggregates
	has  bool
	name string
}

func (s *Server) showCompare(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	ctx := r.Context()
	q := r.URL.Query()
	var ids []int64
	for _, raw := range q["run"] {
		id, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil || id <= 0 {
			s.renderError(w, r, http.StatusBadRequest)
			return
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	d := web.ComparePageData{Min: minCompare, Max: maxCompare}
	var runs []compareRun
	for _, id := range ids {
		run, err := s.store.GetRun(ctx, pr.ID, id)
		if err != nil {
			s.notFoundOr(w, r, err)
			return
		}
		runs = append(runs, compareRun{run: run, name: runName(run.ID)})
	}
	if err := s.compareChoices(r, &d, ids); err != nil {
		s.serverError(w, r, err)
		return
	}
	status := http.StatusOK
	switch {
	case len(ids) == 0:
	case len(ids) == 1:
		// The run page's Compare button of a run without a baseline.
		d.Message = fmt.Sprintf("Choose at least one more run to compare %s with.", runs[0].name)
	case len(ids) > maxCompare:
		d.Message = fmt.Sprintf("Choose %d to %d runs of this program (%d chosen).", minCompare, maxCompare, len(ids))
		status = http.StatusUnprocessableEntity
	default:
		if err := s.compareData(ctx, pr.ID, runs, q, &d); err != nil {
			s.serverError(w, r, err)
			return
		}
	}
	p := s.page(r, "Compare runs · "+pr.Name, "programs", web.Crumb{Label: "Programs", Href: "/programs"},
		web.Crumb{Label: pr.Name, Href: web.ProgramLink(pr.ID, "")}, web.Crumb{Label: "Compare"})
	s.render(w, r, status, web.ComparePage(p, pr.ProgramAccess, d))
}

// compareChoices lists the program's recent finished runs for the form.
func (s *Server) compareChoices(r *http.Request, d *web.ComparePageData, chosen []int64) error {
	pr := programFrom(r.Context())
	runs, err := s.store.ListRuns(r.Context(), pr.ID, store.RunFilter{Limit: 100})
	if err != nil {
		return err
	}
	for _, run := range runs {
		if run.State != store.RunDone && run.State != store.RunFailed && !slices.Contains(chosen, run.ID) {
			continue
		}
		d.Choices = append(d.Choices, web.CompareChoice{ID: run.ID, Label: run.DisplayLabel(), Host: run.HostName, Verdict: run.Verdict,
			When: runTimeText(run), Checked: slices.Contains(chosen, run.ID)})
	}
	return nil
}

func runTimeText(run store.Run) string {
	t := run.CreatedAt
	if run.FinishedAt != nil {
		t = *run.FinishedAt
	} else if run.StartedAt != nil {
		t = *run.StartedAt
	}
	return t.UTC().Format("2006-01-02 15:04")
}

// seriesKey names a series in forms: "step|level".
func seriesKey(step, level string) string { return step + "|" + level }

func seriesLabelText(step, level string) string {
	if level == "" {
		return step
	}
	return step + " at " + level
}

func (s *Server) compareData(ctx context.Context, programID int64, runs []compareRun, q url.Values, d *web.ComparePageData) error {
	for i := range runs {
		var err error
		runs[i].agg, runs[i].has, err = s.loadAggregates(ctx, runs[i].run.ID, "meta", "summary", "facts", "hist", "cdf:%")
		if err != nil {
			return err
		}
	}
	// The reference: ?ref= when it is one of the runs, else the earliest.
	ref := 0
	for i, cr := range runs {
		if cr.run.ID < runs[ref].run.ID {
			ref = i
		}
	}
	if v, err := strconv.ParseInt(q.Get("ref"), 10, 64); err == nil {
		for i, cr := range runs {
			if cr.run.ID == v {
				ref = i
			}
		}
	}
	for i, cr := range runs {
		d.Runs = append(d.Runs, web.CompareRun{ID: cr.run.ID, Name: cr.name, Label: cr.run.Label, Profile: fmt.Sprintf("%s v%d", cr.run.ProfileName, cr.run.ProfileVersion),
			Host: cr.run.HostName, State: cr.run.State, Verdict: cr.run.Verdict, When: runTimeText(cr.run), Reference: i == ref, HasData: cr.has})
	}
	d.Reference = runs[ref].run.ID
	if !runs[ref].has {
		d.Message = fmt.Sprintf("%s has no results to compare with.", runs[ref].name)
		return nil
	}

	// The series: ?series= when the reference has it, else the first
	// inference step's worst level that every run has, else the first.
	refAgg := runs[ref].agg
	var keys []string
	var worst string
	for _, st := range refAgg.Meta.Steps {
		for _, lv := range st.Levels {
			keys = append(keys, seriesKey(st.Name, lv))
			d.Series = append(d.Series, web.CompareSeries{Value: seriesKey(st.Name, lv), Label: seriesLabelText(st.Name, lv)})
		}
		if worst == "" && st.Kind == string(acceptance.StepInference) && len(st.Levels) > 0 {
			worst = seriesKey(st.Name, worstLevel(refAgg, st))
		}
	}
	if len(keys) == 0 {
		d.Message = fmt.Sprintf("%s has no results to compare with.", runs[ref].name)
		return nil
	}
	chosen := q.Get("series")
	if !slices.Contains(keys, chosen) {
		chosen = worst
		if chosen == "" {
			chosen = keys[0]
		}
	}
	for i := range d.Series {
		d.Series[i].Selected = d.Series[i].Value == chosen
	}
	step, level, _ := strings.Cut(chosen, "|")
	d.SeriesLabel = seriesLabelText(step, level)

	if err := compareTable(runs, ref, step, level, d); err != nil {
		return err
	}
	if err := compareCDFs(runs, ref, step, level, d); err != nil {
		return err
	}
	if err := compareHitRatio(runs, ref, step, d); err != nil {
		return err
	}
	compareFacts(runs, d)
	if pid := runs[ref].run.ProfileID; pid != nil {
		d.TrendHref = web.ProgramLink(programID, fmt.Sprintf("/trend?profile=%d", *pid))
	}
	return nil
}

// compareTable fills the deltas: each run against the reference, with the
// gate engine's interval of the relative difference.
func compareTable(runs []compareRun, ref int, step, level string, d *web.ComparePageData) error {
	refAgg := runs[ref].agg
	var rows []compareRow
	for _, cr := range compareRows {
		if _, ok := refAgg.Stat(cr.metric, step, level, string(cr.statistic)); ok {
			rows = append(rows, cr)
		}
	}
	// One comparison per run against the reference.
	results := make([]map[chartdata.MetricStatistic]acceptance.SeriesResult, len(runs))
	for i, cr := range runs {
		if i == ref || !cr.has {
			continue
		}
		var criteria []chartdata.MetricStatistic
		for _, row := range rows {
			if _, ok := cr.agg.Stat(row.metric, step, level, string(row.statistic)); ok {
				criteria = append(criteria, chartdata.MetricStatistic{Metric: row.metric, Statistic: row.statistic})
			}
		}
		res, err := chartdata.CompareSeries(cr.agg, refAgg, criteria, step, level, chartdata.ViewResamples)
		if err != nil {
			return fmt.Errorf("compare %s with %s: %w", cr.name, runs[ref].name, err)
		}
		results[i] = res
	}
	for _, row := range rows {
		meta, _ := acceptance.LookupMetric(row.metric)
		wr := web.CompareRow{Label: string(row.statistic) + " " + shortMetric(row.metric), Unit: string(meta.Unit)}
		if row.statistic == acceptance.StatRate {
			wr.Label = meta.Name
		}
		for i, cr := range runs {
			cell := web.CompareCell{Value: "–"}
			if v, ok := cr.agg.Stat(row.metric, step, level, string(row.statistic)); ok && cr.has {
				cell.Value = web.Num(v)
				if st, _ := cr.agg.Stats(row.metric, step, level); st.Summary {
					cell.Value += " (the tool's own)" // no samples: the import's summary, not Accord's percentile
				}
			}
			if i != ref {
				if sr, ok := results[i][chartdata.MetricStatistic{Metric: row.metric, Statistic: row.statistic}]; ok {
					cell.Diff, cell.Interval, cell.Class, cell.Why = deltaText(sr, meta)
				}
			}
			wr.Cells = append(wr.Cells, cell)
		}
		d.Rows = append(d.Rows, wr)
	}
	return nil
}

// deltaText formats a relative difference and its interval, and says
// whether the run is better or worse than the reference beyond doubt.
func deltaText(sr acceptance.SeriesResult, m acceptance.Metric) (diff, interval, class, why string) {
	if sr.Estimate == nil {
		return "", "", "", sr.Explanation
	}
	diff = signedPct(*sr.Estimate)
	if sr.Lower == nil || sr.Upper == nil {
		return diff, "", "", sr.Explanation
	}
	interval = signedPct(*sr.Lower) + " to " + signedPct(*sr.Upper)
	up, down := *sr.Lower > 0, *sr.Upper < 0
	switch {
	case (up && m.Direction == acceptance.LowerIsBetter) || (down && m.Direction == acceptance.HigherIsBetter):
		class = "worse"
	case up || down:
		class = "better"
	}
	return diff, interval, class, ""
}

func signedPct(v float64) string {
	if math.IsInf(v, 0) {
		return "∞"
	}
	return fmt.Sprintf("%+.1f %%", v)
}

// compareRoles colours the compare page's runs as the run page does its
// candidate and baseline: the reference (what the others are measured
// against) is the baseline, the first other run the candidate, further
// runs other colours.
func compareRoles(runs []compareRun, ref int) []charts.Role {
	roles := make([]charts.Role, len(runs))
	candidate := false
	for i := range runs {
		switch {
		case i == ref:
			roles[i] = charts.RoleBaseline
		case !candidate:
			roles[i], candidate = charts.RoleCandidate, true
		default:
			roles[i] = charts.RoleOther
		}
	}
	return roles
}

func compareCDFs(runs []compareRun, ref int, step, level string, d *web.ComparePageData) error {
	key := chartdata.KeyCDF(step, level)
	roles := compareRoles(runs, ref)
	for k, metric := range []string{acceptance.MetricTTFT, acceptance.MetricE2EL} {
		var series []charts.CDFSeries
		for i, cr := range runs {
			if c, ok := cr.agg.CDF[key][metric]; ok {
				name := cr.name
				if cr.run.Label != "" {
					name += " " + cr.run.Label
				}
				if i == ref {
					name += " (reference)"
				}
				series = append(series, cdfSeries(name, roles[i], "solid", c))
			}
		}
		if len(series) < minCompare {
			continue
		}
		opt, table, err := charts.CompareCDFs(charts.CDFInput{Unit: "ms", Series: series, Guides: []float64{50, 99, 99.9}})
		if err != nil {
			return fmt.Errorf("compare %s CDFs: %w", metric, err)
		}
		d.Charts = append(d.Charts, web.ChartBlock{ID: chartID("compare-cdf", k), Option: opt, Table: chartTable(table),
			Title: shortMetric(metric) + " distribution of each run, " + seriesLabelText(step, level),
			Help:  "Share of requests answered within each latency (log axis), one curve per run: grey the reference, as a baseline is on a run's page, blue the first run measured against it; the table gives each run's exact percentiles."})
	}
	return nil
}

// compareFacts lists the comparable host facts of each run, differing
// ones first.
func compareFacts(runs []compareRun, d *web.ComparePageData) {
	keys := map[string]bool{}
	for _, cr := range runs {
		for k := range cr.agg.Facts {
			keys[k] = true
		}
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		row := web.FactRow{Fact: k}
		for _, cr := range runs {
			v, ok := cr.agg.Facts[k]
			if !ok {
				v = "–"
			}
			row.Values = append(row.Values, v)
		}
		for _, v := range row.Values[1:] {
			row.Differs = row.Differs || v != row.Values[0]
		}
		if row.Differs {
			d.Facts = append(d.Facts, row)
		} else {
			d.SameFacts = append(d.SameFacts, row)
		}
	}
	d.FactsKnown = len(names) > 0
}

// ---- the trend page ----

// trendDefaults are the statistics drawn when none is chosen, when the
// profile's runs have them.
var trendDefaults = []compareRow{
	{acceptance.MetricTTFT, acceptance.StatP99}, {acceptance.MetricE2EL, acceptance.StatP99},
	{acceptance.MetricOutputTokenThroughput, acceptance.StatRate}, {acceptance.MetricReadCLat, acceptance.StatP99},
	{acceptance.MetricReadIOPS, acceptance.StatRate}, {acceptance.MetricWriteCLat, acceptance.StatP99},
}

// maxTrendCharts bounds the charts of the default view.
const maxTrendCharts = 4

// trendRun is one run of the profile with its summary.
type trendRun struct {
	run     store.Run
	summary []chartdata.SeriesStats
	facts   map[string]string
	// changeNote says which host facts changed since the host's previous run.
	changeNote string
}

func (s *Server) showTrend(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	ctx := r.Context()
	q := r.URL.Query()
	d := web.TrendPageData{}
	profiles, err := s.store.ListSpecs(ctx, store.KindProfile, pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	var profileID int64
	if raw := q.Get("profile"); raw != "" {
		if profileID, err = strconv.ParseInt(raw, 10, 64); err != nil || profileID <= 0 {
			s.renderError(w, r, http.StatusBadRequest)
			return
		}
		spec, err := s.store.GetSpec(ctx, store.KindProfile, pr.ID, profileID)
		if err != nil {
			s.notFoundOr(w, r, err)
			return
		}
		d.ProfileName = spec.Name
	}
	for _, p := range profiles {
		d.Profiles = append(d.Profiles, web.TrendChoice{Value: fmt.Sprint(p.ID), Label: p.Name, Selected: p.ID == profileID})
	}
	d.Profile = profileID
	for _, m := range acceptance.Metrics() {
		d.Metrics = append(d.Metrics, web.TrendChoice{Value: m.ID, Label: m.Name, Selected: m.ID == q.Get("metric")})
	}
	for _, st := range acceptance.Statistics {
		d.Statistics = append(d.Statistics, web.TrendChoice{Value: string(st), Label: string(st), Selected: string(st) == q.Get("statistic")})
	}
	if profileID != 0 {
		if err := s.trendData(ctx, pr.ID, profileID, q, &d); err != nil {
			s.serverError(w, r, err)
			return
		}
	}
	p := s.page(r, "Trend · "+pr.Name, "programs", web.Crumb{Label: "Programs", Href: "/programs"},
		web.Crumb{Label: pr.Name, Href: web.ProgramLink(pr.ID, "")}, web.Crumb{Label: "Trend"})
	s.render(w, r, http.StatusOK, web.TrendPage(p, pr.ProgramAccess, d))
}

func (s *Server) trendData(ctx context.Context, programID, profileID int64, q url.Values, d *web.TrendPageData) error {
	list, err := s.store.ListRuns(ctx, programID, store.RunFilter{ProfileID: &profileID, Limit: 500})
	if err != nil {
		return err
	}
	var ids []int64
	for _, run := range list {
		if run.State == store.RunDone || run.State == store.RunFailed {
			ids = append(ids, run.ID)
		}
	}
	summaries, err := s.store.ChartOfRuns(ctx, ids, chartdata.KeySummary)
	if err != nil {
		return err
	}
	factDocs, err := s.store.ChartOfRuns(ctx, ids, chartdata.KeyFacts)
	if err != nil {
		return err
	}
	var runs []trendRun
	for _, run := range list {
		raw, ok := summaries[run.ID]
		if !ok {
			continue
		}
		tr := trendRun{run: run}
		if err := json.Unmarshal(raw, &tr.summary); err != nil {
			return fmt.Errorf("summary of run %d: %w", run.ID, err)
		}
		if raw, ok := factDocs[run.ID]; ok {
			if err := json.Unmarshal(raw, &tr.facts); err != nil {
				return fmt.Errorf("facts of run %d: %w", run.ID, err)
			}
		}
		runs = append(runs, tr)
	}
	// Oldest first: a fact change is read against the host's previous run.
	slices.SortFunc(runs, func(a, b trendRun) int { return cmp.Compare(a.run.ID, b.run.ID) })
	d.Runs = len(runs)
	if len(runs) == 0 {
		d.Message = "No finished run of this profile has results yet."
		return nil
	}
	limits, err := s.trendLimits(ctx, programID, runs)
	if err != nil {
		return err
	}
	d.Changes = factChanges(runs)

	var wanted []compareRow
	metric, statistic := q.Get("metric"), acceptance.Statistic(q.Get("statistic"))
	if metric != "" {
		m, ok := acceptance.LookupMetric(metric)
		if !ok {
			d.Message = fmt.Sprintf("%q is not a metric Accord knows.", metric)
			return nil
		}
		if statistic == "" || !statistic.AppliesTo(m) {
			statistic = acceptance.StatP99
			if m.Kind == acceptance.KindRate {
				statistic = acceptance.StatRate
			}
		}
		wanted = []compareRow{{metric, statistic}}
	} else {
		for _, l := range limits {
			if st := acceptance.Statistic(l.statistic); !slices.ContainsFunc(wanted, func(c compareRow) bool { return c.metric == l.metric && c.statistic == st }) {
				wanted = append(wanted, compareRow{l.metric, st})
			}
		}
		for _, c := range trendDefaults {
			if !slices.Contains(wanted, c) {
				wanted = append(wanted, c)
			}
		}
	}
	for _, c := range wanted {
		if len(d.Charts) >= maxTrendCharts && metric == "" {
			break
		}
		block, ok, err := trendChart(runs, limits, c, q.Get("series"), len(d.Charts))
		if err != nil {
			return err
		}
		if ok {
			d.Charts = append(d.Charts, block)
		}
	}
	if len(d.Charts) == 0 {
		d.Message = "The profile's runs have no values of this metric."
	}
	return nil
}

// trendChart draws one statistic across the runs, a line per host, for
// one series: the one asked for, else the one most runs have (the last in
// run order on a tie: the highest sweep level).
func trendChart(runs []trendRun, limits []gateLimit, c compareRow, wantSeries string, n int) (web.ChartBlock, bool, error) {
	count := map[string]int{}
	var order []string
	for _, tr := range runs {
		for _, st := range tr.summary {
			if st.Metric != c.metric {
				continue
			}
			if _, ok := st.Stat(string(c.statistic)); !ok {
				continue
			}
			k := seriesKey(st.Step, st.Level)
			if count[k] == 0 {
				order = append(order, k)
			}
			count[k]++
		}
	}
	if len(order) == 0 {
		return web.ChartBlock{}, false, nil
	}
	key := wantSeries
	if count[key] == 0 {
		key = order[0]
		for _, k := range order {
			if count[k] >= count[key] {
				key = k
			}
		}
	}
	step, level, _ := strings.Cut(key, "|")
	byHost := map[string]*charts.TrendSeries{}
	var hosts []string
	for _, tr := range runs {
		for _, st := range tr.summary {
			if st.Metric != c.metric || st.Step != step || st.Level != level {
				continue
			}
			v, ok := st.Stat(string(c.statistic))
			if !ok {
				continue
			}
			host := tr.run.HostName
			if host == "" {
				host = "imported"
			}
			ts := byHost[host]
			if ts == nil {
				ts = &charts.TrendSeries{Host: host}
				byHost[host] = ts
				hosts = append(hosts, host)
			}
			when := tr.run.CreatedAt
			if tr.run.FinishedAt != nil {
				when = *tr.run.FinishedAt
			}
			note := tr.run.Verdict
			if ch := tr.changeNote; ch != "" {
				note = strings.TrimPrefix(note+" · "+ch, " · ")
			}
			ts.Points = append(ts.Points, charts.TrendPoint{Time: when, Value: v, RunID: runName(tr.run.ID), Note: note})
		}
	}
	var series []charts.TrendSeries
	for _, h := range hosts {
		series = append(series, *byHost[h])
	}
	var lim []charts.Limit
	seen := map[string]bool{}
	for _, g := range limits {
		if g.appliesTo(c.metric, step) && g.statistic == string(c.statistic) {
			l := charts.Limit{Value: g.value, Label: g.label() + " (" + g.gate + ")"}
			if !seen[l.Label] {
				seen[l.Label] = true
				lim = append(lim, l)
			}
		}
	}
	meta, _ := acceptance.LookupMetric(c.metric)
	what := string(c.statistic) + " " + shortMetric(c.metric)
	if c.statistic == acceptance.StatRate {
		what = meta.Name
	}
	opt, table, err := charts.Trend(charts.TrendInput{Metric: what, Unit: string(meta.Unit), Series: series, Limits: lim})
	if err != nil {
		return web.ChartBlock{}, false, fmt.Errorf("trend of %s: %w", what, err)
	}
	title := what + ", " + seriesLabelText(step, level)
	return web.ChartBlock{ID: chartID("trend", n), Title: title, Option: opt, Table: chartTable(table),
		Help: "One point per finished run, one line per lab host; red lines are the gate sets' limits. A note marks a run whose host facts (kernel, drivers, firmware, NICs) changed since the host's previous run."}, true, nil
}

// trendLimits reads the absolute limits of every gate set version the
// runs were judged by.
func (s *Server) trendLimits(ctx context.Context, programID int64, runs []trendRun) ([]gateLimit, error) {
	var out []gateLimit
	seen := map[int64]bool{}
	for _, tr := range runs {
		id := tr.run.GateSetVersionID
		if id == nil || seen[*id] {
			continue
		}
		seen[*id] = true
		l, err := s.gateLimits(ctx, programID, id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		out = append(out, l...)
	}
	return out, nil
}

// factChanges marks, per host, the runs whose comparable host facts
// differ from the host's previous run, and lists them.
func factChanges(runs []trendRun) []web.FactChange {
	var out []web.FactChange
	last := map[string]map[string]string{}
	for i := range runs {
		tr := &runs[i]
		if tr.facts == nil {
			continue
		}
		host := tr.run.HostName
		if prev, ok := last[host]; ok {
			diffs := acceptance.CompareFacts(tr.facts, prev)
			var parts []string
			for _, df := range diffs {
				parts = append(parts, fmt.Sprintf("%s %s → %s", df.Fact, orDashText(df.Baseline), orDashText(df.Candidate)))
			}
			if len(parts) > 0 {
				tr.changeNote = "changed: " + strings.Join(parts, ", ")
				out = append(out, web.FactChange{Host: host, RunID: tr.run.ID, When: runTimeText(tr.run), Changes: parts})
			}
		}
		last[host] = tr.facts
	}
	return out
}

func orDashText(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
