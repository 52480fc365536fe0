package charts

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/accordlab/accord/acceptance/chartdata"
)

// ColorBreaches colours the count of breaches in a row.
const ColorBreaches = "#e8710a"

// WatchInput is a production watch's chart.
type WatchInput struct {
	Name        string // e.g. "p99 TTFT of the serving fleet"
	Unit        string
	Consecutive int // breaches in a row that halt the stage
	Data        chartdata.WatchChart
	// Location is the time zone of tooltips (UTC when nil).
	Location *time.Location
}

// Watch draws a watch's values over time with the stop-loss line as it
// was, each value past it marked, the count of breaches in a row at each
// check on a second axis (up to the k that halts), and each halt as a
// vertical line. The table counts the checks.
func Watch(in WatchInput) (json.RawMessage, Table, error) {
	d := in.Data
	if d.Checks == 0 {
		return nil, Table{}, errors.New("charts: watch: no checks")
	}
	loc := in.Location
	if loc == nil {
		loc = time.UTC
	}
	k := max(in.Consecutive, 1)
	c := newChart(opts.Tooltip{Show: opts.Bool(true), Trigger: "item"}, sliderGrid())
	c.SetGlobalOptions(
		charts.WithXAxisOpts(opts.XAxis{Type: "time", Name: "Check time", NameLocation: "middle", NameGap: 28}),
		charts.WithDataZoomOpts(
			opts.DataZoom{Type: "inside", XAxisIndex: 0},
			opts.DataZoom{Type: "slider", XAxisIndex: 0},
		),
	)
	c.YAxisList = []opts.YAxis{
		{Type: "value", Name: axisName(plainText(in.Name), in.Unit), Max: round(d.Top, 6)},
		{Type: "value", Name: "breaches in a row", Position: "right", Min: 0, Max: k, MinInterval: 1, SplitLine: &opts.SplitLine{Show: opts.Bool(false)}},
	}
	when := func(t time.Time) string { return t.In(loc).Format("2006-01-02 15:04:05 MST") }
	ms := func(t time.Time) float64 { return float64(t.UnixMilli()) }

	var within, past []dataItem
	for _, v := range d.Values {
		value := num(v.Value) + unitSuffix(in.Unit)
		if v.Infinite {
			value = "+Inf (drawn at the top)"
			if v.Value < 0 {
				value = "−Inf (drawn at the bottom)"
			}
		}
		item := dataItem{Value: [2]float64{ms(v.At), round(v.Value, 6)}}
		if v.Past {
			item.Tooltip = &opts.Tooltip{Formatter: tipText("past the line", when(v.At), value)}
			past = append(past, item)
		} else {
			item.Tooltip = &opts.Tooltip{Formatter: tipText(when(v.At), value)}
			within = append(within, item)
		}
	}
	// The value: one line through every drawn check, the breaches on it.
	all := make([][2]float64, 0, len(d.Values))
	for _, v := range d.Values {
		all = append(all, [2]float64{ms(v.At), round(v.Value, 6)})
	}
	line := series(c, plainText(in.Name), "line")
	line.Data = all
	line.Color = ColorCandidate
	line.ShowSymbol = opts.Bool(false)
	line.Symbol = "none"
	line.LineStyle = &opts.LineStyle{Color: ColorCandidate, Width: 1.5}
	points := series(c, "checks within the line", "scatter")
	points.Data = within
	points.Color = ColorCandidate
	points.SymbolSize = 4
	breaches := series(c, "past the line", "scatter")
	breaches.Data = past
	breaches.Color = ColorLimit
	breaches.SymbolSize = 9
	c.MultiSeries = append(c.MultiSeries, line, points, breaches)

	// The line as it was at each check (a step: it changes when the watch
	// is edited).
	levels := func(ls []chartdata.WatchLevel) [][2]float64 {
		out := make([][2]float64, len(ls))
		for i, l := range ls {
			out[i] = [2]float64{ms(l.At), round(l.Value, 6)}
		}
		return out
	}
	stop := series(c, "stop-loss line", "line")
	stop.Data = levels(d.Lines)
	stop.Color = ColorLimit
	stop.Symbol = "none"
	stop.Step = "end"
	stop.LineStyle = &opts.LineStyle{Color: ColorLimit, Type: "dashed", Width: 1.5}
	count := series(c, "breaches in a row", "line")
	count.Data = levels(d.Breaches)
	count.Color = ColorBreaches
	count.Symbol = "none"
	count.Step = "end"
	count.YAxisIndex = 1
	count.LineStyle = &opts.LineStyle{Color: ColorBreaches, Width: 1}
	count.MarkLines = &opts.MarkLines{
		Data: []any{markLineItem{Name: "halts at " + strconv.Itoa(k), YAxis: k,
			Label:     &opts.Label{Show: opts.Bool(true), Formatter: "halts at " + strconv.Itoa(k) + " in a row", Color: ColorBreaches, Position: "insideEndBottom"},
			LineStyle: &opts.LineStyle{Color: ColorBreaches, Type: "dotted", Width: 1}}},
		MarkLineStyle: opts.MarkLineStyle{Symbol: []string{"none", "none"}},
	}
	c.MultiSeries = append(c.MultiSeries, stop, count)
	if len(d.Halts) > 0 {
		halts := series(c, "stage halted", "line")
		halts.Data = []any{}
		halts.Color = ColorLimit
		items := make([]any, len(d.Halts))
		for i, h := range d.Halts {
			items[i] = markLineItem{Name: "stage halted", XAxis: ms(h),
				Label:     &opts.Label{Show: opts.Bool(true), Formatter: "halted " + h.In(loc).Format("15:04:05"), Color: ColorLimit, Position: "insideEndTop"},
				LineStyle: &opts.LineStyle{Color: ColorLimit, Type: "solid", Width: 2}}
		}
		halts.MarkLines = &opts.MarkLines{Data: items, MarkLineStyle: opts.MarkLineStyle{Symbol: []string{"none", "none"}}}
		c.MultiSeries = append(c.MultiSeries, halts)
	}

	t := Table{Head: []string{"Checks", "Without a value", "Past the line", "Halts", "Drawn"}, Rows: [][]string{{
		strconv.Itoa(d.Checks), strconv.Itoa(d.WithoutValue), strconv.Itoa(d.PastLine), strconv.Itoa(len(d.Halts)), strconv.Itoa(len(d.Values)),
	}}}
	option, err := render(c, extra{useUTC: loc == time.UTC, timeLabels: true})
	return option, t, err
}
