package chartdata

import (
	"math"

	"github.com/accordlab/accord/acceptance"
)

// Records aggregate a run folder's request and telemetry records as the
// ingest reads them, keeping per request only what the charts need.
type Records struct {
	requests int64
	steps    map[string]*stepRecords
	// Per second of the run: output tokens (spread over each request's
	// decoding) and completed requests. Whole seconds inside a request's
	// decoding go to tokenRate as differences (added up at the end), so a
	// request costs the same however long it lasted.
	tokens, tokenRate, done []float64
	last                    int // highest second with data, -1 when none
	quantities              []Quantity
	telemetry               [][]Point // by quantity
	notes                   []string
	// exactLimit is the most requests of a step kept one point each
	// (maxExactPoints; tests lower it); past it the step's requests go
	// into windows (windows.go).
	exactLimit int
}

// Quantity is one charted telemetry quantity. Group names the chart it is
// drawn on (GroupTelemetry when empty).
type Quantity struct {
	Key, Name, Unit string
	Group           string
}

// Groups of per-second series, one time chart each.
const (
	GroupThroughput = "throughput" // output tokens and requests per second
	GroupTelemetry  = "telemetry"  // the host's CPU, GPU, disk and NIC
	GroupStorage    = "storage"    // the NVMe namespaces' latency
	GroupFabric     = "fabric"     // RDMA and NIC error, congestion and pause counters as rates
)

// Request is one request record, its times in nanoseconds on its step's
// clock (0: did not happen).
type Request struct {
	Sent, FirstToken, Done int64
	OutputTokens           int64
	// Warmup: sent during warm-up (not measured); Failed: the request
	// failed.
	Warmup, Failed bool
}

type stepRecords struct {
	points, warmup []Point
	failed         int64
	// Past the exact limit: the measured and warm-up requests' windows
	// (points and warmup are then empty).
	win, warmWin *latencyWindows
}

// addPoint keeps a request's point, exactly or, past limit, in windows.
func (sr *stepRecords) addPoint(p Point, warmup bool, limit int) {
	if sr.win == nil && len(sr.points)+len(sr.warmup) >= limit {
		sr.win, sr.warmWin = newLatencyWindows(), newLatencyWindows()
		for _, q := range sr.points {
			sr.win.add(q)
		}
		for _, q := range sr.warmup {
			sr.warmWin.add(q)
		}
		sr.points, sr.warmup = nil, nil
	}
	switch {
	case sr.win != nil && warmup:
		sr.warmWin.add(p)
	case sr.win != nil:
		sr.win.add(p)
	case warmup:
		sr.warmup = append(sr.warmup, p)
	default:
		sr.points = append(sr.points, p)
	}
}

// NewRecords starts an aggregation whose telemetry holds the quantities,
// charted in that order.
func NewRecords(telemetry []Quantity) *Records {
	return &Records{steps: map[string]*stepRecords{}, last: -1, quantities: telemetry, telemetry: make([][]Point, len(telemetry)), exactLimit: maxExactPoints}
}

// Requests is the number of request records added.
func (a *Records) Requests() int64 { return a.requests }

// Note keeps what could not be read, for the chart data's notes.
func (a *Records) Note(msg string) { a.notes = append(a.notes, msg) }

// AddRequest adds one request of a step whose start is offset seconds
// into the run.
func (a *Records) AddRequest(step string, offset float64, rec Request) {
	sr := a.steps[step]
	if sr == nil {
		sr = &stepRecords{}
		a.steps[step] = sr
	}
	a.requests++
	if rec.Failed || rec.Done == 0 || rec.Sent == 0 {
		if !rec.Warmup {
			sr.failed++
		}
		return
	}
	if rec.FirstToken >= rec.Sent && rec.FirstToken > 0 {
		p := Point{X: offset + float64(rec.Sent)/1e9, Y: float64(rec.FirstToken-rec.Sent) / 1e6}
		if finite(p.X) && finite(p.Y) {
			sr.addPoint(p, rec.Warmup, a.exactLimit)
		}
	}
	// Throughput per second of the run.
	end := offset + float64(rec.Done)/1e9
	if !(end >= 0 && end < maxRunSeconds) {
		return
	}
	a.grow(int(end))
	a.done[int(end)]++
	if rec.OutputTokens <= 0 {
		return
	}
	start := end
	if rec.FirstToken > 0 && rec.FirstToken <= rec.Done {
		start = offset + float64(rec.FirstToken)/1e9
	}
	spreadOver(a.tokens, a.tokenRate, start, end, float64(rec.OutputTokens))
}

// AddTelemetry adds a sample of quantity q (an index of the quantities)
// at x seconds into the run.
func (a *Records) AddTelemetry(q int, x, y float64) {
	if finite(x) && finite(y) {
		a.telemetry[q] = append(a.telemetry[q], Point{X: x, Y: y})
	}
}

func (a *Records) grow(sec int) {
	if sec > a.last {
		a.last = sec
	}
	if sec >= len(a.done) {
		n := max(sec+1, 2*len(a.done), 64)
		a.done = append(a.done, make([]float64, n-len(a.done))...)
		a.tokens = append(a.tokens, make([]float64, n-len(a.tokens))...)
		a.tokenRate = append(a.tokenRate, make([]float64, n+1-len(a.tokenRate))...)
	}
}

// spreadOver adds amount over [start, end] seconds into per-second bins,
// in proportion to the time spent in each (all into end's bin when the
// interval is empty): the partial first and last seconds directly, the
// whole seconds between as a rate in the difference array diff (bin s gets
// the sum of diff[0..s]; diff has a slot more than bins).
func spreadOver(bins, diff []float64, start, end, amount float64) {
	if end-start <= 1e-9 {
		bins[int(end)] += amount
		return
	}
	rate := amount / (end - start)
	first, last := int(start), int(end)
	if first == last {
		bins[first] += amount
		return
	}
	bins[first] += rate * (float64(first+1) - start)
	bins[last] += rate * (end - float64(last))
	if first+1 < last {
		diff[first+1] += rate
		diff[last] -= rate
	}
}

// tokenSeconds adds the whole seconds' rates into the per-second tokens.
func (a *Records) tokenSeconds() {
	var rate float64
	for s := range a.tokens {
		rate += a.tokenRate[s]
		a.tokens[s] += rate
		a.tokenRate[s] = 0
	}
}

// overRun is a step's TTFT per request over the run: the scatter reduced
// with MinMaxSampled, the rolling p99 from every request.
func (a *Records) overRun(step string) (OverRun, bool, error) {
	sr := a.steps[step]
	if sr != nil && sr.win != nil {
		return a.overRunWindowed(step, sr), true, nil
	}
	if sr == nil || len(sr.points)+len(sr.warmup) == 0 {
		return OverRun{}, false, nil
	}
	SortPoints(sr.points)
	SortPoints(sr.warmup)
	window, rolling, err := RollingQuantile(sr.points, 0, overRunQuantile)
	if err != nil {
		return OverRun{}, false, err
	}
	or := OverRun{Metric: acceptance.MetricTTFT, Window: window, Quantile: overRunQuantile, Requests: int64(len(sr.points)),
		Points: pairs(MinMaxSampled(sr.points, ScatterPoints), 5), Rolling: pairs(rolling, 7),
		Warmup: pairs(MinMaxSampled(sr.warmup, ScatterPoints/4), 5), WarmupCount: int64(len(sr.warmup)), Failed: sr.failed}
	if or.Points == nil {
		or.Points = [][2]float64{}
	}
	if or.Rolling == nil {
		or.Rolling = [][2]float64{}
	}
	return or, true, nil
}

// overRunWindowed is overRun for a step kept in windows: each window's
// fastest and slowest request as the scatter, the rolling p99 from the
// windows' histograms over about as many windows as AutoWindow picks.
func (a *Records) overRunWindowed(step string, sr *stepRecords) OverRun {
	ext := sr.win.extremes()
	span := 0.0
	if len(ext) > 0 {
		span = ext[len(ext)-1].X - ext[0].X
	}
	window, rolling := sr.win.rolling(AutoWindow(span, int(min(sr.win.n, math.MaxInt32))), overRunQuantile)
	or := OverRun{Metric: acceptance.MetricTTFT, Window: window, Quantile: overRunQuantile, Requests: sr.win.n,
		Points: pairs(MinMaxSampled(ext, ScatterPoints), 5), Rolling: pairs(rolling, 7),
		Warmup: pairs(MinMaxSampled(sr.warmWin.extremes(), ScatterPoints/4), 5), WarmupCount: sr.warmWin.n, Failed: sr.failed,
		Windowed: windowedNote(step, sr.win.n, sr.win.width)}
	if or.Points == nil {
		or.Points = [][2]float64{}
	}
	if or.Rolling == nil {
		or.Rolling = [][2]float64{}
	}
	return or
}

// timeSeries lists throughput (per second of the run, from the requests)
// and telemetry, each reduced with LTTB.
func (a *Records) timeSeries() []TimeSeries {
	var out []TimeSeries
	if a.last >= 0 {
		a.tokenSeconds()
		first := 0
		for first < a.last && a.done[first] == 0 && a.tokens[first] == 0 {
			first++
		}
		tok := make([]Point, 0, a.last-first+1)
		req := make([]Point, 0, a.last-first+1)
		for s := first; s <= a.last; s++ {
			tok = append(tok, Point{X: float64(s) + 0.5, Y: a.tokens[s]})
			req = append(req, Point{X: float64(s) + 0.5, Y: a.done[s]})
		}
		out = append(out, timeSeriesOf(GroupThroughput, "Output tokens/s", "tok/s", tok), timeSeriesOf(GroupThroughput, "Requests/s", "req/s", req))
	}
	for q, pts := range a.telemetry {
		if len(pts) == 0 {
			continue
		}
		SortPoints(pts)
		qt := a.quantities[q]
		group := qt.Group
		if group == "" {
			group = GroupTelemetry
		}
		ts := timeSeriesOf(group, qt.Name, qt.Unit, pts)
		ts.Key = qt.Key
		out = append(out, ts)
	}
	return out
}

// timeSeriesOf reduces a series for drawing and keeps its exact summary.
func timeSeriesOf(group, name, unit string, pts []Point) TimeSeries {
	ts := TimeSeries{Group: group, Name: name, Unit: unit, N: int64(len(pts))}
	if len(pts) == 0 {
		return ts
	}
	ts.Min, ts.Max = math.Inf(1), math.Inf(-1)
	var sum float64
	for _, p := range pts {
		ts.Min, ts.Max = min(ts.Min, p.Y), max(ts.Max, p.Y)
		sum += p.Y
	}
	ts.Mean = sum / float64(len(pts))
	reduced := LTTB(pts, timeSeriesPoints)
	ts.Points = make([][2]float64, len(reduced))
	for i, p := range reduced {
		ts.Points[i] = [2]float64{roundSig(p.X, 7), roundSig(p.Y, 5)}
	}
	return ts
}

// pairs keeps points as [x, y]: x (seconds of the run) to 7 significant
// digits, y to ySig (a dot needs fewer than a table).
func pairs(pts []Point, ySig int) [][2]float64 {
	if len(pts) == 0 {
		return nil
	}
	out := make([][2]float64, len(pts))
	for i, p := range pts {
		out[i] = [2]float64{roundSig(p.X, 7), roundSig(p.Y, ySig)}
	}
	return out
}

// roundSig rounds to sig significant digits (keeps the documents small).
func roundSig(v float64, sig int) float64 {
	if v == 0 || !finite(v) {
		return v
	}
	p := math.Pow(10, float64(sig)-math.Ceil(math.Log10(math.Abs(v))))
	r := math.Round(v*p) / p
	if !finite(r) {
		return v
	}
	return r
}
