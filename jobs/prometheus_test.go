package jobs

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

func TestParsePromRange(t *testing.T) {
	t.Parallel()
	at := func(sec float64) time.Time { return time.UnixMilli(int64(sec * 1000)).UTC() }
	for _, tc := range []struct {
		name, body, comparator string
		want                   []store.WatchPoint
		err                    string
	}{
		{name: "the worst series at each step, in time order", comparator: "<=",
			body: `{"status":"success","data":{"resultType":"matrix","result":[
				{"metric":{"pod":"a"},"values":[[1764492010,"2"],[1764492000,"1"]]},
				{"metric":{"pod":"b"},"values":[[1764492000,"3"],[1764492020.5,"0.5"]]}]}}`,
			want: []store.WatchPoint{{At: at(1764492000), Value: 3}, {At: at(1764492010), Value: 2}, {At: at(1764492020.5), Value: 0.5}}},
		{name: "the lowest for a line to stay above", comparator: ">=",
			body: `{"status":"success","data":{"resultType":"matrix","result":[
				{"metric":{},"values":[[1764492000,"1"]]},{"metric":{},"values":[[1764492000,"3"]]}]}}`,
			want: []store.WatchPoint{{At: at(1764492000), Value: 1}}},
		{name: "NaN is no value, +Inf is one", comparator: "<=",
			body: `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1764492000,"NaN"],[1764492001,"+Inf"]]}]}}`,
			want: []store.WatchPoint{{At: at(1764492001), Value: math.Inf(1)}}},
		{name: "no series", comparator: "<=", want: []store.WatchPoint{},
			body: `{"status":"success","data":{"resultType":"matrix","result":[]}}`},
		{name: "an instant vector is no range", comparator: "<=", err: `a range query answers a matrix, not "vector"`,
			body: `{"status":"success","data":{"resultType":"vector","result":[]}}`},
		{name: "API error", comparator: "<=", err: "API error bad_data: exceeded maximum resolution",
			body: `{"status":"error","errorType":"bad_data","error":"exceeded maximum resolution"}`},
		{name: "time is a number", comparator: "<=", err: "a sample's time is a number",
			body: `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[["soon","1"]]}]}}`},
		{name: "time out of range", comparator: "<=", err: "out of range",
			body: `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1e300,"1"]]}]}}`},
		{name: "value not a number", comparator: "<=", err: `sample value "fast" is not a number`,
			body: `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"fast"]]}]}}`},
		{name: "not JSON", comparator: "<=", err: "not Prometheus API JSON", body: `<html>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePromRange([]byte(tc.body), tc.comparator)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestQueryPrometheusRangeRefusesBadRanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now()
	for _, tc := range []struct {
		start, end time.Time
		step       time.Duration
	}{
		{now, now, time.Second},
		{now, now.Add(-time.Minute), time.Second},
		{now, now.Add(time.Minute), 0},
		{now.Add(-24 * time.Hour), now, time.Second}, // 86,400 steps: more than Prometheus answers
	} {
		_, err := QueryPrometheusRange(ctx, nil, "http://127.0.0.1:1", "up", "<=", tc.start, tc.end, tc.step)
		require.ErrorContains(t, err, "is not a range of 1 to 11000 steps")
	}
}

func FuzzParsePromRange(f *testing.F) {
	for _, seed := range []string{
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1764492000,"2.5"],[1764492001,"NaN"]]}]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]},{"metric":{},"values":[[1,"-Inf"],[0.001,"3"]]}]}}`,
		`{"status":"error","errorType":"bad_data","error":"x"}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"values":[[1e10,"1"]]}]}}`,
	} {
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, below bool) {
		comparator := map[bool]string{true: "<=", false: ">="}[below]
		points, err := ParsePromRange(body, comparator)
		if err != nil {
			require.Nil(t, points)
			return
		}
		other, err := ParsePromRange(body, map[bool]string{true: ">=", false: "<="}[below])
		require.NoError(t, err)
		require.Len(t, other, len(points), "both comparators see the same steps")
		for i, p := range points {
			require.False(t, math.IsNaN(p.Value), "NaN is never a value")
			require.True(t, p.At.Equal(other[i].At))
			if i > 0 {
				require.True(t, points[i-1].At.Before(p.At), "one point a step, in time order")
			}
			if below {
				require.GreaterOrEqual(t, p.Value, other[i].Value)
			} else {
				require.LessOrEqual(t, p.Value, other[i].Value)
			}
		}
	})
}
