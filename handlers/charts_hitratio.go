package handlers

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/web"
	"github.com/accordlab/accord/web/charts"
)

// hitRatioHelp says what the hit-ratio chart shows and where its numbers
// come from.
const hitRatioHelp = "Each point is one level of the prefix-reuse sweep (its share of each prompt made a shared prefix): across, the prefix cache hit ratio the inference server's own counters measured over the level (hits over queries, in tokens, between its Prometheus scrapes before and after; the mean over repetitions); up, the TTFT of its requests, p99 solid and p50 dashed, every repetition pooled. How steeply TTFT rises as the ratio drops says how much a workload's own hit ratio matters."

// hitRatioSeries makes a chart series of a run's curve.
func hitRatioSeries(c chartdata.HitRatioCurve, name string, role charts.Role) charts.HitRatioSeries {
	s := charts.HitRatioSeries{Name: name, Role: role}
	for _, p := range c.Points {
		s.Points = append(s.Points, charts.HitRatioPoint{Label: p.Level, HitRatio: p.HitRatio, P50: p.P50, P99: p.P99, N: p.N})
	}
	return s
}

// leftNote says which levels have no point, for a chart's help.
func leftNote(name string, c chartdata.HitRatioCurve) string {
	if len(c.Left) == 0 {
		return ""
	}
	return fmt.Sprintf(" Not drawn for %s: %s.", name, strings.Join(c.Left, "; "))
}

// hitRatioChart draws a reuse sweep's TTFT against the measured hit
// ratio, the run against its baseline's same step, with the gate set's
// p99 TTFT limit.
func (b *runChartBuilder) hitRatioChart(i int, step chartdata.Step) {
	curve, ok := chartdata.HitRatioCurveOf(b.a, step.Name)
	if !ok {
		return
	}
	help := hitRatioHelp + leftNote(runName(b.run.ID), curve)
	series := []charts.HitRatioSeries{hitRatioSeries(curve, runName(b.run.ID), charts.RoleCandidate)}
	if b.hasBase {
		if bc, ok := chartdata.HitRatioCurveOf(b.base, step.Name); ok && len(bc.Points) > 0 {
			series = append(series, hitRatioSeries(bc, b.baseName(), charts.RoleBaseline))
			help += leftNote(b.baseName(), bc)
		}
	}
	if len(curve.Points) == 0 {
		return // why each level has no ratio is in the run's notes (the ingest's warnings)
	}
	var limit float64
	var label string
	for _, g := range b.limits {
		if g.appliesTo(acceptance.MetricTTFT, step.Name) && g.statistic == "p99" && g.comparator == acceptance.LessOrEqual {
			limit, label = g.value, g.label()+" (gate)"
			break
		}
	}
	b.add(web.ChartBlock{ID: chartID("hitratio", i), Title: "TTFT against the prefix cache hit ratio, step " + step.Name, Help: help},
		func() (json.RawMessage, charts.Table, error) {
			return charts.HitRatio(charts.HitRatioInput{Series: series, Limit: limit, LimitLabel: label})
		})
}

// compareHitRatio draws every run's reuse sweep of the step on one chart,
// when the reference run swept prefix reuse there.
func compareHitRatio(runs []compareRun, ref int, step string, d *web.ComparePageData) error {
	if _, ok := chartdata.HitRatioCurveOf(runs[ref].agg, step); !ok {
		return nil
	}
	var series []charts.HitRatioSeries
	help := hitRatioHelp
	roles := compareRoles(runs, ref)
	for i, cr := range runs {
		c, ok := chartdata.HitRatioCurveOf(cr.agg, step)
		if !ok || len(c.Points) == 0 {
			continue
		}
		name := cr.name
		if cr.run.Label != "" {
			name += " " + cr.run.Label
		}
		if i == ref {
			name += " (reference)"
		}
		series = append(series, hitRatioSeries(c, name, roles[i]))
		help += leftNote(name, c)
	}
	if len(series) == 0 {
		return nil
	}
	opt, table, err := charts.HitRatio(charts.HitRatioInput{Series: series})
	if err != nil {
		return fmt.Errorf("compare hit ratio of step %s: %w", step, err)
	}
	d.Charts = append(d.Charts, web.ChartBlock{ID: "chart-compare-hitratio", Option: opt, Table: chartTable(table),
		Title: "TTFT against the prefix cache hit ratio of each run, step " + step, Help: help + " Grey is the reference, blue the first run measured against it."})
	return nil
}
