package charts

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/acceptance/chartdata/chartdatatest"
)

// A curve reduced at ingest (chartdata.CurveOf) draws the same table as
// every sample: n, min, p50, p90, p99, p99.9 and max are exact.
func TestLatencyCDFOfAStoredCurveIsExact(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1001, 50_000, 1_000_000} {
		values := chartdatatest.SortedLatencies(uint64(n), n, 400, 0.6)
		c := chartdata.CurveOf(values)
		require.NotEmpty(t, c.Points, "n=%d is reduced", n)
		buckets := make([]Bucket, len(c.Points))
		for i, p := range c.Points {
			buckets[i] = Bucket{Value: p[0], Count: int64(p[1])}
		}
		_, table, err := LatencyCDF(CDFInput{Unit: "ms", Series: []CDFSeries{{Name: "x", Buckets: buckets}}})
		require.NoError(t, err)
		_, exact, err := LatencyCDF(CDFInput{Unit: "ms", Series: []CDFSeries{{Name: "x", Values: values}}})
		require.NoError(t, err)
		require.Equal(t, exact.Rows, table.Rows, "n, min, p50, p90, p99, p99.9 and max are exact")
	}
}
