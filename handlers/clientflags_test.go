package handlers

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/web"
)

// A level where the load generator was late is flagged on the run page and
// in the signed report, from the run's stored self-check measurements.
func TestClientFlagOnRunPageAndReport(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	run := pb.signedRun(t)
	src := acceptance.Source{Tool: "accord-probe"}
	require.NoError(t, pb.store.SaveMeasurements(ctx, run, []acceptance.Measurement{
		{Metric: acceptance.MetricTTFT, Step: "decode", Level: "r=8", Repetition: 1, Values: []float64{120, 130, 140}, Source: src},
		{Metric: acceptance.MetricClientLateness, Step: "decode", Level: "r=8", Repetition: 1, Values: []float64{3, 1736}, Counts: []int64{90, 10}, Source: src},
		{Metric: acceptance.MetricClientTickDelay, Step: "decode", Level: "r=8", Repetition: 1, Values: []float64{1, 1758}, Counts: []int64{90, 10}, Source: src},
		{Metric: acceptance.MetricClientCPU, Step: "decode", Level: "r=8", Repetition: 1, Values: []float64{2}, Source: src},
		{Metric: acceptance.MetricClientLateness, Step: "decode", Level: "r=2", Repetition: 1, Values: []float64{3}, Counts: []int64{100}, Source: src},
	}))
	_, page := pb.get(t, pb.viewer, pb.url("/runs/")+strconv.FormatInt(run, 10))
	require.Contains(t, page, `id="client-flags"`)
	require.Contains(t, page, "The load generator did not keep up on 1 load level(s)")
	require.Contains(t, page, "step decode r=8 repetition 1: late: the load generator sent requests p99 1736 ms after their intended times (limit 100 ms); starved: a 10 ms ticker in the probe woke p99 1758 ms late")
	require.NotContains(t, page, "r=2 repetition", "a level that kept up is not flagged")

	_, err := report.Signer{Store: pb.store, Keyring: pb.keyring, Render: web.RenderReport}.Sign(ctx, run)
	require.NoError(t, err)
	bundle := pb.download(t, pb.viewer, pb.url("/runs/")+strconv.FormatInt(run, 10)+"/report.tar.gz")
	html := string(fileOf(t, bundle, "/"+attest.FileReportHTML))
	require.Contains(t, html, "The load generator did not keep up on 1 load level(s)")
}
