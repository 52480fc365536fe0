package web

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/web/htmltest"
)

// The verdict panel of a run judged on isolation lays the victim alone
// beside the victim under interference, with the change and its bounds,
// as the gate engine computed them.
func TestVerdictPanelShowsQuietAgainstInterference(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 1))
	draw := func(step string, f float64) acceptance.Measurement {
		m := acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: step, Repetition: 1, Source: acceptance.Source{Tool: "accord-probe"}}
		for range 1000 {
			m.Values = append(m.Values, 50*f*math.Exp(0.1*r.NormFloat64()))
		}
		return m
	}
	gates := acceptance.GateSetSpec{SchemaVersion: 1, Name: "g", Criteria: []acceptance.Criterion{{
		Name: "ttft-isolation", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP50, Mode: acceptance.Isolation,
		Step: "noisy", Reference: "alone", Comparator: acceptance.LessOrEqual, Threshold: 10, Unit: "%", Severity: acceptance.Blocking}}}
	ev, err := acceptance.Evaluate(acceptance.EvaluationInput{Gates: gates, Candidate: []acceptance.Measurement{draw("alone", 1), draw("noisy", 3)}, Resamples: acceptance.MinResamples})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, VerdictPanel(ev).Render(context.Background(), &buf))
	doc := htmltest.Parse(t, buf.String())
	table := htmltest.ByID(doc, "isolation-figures")
	require.NotNil(t, table)
	rows := htmltest.Rows(table)
	require.Len(t, rows, 2)
	require.Equal(t, []string{"Criterion", "Series", "Alone", "Beside the aggressor", "Change", "Bounds", "Verdict"}, rows[0])
	sr := ev.Criteria[0].Series[0]
	require.Equal(t, "ttft-isolation (p50 ttft)", rows[1][0])
	require.Equal(t, "noisy", rows[1][1])
	require.Contains(t, rows[1][2], Num(*sr.Baseline.Value)+" ms step alone, n = 1000")
	require.Contains(t, rows[1][3], Num(*sr.Candidate.Value)+" ms step noisy, n = 1000")
	require.Regexp(t, `^\+2\d\d\.\d %$`, rows[1][4])
	require.Equal(t, "FAIL", rows[1][6])
	require.Nil(t, htmltest.ByID(doc, "drift-figures"))
}
