// Package svgplot draws small static charts as SVG on the server: line
// plots (latency distributions, a sweep's throughput against latency) and
// grouped bar plots (percentiles), with limit lines and a legend. The
// signed report embeds them, so it needs no script, opens offline and
// prints. Every drawn value carries its number in a data- attribute, so a
// test (or a reader) can read the chart by value.
package svgplot

import (
	"errors"
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/accordlab/accord/web/palette"
)

// Size and margins of a chart, in SVG units (the SVG scales to its box).
const (
	width        = 720
	height       = 330
	marginLeft   = 72
	marginRight  = 24
	marginTop    = 44
	marginBottom = 58
)

// Colours are web/palette's, as on the pages' charts: the run in the
// candidate's blue, the baseline in its grey, limits in red; further run
// series take the palette's other colours, further baseline series
// other greys.
var (
	candidateColours = append([]string{palette.CandidateColour}, palette.Others...)
	baselineColours  = palette.BaselineShades
)

const limitColour = palette.LimitColour

// Axis is one axis of a plot.
type Axis struct {
	Label string
	// Log draws the axis logarithmically (all values must be > 0).
	Log bool
	// Min and Max fix the range (both zero: from the data).
	Min, Max float64
	// Percent writes tick labels of a 0..1 share as percentages.
	Percent bool
}

// Point is one (x, y) value.
type Point struct{ X, Y float64 }

// Series is one line of a line plot.
type Series struct {
	Name     string
	Baseline bool
	Dashed   bool
	// Markers draws a dot at every point, labelled with Labels[i] if set.
	Markers bool
	Labels  []string
	Points  []Point
}

// Limit is a gate's limit, drawn as a red dashed line across the plot:
// horizontal at Value on the y axis, or vertical on the x axis.
type Limit struct {
	Value    float64
	Label    string
	Vertical bool
}

// LinePlot is lines over two axes.
type LinePlot struct {
	Title  string
	X, Y   Axis
	Series []Series
	Limits []Limit
}

// Bar is one bar of a group.
type Bar struct {
	Series   string
	Baseline bool
	// Missing marks a value the series does not have (drawn as "n/a").
	Missing bool
	Value   float64
}

// BarGroup is the bars above one label (a percentile, a job).
type BarGroup struct {
	Label string
	Bars  []Bar
}

// BarPlot is groups of bars on one value axis.
type BarPlot struct {
	Title  string
	Y      Axis
	Groups []BarGroup
	Limits []Limit
}

// scale maps data values to SVG coordinates along one axis.
type scale struct {
	lo, hi     float64 // data range
	from, to   float64 // SVG range
	log        bool
	percent    bool
	ticks      []float64
	tickLabels []string
}

func newScale(a Axis, values []float64, from, to float64, zeroBased bool) (scale, error) {
	s := scale{from: from, to: to, log: a.Log, percent: a.Percent}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return s, fmt.Errorf("svgplot: value %v", v)
		}
		if a.Log && v <= 0 {
			continue // a log axis leaves out what it cannot show
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if a.Min != 0 || a.Max != 0 {
		lo, hi = a.Min, a.Max
	}
	if math.IsInf(lo, 0) {
		if a.Log {
			lo, hi = 1, 10
		} else {
			lo, hi = 0, 1
		}
	}
	if a.Log {
		lo = math.Pow(10, math.Floor(math.Log10(lo)))
		hi = math.Pow(10, math.Ceil(math.Log10(hi)))
		if hi <= lo {
			hi = lo * 10
		}
		s.lo, s.hi = lo, hi
		s.ticks = logTicks(lo, hi)
	} else {
		if zeroBased && lo > 0 {
			lo = 0
		}
		if hi <= lo {
			hi = lo + 1
		}
		step := niceStep((hi - lo) / 5)
		lo = math.Floor(lo/step) * step
		hi = math.Ceil(hi/step) * step
		s.lo, s.hi = lo, hi
		for i := 0; lo+float64(i)*step <= hi+step/2; i++ {
			s.ticks = append(s.ticks, roundTo(lo+float64(i)*step, step))
		}
	}
	for _, t := range s.ticks {
		s.tickLabels = append(s.tickLabels, s.format(t))
	}
	return s, nil
}

// at maps a value; ok is false for what a log axis cannot show.
func (s scale) at(v float64) (float64, bool) {
	var f float64
	if s.log {
		if v <= 0 {
			return 0, false
		}
		f = (math.Log10(v) - math.Log10(s.lo)) / (math.Log10(s.hi) - math.Log10(s.lo))
	} else {
		f = (v - s.lo) / (s.hi - s.lo)
	}
	f = math.Max(0, math.Min(1, f))
	return s.from + f*(s.to-s.from), true
}

func (s scale) format(v float64) string {
	if s.percent {
		return strconv.FormatFloat(math.Round(v*1e5)/1e3, 'f', -1, 64) + " %"
	}
	return Num(v)
}

// Num writes a number with up to four significant digits (1843, 0.25,
// 12.5k), as the charts label values.
func Num(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 4, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'g', 4, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// roundTo removes the float noise of adding steps (0.6000000000000001).
func roundTo(v, step float64) float64 {
	digits := math.Pow(10, math.Max(0, -math.Floor(math.Log10(step))+2))
	return math.Round(v*digits) / digits
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

func logTicks(lo, hi float64) []float64 {
	var out []float64
	decades := math.Log10(hi) - math.Log10(lo)
	for d := lo; d <= hi*1.0001; d *= 10 {
		out = append(out, d)
		if decades <= 2 && d*10 <= hi*1.0001 {
			out = append(out, 2*d, 5*d)
		}
	}
	return out
}

// svg collects the markup of one chart.
type svg struct {
	b strings.Builder
}

func (w *svg) printf(format string, args ...any) { fmt.Fprintf(&w.b, format, args...) }

func esc(s string) string { return html.EscapeString(s) }

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func (w *svg) open(title string) {
	w.printf(`<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" font-family="system-ui, Arial, sans-serif" font-size="12">`,
		width, height, width, height, esc(title))
	w.printf(`<title>%s</title>`, esc(title))
	w.printf(`<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`, width, height)
}

func (w *svg) close() string {
	w.b.WriteString(`</svg>`)
	return w.b.String()
}

// axes draws the frame, ticks, grid lines and axis labels.
func (w *svg) axes(x *scale, xLabel string, y scale, yLabel string) {
	left, right, top, bottom := float64(marginLeft), float64(width-marginRight), float64(marginTop), float64(height-marginBottom)
	for i, t := range y.ticks {
		py, _ := y.at(t)
		w.printf(`<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e3e7ec"/>`, f1(left), f1(py), f1(right), f1(py))
		w.printf(`<text class="tick" x="%s" y="%s" text-anchor="end" fill="#5b6675">%s</text>`, f1(left-6), f1(py+4), esc(y.tickLabels[i]))
	}
	if x != nil {
		for i, t := range x.ticks {
			px, _ := x.at(t)
			w.printf(`<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#eef1f4"/>`, f1(px), f1(top), f1(px), f1(bottom))
			w.printf(`<text class="tick" x="%s" y="%s" text-anchor="middle" fill="#5b6675">%s</text>`, f1(px), f1(bottom+16), esc(x.tickLabels[i]))
		}
	}
	w.printf(`<rect class="frame" x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#9aa3ae"/>`, f1(left), f1(top), f1(right-left), f1(bottom-top))
	w.printf(`<text class="axis-label" x="%s" y="%s" text-anchor="middle" fill="#1c2430">%s</text>`, f1((left+right)/2), f1(float64(height)-12), esc(xLabel))
	w.printf(`<text class="axis-label" transform="translate(16 %s) rotate(-90)" text-anchor="middle" fill="#1c2430">%s</text>`, f1((top+bottom)/2), esc(yLabel))
}

// legend draws the series names across the top.
func (w *svg) legend(items []legendItem) {
	x := float64(marginLeft)
	for _, it := range items {
		dash := ""
		if it.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		w.printf(`<g class="legend-item" data-series="%s"><line x1="%s" y1="24" x2="%s" y2="24" stroke="%s" stroke-width="3"%s/><text x="%s" y="28" fill="#1c2430">%s</text></g>`,
			esc(it.name), f1(x), f1(x+22), it.colour, dash, f1(x+27), esc(it.name))
		x += 40 + 6.5*float64(len([]rune(it.name)))
	}
}

type legendItem struct {
	name, colour string
	dashed       bool
}

// limits draws the gate limits.
func (w *svg) limits(ls []Limit, x *scale, y scale) {
	left, right, top, bottom := float64(marginLeft), float64(width-marginRight), float64(marginTop), float64(height-marginBottom)
	for i, l := range ls {
		if l.Vertical {
			if x == nil {
				continue
			}
			px, ok := x.at(l.Value)
			if !ok {
				continue
			}
			w.printf(`<line class="limit" data-value="%s" data-label="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="5 3"/>`,
				num(l.Value), esc(l.Label), f1(px), f1(top), f1(px), f1(bottom), limitColour)
			w.printf(`<text class="limit-label" x="%s" y="%s" fill="%s" text-anchor="end">%s</text>`, f1(px-4), f1(bottom-8-14*float64(i)), limitColour, esc(l.Label))
			continue
		}
		py, ok := y.at(l.Value)
		if !ok {
			continue
		}
		w.printf(`<line class="limit" data-value="%s" data-label="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="5 3"/>`,
			num(l.Value), esc(l.Label), f1(left), f1(py), f1(right), f1(py), limitColour)
		w.printf(`<text class="limit-label" x="%s" y="%s" fill="%s" text-anchor="end">%s</text>`, f1(right-4), f1(py-4), limitColour, esc(l.Label))
	}
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// SVG draws the line plot.
func (p LinePlot) SVG() (string, error) {
	if len(p.Series) == 0 {
		return "", errors.New("svgplot: line plot without series")
	}
	var xs, ys []float64
	for _, s := range p.Series {
		for _, pt := range s.Points {
			xs, ys = append(xs, pt.X), append(ys, pt.Y)
		}
	}
	for _, l := range p.Limits {
		if l.Vertical {
			xs = append(xs, l.Value)
		} else {
			ys = append(ys, l.Value)
		}
	}
	x, err := newScale(p.X, xs, marginLeft, width-marginRight, false)
	if err != nil {
		return "", err
	}
	y, err := newScale(p.Y, ys, height-marginBottom, marginTop, !p.Y.Log)
	if err != nil {
		return "", err
	}
	var w svg
	w.open(p.Title)
	w.axes(&x, p.X.Label, y, p.Y.Label)
	var legend []legendItem
	// A dashed series is another measure of the series before it of its
	// role (E2E after TTFT): it keeps that series' colour.
	nc, nb := 0, 0
	for _, s := range p.Series {
		palette, n := candidateColours, &nc
		if s.Baseline {
			palette, n = baselineColours, &nb
		}
		i := *n
		if s.Dashed && i > 0 {
			i--
		} else {
			*n++
		}
		colour := palette[i%len(palette)]
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		legend = append(legend, legendItem{name: s.Name, colour: colour, dashed: s.Dashed})
		var pts []string
		for _, pt := range s.Points {
			px, okx := x.at(pt.X)
			py, oky := y.at(pt.Y)
			if okx && oky {
				pts = append(pts, f1(px)+","+f1(py))
			}
		}
		w.printf(`<polyline class="series" data-series="%s" fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`, esc(s.Name), colour, dash, strings.Join(pts, " "))
		if s.Markers {
			for i, pt := range s.Points {
				px, okx := x.at(pt.X)
				py, oky := y.at(pt.Y)
				if !okx || !oky {
					continue
				}
				w.printf(`<circle class="point" data-series="%s" data-x="%s" data-y="%s" cx="%s" cy="%s" r="3.5" fill="%s"/>`, esc(s.Name), num(pt.X), num(pt.Y), f1(px), f1(py), colour)
				if i < len(s.Labels) && s.Labels[i] != "" {
					w.printf(`<text class="point-label" x="%s" y="%s" fill="#5b6675" font-size="10">%s</text>`, f1(px+5), f1(py-5), esc(s.Labels[i]))
				}
			}
		}
	}
	w.limits(p.Limits, &x, y)
	w.legend(legend)
	return w.close(), nil
}

// SVG draws the bar plot: each group's bars side by side.
func (p BarPlot) SVG() (string, error) {
	if len(p.Groups) == 0 {
		return "", errors.New("svgplot: bar plot without groups")
	}
	var values []float64
	var names []string
	baseline := map[string]bool{}
	for _, g := range p.Groups {
		for _, b := range g.Bars {
			if !b.Missing {
				values = append(values, b.Value)
			}
			if !slices.Contains(names, b.Series) {
				names = append(names, b.Series)
				baseline[b.Series] = b.Baseline
			}
		}
	}
	for _, l := range p.Limits {
		values = append(values, l.Value)
	}
	y, err := newScale(p.Y, values, height-marginBottom, marginTop, !p.Y.Log)
	if err != nil {
		return "", err
	}
	colours := map[string]string{}
	nc, nb := 0, 0
	var legend []legendItem
	for _, n := range names {
		if baseline[n] {
			colours[n] = baselineColours[nb%len(baselineColours)]
			nb++
		} else {
			colours[n] = candidateColours[nc%len(candidateColours)]
			nc++
		}
		legend = append(legend, legendItem{name: n, colour: colours[n]})
	}
	var w svg
	w.open(p.Title)
	w.axes(nil, "", y, p.Y.Label)
	left, right, bottom := float64(marginLeft), float64(width-marginRight), float64(height-marginBottom)
	groupW := (right - left) / float64(len(p.Groups))
	for gi, g := range p.Groups {
		gx := left + float64(gi)*groupW
		w.printf(`<text class="group-label" x="%s" y="%s" text-anchor="middle" fill="#1c2430">%s</text>`, f1(gx+groupW/2), f1(bottom+16), esc(g.Label))
		if len(g.Bars) == 0 {
			continue
		}
		barW := math.Min(36, groupW*0.8/float64(len(g.Bars)))
		start := gx + (groupW-barW*float64(len(g.Bars)))/2
		for bi, b := range g.Bars {
			bx := start + float64(bi)*barW
			if b.Missing {
				w.printf(`<text class="bar-missing" data-series="%s" data-group="%s" x="%s" y="%s" text-anchor="middle" fill="#5b6675" font-size="10">n/a</text>`,
					esc(b.Series), esc(g.Label), f1(bx+barW/2), f1(bottom-4))
				continue
			}
			top, ok := y.at(b.Value)
			if !ok {
				continue
			}
			base := bottom
			if y.log {
				base, _ = y.at(y.lo)
			} else if z, ok := y.at(0); ok {
				base = z
			}
			w.printf(`<rect class="bar" data-series="%s" data-group="%s" data-value="%s" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s %s: %s</title></rect>`,
				esc(b.Series), esc(g.Label), num(b.Value), f1(bx+1), f1(math.Min(top, base)), f1(barW-2), f1(math.Abs(base-top)), colours[b.Series],
				esc(b.Series), esc(g.Label), esc(Num(b.Value)))
		}
	}
	w.limits(p.Limits, nil, y)
	w.legend(legend)
	return w.close(), nil
}
