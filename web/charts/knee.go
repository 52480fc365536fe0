package charts

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// KneePoint is one level of a concurrency (or rate) sweep.
type KneePoint struct {
	Concurrency int     // the level; labelled "c=16"
	Label       string  // replaces "c=N" when set (e.g. "8 req/s" for an open-loop sweep)
	Throughput  float64 // e.g. output tokens/s or requests/s
	Latency     float64 // e.g. p99 TTFT
}

// KneeSeries is one sweep (candidate or baseline), levels in sweep order.
type KneeSeries struct {
	Name   string
	Role   Role
	Points []KneePoint
}

// KneeInput is throughput against tail latency across a sweep.
type KneeInput struct {
	ThroughputName string // axis name, e.g. "Output tokens/s"; "Throughput" when empty
	ThroughputUnit string // e.g. "tok/s"
	LatencyName    string // e.g. "p99 TTFT"; "p99 latency" when empty
	LatencyUnit    string // e.g. "ms"
	Series         []KneeSeries
	// SLO is the latency limit, drawn as a horizontal line (none when 0).
	SLO      float64
	SLOLabel string // e.g. "p99 TTFT SLO 2000 ms"
	// LogY asks for a logarithmic latency axis (past the knee latency
	// grows by orders of magnitude).
	LogY bool
}

// Knee draws each sweep as a line through its levels, throughput across
// and latency up, each point labelled with its level, and the SLO as a
// horizontal line: the knee is where the line turns up, the usable
// capacity is the highest throughput under the SLO. The table lists every
// level and whether it meets the SLO.
func Knee(in KneeInput) (json.RawMessage, Table, error) {
	if len(in.Series) == 0 {
		return nil, Table{}, errors.New("charts: knee: no series")
	}
	if !finite(in.SLO) || in.SLO < 0 {
		return nil, Table{}, fmt.Errorf("charts: knee: SLO %v", in.SLO)
	}
	tpName := in.ThroughputName
	if tpName == "" {
		tpName = "Throughput"
	}
	latName := in.LatencyName
	if latName == "" {
		latName = "p99 latency"
	}
	yAxis := opts.YAxis{Type: "value", Name: axisName(latName, in.LatencyUnit)}
	yMin, yMax := math.Inf(1), math.Inf(-1)
	for _, s := range in.Series {
		for i, p := range s.Points {
			if !finite(p.Throughput) || !finite(p.Latency) {
				return nil, Table{}, fmt.Errorf("charts: knee: series %q: level %d is (%v, %v)", s.Name, i, p.Throughput, p.Latency)
			}
			yMin, yMax = min(yMin, p.Latency), max(yMax, p.Latency)
		}
	}
	if in.LogY && yMin > 0 {
		yAxis.Type = "log"
	} else if in.SLO > 0 && (in.SLO > yMax || math.IsInf(yMax, 0)) {
		yAxis.Max = paddedMax(in.SLO)
	}
	if yAxis.Type == "log" && in.SLO > 0 {
		yAxis.Min, yAxis.Max = logExtent(min(yMin, in.SLO), max(yMax, in.SLO))
	}

	c := newChart(opts.Tooltip{Show: opts.Bool(true), Trigger: "item"}, defaultGrid())
	c.SetGlobalOptions(
		charts.WithXAxisOpts(opts.XAxis{Type: "value", Name: axisName(tpName, in.ThroughputUnit), NameLocation: "middle", NameGap: 28}),
		charts.WithYAxisOpts(yAxis),
	)
	t := Table{Head: []string{"Series", "Level", axisName(tpName, in.ThroughputUnit), axisName(latName, in.LatencyUnit)}}
	if in.SLO > 0 {
		t.Head = append(t.Head, "Within SLO")
	}
	var col colourer
	for i, s := range in.Series {
		color := col.next(s.Role, i)
		data := make([]dataItem, len(s.Points))
		for k, p := range s.Points {
			label := p.Label
			if label == "" {
				label = fmt.Sprintf("c=%d", p.Concurrency)
			}
			label = plainText(label)
			data[k] = dataItem{
				Name:    label,
				Value:   [2]float64{round(p.Throughput, 6), round(p.Latency, 6)},
				Tooltip: &opts.Tooltip{Formatter: tipText(s.Name+" · "+label, num(p.Throughput)+unitSuffix(in.ThroughputUnit)+" · "+num(p.Latency)+unitSuffix(in.LatencyUnit))},
			}
			row := []string{s.Name, label, num(p.Throughput), num(p.Latency)}
			if in.SLO > 0 {
				row = append(row, yesNo(p.Latency <= in.SLO))
			}
			t.Rows = append(t.Rows, row)
		}
		ls := series(c, s.Name, "line")
		ls.Data = data
		ls.Color = color
		ls.Symbol = "circle"
		ls.SymbolSize = 7
		ls.LineStyle = &opts.LineStyle{Color: color, Width: 2}
		ls.Label = &opts.Label{Show: opts.Bool(true), Formatter: "{b}", Position: "top", Color: color}
		ls.LabelLayout = &opts.LabelLayout{HideOverlap: opts.Bool(true)}
		c.MultiSeries = append(c.MultiSeries, ls)
	}
	if in.SLO > 0 {
		label := in.SLOLabel
		if label == "" {
			label = "SLO " + num(in.SLO) + unitSuffix(in.LatencyUnit)
		}
		c.MultiSeries = append(c.MultiSeries, limitSeries(c, []Limit{{Value: in.SLO, Label: label}}, false, in.LatencyUnit))
	}
	option, err := render(c, extra{})
	return option, t, err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
