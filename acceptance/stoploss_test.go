package acceptance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type stopLossBundle struct {
	start time.Time
	seq   int64
}

func setupStopLoss(t *testing.T) *stopLossBundle {
	t.Helper()
	return &stopLossBundle{start: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
}

// window makes the next interim snapshot of step decode at c=16 with the
// given TTFT p99 (and the other statistics around it).
func (b *stopLossBundle) window(p99 float64) InterimSnapshot {
	b.seq++
	return InterimSnapshot{
		Step: "decode", Level: "c=16", Repetition: 1, Seq: b.seq, At: b.start.Add(time.Duration(b.seq) * 2 * time.Second),
		Metrics: map[string]InterimValue{MetricTTFT: {N: 200, Mean: p99 / 3, P50: p99 / 4, P95: p99 / 1.5, P99: p99, Max: p99 * 2}},
	}
}

func ttftStopLossGates(k int) GateSetSpec {
	c := absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 2, "s")
	c.StopLoss = new(5.0) // seconds, like the threshold
	g := gateSet(c, absoluteCriterion(MetricTTFT, StatP50, LessOrEqual, 1000, "ms"))
	g.StopLossConsecutive = k
	return g
}

func TestStopLossNeedsKConsecutiveBreaches(t *testing.T) {
	t.Parallel()
	b := setupStopLoss(t)
	mon, err := NewStopLossMonitor(ttftStopLossGates(3), nil)
	require.NoError(t, err)
	require.Equal(t, 1, mon.Lines())
	require.Equal(t, []StopLossLine{{Name: "c0", Metric: MetricTTFT, Statistic: StatP99, Comparator: LessOrEqual, Value: 5000}}, mon.LinesAt("decode", "c=16"),
		"an absolute line in the canonical unit, the same at every level")

	// k − 1 breaches do not trigger; a window under the line resets.
	for _, p99 := range []float64{6000, 7000, 4000, 5500, 5200} {
		_, tripped := mon.Observe(b.window(p99))
		require.False(t, tripped, "p99 %v", p99)
	}
	// A window of another step, without TTFT, changes nothing.
	b.seq++
	_, tripped := mon.Observe(InterimSnapshot{Step: "fio-warmup", Seq: b.seq, Metrics: map[string]InterimValue{MetricReadCLat: {N: 10, P99: 1e9}}})
	require.False(t, tripped)
	// Neither does a window with no requests completed.
	b.seq++
	_, tripped = mon.Observe(InterimSnapshot{Step: "decode", Level: "c=16", Seq: b.seq, Metrics: map[string]InterimValue{MetricTTFT: {}}})
	require.False(t, tripped)
	// A value exactly on the line is not past it.
	_, tripped = mon.Observe(b.window(5000))
	require.False(t, tripped)

	for _, p99 := range []float64{5100, 5300} {
		_, tripped := mon.Observe(b.window(p99))
		require.False(t, tripped)
	}
	breach, tripped := mon.Observe(b.window(9000))
	require.True(t, tripped)
	require.Equal(t, 0, breach.Criterion)
	require.Equal(t, "c0", breach.Name)
	require.Equal(t, 5000.0, breach.Line)
	require.Equal(t, "ms", breach.Unit)
	require.Equal(t, "p99", breach.Interim)
	require.Equal(t, 3, breach.Consecutive)
	require.Len(t, breach.Breaches, 3)
	var vals []float64
	for _, p := range breach.Breaches {
		vals = append(vals, p.Value)
		require.Equal(t, "c=16", p.Level)
		require.Equal(t, int64(200), p.N)
	}
	require.Equal(t, []float64{5100, 5300, 9000}, vals)
	require.Equal(t, b.start.Add(time.Duration(b.seq)*2*time.Second), breach.Breaches[2].At)
	require.Equal(t, b.seq, breach.Breaches[2].Seq)
	require.Equal(t, "Stop-loss: p99 TTFT crossed the 5,000 ms line in 3 consecutive interim windows (5,100 ms, 5,300 ms and 9,000 ms; step decode at c=16, 2026-03-01T10:00:18Z to 2026-03-01T10:00:22Z).", breach.Explanation)

	// Once triggered it stays triggered, with the same breach.
	again, tripped := mon.Observe(b.window(100))
	require.True(t, tripped)
	require.Same(t, breach, again)
}

func TestStopLossKFromTheGateSet(t *testing.T) {
	t.Parallel()
	b := setupStopLoss(t)
	mon, err := NewStopLossMonitor(ttftStopLossGates(1), nil)
	require.NoError(t, err)
	_, tripped := mon.Observe(b.window(4999))
	require.False(t, tripped)
	_, tripped = mon.Observe(b.window(5001))
	require.True(t, tripped)

	// Default k is 3.
	g := ttftStopLossGates(0)
	mon, err = NewStopLossMonitor(g, nil)
	require.NoError(t, err)
	for i := range 3 {
		_, tripped = mon.Observe(b.window(8000))
		require.Equal(t, i == 2, tripped)
	}
}

func TestStopLossRelativeLinesUseTheBaseline(t *testing.T) {
	t.Parallel()
	b := setupStopLoss(t)
	c := relativeCriterion(MetricOutputTokenThroughput, StatRate, GreaterOrEqual, 25)
	c.StopLoss = new(-10.0)
	c.Step = "decode"
	p999 := relativeCriterion(MetricTTFT, StatP999, LessOrEqual, 5)
	p999.StopLoss = new(50.0)
	g := gateSet(c, p999)
	g.StopLossConsecutive = 2

	baseline := []Measurement{
		{Metric: MetricOutputTokenThroughput, Step: "decode", Level: "c=16", Repetition: 1, Values: []float64{900}},
		{Metric: MetricOutputTokenThroughput, Step: "decode", Level: "c=16", Repetition: 2, Values: []float64{1100}},
		{Metric: MetricTTFT, Step: "decode", Level: "c=16", Repetition: 1, Values: sequence(1000)},
		{Metric: MetricOutputTokenThroughput, Step: "other", Repetition: 1, Values: []float64{5}},
	}
	points, err := BaselinePoints(g, baseline)
	require.NoError(t, err)
	require.Equal(t, []BaselinePoint{
		{Metric: MetricOutputTokenThroughput, Statistic: StatRate, Step: "decode", Level: "c=16", Value: 1000},
		{Metric: MetricTTFT, Statistic: StatP99, Step: "decode", Level: "c=16", Value: 990},
	}, points)

	mon, err := NewStopLossMonitor(g, points)
	require.NoError(t, err)
	require.Equal(t, 2, mon.Lines())
	// Drawn, a relative line is the baseline's value moved by its percentage.
	require.Equal(t, []StopLossLine{
		{Name: "c0", Metric: MetricOutputTokenThroughput, Statistic: StatRate, Comparator: GreaterOrEqual, Value: 900, Relative: true},
		{Name: "c1", Metric: MetricTTFT, Statistic: StatP99, Comparator: LessOrEqual, Value: 1485, Relative: true},
	}, mon.LinesAt("decode", "c=16"))
	require.Empty(t, mon.LinesAt("decode", "c=64"), "no baseline for the level")
	require.Empty(t, mon.LinesAt("other", ""), "the throughput line is the decode step's; the baseline has no TTFT there")
	snap := func(rate, p99 float64) InterimSnapshot {
		s := b.window(p99)
		s.Metrics[MetricOutputTokenThroughput] = InterimValue{Rate: &rate}
		return s
	}
	// −5 % and −20 %, then back to −9 %: reset.
	for _, rate := range []float64{950, 800, 910} {
		_, tripped := mon.Observe(snap(rate, 1000))
		require.False(t, tripped)
	}
	// A level without a baseline value is not judged.
	s := snap(100, 1000)
	s.Level = "c=64"
	_, tripped := mon.Observe(s)
	require.False(t, tripped)

	_, tripped = mon.Observe(snap(850, 1000))
	require.False(t, tripped)
	breach, tripped := mon.Observe(snap(700, 1000))
	require.True(t, tripped)
	require.Equal(t, "c0", breach.Name)
	require.Equal(t, "%", breach.Unit)
	require.Len(t, breach.Breaches, 2)
	require.InDelta(t, -15, *breach.Breaches[0].Relative, 1e-9)
	require.InDelta(t, -30, *breach.Breaches[1].Relative, 1e-9)
	require.Equal(t, 1000.0, *breach.Breaches[1].Baseline)
	require.Contains(t, breach.Explanation, "crossed the −10 % against the baseline line in 2 consecutive interim windows (−15 % and −30 %")
}

func TestStopLossMapsMissingPercentiles(t *testing.T) {
	t.Parallel()
	b := setupStopLoss(t)
	c := absoluteCriterion(MetricTTFT, StatP999, LessOrEqual, 2000, "ms")
	c.StopLoss = new(3000.0)
	g := gateSet(c)
	g.StopLossConsecutive = 1
	mon, err := NewStopLossMonitor(g, nil)
	require.NoError(t, err)
	breach, tripped := mon.Observe(b.window(3500))
	require.True(t, tripped)
	require.Equal(t, "p99", breach.Interim)
	require.Contains(t, breach.Note, "nearest, p99")
	require.Contains(t, breach.Explanation, "Note: interim windows carry no p99.9")

	f, n := interimStatistic(StatP90)
	require.Equal(t, StatP95, f)
	require.NotEmpty(t, n)
	f, n = interimStatistic(StatMean)
	require.Equal(t, StatMean, f)
	require.Empty(t, n)

	_, err = NewStopLossMonitor(gateSet(absoluteCriterion("bogus", StatP99, LessOrEqual, 1, "ms")), nil)
	require.Error(t, err)
}

// The final evaluation's estimates are held against the stop-loss lines:
// relative lines by the relative change, either comparator, and series not
// comparable with their baseline never cross.
func TestFinalStopLoss(t *testing.T) {
	ptr := func(v float64) *float64 { return &v }
	throughputLine, latencyLine := -10.0, 2.0
	g := GateSetSpec{Name: "g", Criteria: []Criterion{
		{Name: "uplift", Metric: MetricOutputTokenThroughput, Statistic: StatRate, Mode: Relative, Comparator: GreaterOrEqual,
			Threshold: 5, Unit: "%", StopLoss: &throughputLine, Severity: Blocking},
		{Name: "ttft", Metric: MetricTTFT, Statistic: StatP99, Mode: Absolute, Comparator: LessOrEqual,
			Threshold: 1, Unit: "s", StopLoss: &latencyLine, Severity: Blocking},
	}}.Normalized()
	eval := func(uplift, ttft SeriesResult) Evaluation {
		return Evaluation{Criteria: []CriterionResult{{Index: 0, Series: []SeriesResult{uplift}}, {Index: 1, Series: []SeriesResult{ttft}}}}
	}
	fine := SeriesResult{Step: "serve", Estimate: ptr(-4), Verdict: Fail}
	fast := SeriesResult{Step: "serve", Estimate: ptr(1500), Verdict: Fail}

	b, err := FinalStopLoss(g, eval(fine, fast))
	require.NoError(t, err)
	require.Nil(t, b, "-4 %% is above the -10 %% line; 1.5 s is under the 2 s line")

	slow := SeriesResult{Step: "serve", Level: "c=64", Estimate: ptr(2100), Verdict: Fail, Candidate: SideSummary{N: 900}}
	b, err = FinalStopLoss(g, eval(fine, slow))
	require.NoError(t, err)
	require.NotNil(t, b)
	require.Equal(t, "ttft", b.Name)
	require.Equal(t, 1, b.Criterion)
	require.Equal(t, 2000.0, b.Line, "the line in the canonical unit, ms")
	require.Equal(t, int64(900), b.Breaches[0].N)
	require.Contains(t, b.Explanation, "2,100 ms in step serve at c=64")

	drop := SeriesResult{Step: "serve", Estimate: ptr(-12.5), Verdict: Fail, Candidate: SideSummary{Value: ptr(875)}, Baseline: &SideSummary{Value: ptr(1000)}}
	b, err = FinalStopLoss(g, eval(drop, slow))
	require.NoError(t, err)
	require.Equal(t, "uplift", b.Name, "the first crossing in the gate set's order")
	require.Equal(t, "%", b.Unit)
	require.Equal(t, -12.5, *b.Breaches[0].Relative)
	require.Equal(t, 1000.0, *b.Breaches[0].Baseline)

	drop.Verdict = Incomparable
	noEstimate := SeriesResult{Step: "serve", Verdict: Inconclusive}
	b, err = FinalStopLoss(g, eval(drop, noEstimate))
	require.NoError(t, err)
	require.Nil(t, b)
}
