package acceptance

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJudgeClient(t *testing.T) {
	t.Parallel()
	healthy := ClientHealth{OpenLoop: true, LatenessP99Ms: 12, TickDelayP99Ms: 20, Ticks: 300, ProbeCPUPct: 3}
	flagged, reasons := JudgeClient(healthy)
	require.False(t, flagged)
	require.Empty(t, reasons)

	rq := 199.0
	for _, tc := range []struct {
		h    ClientHealth
		want string
	}{
		{ClientHealth{OpenLoop: true, LatenessP99Ms: 1736}, "late: the load generator sent requests p99 1736 ms after their intended times (limit 100 ms)"},
		{ClientHealth{TickDelayP99Ms: 400, Ticks: 100}, "starved: a 10 ms ticker in the probe woke p99 400 ms late"},
		{ClientHealth{ProbeCPUPct: 97}, "CPU-bound: the probe used 97 % of the CPUs it may run on"},
		{ClientHealth{ProbeRunQueuePct: &rq}, "starved: the probe's threads waited for a CPU 199 % of the time"},
	} {
		flagged, reasons := JudgeClient(tc.h)
		require.True(t, flagged, tc.want)
		require.Contains(t, reasons[0], tc.want)
	}
	// A closed loop has no lateness: a stray value is not read.
	flagged, _ = JudgeClient(ClientHealth{OpenLoop: false, LatenessP99Ms: 5000})
	require.False(t, flagged)
}

// clientMeasurements are one level's self-check readings, late by lateMs
// at p99.
func clientMeasurements(step, level string, rep int, lateMs float64) []Measurement {
	return []Measurement{
		{Metric: MetricClientLateness, Step: step, Level: level, Repetition: rep, Values: []float64{2, lateMs}, Counts: []int64{98, 2}, Source: Source{Tool: "accord-probe"}},
		{Metric: MetricClientTickDelay, Step: step, Level: level, Repetition: rep, Values: []float64{1, 3}, Counts: []int64{290, 10}, Source: Source{Tool: "accord-probe"}},
		{Metric: MetricClientCPU, Step: step, Level: level, Repetition: rep, Values: []float64{4}, Source: Source{Tool: "accord-probe"}},
	}
}

func TestClientLimitedLevelIsNotJudged(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	ttftMs := lognormalMeasurements(r, MetricTTFT, "decode", 1, 3000, 100, 0.3, 1)
	for i := range ttftMs {
		ttftMs[i].Level = "r=8"
	}
	late := append(append([]Measurement{}, ttftMs...), clientMeasurements("decode", "r=8", 1, 1736)...)
	ok := append(append([]Measurement{}, ttftMs...), clientMeasurements("decode", "r=8", 1, 12)...)
	gates := gateSet(absoluteCriterion(MetricTTFT, StatP99, LessOrEqual, 1000, "ms"),
		absoluteCriterion(MetricClientCPU, StatRate, LessOrEqual, 50, "%"))

	ev := evaluate(t, EvaluationInput{Gates: gates, Candidate: ok})
	require.Equal(t, Pass, ev.Criteria[0].Verdict)
	require.Empty(t, ev.ClientFlags)

	ev = evaluate(t, EvaluationInput{Gates: gates, Candidate: late})
	require.Len(t, ev.ClientFlags, 1)
	require.Equal(t, ClientFlag{Step: "decode", Level: "r=8", Repetition: 1,
		Reasons: []string{"late: the load generator sent requests p99 1736 ms after their intended times (limit 49 ms, half the level's TTFT p50 of 99 ms)"}}, ev.ClientFlags[0])
	sr := ev.Criteria[0].Series[0]
	require.Equal(t, Inconclusive, sr.Verdict)
	require.Equal(t, reasonClientLimited, sr.Reason)
	require.Nil(t, sr.PValue)
	require.Contains(t, sr.Explanation, "The load generator was late or starved on step decode at r=8")
	require.Contains(t, sr.Explanation, "accept_client_limited: true")
	require.Contains(t, ev.Explanation, "INCONCLUSIVE")
	// The self-check's own metrics are judged on their own.
	require.NotEqual(t, reasonClientLimited, ev.Criteria[1].Series[0].Reason)

	gates.AcceptClientLimited = true
	ev = evaluate(t, EvaluationInput{Gates: gates, Candidate: late})
	require.True(t, ev.AcceptClientLimited)
	require.Len(t, ev.ClientFlags, 1, "the flag is shown even when accepted")
	sr = ev.Criteria[0].Series[0]
	require.Equal(t, Pass, sr.Verdict)
	require.Contains(t, sr.Explanation, "the gate set accepts such levels (accept_client_limited: true)")

	// A relative criterion is held back by a late baseline too.
	gates = gateSet(relativeCriterion(MetricTTFT, StatP99, LessOrEqual, 10))
	ev = evaluate(t, EvaluationInput{Gates: gates, Candidate: ok, Baseline: late})
	require.Len(t, ev.BaselineClientFlags, 1)
	require.Equal(t, reasonClientLimited, ev.Criteria[0].Series[0].Reason)
	require.Contains(t, ev.Criteria[0].Series[0].Explanation, "the baseline's repetition 1")
}

// The client's delays are held to a share of the level's own TTFT where
// that is below the absolute limits: the recorded lab run local-2
// (handlers/testdata/labruns) at c=4 had a TTFT p99 of 25.2 ms while its
// ticker woke 28.3 ms late at p99 on a host at 93 % CPU pressure.
func TestJudgeClientHoldsDelaysToTheLevelsTTFT(t *testing.T) {
	t.Parallel()
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name string
		h    ClientHealth
		want string // "" for not flagged
	}{
		{"recorded local-2 c=4", ClientHealth{Ticks: 120, TickDelayP99Ms: 28.27, HostCPUPressurePct: f(92.7), TTFTP50Ms: f(2.64), TTFTP99Ms: f(25.23)},
			"starved: a 10 ms ticker in the probe woke p99 28 ms late (limit 6.3 ms, a quarter of the level's TTFT p99 of 25 ms on a saturated host: CPU pressure 93 %)"},
		{"the same on a host that is not saturated", ClientHealth{Ticks: 120, TickDelayP99Ms: 28.27, HostCPUPressurePct: f(50), TTFTP50Ms: f(2.64), TTFTP99Ms: f(25.23)},
			"starved: a 10 ms ticker in the probe woke p99 28 ms late (limit 13 ms, half the level's TTFT p99 of 25 ms)"},
		{"recorded fabric-1 c=1: the server's tail", ClientHealth{Ticks: 120, TickDelayP99Ms: 7.84, HostCPUPressurePct: f(87.4), TTFTP50Ms: f(10.46), TTFTP99Ms: f(74.19)}, ""},
		{"below the 5 ms floor", ClientHealth{Ticks: 120, TickDelayP99Ms: 2.09, HostCPUPressurePct: f(95.3), TTFTP50Ms: f(2.45), TTFTP99Ms: f(3.9)}, ""},
		{"late against a 10 ms TTFT", ClientHealth{OpenLoop: true, LatenessP99Ms: 12, TTFTP50Ms: f(10), TTFTP99Ms: f(40)},
			"late: the load generator sent requests p99 12 ms after their intended times (limit 5.0 ms, half the level's TTFT p50 of 10 ms)"},
		{"late, but a long TTFT keeps the absolute limit", ClientHealth{OpenLoop: true, LatenessP99Ms: 62, TTFTP50Ms: f(800), TTFTP99Ms: f(900)}, ""},
		{"without a TTFT, the absolute limits", ClientHealth{OpenLoop: true, LatenessP99Ms: 62, Ticks: 100, TickDelayP99Ms: 51}, ""},
	} {
		flagged, reasons := JudgeClient(tc.h)
		if tc.want == "" {
			require.False(t, flagged, "%s: %q", tc.name, reasons)
			continue
		}
		require.True(t, flagged, tc.name)
		require.Equal(t, []string{tc.want}, reasons, tc.name)
	}

	// From measurements: the level's TTFT samples set the limit.
	ttft := Measurement{Metric: MetricTTFT, Step: "chat", Level: "c=4", Repetition: 1, Values: []float64{2, 2.5, 3, 25}, Source: Source{Tool: "accord-probe"}}
	tick := Measurement{Metric: MetricClientTickDelay, Step: "chat", Level: "c=4", Repetition: 1, Values: []float64{0.5, 28}, Counts: []int64{98, 2}, Source: Source{Tool: "accord-probe"}}
	flags := ClientFlags([]Measurement{ttft, tick})
	require.Len(t, flags, 1)
	require.Contains(t, flags[0].Reasons[0], "half the level's TTFT p99 of 25 ms")
	require.Empty(t, ClientFlags([]Measurement{tick}), "28 ms is under the absolute 150 ms without a TTFT to hold it to")
}
