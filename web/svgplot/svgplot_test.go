package svgplot

import (
	"encoding/xml"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/web/palette"
)

// element is a parsed SVG element with its attributes.
type element struct {
	Name  string
	Attrs map[string]string
	Text  string
}

// parse reads an SVG as XML (it must be well formed) into its elements.
func parse(t *testing.T, doc string) []element {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(doc))
	var out []element
	var stack []int
	for {
		tok, err := dec.Token()
		if err != nil {
			require.ErrorContains(t, err, "EOF")
			break
		}
		switch x := tok.(type) {
		case xml.StartElement:
			e := element{Name: x.Name.Local, Attrs: map[string]string{}}
			for _, a := range x.Attr {
				e.Attrs[a.Name.Local] = a.Value
			}
			out = append(out, e)
			stack = append(stack, len(out)-1)
		case xml.CharData:
			if len(stack) > 0 {
				out[stack[len(stack)-1]].Text += string(x)
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	require.NotEmpty(t, out)
	require.Equal(t, "svg", out[0].Name)
	return out
}

func float(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return v
}

// Bars stand on the axis and their heights are proportional to their
// values; each carries its value; a missing value says n/a; names are
// escaped; the limit is drawn at its value.
func TestBarPlotDrawsValues(t *testing.T) {
	t.Parallel()
	doc, err := BarPlot{Title: `TTFT <p99> & co`, Y: Axis{Label: "ms"}, Groups: []BarGroup{
		{Label: "p50", Bars: []Bar{{Series: "run #2", Value: 100}, {Series: "baseline #1", Baseline: true, Value: 200}}},
		{Label: "p99", Bars: []Bar{{Series: "run #2", Value: 400}, {Series: "baseline #1", Baseline: true, Missing: true}}},
	}, Limits: []Limit{{Value: 300, Label: "p99 TTFT ≤ 300 ms"}}}.SVG()
	require.NoError(t, err)
	require.NotContains(t, doc, "<script")
	els := parse(t, doc)
	require.Equal(t, "TTFT <p99> & co", els[1].Text, "the title, escaped and read back")
	heights := map[float64]float64{}
	var bottom float64
	for _, e := range els {
		if e.Name == "rect" && e.Attrs["class"] == "bar" {
			v := float(t, e.Attrs["data-value"])
			heights[v] = float(t, e.Attrs["height"])
			b := float(t, e.Attrs["y"]) + heights[v]
			if bottom != 0 {
				require.InDelta(t, bottom, b, 0.2, "every bar stands on the axis")
			}
			bottom = b
		}
	}
	require.Len(t, heights, 3)
	require.InDelta(t, 2, heights[200]/heights[100], 0.02)
	require.InDelta(t, 4, heights[400]/heights[100], 0.02)
	var missing, limits int
	for _, e := range els {
		if e.Attrs["class"] == "bar-missing" {
			missing++
			require.Equal(t, "p99", e.Attrs["data-group"])
		}
		if e.Attrs["class"] == "limit" {
			limits++
			require.Equal(t, "300", e.Attrs["data-value"])
			// 300 lies three quarters of the way up from 0 to 400.
			y := float(t, e.Attrs["y1"])
			require.InDelta(t, bottom-heights[400]*0.75, y, 0.5)
		}
	}
	require.Equal(t, 1, missing)
	require.Equal(t, 1, limits)
}

// A log axis spans whole decades and places each point by its logarithm;
// markers carry their values; a vertical limit sits at its x.
func TestLinePlotLogAxis(t *testing.T) {
	t.Parallel()
	doc, err := LinePlot{Title: "distribution", X: Axis{Label: "ms", Log: true}, Y: Axis{Label: "share", Min: 0, Max: 1, Percent: true},
		Series: []Series{
			{Name: "TTFT run", Markers: true, Points: []Point{{10, 0.1}, {100, 0.5}, {1000, 1}}},
			{Name: "TTFT baseline", Baseline: true, Points: []Point{{20, 0.2}, {2000, 1}}},
		},
		Limits: []Limit{{Value: 100, Label: "p99 TTFT ≤ 100 ms", Vertical: true}}}.SVG()
	require.NoError(t, err)
	els := parse(t, doc)
	xs := map[float64]float64{}
	var lines int
	for _, e := range els {
		switch {
		case e.Attrs["class"] == "point":
			xs[float(t, e.Attrs["data-x"])] = float(t, e.Attrs["cx"])
		case e.Attrs["class"] == "series":
			lines++
		case e.Attrs["class"] == "limit":
			require.InDelta(t, xs[100], float(t, e.Attrs["x1"]), 0.2, "the limit at x = 100")
		}
	}
	require.Equal(t, 2, lines)
	require.Len(t, xs, 3)
	require.InDelta(t, xs[100]-xs[10], xs[1000]-xs[100], 0.2, "a decade is a decade")
	var ticks []string
	for _, e := range els {
		if e.Attrs["class"] == "tick" {
			ticks = append(ticks, e.Text)
		}
	}
	require.Contains(t, ticks, "100 %")
	require.Contains(t, ticks, "10")
	require.Contains(t, ticks, "1000")
	require.Contains(t, ticks, "10k", "the axis ends at the decade above 2000")
	require.Contains(t, ticks, "60 %")
}

func TestNum(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{1843.25: "1843", 0.25: "0.25", 12500: "12.5k", 3_200_000: "3.2M", 7: "7"} {
		require.Equal(t, want, Num(v))
	}
}

// The report's figures colour by role as the pages' charts do
// (web/palette): the run blue, the baseline grey; a dashed series keeps
// the colour of the one before it of its role; a second run series takes
// a colour that is neither.
func TestColoursByRole(t *testing.T) {
	t.Parallel()
	pts := []Point{{1, 0.5}, {2, 1}}
	doc, err := LinePlot{X: Axis{Label: "x"}, Y: Axis{Label: "y"}, Series: []Series{
		{Name: "TTFT run", Points: pts}, {Name: "TTFT base", Baseline: true, Points: pts},
		{Name: "E2E run", Dashed: true, Points: pts}, {Name: "E2E base", Baseline: true, Dashed: true, Points: pts},
		{Name: "another run", Points: pts},
	}}.SVG()
	require.NoError(t, err)
	stroke := map[string]string{}
	for _, e := range parse(t, doc) {
		if e.Name == "polyline" {
			stroke[e.Attrs["data-series"]] = e.Attrs["stroke"]
		}
	}
	require.Equal(t, map[string]string{
		"TTFT run": palette.CandidateColour, "TTFT base": palette.BaselineColour,
		"E2E run": palette.CandidateColour, "E2E base": palette.BaselineColour,
		"another run": palette.Others[0],
	}, stroke)

	doc, err = BarPlot{Y: Axis{Label: "ms"}, Groups: []BarGroup{{Label: "p50", Bars: []Bar{{Series: "run", Value: 2}, {Series: "base", Baseline: true, Value: 1}}}}}.SVG()
	require.NoError(t, err)
	fill := map[string]string{}
	for _, e := range parse(t, doc) {
		if e.Name == "rect" && e.Attrs["class"] == "bar" {
			fill[e.Attrs["data-series"]] = e.Attrs["fill"]
		}
	}
	require.Equal(t, map[string]string{"run": palette.CandidateColour, "base": palette.BaselineColour}, fill)
}
