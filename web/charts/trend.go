package charts

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// TrendPoint is one run's value of the metric.
type TrendPoint struct {
	Time  time.Time // when the run finished
	Value float64
	RunID string // shown in the tooltip and the table, e.g. "run 42"
	Note  string // optional, e.g. the verdict "PASS"
}

// TrendSeries is one host's runs.
type TrendSeries struct {
	Host   string
	Points []TrendPoint
}

// TrendInput is one metric across runs over time.
type TrendInput struct {
	Metric string // e.g. "p99 TTFT"
	Unit   string // e.g. "ms"
	Series []TrendSeries
	// Limits are gate thresholds, drawn as horizontal lines.
	Limits []Limit
	// Location is the time zone of tooltips and the table (UTC when nil).
	// The axis labels are in UTC when it is UTC, in the browser's zone
	// otherwise (all ECharts can do).
	Location *time.Location
}

// Trend draws one line per host over run time, a point per run whose
// tooltip names the run, and the gate thresholds as horizontal lines. The
// table lists every run.
func Trend(in TrendInput) (json.RawMessage, Table, error) {
	if len(in.Series) == 0 {
		return nil, Table{}, errors.New("charts: trend: no hosts")
	}
	loc := in.Location
	if loc == nil {
		loc = time.UTC
	}
	yMax := math.Inf(-1)
	for _, s := range in.Series {
		for i, p := range s.Points {
			if !finite(p.Value) {
				return nil, Table{}, fmt.Errorf("charts: trend: host %q: point %d is %v", s.Host, i, p.Value)
			}
			if p.Time.IsZero() {
				return nil, Table{}, fmt.Errorf("charts: trend: host %q: point %d has no time", s.Host, i)
			}
			yMax = max(yMax, p.Value)
		}
	}
	yAxis := opts.YAxis{Type: "value", Name: axisName(in.Metric, in.Unit)}
	var limitMax float64
	for _, l := range in.Limits {
		if !finite(l.Value) {
			return nil, Table{}, fmt.Errorf("charts: trend: limit %q is %v", l.Label, l.Value)
		}
		limitMax = max(limitMax, l.Value)
	}
	if limitMax > 0 && (limitMax > yMax || math.IsInf(yMax, 0)) {
		yAxis.Max = paddedMax(limitMax)
	}

	c := newChart(opts.Tooltip{Show: opts.Bool(true), Trigger: "item"}, sliderGrid())
	c.SetGlobalOptions(
		charts.WithXAxisOpts(opts.XAxis{Type: "time", Name: "Run time", NameLocation: "middle", NameGap: 28}),
		charts.WithYAxisOpts(yAxis),
		charts.WithDataZoomOpts(
			opts.DataZoom{Type: "inside", XAxisIndex: 0},
			opts.DataZoom{Type: "slider", XAxisIndex: 0},
		),
	)
	t := Table{Head: []string{"Host", "Run", "Time", axisName(in.Metric, in.Unit), "Note"}}
	for i, s := range in.Series {
		pts := slices.Clone(s.Points)
		slices.SortStableFunc(pts, func(a, b TrendPoint) int { return a.Time.Compare(b.Time) })
		data := make([]dataItem, len(pts))
		for k, p := range pts {
			when := p.Time.In(loc).Format("2006-01-02 15:04 MST")
			// The tooltip is fixed text per point: the run, its time and
			// value (a template could only show the raw epoch time).
			value := num(p.Value) + unitSuffix(in.Unit)
			if p.Note != "" {
				value += " · " + p.Note
			}
			data[k] = dataItem{
				Name:    plainText(p.RunID),
				Value:   [2]float64{float64(p.Time.UnixMilli()), round(p.Value, 6)},
				Tooltip: &opts.Tooltip{Formatter: tipText(s.Host+" · "+p.RunID, when, value)},
			}
			t.Rows = append(t.Rows, []string{s.Host, p.RunID, when, num(p.Value), p.Note})
		}
		ls := series(c, plainText(s.Host), "line")
		ls.Data = data
		ls.Color = Palette[i%len(Palette)]
		ls.Symbol = "circle"
		ls.SymbolSize = 6
		ls.ShowSymbol = opts.Bool(true)
		ls.LineStyle = &opts.LineStyle{Color: ls.Color, Width: 1.5}
		c.MultiSeries = append(c.MultiSeries, ls)
	}
	if len(in.Limits) > 0 {
		c.MultiSeries = append(c.MultiSeries, limitSeries(c, in.Limits, false, in.Unit))
	}
	// ECharts labels a time axis in the browser's zone or in UTC.
	option, err := render(c, extra{useUTC: loc == time.UTC, timeLabels: true})
	return option, t, err
}
