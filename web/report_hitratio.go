package web

import (
	"fmt"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/web/svgplot"
)

// hitRatio draws a prefix-reuse sweep's TTFT (p99 solid, p50 dashed)
// against the prefix cache hit ratio each level measured, the run's beside
// the baseline's, with the gate set's absolute p99 TTFT limit.
func (f *figureSet) hitRatio(i int, step chartdata.Step) {
	curve, ok := chartdata.HitRatioCurveOf(*f.run, step.Name)
	if !ok || len(curve.Points) == 0 {
		return
	}
	series := hitRatioLines(curve, f.runName, false)
	left := curve.Left
	if f.base != nil {
		if bc, ok := chartdata.HitRatioCurveOf(*f.base, step.Name); ok && len(bc.Points) > 0 {
			series = append(series, hitRatioLines(bc, f.baseName, true)...)
			for _, l := range bc.Left {
				left = append(left, f.baseName+" "+l)
			}
		}
	}
	var limits []svgplot.Limit
	for _, l := range f.limits {
		if l.AppliesTo(acceptance.MetricTTFT, step.Name) && l.Statistic == "p99" && l.Comparator == acceptance.LessOrEqual && !l.Relative {
			limits = append(limits, svgplot.Limit{Value: l.Value, Label: l.Label})
		}
	}
	caption := "Each point is one level of the prefix-reuse sweep: across, the prefix cache hit ratio the inference server's own counters measured over it (hits over queries, in tokens; the mean over repetitions); up, the TTFT of its requests, p99 solid and p50 dashed; blue this run, grey the baseline."
	if len(left) > 0 {
		caption += " Not drawn: " + strings.Join(left, "; ") + "."
	}
	title := "TTFT against the prefix cache hit ratio, step " + step.Name
	f.add(fmt.Sprintf("fig-hitratio-%d", i), title, caption, func() (string, error) {
		return svgplot.LinePlot{Title: title, X: svgplot.Axis{Label: "prefix cache hit ratio, measured", Min: 0, Max: 1, Percent: true},
			Y: svgplot.Axis{Label: "TTFT (ms)"}, Series: series, Limits: limits}.SVG()
	})
}

// hitRatioLines are a curve's p99 and p50 lines.
func hitRatioLines(c chartdata.HitRatioCurve, name string, baseline bool) []svgplot.Series {
	p99 := svgplot.Series{Name: "p99 TTFT " + name, Baseline: baseline, Markers: true}
	p50 := svgplot.Series{Name: "p50 TTFT " + name, Baseline: baseline, Dashed: true, Markers: true}
	for _, p := range c.Points {
		p99.Points = append(p99.Points, svgplot.Point{X: p.HitRatio, Y: p.P99})
		p99.Labels = append(p99.Labels, p.Level)
		p50.Points = append(p50.Points, svgplot.Point{X: p.HitRatio, Y: p.P50})
	}
	return []svgplot.Series{p99, p50}
}
