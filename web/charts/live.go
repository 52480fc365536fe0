package charts

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
)

// The live charts of a running run, redrawn as its interim windows come:
// TTFT p50 and p99, and the throughputs, one colour per sweep level, with
// the gate set's stop-loss lines as they applied to each window.

// LiveTTFT draws TTFT p99 (solid) and p50 (dashed) of each window, a
// colour per series, and the stop-loss lines on TTFT.
func LiveTTFT(d chartdata.Live) (json.RawMessage, error) {
	if len(d.TTFT) == 0 {
		return nil, errors.New("charts: live TTFT: no window with a TTFT")
	}
	c := liveChart()
	c.YAxisList = []opts.YAxis{{Type: "value", Name: "TTFT (ms)", Min: 0}}
	for _, s := range d.TTFT {
		c.MultiSeries = append(c.MultiSeries, liveSeries(c, s.Statistic+" · "+d.Keys[s.Key].Label, s, s.Statistic == chartdata.LiveP50, 0))
	}
	for _, l := range d.Lines {
		if l.Metric == acceptance.MetricTTFT {
			c.MultiSeries = append(c.MultiSeries, liveLine(c, l, 0))
		}
	}
	return render(c, extra{pointerPrecision: 1})
}

// LiveThroughput draws requests/s (solid, left axis) and output tokens/s
// (dashed, right axis) of each window, and the stop-loss lines on them.
func LiveThroughput(d chartdata.Live) (json.RawMessage, error) {
	if len(d.Throughput) == 0 {
		return nil, errors.New("charts: live throughput: no window with a throughput")
	}
	c := liveChart()
	c.YAxisList = []opts.YAxis{
		{Type: "value", Name: "requests/s", Min: 0},
		{Type: "value", Name: "tokens/s", Min: 0, Position: "right", SplitLine: &opts.SplitLine{Show: opts.Bool(false)}},
	}
	for _, s := range d.Throughput {
		axis := 0
		if s.Statistic == chartdata.LiveTokens {
			axis = 1
		}
		c.MultiSeries = append(c.MultiSeries, liveSeries(c, s.Statistic+" · "+d.Keys[s.Key].Label, s, axis == 1, axis))
	}
	for _, l := range d.Lines {
		switch l.Metric {
		case acceptance.MetricRequestThroughput:
			c.MultiSeries = append(c.MultiSeries, liveLine(c, l, 0))
		case acceptance.MetricOutputTokenThroughput:
			c.MultiSeries = append(c.MultiSeries, liveLine(c, l, 1))
		}
	}
	return render(c, extra{pointerPrecision: 1})
}

// LiveTable lists the newest n windows, newest first.
func LiveTable(d chartdata.Live, n int) Table {
	t := Table{Head: []string{"End (s)", "Series", "Repetition", "Requests", "TTFT p50 (ms)", "TTFT p99 (ms)", "requests/s", "tokens/s"}}
	for i := len(d.Windows) - 1; i >= 0 && len(t.Rows) < n; i-- {
		w := d.Windows[i]
		row := []string{num(w.X), d.Keys[w.Key].Label, strconv.Itoa(w.Repetition), strconv.FormatInt(w.N, 10), "–", "–", "–", "–"}
		if w.HasTTFT {
			row[4], row[5] = num(w.P50), num(w.P99)
		}
		if w.Requests != nil {
			row[6] = num(*w.Requests)
		}
		if w.Tokens != nil {
			row[7] = num(*w.Tokens)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func liveChart() *charts.RectChart {
	c := newChart(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}, defaultGrid())
	c.SetGlobalOptions(charts.WithXAxisOpts(opts.XAxis{Type: "value", Name: "seconds since the first window", NameLocation: "middle", NameGap: 28, Min: 0}))
	return c
}

func liveSeries(c *charts.RectChart, name string, s chartdata.LiveSeries, dashed bool, axis int) charts.SingleSeries {
	ls := series(c, plainText(name), "line")
	ls.Data = pairs(chartdata.LTTB(s.Points, DefaultLinePoints), 7, 6)
	ls.Color = Palette[s.Key%len(Palette)]
	ls.Symbol = "circle"
	ls.SymbolSize = 4
	ls.YAxisIndex = axis
	style := &opts.LineStyle{Color: ls.Color, Width: 1.5}
	if dashed {
		style.Type = "dashed"
	}
	ls.LineStyle = style
	return ls
}

// liveLine is a stop-loss line as it applied to each window: a step (a
// relative line moves with the level's baseline).
func liveLine(c *charts.RectChart, l chartdata.LiveLine, axis int) charts.SingleSeries {
	rule := "≤"
	if l.Comparator == acceptance.GreaterOrEqual {
		rule = "≥"
	}
	metric := l.Metric
	if m, ok := acceptance.LookupMetric(l.Metric); ok {
		metric = m.Name
	}
	if l.Statistic != acceptance.StatRate {
		metric = string(l.Statistic) + " " + metric // a rate is the metric itself
	}
	name := "stop-loss " + l.Name + " (" + metric + " " + rule + ")"
	ls := series(c, plainText(name), "line")
	ls.Data = pairs(l.Points, 7, 6)
	ls.Color = ColorLimit
	ls.Symbol = "none"
	ls.Step = "end"
	ls.YAxisIndex = axis
	ls.LineStyle = &opts.LineStyle{Color: ColorLimit, Type: "dashed", Width: 1.5}
	return ls
}
