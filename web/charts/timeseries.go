package charts

import (
	"github.com/accordlab/accord/acceptance/chartdata"

	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// DefaultLinePoints bounds the points of one line series over time.
const DefaultLinePoints = 3000

// maxUnitAxes is how many different units one chart can carry: one axis
// on the left, the others stacked on the right.
const maxUnitAxes = 4

// TimeSeries is one measured quantity over a run (X in seconds since the
// run's start): tokens/s, requests/s, CPU %, GPU %, disk or NIC bytes/s.
type TimeSeries struct {
	Name   string
	Unit   string // series with the same unit share a y axis
	Role   Role
	Points []Point
}

// TimeSeriesInput is throughput and telemetry over a run.
type TimeSeriesInput struct {
	Series []TimeSeries
	// MaxPoints bounds the points per series (DefaultLinePoints when 0).
	MaxPoints int
}

// OverTime draws each series as a line, reduced with LTTB (rates and
// utilisation are read for their shape; the table keeps each series'
// exact min, mean and max). Series of different units get their own y
// axis: the first unit on the left, up to three more on the right.
func OverTime(in TimeSeriesInput) (json.RawMessage, Table, error) {
	if len(in.Series) == 0 {
		return nil, Table{}, errors.New("charts: over time: no series")
	}
	maxPts := in.MaxPoints
	if maxPts <= 0 {
		maxPts = DefaultLinePoints
	}
	var units []string
	axisOf := map[string]int{}
	t0, t1 := math.Inf(1), math.Inf(-1)
	for _, s := range in.Series {
		if err := checkFinite("over time: series "+s.Name, s.Points); err != nil {
			return nil, Table{}, err
		}
		for _, p := range s.Points {
			t0, t1 = min(t0, p.X), max(t1, p.X)
		}
		if _, ok := axisOf[s.Unit]; !ok {
			axisOf[s.Unit] = len(units)
			units = append(units, s.Unit)
		}
	}
	if len(units) > maxUnitAxes {
		return nil, Table{}, fmt.Errorf("charts: over time: %d units %q, at most %d fit one chart", len(units), units, maxUnitAxes)
	}

	grid := sliderGrid()
	right := 40
	if len(units) > 1 {
		right = 16 + rightAxisOffset*(len(units)-1)
	}
	grid.Right = strconv.Itoa(right)
	grid.ContainLabel = opts.Bool(false) // the right-hand axes are placed by offset
	grid.Left = "64"
	c := newChart(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}, grid)
	c.SetGlobalOptions(
		charts.WithXAxisOpts(runTimeAxis(t0, t1)),
		charts.WithDataZoomOpts(
			opts.DataZoom{Type: "inside", XAxisIndex: 0},
			opts.DataZoom{Type: "slider", XAxisIndex: 0},
		),
	)
	c.YAxisList = c.YAxisList[:0]
	for i, u := range units {
		y := opts.YAxis{Type: "value", Name: u, AlignTicks: opts.Bool(i > 0)}
		if i > 0 {
			y.Position = "right"
			y.SplitLine = &opts.SplitLine{Show: opts.Bool(false)}
		}
		if u == "%" {
			y.Min = 0
		}
		c.YAxisList = append(c.YAxisList, y)
	}

	t := Table{Head: []string{"Series", "Unit", "Points", "min", "mean", "max"}}
	var col colourer
	for i, s := range in.Series {
		pts := chartdata.SortedByX(s.Points)
		ls := series(c, s.Name, "line")
		ls.Data = pairs(chartdata.LTTB(pts, maxPts), 7, 6)
		ls.Color = col.next(s.Role, i)
		ls.ShowSymbol = opts.Bool(false)
		ls.Symbol = "none"
		ls.YAxisIndex = axisOf[s.Unit]
		ls.LineStyle = &opts.LineStyle{Color: ls.Color, Width: 1.5}
		c.MultiSeries = append(c.MultiSeries, ls)
		t.Rows = append(t.Rows, summaryRow(s.Name, s.Unit, pts))
	}
	option, err := render(c, extra{})
	return option, t, err
}

func summaryRow(name, unit string, pts []Point) []string {
	if len(pts) == 0 {
		return []string{name, unit, "0", "–", "–", "–"}
	}
	lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
	for _, p := range pts {
		lo, hi, sum = min(lo, p.Y), max(hi, p.Y), sum+p.Y
	}
	return []string{name, unit, strconv.Itoa(len(pts)), num(lo), num(sum / float64(len(pts))), num(hi)}
}
