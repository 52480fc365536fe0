package web

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/a-h/templ"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/web/svgplot"
)

// ReportFigure is one chart of the signed report: static SVG drawn here on
// the server from the run's chart data (no script: the report opens
// offline and prints), with its caption.
type ReportFigure struct {
	ID, Title, Caption string
	SVG                string
}

// Graphic is the figure's SVG for the template: made by svgplot, which
// escapes every text it draws.
func (f ReportFigure) Graphic() templ.Component { return templ.Raw(f.SVG) }

// reportFigures draws the report's key charts: for each inference step
// the TTFT and end-to-end latency distributions against the baseline and
// their percentiles with the gate limits, throughput against p99 TTFT
// across a sweep, and the fio latency percentiles. A run without chart
// data has no figures.
func reportFigures(c report.Contents) ([]ReportFigure, error) {
	if c.Charts == nil {
		return nil, nil
	}
	f := figureSet{run: c.Charts, limits: c.Limits, runName: fmt.Sprintf("run #%d", c.Run.ID)}
	if c.Baseline != nil && c.Baseline.Charts != nil {
		f.base, f.baseName = c.Baseline.Charts, fmt.Sprintf("baseline #%d", c.Baseline.RunID)
	}
	var fio []chartdata.Step
	for i, step := range c.Charts.Meta.Steps {
		if len(step.Levels) == 0 {
			continue
		}
		switch acceptance.StepKind(step.Kind) {
		case acceptance.StepFio:
			fio = append(fio, step)
		case acceptance.StepPause, acceptance.StepDropCaches, acceptance.StepFault, acceptance.StepGPUPath:
		default:
			f.inference(i, step)
		}
	}
	f.fio(fio)
	return f.figures, f.err
}

type figureSet struct {
	run, base         *chartdata.Aggregates
	runName, baseName string
	limits            []report.Limit
	figures           []ReportFigure
	err               error
}

func (f *figureSet) add(id, title, caption string, draw func() (string, error)) {
	if f.err != nil {
		return
	}
	svg, err := draw()
	if err != nil {
		f.err = fmt.Errorf("report chart %s: %w", id, err)
		return
	}
	f.figures = append(f.figures, ReportFigure{ID: id, Title: title, Caption: caption, SVG: svg})
}

// stat reads a statistic of the run or the baseline (false without it).
func stat(a *chartdata.Aggregates, metric, step, level, statistic string) (float64, bool) {
	if a == nil {
		return 0, false
	}
	return a.Stat(metric, step, level, statistic)
}

// tailLevel is the level of a step whose p99 TTFT (or end-to-end latency)
// is highest: the one a tail-latency gate is decided by.
func tailLevel(a *chartdata.Aggregates, step chartdata.Step) string {
	level, worst := step.Levels[len(step.Levels)-1], math.Inf(-1)
	for _, metric := range []string{acceptance.MetricTTFT, acceptance.MetricE2EL} {
		for _, lv := range step.Levels {
			if v, ok := a.Stat(metric, step.Name, lv, "p99"); ok && v > worst {
				level, worst = lv, v
			}
		}
		if !math.IsInf(worst, -1) {
			break
		}
	}
	return level
}

// latencyMetrics are the inference latencies the report draws, with how
// their lines look.
var latencyMetrics = []struct {
	id, name string
	dashed   bool
}{
	{acceptance.MetricTTFT, "TTFT", false},
	{acceptance.MetricE2EL, "E2E", true},
}

func (f *figureSet) upperLimits(metric, step, level string, vertical bool) []svgplot.Limit {
	var out []svgplot.Limit
	for _, l := range f.limits {
		if !l.AppliesTo(metric, step) || l.Comparator != acceptance.LessOrEqual || l.Statistic == "mean" {
			continue
		}
		v, label := l.Value, l.Label
		if l.Relative {
			// Made absolute with the baseline's figure: the point estimate
			// of the limit the gate engine judges with an interval.
			b, ok := stat(f.base, metric, step, level, l.Statistic)
			if !ok {
				continue
			}
			v = b * (1 + l.Value/100)
			label += " (" + svgplot.Num(v) + ")"
		}
		out = append(out, svgplot.Limit{Value: v, Label: label, Vertical: vertical})
	}
	return out
}

// limitsNote ends a caption: what the red dashed lines are, when any are
// drawn.
func limitsNote(limits []svgplot.Limit, on string) string {
	if len(limits) == 0 {
		return " The gate set sets no upper limit on " + on + " here."
	}
	return " Red dashed lines are the gate set's limits on " + on + " (a relative one at the baseline's figure changed by the allowed share)."
}

func (f *figureSet) inference(i int, step chartdata.Step) {
	level := tailLevel(f.run, step)
	where := "step " + step.Name
	if level != "" {
		where += " at " + level
	}
	key := chartdata.KeyCDF(step.Name, level)
	curves := f.run.CDF[key]
	var baseCurves map[string]chartdata.CDFCurve
	if f.base != nil {
		baseCurves = f.base.CDF[key]
	}
	var series []svgplot.Series
	var limits []svgplot.Limit
	for _, m := range latencyMetrics {
		c, ok := curves[m.id]
		if !ok {
			continue
		}
		series = append(series, svgplot.Series{Name: m.name + " " + f.runName, Dashed: m.dashed, Points: sharePoints(c)})
		if bc, ok := baseCurves[m.id]; ok {
			series = append(series, svgplot.Series{Name: m.name + " " + f.baseName, Baseline: true, Dashed: m.dashed, Points: sharePoints(bc)})
		}
		limits = append(limits, f.upperLimits(m.id, step.Name, level, true)...)
	}
	if len(series) > 0 {
		caption := "Share of requests answered within each latency (log axis): solid TTFT, dashed end-to-end; blue this run"
		if len(baseCurves) > 0 {
			caption += ", grey the baseline"
		} else if f.base != nil {
			caption += "; no baseline figures for " + where + ": the baseline has no latency distribution there"
		}
		caption += "." + limitsNote(limits, "these latencies")
		f.add(fmt.Sprintf("fig-cdf-%d", i), "Latency distribution, "+where, caption, func() (string, error) {
			return svgplot.LinePlot{Title: "Latency distribution, " + where, X: svgplot.Axis{Label: "latency (ms)", Log: true},
				Y: svgplot.Axis{Label: "share of requests", Min: 0, Max: 1, Percent: true}, Series: series, Limits: limits}.SVG()
		})
	}
	for k, m := range latencyMetrics {
		f.percentiles(fmt.Sprintf("fig-pct-%d-%d", i, k), m.id, m.name, step.Name, level, where, "ms")
	}
	if chartdata.IsReuseSweep(step) {
		f.hitRatio(i, step)
	} else if len(step.Levels) > 1 {
		f.knee(i, step)
	}
}

// sharePoints turns a reduced distribution into (latency, share at or
// below it) points.
func sharePoints(c chartdata.CDFCurve) []svgplot.Point {
	if c.N == 0 {
		return nil
	}
	var out []svgplot.Point
	if len(c.Values) > 0 {
		vs := slices.Clone(c.Values)
		sort.Float64s(vs)
		for i, v := range vs {
			out = append(out, svgplot.Point{X: v, Y: float64(i+1) / float64(len(vs))})
		}
		return out
	}
	var seen float64
	for _, p := range c.Points {
		seen += p[1]
		out = append(out, svgplot.Point{X: p[0], Y: seen / float64(c.N)})
	}
	return out
}

var reportPercentiles = []string{"p50", "p90", "p95", "p99", "p99.9"}

// percentiles draws one metric's percentiles on the run beside the
// baseline's, with the gate limits on the metric.
func (f *figureSet) percentiles(id, metric, name, step, level, where, unit string) {
	if _, ok := f.run.Stats(metric, step, level); !ok {
		return
	}
	var groups []svgplot.BarGroup
	for _, p := range reportPercentiles {
		g := svgplot.BarGroup{Label: p}
		v, ok := f.run.Stat(metric, step, level, p)
		g.Bars = append(g.Bars, svgplot.Bar{Series: f.runName, Value: v, Missing: !ok})
		if f.base != nil {
			bv, ok := f.base.Stat(metric, step, level, p)
			g.Bars = append(g.Bars, svgplot.Bar{Series: f.baseName, Baseline: true, Value: bv, Missing: !ok})
		}
		groups = append(groups, g)
	}
	title := name + " percentiles, " + where
	limits := f.upperLimits(metric, step, level, false)
	f.add(id, title, "Each percentile of this run (blue) beside the baseline's (grey), Accord's nearest rank over every request."+limitsNote(limits, name),
		func() (string, error) {
			return svgplot.BarPlot{Title: title, Y: svgplot.Axis{Label: name + " (" + unit + ")"}, Groups: groups, Limits: limits}.SVG()
		})
}

// kneePoints are a sweep's levels: throughput against p99 TTFT.
func kneePoints(a *chartdata.Aggregates, step chartdata.Step, throughput string) ([]svgplot.Point, []string) {
	var pts []svgplot.Point
	var labels []string
	for _, lv := range step.Levels {
		t, ok1 := a.Stat(throughput, step.Name, lv, "rate")
		l, ok2 := a.Stat(acceptance.MetricTTFT, step.Name, lv, "p99")
		if ok1 && ok2 {
			pts, labels = append(pts, svgplot.Point{X: t, Y: l}), append(labels, lv)
		}
	}
	return pts, labels
}

func (f *figureSet) knee(i int, step chartdata.Step) {
	tp, tpLabel := acceptance.MetricOutputTokenThroughput, "output tokens/s"
	if _, ok := f.run.Stat(tp, step.Name, step.Levels[0], "rate"); !ok {
		tp, tpLabel = acceptance.MetricRequestThroughput, "requests/s"
	}
	pts, labels := kneePoints(f.run, step, tp)
	if len(pts) < 2 {
		return
	}
	series := []svgplot.Series{{Name: f.runName, Markers: true, Labels: labels, Points: pts}}
	if f.base != nil {
		for _, bs := range f.base.Meta.Steps {
			if bs.Name == step.Name && len(bs.Levels) > 0 {
				if bp, bl := kneePoints(f.base, bs, tp); len(bp) > 0 {
					series = append(series, svgplot.Series{Name: f.baseName, Baseline: true, Markers: true, Labels: bl, Points: bp})
				}
			}
		}
	}
	var limits []svgplot.Limit
	for _, l := range f.limits {
		if l.AppliesTo(acceptance.MetricTTFT, step.Name) && l.Statistic == "p99" && l.Comparator == acceptance.LessOrEqual && !l.Relative {
			limits = append(limits, svgplot.Limit{Value: l.Value, Label: l.Label})
		}
	}
	if len(limits) == 0 && step.SLOTTFT > 0 {
		limits = append(limits, svgplot.Limit{Value: step.SLOTTFT, Label: fmt.Sprintf("TTFT SLO %s ms (the profile's)", svgplot.Num(step.SLOTTFT))})
	}
	lo, hi := math.Inf(1), 0.0
	for _, s := range series {
		for _, p := range s.Points {
			lo, hi = math.Min(lo, p.Y), math.Max(hi, p.Y)
		}
	}
	title := "Throughput against p99 TTFT across the sweep, step " + step.Name
	f.add(fmt.Sprintf("fig-knee-%d", i), title, "Each point is one load level: its throughput over the measured window and the p99 TTFT of its requests. The knee is where the line turns up; the usable capacity is the highest throughput under the limit.",
		func() (string, error) {
			return svgplot.LinePlot{Title: title, X: svgplot.Axis{Label: tpLabel}, Y: svgplot.Axis{Label: "p99 TTFT (ms)", Log: lo > 0 && hi/lo > 20},
				Series: series, Limits: limits}.SVG()
		})
}

var fioDirections = []struct{ name, clat string }{
	{"read", acceptance.MetricReadCLat},
	{"write", acceptance.MetricWriteCLat},
}

var fioPercentiles = []string{"p50", "p90", "p99", "p99.9"}

// fio draws the completion latency percentiles of every fio job and
// direction, the run's beside the baseline's.
func (f *figureSet) fio(steps []chartdata.Step) {
	type job struct{ name, step, level, metric string }
	var jobs []job
	for _, step := range steps {
		for _, lv := range step.Levels {
			for _, d := range fioDirections {
				if _, ok := f.run.Stats(d.clat, step.Name, lv); ok {
					name := step.Name
					if lv != "" {
						name += " " + lv
					}
					jobs = append(jobs, job{name: name + " " + d.name, step: step.Name, level: lv, metric: d.clat})
				}
			}
		}
	}
	if len(jobs) == 0 {
		return
	}
	var groups []svgplot.BarGroup
	lo := math.Inf(1)
	for _, p := range fioPercentiles {
		g := svgplot.BarGroup{Label: p}
		for _, j := range jobs {
			v, ok := f.run.Stat(j.metric, j.step, j.level, p)
			g.Bars = append(g.Bars, svgplot.Bar{Series: j.name + ", " + f.runName, Value: v, Missing: !ok})
			if ok {
				lo = math.Min(lo, v)
			}
			if f.base != nil {
				bv, ok := stat(f.base, j.metric, j.step, j.level, p)
				g.Bars = append(g.Bars, svgplot.Bar{Series: j.name + ", " + f.baseName, Baseline: true, Value: bv, Missing: !ok})
			}
		}
		groups = append(groups, g)
	}
	var limits []svgplot.Limit
	for _, d := range fioDirections {
		for _, s := range steps {
			for _, lv := range s.Levels {
				for _, l := range f.upperLimits(d.clat, s.Name, lv, false) {
					if !slices.Contains(limits, l) {
						limits = append(limits, l)
					}
				}
			}
		}
	}
	title := "I/O completion latency percentiles per fio job"
	f.add("fig-fio", title, "fio's completion latency (clat) of each job and direction, all repetitions pooled, on a log axis: this run beside the baseline (grey)."+limitsNote(limits, "completion latency"),
		func() (string, error) {
			return svgplot.BarPlot{Title: title, Y: svgplot.Axis{Label: "completion latency (µs)", Log: lo > 0}, Groups: groups, Limits: limits}.SVG()
		})
}
