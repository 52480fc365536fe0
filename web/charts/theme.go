// Package charts builds the ECharts options of Accord's run, compare and
// trend pages with go-echarts, as JSON that a page writes into
// <script type="application/json"> and static/js/charts.js hands to
// echarts.setOption.
//
// The pages run under a strict Content-Security-Policy without eval, so an
// option never holds a JavaScript function: every formatter is an ECharts
// string template ("{value} %", "{a}<br/>{b}") or a fixed string computed
// here, and tests check that no "function" reaches the JSON.
//
// Large series are reduced on the server (see LTTB and MinMax) so that a
// page carries a few thousand points per series, whatever the run's size.
// Every builder also returns a Table of what it plotted, for the page's
// "The data" section.
package charts

import (
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/web/palette"

	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/go-echarts/go-echarts/v2/types"
)

// Colours with a meaning, the same on every chart and in the signed
// report's figures (web/palette).
const (
	ColorCandidate = palette.CandidateColour
	ColorBaseline  = palette.BaselineColour
	ColorLimit     = palette.LimitColour
	ColorGuide     = palette.GuideColour
	colorInk       = palette.InkColour
)

// Palette colours series that have no role (hosts on the trend page,
// telemetry lines), in order. Red is left out: it means a limit.
var Palette = palette.Series

// Role gives a series its colour by meaning (web/palette's roles).
type Role = palette.Role

const (
	// RoleNone takes the colour from Palette by the series' position.
	RoleNone      = palette.None
	RoleCandidate = palette.Candidate
	RoleBaseline  = palette.Baseline
	// RoleOther is a further run beside the candidate (the compare page's
	// third run and on), coloured by its position among those.
	RoleOther = palette.Other
)

// colourer hands a chart's series their colours in order: by role, a
// RoleOther series by its position among the RoleOther series, a
// RoleNone series by its position among all.
type colourer struct{ others int }

func (c *colourer) next(r Role, i int) string {
	if r == RoleOther {
		c.others++
		return palette.Of(r, c.others-1)
	}
	return palette.Of(r, i)
}

// Point is one (x, y) point (acceptance/chartdata's, which reduces
// series).
type Point = chartdata.Point

// Limit is a gate threshold drawn as a marked line with its label
// ("p99 limit 2000 ms"). Vertical on CDFs, horizontal elsewhere.
type Limit struct {
	Value float64
	Label string
}

// Table is the plotted data as text, for the page's "The data" section
// (convertible to web.ChartTable).
type Table struct {
	Head []string
	Rows [][]string
}

// newChart is the shared look: no title (the page has headings), no
// animation (screenshots and tests see a finished chart), a legend on top,
// tooltips, and a grid with room for the legend and axis names.
func newChart(tooltip opts.Tooltip, grid opts.Grid) *charts.RectChart {
	c := charts.NewLine() // a rectangular chart; each series sets its own type
	c.SetGlobalOptions(
		charts.WithAnimation(false),
		charts.WithColorsOpts(opts.Colors(Palette)),
		charts.WithTooltipOpts(tooltip),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Type: "scroll", Top: "0"}),
		charts.WithGridOpts(grid),
	)
	return &c.RectChart
}

// defaultGrid leaves room for the legend and the y axis name above and
// the x axis name below.
func defaultGrid() opts.Grid {
	return opts.Grid{Left: "16", Right: "40", Top: "60", Bottom: "40", ContainLabel: opts.Bool(true)}
}

// sliderGrid also leaves room for a zoom slider below the x axis name.
func sliderGrid() opts.Grid {
	g := defaultGrid()
	g.Bottom = "84"
	return g
}

// series makes a series of the given type with the chart's defaults.
func series(c *charts.RectChart, name, typ string) charts.SingleSeries {
	s := charts.SingleSeries{Name: name, Type: typ}
	s.InitSeriesDefaultOpts(c.BaseConfiguration)
	return s
}

// extra is what go-echarts has no field for, added to its option by
// render. Every chart gets, beyond go-echarts:
//   - tooltip.renderMode "richText" and confine: ECharts' HTML tooltips
//     write style attributes, which the pages' CSP (style-src 'self')
//     refuses; rich-text tooltips are drawn on the canvas.
//   - yAxis nameTextStyle.align "left" on left-hand axes (a name above
//     the axis would be cut at the chart's left edge), and an offset for
//     each right-hand axis after the first, so that their labels do not
//     overlap.
type extra struct {
	// pointerPrecision, when above 0, gives the axis pointer's labels
	// that many decimals (they show the raw value otherwise).
	pointerPrecision int
	// useUTC makes a time axis label in UTC rather than the browser's zone.
	useUTC bool
	// timeLabels labels the time x axis by tick level (a date at day
	// ticks, a time at hour ticks): ECharts takes an object of templates,
	// go-echarts' formatter only a string.
	timeLabels bool
	// seriesFields adds fields to series by index.
	seriesFields map[int]map[string]any
	// graphic are elements drawn over the chart (ECharts' graphic
	// component): text saying what an empty panel means.
	graphic []any
}

// rightAxisOffset is the room one right-hand y axis takes.
const rightAxisOffset = 56

// richTooltip adds renderMode and confine to go-echarts' Tooltip; its
// AxisPointer hides the embedded one so that a label precision can be set.
type richTooltip struct {
	opts.Tooltip
	RenderMode  string `json:"renderMode"`
	Confine     bool   `json:"confine"`
	AxisPointer any    `json:"axisPointer,omitempty"`
}

type axisPointer struct {
	Type  string `json:"type,omitempty"`
	Label *struct {
		Precision int `json:"precision"`
	} `json:"label,omitempty"`
}

// xAxisTime replaces go-echarts' axis label with one by tick level.
type xAxisTime struct {
	opts.XAxis
	AxisLabel timeAxisLabel `json:"axisLabel"`
}

type timeAxisLabel struct {
	HideOverlap bool              `json:"hideOverlap"`
	Formatter   map[string]string `json:"formatter"`
}

// yAxisExtra adds nameTextStyle and offset to go-echarts' YAxis.
type yAxisExtra struct {
	opts.YAxis
	NameTextStyle *struct {
		Align string `json:"align"`
	} `json:"nameTextStyle,omitempty"`
	Offset int `json:"offset,omitempty"`
}

// render marshals the option: go-echarts' JSON() is the option as ECharts
// reads it, with what it has no field for added (see extra).
func render(c *charts.RectChart, x extra) (json.RawMessage, error) {
	option := c.JSON()

	tt := richTooltip{Tooltip: c.Tooltip, RenderMode: "richText", Confine: true}
	if ap := c.Tooltip.AxisPointer; ap != nil {
		p := axisPointer{Type: ap.Type}
		if x.pointerPrecision > 0 {
			p.Label = &struct {
				Precision int `json:"precision"`
			}{x.pointerPrecision}
		}
		tt.AxisPointer = p
	}
	option["tooltip"] = tt

	axes := make([]yAxisExtra, len(c.YAxisList))
	right := 0
	for i, y := range c.YAxisList {
		axes[i].YAxis = y
		if y.Position == "right" {
			axes[i].Offset = right * rightAxisOffset
			right++
		} else if y.Name != "" {
			axes[i].NameTextStyle = &struct {
				Align string `json:"align"`
			}{"left"}
		}
	}
	option["yAxis"] = axes

	if x.useUTC {
		option["useUTC"] = true
	}
	if x.timeLabels && len(c.XAxisList) > 0 {
		option["xAxis"] = []any{xAxisTime{XAxis: c.XAxisList[0], AxisLabel: timeAxisLabel{
			HideOverlap: true,
			Formatter: map[string]string{
				"year": "{yyyy}", "month": "{yyyy}-{MM}", "day": "{MM}-{dd}",
				"hour": "{HH}:{mm}", "minute": "{HH}:{mm}", "second": "{HH}:{mm}:{ss}",
				"millisecond": "{HH}:{mm}:{ss}", "none": "{yyyy}-{MM}-{dd} {HH}:{mm}",
			},
		}}}
	}
	if len(x.graphic) > 0 {
		option["graphic"] = x.graphic
	}
	if len(x.seriesFields) > 0 {
		ss := make([]any, len(c.MultiSeries))
		for i, s := range c.MultiSeries {
			ss[i] = s
			if f := x.seriesFields[i]; len(f) > 0 {
				ss[i] = seriesWithExtra{s, f}
			}
		}
		option["series"] = ss
	}
	b, err := json.Marshal(option)
	if err != nil {
		return nil, fmt.Errorf("charts: marshal option: %w", err)
	}
	return b, nil
}

// seriesWithExtra is a go-echarts series plus some fields.
type seriesWithExtra struct {
	charts.SingleSeries
	extra map[string]any
}

func (s seriesWithExtra) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(s.SingleSeries)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range s.extra {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("series %s: field %s: %w", s.Name, k, err)
		}
		m[k] = raw
	}
	return json.Marshal(m)
}

// markLineItem is one marked line with its own label and style.
// go-echarts' MarkLineName{X,Y}AxisItem have no label or line style, and
// MarkLines.Data takes any value, so the items are our own.
type markLineItem struct {
	Name      string          `json:"name,omitempty"`
	XAxis     any             `json:"xAxis,omitempty"`
	YAxis     any             `json:"yAxis,omitempty"`
	Label     *opts.Label     `json:"label,omitempty"`
	LineStyle *opts.LineStyle `json:"lineStyle,omitempty"`
}

// dataItem is a data item with its own name, label and tooltip (fixed
// text): go-echarts' LineData and ScatterData have no label or tooltip.
type dataItem struct {
	Name    string        `json:"name,omitempty"`
	Value   any           `json:"value"`
	Label   *opts.Label   `json:"label,omitempty"`
	Tooltip *opts.Tooltip `json:"tooltip,omitempty"`
}

// limitSeries is an empty line series that carries the limits as marked
// lines, so that the legend shows "Gate limits" and can hide them, and the
// lines do not depend on any data series being shown.
func limitSeries(c *charts.RectChart, limits []Limit, vertical bool, unit string) charts.SingleSeries {
	s := series(c, "Gate limits", "line")
	s.Data = []any{}
	s.Color = ColorLimit
	s.LineStyle = &opts.LineStyle{Color: ColorLimit, Type: "dashed"}
	items := make([]any, 0, len(limits))
	for _, l := range limits {
		label := l.Label
		if label == "" {
			label = "limit " + num(l.Value) + unitSuffix(unit)
		}
		it := markLineItem{
			Name:      plainText(label),
			Label:     &opts.Label{Show: opts.Bool(true), Formatter: plainText(label), Color: ColorLimit},
			LineStyle: &opts.LineStyle{Color: ColorLimit, Type: "dashed", Width: 1.5},
		}
		if vertical {
			it.XAxis = round(l.Value, 6)
			it.Label.Position = "insideEndTop"
		} else {
			it.YAxis = round(l.Value, 6)
			it.Label.Position = "insideEndTop"
		}
		items = append(items, it)
	}
	s.MarkLines = &opts.MarkLines{
		Data:          items,
		MarkLineStyle: opts.MarkLineStyle{Symbol: []string{"none", "none"}},
	}
	return s
}

// plainText keeps a fixed label from being read as an ECharts template:
// braces would start a placeholder or rich-text block.
func plainText(s string) string {
	return strings.NewReplacer("{", "(", "}", ")").Replace(s)
}

// tipText is a fixed tooltip of lines. Tooltips are rich text (see
// extra), not HTML: lines are joined with a newline and braces, which
// would open a template or rich-text block, are replaced.
func tipText(lines ...string) types.FuncStr {
	for i, l := range lines {
		lines[i] = plainText(l)
	}
	return types.FuncStr(strings.Join(lines, "\n"))
}

// unitSuffix is " ms" for "ms" and "" for no unit.
func unitSuffix(unit string) string {
	if unit == "" {
		return ""
	}
	return " " + unit
}

// axisName is "Latency (ms)" or "Latency".
func axisName(name, unit string) string {
	if unit == "" {
		return name
	}
	return name + " (" + unit + ")"
}

// round keeps digits significant digits, so the JSON stays short.
func round(v float64, digits int) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', digits, 64), 64)
	if err != nil {
		return v
	}
	return r
}

// num formats a value for tables and labels: whole numbers from 1000
// up, four significant digits below, no exponent.
func num(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	r := round(v, 4)
	if math.Abs(v) >= 1000 {
		r = math.Round(v)
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// pct formats a fraction as a signed percentage: 0.1234 → "+12.3 %".
func pct(frac float64) string {
	if math.IsNaN(frac) {
		return "–"
	}
	return fmt.Sprintf("%+.1f %%", frac*100)
}

// pairs turns points into [x, y] pairs rounded for the JSON, the form
// ECharts reads fastest (go-echarts' Data field takes any JSON value; an
// opts.LineData per point would only add a {"value": …} wrapper).
func pairs(pts []Point, xDigits, yDigits int) [][2]float64 {
	out := make([][2]float64, len(pts))
	for i, p := range pts {
		out[i] = [2]float64{round(p.X, xDigits), round(p.Y, yDigits)}
	}
	return out
}

// brokenAtGaps is a line's [x, y] pairs, rounded as pairs does, with a
// break ([x, "-"]: ECharts leaves an empty value undrawn and does not join
// the points around it) wherever two consecutive points are more than
// maxStep apart: a stretch with nothing measured in it (the warm-up of
// the next repetition, another step) is not drawn as if it had been.
func brokenAtGaps(pts []Point, maxStep float64, xDigits, yDigits int) []any {
	out := make([]any, 0, len(pts))
	for i, p := range pts {
		if i > 0 && p.X-pts[i-1].X > maxStep {
			out = append(out, []any{round((p.X+pts[i-1].X)/2, xDigits), "-"})
		}
		out = append(out, [2]float64{round(p.X, xDigits), round(p.Y, yDigits)})
	}
	return out
}

// checkFinite reports the first NaN or infinite value of a series.
func checkFinite(what string, pts []Point) error {
	if err := chartdata.CheckFinite(pts); err != nil {
		return fmt.Errorf("charts: %s: %w", what, err)
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// paddedMax is an axis maximum that shows v (a limit beyond the data):
// ECharts leaves marked lines out of an axis' extent.
func paddedMax(v float64) float64 {
	if v <= 0 {
		return 0
	}
	return niceCeil(v * 1.08)
}

// logExtent is a log axis' extent over [lo, hi] (lo > 0): the powers of
// ten around them, what ECharts picks for data alone; set explicitly
// because marked lines are not part of an axis' extent.
func logExtent(lo, hi float64) (float64, float64) {
	return math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
}

// runTimeAxis is the x axis of seconds since a run's start, from the
// whole second before the first point to the one after the last.
func runTimeAxis(t0, t1 float64) opts.XAxis {
	ax := opts.XAxis{Type: "value", Name: "Time since start (s)", NameLocation: "middle", NameGap: 28}
	if t0 <= t1 {
		lo, hi := math.Floor(t0), math.Ceil(t1)
		if hi == lo {
			hi++
		}
		ax.Min, ax.Max = lo, hi
	}
	return ax
}

// niceCeil rounds up to a round number: 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6
// or 8 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if v <= m*p*(1+1e-12) {
			return m * p
		}
	}
	return 10 * p
}
