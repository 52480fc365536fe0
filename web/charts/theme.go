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
	"encoding/json"
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/go-echarts/go-echarts/v2/types"
)

// Colours with a meaning, the same on every chart (they match the page's
// stylesheet: the accent blue, the muted grey and the failure red).
const (
	ColorCandidate = "#1f5fbf"
	ColorBaseline  = "#8a94a3"
	ColorLimit     = "#b42318"
	ColorGuide     = "#9aa4b2"
	colorInk       = "#1c2430"
)

// Palette colours series that have no role (runs on the compare page, hosts
// on the trend page), in order. Red is left out: it means a limit.
var Palette = []string{"#1f5fbf", "#e8710a", "#1b7f3b", "#8e44ad", "#0f9d9a", "#b5892f", "#5b6675", "#d4609b"}

// Role gives a series its colour by meaning.
type Role string

const (
	// RoleNone takes the colour from Palette by the series' position.
	RoleNone      Role = ""
	RoleCandidate Role = "candidate"
	RoleBaseline  Role = "baseline"
)

// colorFor picks the colour of the i-th series of a chart.
func colorFor(r Role, i int) string {
	switch r {
	case RoleCandidate:
		return ColorCandidate
	case RoleBaseline:
		return ColorBaseline
	}
	return Palette[i%len(Palette)]
}

// Point is one (x, y) point. Series given to the builders and the
// downsamplers are ordered by X.
type Point struct{ X, Y float64 }

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
// tooltips, and a grid with room for axis names and a zoom slider.
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

// defaultGrid leaves room for the legend above and axis names below.
func defaultGrid() opts.Grid {
	return opts.Grid{Left: "16", Right: "40", Top: "44", Bottom: "64", ContainLabel: opts.Bool(true)}
}

// series makes a series of the given type with the chart's defaults.
func series(c *charts.RectChart, name, typ string) charts.SingleSeries {
	s := charts.SingleSeries{Name: name, Type: typ}
	s.InitSeriesDefaultOpts(c.BaseConfiguration)
	return s
}

// render marshals the option. go-echarts' JSON() is the option as
// ECharts reads it; extend, when given, adds what go-echarts has no field
// for (each use says what and why).
func render(c *charts.RectChart, extend func(option map[string]any)) (json.RawMessage, error) {
	option := c.JSON()
	if extend != nil {
		extend(option)
	}
	b, err := json.Marshal(option)
	if err != nil {
		return nil, fmt.Errorf("charts: marshal option: %w", err)
	}
	return b, nil
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

// tipText is a fixed tooltip: ECharts sets a tooltip string as HTML, so
// each line (which may hold names typed by users) is escaped, and the
// lines are joined with <br/>.
func tipText(lines ...string) types.FuncStr {
	for i, l := range lines {
		lines[i] = html.EscapeString(plainText(l))
	}
	return types.FuncStr(strings.Join(lines, "<br/>"))
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

// checkFinite reports the first NaN or infinite value of a series.
func checkFinite(what string, pts []Point) error {
	for i, p := range pts {
		if !finite(p.X) || !finite(p.Y) {
			return fmt.Errorf("charts: %s: point %d is (%v, %v)", what, i, p.X, p.Y)
		}
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// sortedByX returns pts ordered by X, copying only when they are not.
func sortedByX(pts []Point) []Point {
	for i := 1; i < len(pts); i++ {
		if pts[i].X < pts[i-1].X {
			cp := append([]Point(nil), pts...)
			sortPoints(cp)
			return cp
		}
	}
	return pts
}

// paddedMax is an axis maximum that shows v (a limit beyond the data):
// ECharts leaves marked lines out of an axis' extent.
func paddedMax(v float64) float64 {
	if v <= 0 {
		return 0
	}
	return niceCeil(v * 1.08)
}

// niceCeil rounds up to 1, 2, 2.5, 5 or 10 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*p*(1+1e-12) {
			return m * p
		}
	}
	return 10 * p
}
