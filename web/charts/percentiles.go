package charts

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/accordlab/accord/web/palette"
)

// PercentileRow is one percentile of candidate and baseline, with the
// relative difference (candidate − baseline) / baseline as a fraction
// (+0.12 is 12 % higher) and its confidence interval [Lower, Upper].
// NaN marks what is not known (no interval: the bootstrap did not run).
type PercentileRow struct {
	Label               string // "p50", "p99.9"
	Candidate, Baseline float64
	RelDiff             float64
	Lower, Upper        float64
}

// PercentileInput is a candidate-against-baseline percentile chart.
type PercentileInput struct {
	Unit          string // of Candidate and Baseline, e.g. "ms"
	CandidateName string // legend names; "candidate" and "baseline" when empty
	BaselineName  string
	Confidence    float64 // of the intervals, e.g. 0.95 (for the legend)
	Rows          []PercentileRow
	// NoBaselineWhy says why the baseline has no figures here, when none
	// of the rows has one (the chart then says so in its empty panel).
	NoBaselineWhy string
}

// NoBaselineText is what a percentile chart says in its empty difference
// panel when the baseline has no figures: "No baseline figures for this
// step and metric", and why when it is known.
func NoBaselineText(why string) string {
	t := "No baseline figures for this step and metric"
	if why != "" {
		t += ": " + why
	}
	return t
}

// graphicText is a text drawn in the chart (ECharts' graphic component):
// a fixed string, for what a panel would otherwise show by its emptiness.
type graphicText struct {
	Type  string `json:"type"`
	Left  string `json:"left"`
	Top   string `json:"top"`
	Style struct {
		Text       string  `json:"text"`
		Fill       string  `json:"fill"`
		FontSize   float32 `json:"fontSize"`
		LineHeight float32 `json:"lineHeight,omitempty"`
		Width      int     `json:"width,omitempty"`
		Overflow   string  `json:"overflow,omitempty"`
	} `json:"style"`
}

// PercentileBars draws two panels over the same percentiles: above, bars
// of candidate and baseline, each labelled with its value; below, the
// relative difference in % as a point with its confidence interval as an
// error bar and a line at 0, under the same percentile labels. When the
// baseline has no figure for any percentile, the empty panel says so
// (NoBaselineText).
//
// ECharts has no error-bar series and a custom series needs a JavaScript
// renderItem, which the CSP forbids; a boxplot item [lower, d, d, d, upper]
// draws exactly an error bar (whiskers with caps at the bounds, a flat box
// at the estimate), so the interval is a go-echarts boxplot series.
func PercentileBars(in PercentileInput) (json.RawMessage, Table, error) {
	if len(in.Rows) == 0 {
		return nil, Table{}, errors.New("charts: percentile bars: no rows")
	}
	candName, baseName := in.CandidateName, in.BaselineName
	if candName == "" {
		candName = "candidate"
	}
	if baseName == "" {
		baseName = "baseline"
	}
	if candName == baseName {
		return nil, Table{}, fmt.Errorf("charts: percentile bars: candidate and baseline both named %q", candName)
	}
	interval := "interval"
	if in.Confidence > 0 && in.Confidence < 1 {
		interval = num(in.Confidence*100) + " % interval"
	}

	labels := make([]string, len(in.Rows))
	cand := make([]opts.BarData, len(in.Rows))
	base := make([]opts.BarData, len(in.Rows))
	ci := make([]opts.BoxPlotData, len(in.Rows))
	diff := make([]dataItem, len(in.Rows))
	noBaseline := true
	t := Table{Head: []string{"Percentile", candName + unitSuffix(in.Unit), baseName + unitSuffix(in.Unit), "Difference", interval}}
	for i, r := range in.Rows {
		if r.Label == "" {
			return nil, Table{}, fmt.Errorf("charts: percentile bars: row %d has no label", i)
		}
		for _, v := range []float64{r.Candidate, r.Baseline, r.RelDiff, r.Lower, r.Upper} {
			if math.IsInf(v, 0) {
				return nil, Table{}, fmt.Errorf("charts: percentile bars: row %s: infinite value", r.Label)
			}
		}
		labels[i] = plainText(r.Label)
		cand[i] = barWithValue(r.Candidate)
		base[i] = barWithValue(r.Baseline)
		noBaseline = noBaseline && math.IsNaN(r.Baseline)
		// The difference as a labelled point (the label is fixed text).
		d := r.RelDiff * 100
		if math.IsNaN(d) {
			diff[i] = dataItem{Value: "-"}
		} else {
			diff[i] = dataItem{Value: round(d, 4), Label: &opts.Label{Show: opts.Bool(true), Formatter: pct(r.RelDiff), Position: "right"}}
		}
		text := r.Label + ": " + pct(r.RelDiff)
		if math.IsNaN(r.Lower) || math.IsNaN(r.Upper) || math.IsNaN(d) {
			ci[i] = opts.BoxPlotData{Value: []any{"-", "-", "-", "-", "-"}}
		} else {
			lo, hi := round(r.Lower*100, 4), round(r.Upper*100, 4)
			text += fmt.Sprintf(" (%s: %s to %s)", interval, pct(r.Lower), pct(r.Upper))
			ci[i] = opts.BoxPlotData{
				Value:   []float64{lo, round(d, 4), round(d, 4), round(d, 4), hi},
				Tooltip: &opts.Tooltip{Formatter: tipText(text)},
			}
		}
		t.Rows = append(t.Rows, []string{labels[i], num(r.Candidate), num(r.Baseline), pct(r.RelDiff), intervalText(r.Lower, r.Upper)})
	}

	c := newChart(opts.Tooltip{Show: opts.Bool(true), Trigger: "item"}, opts.Grid{})
	// Two grids: values above, differences below.
	c.GridList = []opts.Grid{
		{Left: "16", Right: "40", Top: "60", Height: "42%", ContainLabel: opts.Bool(true)},
		{Left: "16", Right: "40", Top: "72%", Bottom: "16", ContainLabel: opts.Bool(true)},
	}
	c.XAxisList = []opts.XAxis{
		{Type: "category", Data: labels, GridIndex: 0},
		{Type: "category", Data: labels, GridIndex: 1, AxisLabel: &opts.AxisLabel{Show: opts.Bool(true)}},
	}
	c.YAxisList = []opts.YAxis{
		{Type: "value", Name: axisName("Latency", in.Unit), GridIndex: 0},
		{Type: "value", Name: "Difference (%)", GridIndex: 1, AxisLabel: &opts.AxisLabel{Formatter: "{value} %"}},
	}

	cs := series(c, candName, "bar")
	cs.Data = cand
	cs.Color = ColorCandidate
	cs.SeriesTooltip = &opts.SeriesTooltip{Formatter: "{a}\n{b}: {c}" + tipText(unitSuffix(in.Unit))}
	bs := series(c, baseName, "bar")
	bs.Data = base
	bs.Color = ColorBaseline
	bs.SeriesTooltip = cs.SeriesTooltip

	ds := series(c, "Difference", "scatter")
	ds.Data = diff
	ds.XAxisIndex, ds.YAxisIndex = 1, 1
	ds.Color = colorInk
	ds.SymbolSize = 8
	ds.SeriesTooltip = &opts.SeriesTooltip{Formatter: "{b}: {c} %"}
	ds.MarkLines = &opts.MarkLines{
		Data: []any{markLineItem{
			Name: "no difference", YAxis: 0,
			Label:     &opts.Label{Show: opts.Bool(false)},
			LineStyle: &opts.LineStyle{Color: ColorGuide, Type: "solid", Width: 1},
		}},
		MarkLineStyle: opts.MarkLineStyle{Symbol: []string{"none", "none"}},
	}
	is := series(c, interval, "boxplot")
	is.Data = ci
	is.XAxisIndex, is.YAxisIndex = 1, 1
	is.Color = colorInk
	is.ItemStyle = &opts.ItemStyle{Color: "transparent", BorderColor: colorInk, BorderWidth: 1.5}

	c.MultiSeries = append(c.MultiSeries, cs, bs, is, ds)
	// Narrow whiskers: go-echarts has no boxWidth.
	x := extra{seriesFields: map[int]map[string]any{2: {"boxWidth": []int{8, 18}}}}
	if noBaseline {
		g := graphicText{Type: "text", Left: "center", Top: "80%"}
		g.Style.Text, g.Style.Fill, g.Style.FontSize = NoBaselineText(in.NoBaselineWhy), palette.MutedColour, 13
		g.Style.Width, g.Style.Overflow, g.Style.LineHeight = 560, "break", 18
		x.graphic = []any{g}
	}
	option, err := render(c, x)
	return option, t, err
}

// barWithValue is a bar labelled above with its value, as the table
// writes it (fixed text); a missing value is no bar and no label.
func barWithValue(v float64) opts.BarData {
	if math.IsNaN(v) {
		return opts.BarData{Value: "-"}
	}
	return opts.BarData{Value: round(v, 6), Label: &opts.Label{Show: opts.Bool(true), Position: "top", Formatter: plainText(num(v)), FontSize: 10}}
}

func intervalText(lo, hi float64) string {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return "–"
	}
	return pct(lo) + " to " + pct(hi)
}
