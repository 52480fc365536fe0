package charts

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// HitRatioPoint is one level of a prefix-reuse sweep.
type HitRatioPoint struct {
	Label    string  // the level, "reuse=0.5"
	HitRatio float64 // measured by the server's counters, 0..1
	P50, P99 float64 // TTFT, ms
	N        int64   // requests with a TTFT
}

// HitRatioSeries is one run's sweep (candidate or baseline), its points in
// the order of their measured hit ratio.
type HitRatioSeries struct {
	Name   string
	Role   Role
	Points []HitRatioPoint
}

// HitRatioInput is TTFT against the measured prefix cache hit ratio.
type HitRatioInput struct {
	Series []HitRatioSeries
	// Limit is a p99 TTFT limit, drawn as a horizontal line (none when 0).
	Limit      float64
	LimitLabel string
}

// HitRatio draws each run's TTFT p99 (solid) and p50 (dashed) against the
// prefix cache hit ratio its levels measured, each point labelled with its
// level: how steeply TTFT rises as the hit ratio drops, and where a
// workload's own ratio sits. The table lists every level.
func HitRatio(in HitRatioInput) (json.RawMessage, Table, error) {
	if len(in.Series) == 0 {
		return nil, Table{}, errors.New("charts: hit ratio: no series")
	}
	if !finite(in.Limit) || in.Limit < 0 {
		return nil, Table{}, fmt.Errorf("charts: hit ratio: limit %v", in.Limit)
	}
	for _, s := range in.Series {
		for i, p := range s.Points {
			if !finite(p.HitRatio) || p.HitRatio < 0 || p.HitRatio > 1 || !finite(p.P50) || !finite(p.P99) {
				return nil, Table{}, fmt.Errorf("charts: hit ratio: series %q: level %d is (%v, %v, %v)", s.Name, i, p.HitRatio, p.P50, p.P99)
			}
		}
	}
	c := newChart(opts.Tooltip{Show: opts.Bool(true), Trigger: "item"}, defaultGrid())
	c.SetGlobalOptions(
		charts.WithXAxisOpts(opts.XAxis{Type: "value", Name: "Prefix cache hit ratio, measured (%)", NameLocation: "middle", NameGap: 28, Min: 0, Max: 100}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "TTFT (ms)"}),
	)
	t := Table{Head: []string{"Series", "Level", "Hit ratio (%)", "TTFT p50 (ms)", "TTFT p99 (ms)", "Requests"}}
	var col colourer
	for i, s := range in.Series {
		color := col.next(s.Role, i)
		for _, line := range []struct {
			stat   string
			dashed bool
			value  func(HitRatioPoint) float64
		}{
			{"p99", false, func(p HitRatioPoint) float64 { return p.P99 }},
			{"p50", true, func(p HitRatioPoint) float64 { return p.P50 }},
		} {
			data := make([]dataItem, len(s.Points))
			for k, p := range s.Points {
				label := plainText(p.Label)
				data[k] = dataItem{
					Name:  label,
					Value: [2]float64{round(p.HitRatio*100, 6), round(line.value(p), 6)},
					Tooltip: &opts.Tooltip{Formatter: tipText(s.Name+" · "+label,
						fmt.Sprintf("hit ratio %s %% · TTFT %s %s ms", num(p.HitRatio*100), line.stat, num(line.value(p))))},
				}
			}
			ls := series(c, "TTFT "+line.stat+" "+s.Name, "line")
			ls.Data = data
			ls.Color = color
			ls.Symbol = "circle"
			ls.SymbolSize = 7
			style := &opts.LineStyle{Color: color, Width: 2}
			if line.dashed {
				style.Type = "dashed"
			}
			ls.LineStyle = style
			if !line.dashed {
				ls.Label = &opts.Label{Show: opts.Bool(true), Formatter: "{b}", Position: "top", Color: color}
				ls.LabelLayout = &opts.LabelLayout{HideOverlap: opts.Bool(true)}
			}
			c.MultiSeries = append(c.MultiSeries, ls)
		}
		for _, p := range s.Points {
			t.Rows = append(t.Rows, []string{s.Name, p.Label, num(p.HitRatio * 100), num(p.P50), num(p.P99), fmt.Sprint(p.N)})
		}
	}
	if in.Limit > 0 {
		c.MultiSeries = append(c.MultiSeries, limitSeries(c, []Limit{{Value: in.Limit, Label: in.LimitLabel}}, false, "ms"))
	}
	option, err := render(c, extra{})
	return option, t, err
}
