package charts

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// FioPercentile is one completion-latency percentile of a fio job.
type FioPercentile struct {
	Label string  // "p50", "p99", "p99.9"
	Value float64 // in FioInput.LatencyUnit
}

// FioJob is one fio job in one direction.
type FioJob struct {
	Job         string // fio's job name
	Direction   string // "read", "write" or "trim"
	Percentiles []FioPercentile
	Bandwidth   float64 // bytes per second
	IOPS        float64
}

// FioInput is the fio step of a run.
type FioInput struct {
	LatencyUnit string // of the percentiles; "us" (canonical) when empty
	Jobs        []FioJob
}

// percentileShades run light to dark as percentiles rise.
var percentileShades = []string{"#a9c7f0", "#6d9fe0", "#1f5fbf", "#14407f", "#0a2148"}

// directionColors colour fio directions.
var directionColors = map[string]string{"read": ColorCandidate, "write": "#e8710a", "trim": ColorBaseline}

// logRatio is the max/min ratio of bar values above which FioLatency uses
// a log axis: beyond it p50 bars would be too short to read next to p99.9.
const logRatio = 50

// FioLatency draws the latency percentiles of each job and direction as
// grouped bars, one colour per percentile. The latency axis is
// logarithmic when the largest value exceeds the smallest 50-fold.
func FioLatency(in FioInput) (json.RawMessage, Table, error) {
	if len(in.Jobs) == 0 {
		return nil, Table{}, errors.New("charts: fio latency: no jobs")
	}
	unit := in.LatencyUnit
	if unit == "" {
		unit = "us"
	}
	var labels []string // percentile labels in order of first appearance
	seen := map[string]bool{}
	cats := make([]string, len(in.Jobs))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, j := range in.Jobs {
		cats[i] = jobCategory(j)
		for _, p := range j.Percentiles {
			if !finite(p.Value) || p.Value < 0 {
				return nil, Table{}, fmt.Errorf("charts: fio latency: job %s: %s is %v", cats[i], p.Label, p.Value)
			}
			if !seen[p.Label] {
				seen[p.Label] = true
				labels = append(labels, p.Label)
			}
			lo, hi = min(lo, p.Value), max(hi, p.Value)
		}
	}
	if len(labels) == 0 {
		return nil, Table{}, errors.New("charts: fio latency: no percentiles")
	}
	yAxis := opts.YAxis{Type: "value", Name: axisName("Completion latency", unit)}
	if lo > 0 && hi/lo > logRatio {
		yAxis.Type = "log"
	}
	c := newChart(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis", AxisPointer: &opts.AxisPointer{Type: "shadow"}}, defaultGrid())
	c.SetGlobalOptions(
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Data: cats}),
		charts.WithYAxisOpts(yAxis),
	)
	t := Table{Head: []string{"Job"}}
	for _, l := range labels {
		t.Head = append(t.Head, l+unitSuffix(unit))
	}
	rows := make([][]string, len(in.Jobs))
	for i := range rows {
		rows[i] = append(make([]string, 0, len(labels)+1), cats[i])
	}
	for k, l := range labels {
		data := make([]opts.BarData, len(in.Jobs))
		for i, j := range in.Jobs {
			v, ok := percentileOf(j, l)
			if ok {
				data[i] = opts.BarData{Value: round(v, 6)}
				rows[i] = append(rows[i], num(v))
			} else {
				data[i] = opts.BarData{Value: "-"}
				rows[i] = append(rows[i], "–")
			}
		}
		bs := series(c, plainText(l), "bar")
		bs.Data = data
		bs.Color = percentileShades[min(k, len(percentileShades)-1)]
		c.MultiSeries = append(c.MultiSeries, bs)
	}
	t.Rows = rows
	option, err := render(c, extra{})
	return option, t, err
}

// FioBandwidth draws the bandwidth of each job in MiB/s, one bar colour
// per direction, with the value on the bar; the table adds IOPS.
func FioBandwidth(in FioInput) (json.RawMessage, Table, error) {
	if len(in.Jobs) == 0 {
		return nil, Table{}, errors.New("charts: fio bandwidth: no jobs")
	}
	var jobs, dirs []string
	jobIdx := map[string]int{}
	dirIdx := map[string]int{}
	t := Table{Head: []string{"Job", "Direction", "Bandwidth (MiB/s)", "Bandwidth (B/s)", "IOPS"}}
	for _, j := range in.Jobs {
		if !finite(j.Bandwidth) || j.Bandwidth < 0 || !finite(j.IOPS) || j.IOPS < 0 {
			return nil, Table{}, fmt.Errorf("charts: fio bandwidth: job %s: bandwidth %v, IOPS %v", jobCategory(j), j.Bandwidth, j.IOPS)
		}
		if _, ok := jobIdx[j.Job]; !ok {
			jobIdx[j.Job] = len(jobs)
			jobs = append(jobs, plainText(j.Job))
		}
		if _, ok := dirIdx[j.Direction]; !ok {
			dirIdx[j.Direction] = len(dirs)
			dirs = append(dirs, j.Direction)
		}
		t.Rows = append(t.Rows, []string{j.Job, j.Direction, num(j.Bandwidth / mib), num(j.Bandwidth), num(j.IOPS)})
	}
	data := make([][]opts.BarData, len(dirs))
	for d := range data {
		data[d] = make([]opts.BarData, len(jobs))
		for k := range data[d] {
			data[d][k] = opts.BarData{Value: "-"}
		}
	}
	for _, j := range in.Jobs {
		cell := &data[dirIdx[j.Direction]][jobIdx[j.Job]]
		if cell.Value != "-" {
			return nil, Table{}, fmt.Errorf("charts: fio bandwidth: job %s given twice", jobCategory(j))
		}
		*cell = opts.BarData{Value: round(j.Bandwidth/mib, 5)}
	}
	c := newChart(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis", AxisPointer: &opts.AxisPointer{Type: "shadow"}}, defaultGrid())
	c.SetGlobalOptions(
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Data: jobs}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "Bandwidth (MiB/s)"}),
	)
	for d, dir := range dirs {
		bs := series(c, plainText(dir), "bar")
		bs.Data = data[d]
		bs.Color = directionColors[dir]
		if bs.Color == "" {
			bs.Color = Palette[(d+3)%len(Palette)]
		}
		bs.Label = &opts.Label{Show: opts.Bool(true), Position: "top", Formatter: "{c}"}
		c.MultiSeries = append(c.MultiSeries, bs)
	}
	option, err := render(c, extra{})
	return option, t, err
}

const mib = 1 << 20

func jobCategory(j FioJob) string {
	if j.Direction == "" {
		return plainText(j.Job)
	}
	return plainText(j.Job + " · " + j.Direction)
}

func percentileOf(j FioJob, label string) (float64, bool) {
	for _, p := range j.Percentiles {
		if p.Label == label {
			return p.Value, true
		}
	}
	return 0, false
}
