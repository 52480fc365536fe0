package acceptance

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance/stats"
)

func hostM(host, metric string, values []float64, counts []int64) Measurement {
	return Measurement{Metric: metric, Step: "load", Level: "c=8", Repetition: 1, Host: host, Values: values, Counts: counts, Source: Source{Tool: "accord-probe"}}
}

// Throughputs add up, shares pool by their requests, distributions merge
// sample by sample (never an average of percentiles).
func TestCombineHosts(t *testing.T) {
	t.Parallel()
	errA := hostM("a", MetricErrorRate, []float64{0.1}, nil)
	errA.Trials = 100
	errB := hostM("b", MetricErrorRate, []float64{0.0}, nil)
	errB.Trials = 300
	ms := []Measurement{
		hostM("a", MetricRequestThroughput, []float64{10}, nil),
		hostM("b", MetricRequestThroughput, []float64{32}, nil),
		errA, errB,
		hostM("a", MetricTTFT, []float64{1, 2, 3}, nil),
		hostM("b", MetricTTFT, []float64{100}, nil),
		hostM("a", MetricITL, []float64{5, 10}, []int64{2, 3}),
		hostM("b", MetricITL, []float64{10, 20}, []int64{4, 1}),
		hostM("a", MetricClientCPU, []float64{12}, nil),
		hostM("b", MetricClientCPU, []float64{85}, nil),
	}
	out, warns := CombineHosts(ms)
	require.Empty(t, warns)
	by := map[string]Measurement{}
	for _, m := range out {
		require.Empty(t, m.Host)
		by[m.Metric] = m
	}
	require.Equal(t, []float64{42}, by[MetricRequestThroughput].Values)
	require.InDelta(t, 10.0/400, by[MetricErrorRate].Values[0], 1e-12, "10 failures in 400 requests")
	require.EqualValues(t, 400, by[MetricErrorRate].Trials)
	require.ElementsMatch(t, []float64{1, 2, 3, 100}, by[MetricTTFT].Values)
	require.Nil(t, by[MetricTTFT].Counts)
	require.Equal(t, []float64{5, 10, 20}, by[MetricITL].Values)
	require.Equal(t, []int64{2, 7, 1}, by[MetricITL].Counts)
	require.Equal(t, []float64{85}, by[MetricClientCPU].Values, "the worst host's self-check")

	// p99 of the merged sample is the slow host's 100 ms; averaging the
	// hosts' own p99s would have said 51.5.
	s, err := stats.NewSample(by[MetricTTFT].Values, nil)
	require.NoError(t, err)
	require.Equal(t, 100.0, s.Quantile(0.99))
}

// A series a host of the step lacks, or has only as a summary, is not
// combined: it is named in a warning instead of being under-counted.
func TestCombineHostsRefusesIncompleteSeries(t *testing.T) {
	t.Parallel()
	summary := hostM("b", MetricTTFT, nil, nil)
	summary.ToolSummary = map[string]float64{"p99": 12}
	ms := []Measurement{
		hostM("a", MetricRequestThroughput, []float64{10}, nil),
		hostM("b", MetricOutputTokenThroughput, []float64{10}, nil),
		hostM("a", MetricTTFT, []float64{1}, nil),
		summary,
	}
	out, warns := CombineHosts(ms)
	require.Empty(t, out)
	require.Len(t, warns, 3)
	require.Contains(t, warns[0], "output_token_throughput of step load at c=8, repetition 1 is not combined over the hosts: a did not measure it")
	require.Contains(t, warns[1], "request_throughput of step load at c=8, repetition 1 is not combined over the hosts: b did not measure it")
	require.Contains(t, warns[2], "host b has only the tool's summary")
}

// Comparability covers every host, whatever order the hosts were named in.
func TestCombineHostFacts(t *testing.T) {
	t.Parallel()
	x := map[string]string{"cpu": "EPYC", "nic": "CX7"}
	y := map[string]string{"cpu": "Xeon", "nic": "CX7"}
	a := CombineHostFacts([]HostFacts{{Role: "clients", Facts: x}, {Role: "clients", Facts: y}, {Role: "aggressor", Facts: x}})
	b := CombineHostFacts([]HostFacts{{Role: "aggressor", Facts: x}, {Role: "clients", Facts: y}, {Role: "clients", Facts: x}})
	require.Equal(t, a, b)
	require.Equal(t, "2", a["clients.hosts"])
	require.Len(t, CompareFacts(a, b), 0)
	c := CombineHostFacts([]HostFacts{{Role: "clients", Facts: x}, {Role: "clients", Facts: x}, {Role: "aggressor", Facts: x}})
	require.NotEmpty(t, CompareFacts(a, c), "one client differs")
}

// Hosts' request samples with send times combine second by second, so
// that a drift criterion can judge the hosts together.
func TestCombineHostsKeepsSendSeconds(t *testing.T) {
	t.Parallel()
	a := Measurement{Metric: MetricTTFT, Step: "s", Repetition: 1, Host: "a", Values: []float64{1, 2, 3}, SentIndex: []int64{0, 2}}
	b := Measurement{Metric: MetricTTFT, Step: "s", Repetition: 1, Host: "b", Values: []float64{10, 20, 30}, SentIndex: []int64{0, 1, 1}}
	out, warnings := CombineHosts([]Measurement{a, b})
	require.Empty(t, warnings)
	require.Len(t, out, 1)
	require.Equal(t, []float64{1, 2, 10, 3, 20, 30}, out[0].Values)
	require.Equal(t, []int64{0, 3, 4}, out[0].SentIndex)
	require.Contains(t, out[0].Source.Field, "second by second")

	b.SentIndex = nil // a host without send times: merged as before, without them
	out, _ = CombineHosts([]Measurement{a, b})
	require.Nil(t, out[0].SentIndex)
	require.Len(t, out[0].Values, 6)
}

// A relative criterion judged between multi-host runs whose one host
// differs in a fact that matters is INCOMPARABLE, naming that host on
// each side (the hosts of a role are placed by their facts, not by name).
func TestIncomparableNamesTheHost(t *testing.T) {
	t.Parallel()
	same := map[string]string{"kernel": "6.1.0"}
	newer := map[string]string{"kernel": "6.8.0"}
	cand := []HostFacts{{Role: "readers", Facts: same, Name: "lab-1"}, {Role: "readers", Facts: newer, Name: "lab-2"}, {Role: "writer", Facts: same, Name: "lab-3"}}
	base := []HostFacts{{Role: "readers", Facts: same, Name: "old-1"}, {Role: "readers", Facts: same, Name: "old-2"}, {Role: "writer", Facts: same, Name: "old-3"}}
	places := HostFactPlaces(cand)
	require.Equal(t, map[string]string{"readers[0]": "lab-1", "readers[1]": "lab-2", "writer[0]": "lab-3"}, places)
	ttft := func(scale float64) []Measurement {
		v := make([]float64, 400)
		for i := range v {
			v[i] = scale * float64(100+i%50)
		}
		return []Measurement{{Metric: MetricTTFT, Step: "read", Repetition: 1, Values: v}}
	}
	ev, err := Evaluate(EvaluationInput{
		Gates: GateSetSpec{Name: "g", Criteria: []Criterion{{Name: "ttft-p50", Metric: MetricTTFT, Statistic: StatP50, Mode: Relative,
			Comparator: LessOrEqual, Threshold: 10, Unit: "%", Severity: Blocking}}}.Normalized(),
		Candidate: ttft(1), Baseline: ttft(1),
		CandidateFacts: CombineHostFacts(cand), BaselineFacts: CombineHostFacts(base),
		CandidateHosts: places, BaselineHosts: HostFactPlaces(base),
	})
	require.NoError(t, err)
	require.Equal(t, Incomparable, ev.Verdict)
	require.Equal(t, []FactDiff{{Fact: "readers[1].kernel", Candidate: "6.8.0", Baseline: "6.1.0", CandidateHost: "lab-2", BaselineHost: "old-2"}}, ev.Comparability.Differences)
	require.Contains(t, ev.Criteria[0].Series[0].Explanation, "readers[1].kernel (6.8.0 on host lab-2 vs 6.1.0 on the baseline's host old-2)")
}
