package web

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

// The percentile table reads in the catalog's order with a metric's
// repetitions together, and host telemetry is set apart.
func TestMetricRowsFollowTheCatalog(t *testing.T) {
	in := []store.MeasurementRow{
		{Metric: acceptance.MetricTPOT, Step: "ttft", Repetition: 2},
		{Metric: acceptance.MetricCPUUtil, Step: "ttft", Repetition: 1},
		{Metric: acceptance.MetricTTFT, Step: "ttft", Repetition: 2},
		{Metric: acceptance.MetricTPOT, Step: "ttft", Repetition: 1},
		{Metric: acceptance.MetricTTFT, Step: "ttft", Repetition: 1},
		{Metric: "made_up_metric", Step: "ttft", Repetition: 1},
	}
	rows := MetricRowsFrom(in)
	var got []string
	var first []bool
	for _, r := range rows {
		got = append(got, r.Metric)
		first = append(first, r.First)
	}
	require.Equal(t, []string{acceptance.MetricTTFT, acceptance.MetricTTFT, acceptance.MetricTPOT, acceptance.MetricTPOT, acceptance.MetricCPUUtil, "made_up_metric"}, got)
	require.Equal(t, []bool{true, false, true, false, true, true}, first)
	require.Equal(t, 1, rows[0].Repetition)
	require.Equal(t, "Time to first token", rows[0].Name)

	measured, telemetry := SplitTelemetry(rows)
	require.Len(t, telemetry, 1)
	require.Equal(t, acceptance.MetricCPUUtil, telemetry[0].Metric)
	require.Len(t, measured, 5)
}

// A sweep's levels read as numbers: c=1, c=4, c=16, not c=1, c=16, c=4.
func TestMetricRowsOrderLevelsAsNumbers(t *testing.T) {
	var in []store.MeasurementRow
	for _, lv := range []string{"c=16", "c=1", "c=4"} {
		in = append(in, store.MeasurementRow{Metric: acceptance.MetricTTFT, Step: "sweep", Level: lv, Repetition: 1})
	}
	var got []string
	for _, r := range MetricRowsFrom(in) {
		got = append(got, r.Level)
	}
	require.Equal(t, []string{"c=1", "c=4", "c=16"}, got)
}
