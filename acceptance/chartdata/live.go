package chartdata

import (
	"slices"
	"strings"
	"time"

	"github.com/accordlab/accord/acceptance"
)

// Live is what a running run's live charts draw from the probe's interim
// windows: TTFT p50 and p99 and the throughputs (requests and output
// tokens per second) of each window, one series per step and sweep level,
// and the stop-loss lines as they applied to each window (a relative line
// moves with the level's baseline). X is seconds since the first window
// began.
type Live struct {
	// Keys are the series (step and level) in the order they appeared:
	// a chart colours them in this order.
	Keys []LiveKey
	TTFT []LiveSeries // p50 and p99 per key
	// Throughput has requests/s and output tokens/s per key.
	Throughput []LiveSeries
	// Lines are the stop-loss lines on these metrics, a point per window.
	Lines   []LiveLine
	Windows []LiveWindow // in time order
}

// LiveKey is one series of a run: a step and a sweep level.
type LiveKey struct {
	Step, Level string
	// Label names it on a chart: the level, or step/level when the run
	// has several steps with interim windows.
	Label string
}

// LiveSeries is one statistic of one key over the run.
type LiveSeries struct {
	Key       int    // index into Keys
	Statistic string // p50, p99 (ms), requests/s, tokens/s
	Points    []Point
}

// LiveLine is one stop-loss line over the run.
type LiveLine struct {
	Name       string
	Metric     string
	Statistic  acceptance.Statistic
	Comparator acceptance.Comparator
	Points     []Point
}

// LiveWindow is one interim window with the figures the charts draw.
type LiveWindow struct {
	X          float64 // end of the window, seconds since the first began
	Key        int
	Repetition int
	N          int64 // requests with a TTFT in the window
	P50, P99   float64
	HasTTFT    bool
	Requests   *float64 // per second
	Tokens     *float64 // per second
}

// Statistics of the live series.
const (
	LiveP50      = "p50"
	LiveP99      = "p99"
	LiveRequests = "requests/s"
	LiveTokens   = "tokens/s"
)

// LiveFrom makes the live charts' data from interim snapshots (in the order
// they were recorded). linesAt gives the stop-loss lines of a window's
// step and level (nil: none); only lines on TTFT and the two throughputs
// are drawn. Snapshots without any of these metrics (a fio step) are left
// out.
func LiveFrom(snaps []acceptance.InterimSnapshot, linesAt func(step, level string) []acceptance.StopLossLine) Live {
	var out Live
	var kept []acceptance.InterimSnapshot
	for _, s := range snaps {
		if hasLiveMetric(s) {
			kept = append(kept, s)
		}
	}
	if len(kept) == 0 {
		return out
	}
	// The first window began WindowSec before it ended.
	t0 := kept[0].At
	if w := kept[0].WindowSec; w > 0 && finite(w) {
		t0 = t0.Add(-time.Duration(w * float64(time.Second)))
	}
	steps := map[string]bool{}
	for _, s := range kept {
		steps[s.Step] = true
	}
	keyOf := map[[2]string]int{}
	series := map[[2]int]int{} // key, statistic index → index into TTFT or Throughput
	lineOf := map[string]int{}
	stats := []string{LiveP50, LiveP99, LiveRequests, LiveTokens}
	add := func(key, stat int, x, y float64) {
		id := [2]int{key, stat}
		i, ok := series[id]
		list := &out.TTFT
		if stat >= 2 {
			list = &out.Throughput
		}
		if !ok {
			i = len(*list)
			series[id] = i
			*list = append(*list, LiveSeries{Key: key, Statistic: stats[stat]})
		}
		(*list)[i].Points = append((*list)[i].Points, Point{X: x, Y: y})
	}
	for _, s := range kept {
		k := [2]string{s.Step, s.Level}
		key, ok := keyOf[k]
		if !ok {
			key = len(out.Keys)
			keyOf[k] = key
			label := s.Level
			if len(steps) > 1 || label == "" {
				label = strings.Trim(s.Step+"/"+s.Level, "/")
			}
			out.Keys = append(out.Keys, LiveKey{Step: s.Step, Level: s.Level, Label: label})
		}
		x := s.At.Sub(t0).Seconds()
		w := LiveWindow{X: x, Key: key, Repetition: s.Repetition}
		if v, ok := s.Metrics[acceptance.MetricTTFT]; ok && v.N > 0 {
			w.N, w.P50, w.P99, w.HasTTFT = v.N, v.P50, v.P99, true
			add(key, 0, x, v.P50)
			add(key, 1, x, v.P99)
		}
		if v, ok := s.Metrics[acceptance.MetricRequestThroughput]; ok && v.Rate != nil && finite(*v.Rate) {
			w.Requests = v.Rate
			add(key, 2, x, *v.Rate)
		}
		if v, ok := s.Metrics[acceptance.MetricOutputTokenThroughput]; ok && v.Rate != nil && finite(*v.Rate) {
			w.Tokens = v.Rate
			add(key, 3, x, *v.Rate)
		}
		out.Windows = append(out.Windows, w)
		if linesAt == nil {
			continue
		}
		for _, l := range linesAt(s.Step, s.Level) {
			if !liveLineMetric(l.Metric) || !finite(l.Value) {
				continue
			}
			i, ok := lineOf[l.Name]
			if !ok {
				i = len(out.Lines)
				lineOf[l.Name] = i
				out.Lines = append(out.Lines, LiveLine{Name: l.Name, Metric: l.Metric, Statistic: l.Statistic, Comparator: l.Comparator})
			}
			out.Lines[i].Points = append(out.Lines[i].Points, Point{X: x, Y: l.Value})
		}
	}
	slices.SortStableFunc(out.Windows, func(a, b LiveWindow) int {
		switch {
		case a.X < b.X:
			return -1
		case a.X > b.X:
			return 1
		}
		return 0
	})
	return out
}

func hasLiveMetric(s acceptance.InterimSnapshot) bool {
	for _, m := range []string{acceptance.MetricTTFT, acceptance.MetricRequestThroughput, acceptance.MetricOutputTokenThroughput} {
		if v, ok := s.Metrics[m]; ok && (v.N > 0 || v.Rate != nil) {
			return true
		}
	}
	return false
}

func liveLineMetric(m string) bool {
	return m == acceptance.MetricTTFT || m == acceptance.MetricRequestThroughput || m == acceptance.MetricOutputTokenThroughput
}
