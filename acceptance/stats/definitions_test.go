package stats

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPercentileDefinitionsWorkedExample(t *testing.T) {
	t.Parallel()
	// The help page's example: p99 of 1..100.
	v := make([]float64, 100)
	for i := range v {
		v[i] = float64(i + 1)
	}
	s, err := NewSample(v, nil)
	require.NoError(t, err)
	nr, err := s.Percentile(NearestRank, 99)
	require.NoError(t, err)
	require.Equal(t, 99.0, nr)
	np, err := s.Percentile(NumpyLinear, 99)
	require.NoError(t, err)
	require.InDelta(t, 99.01, np, 1e-12)
	fb, err := s.Percentile(FioBins, 99)
	require.NoError(t, err)
	require.Equal(t, 99.0, fb, "fio: the first value whose running count reaches 99 of 100")

	// numpy.percentile(range(1, 101), [0, 50, 25, 100]) = 1, 50.5, 25.75, 100
	for p, want := range map[float64]float64{0: 1, 50: 50.5, 25: 25.75, 100: 100} {
		got, err := s.Percentile(NumpyLinear, p)
		require.NoError(t, err)
		require.InDelta(t, want, got, 1e-12, "p%v", p)
	}
}

func TestPercentileDefinitionsOnHistograms(t *testing.T) {
	t.Parallel()
	// Bins as fio writes them: value → count. 1000 samples.
	s, err := NewSample([]float64{10, 20, 30, 40}, []int64{500, 400, 99, 1})
	require.NoError(t, err)
	for _, tt := range []struct {
		def  Definition
		p    float64
		want float64
	}{
		{FioBins, 50, 10},    // 500 ≥ 500
		{FioBins, 50.1, 20},  // 500 < 501
		{FioBins, 99.9, 40},  // the double 99.9 is 99.900000000000006: 99.9/100·1000 > 999 in extended precision
		{FioBins, 99.8, 30},  // the double 99.8 is 99.799999999999997: below 998
		{FioBins, 99.95, 40}, // 999 < 999.5
		{NearestRank, 99.9, 30},
		{NumpyLinear, 99.9, 30 + 0.001*10}, // h = 999·0.999 = 998.001: X_999 = 30, X_1000 = 40
	} {
		got, err := s.Percentile(tt.def, tt.p)
		require.NoError(t, err)
		require.InDelta(t, tt.want, got, 1e-9, "%s p%v", tt.def, tt.p)
	}
	_, err = s.Percentile("median-of-medians", 50)
	require.ErrorContains(t, err, "unknown percentile definition")
	_, err = s.Percentile(NumpyLinear, 101)
	require.ErrorContains(t, err, "outside [0, 100]")
	empty, _ := NewSample(nil, nil)
	_, err = empty.Percentile(NumpyLinear, 50)
	require.ErrorContains(t, err, "empty sample")
}

// fio's comparison is sum ≥ p · (N · 0.01L) (fio ≥ 3.14 as gcc builds it),
// so a percentage whose double lies just above its decimal value (99.9)
// needs one sample more than nearest rank does, and one just below (99.8)
// does not.
func TestFioBinsFollowsTheDoubleOfThePercentage(t *testing.T) {
	t.Parallel()
	s, err := NewSample([]float64{1, 2}, []int64{999, 1})
	require.NoError(t, err)
	fio, err := s.Percentile(FioBins, 99.9)
	require.NoError(t, err)
	require.Equal(t, 2.0, fio)
	nr, err := s.Percentile(NearestRank, 99.9)
	require.NoError(t, err)
	require.Equal(t, 1.0, nr, "nearest rank: ⌈0.999 · 1000⌉ = 999")
}

// Where p/100 · N is a whole count, fio as built (p · (N · 0.01), the
// product gcc makes of p / 100.0 · N under fio's -ffast-math) and the
// source's literal order can part by one sample. The cases here are the
// ones fio 3.33 and fio 2.19 printed in testdata (runners/parse,
// TestRealFioPercentileRuleOfEachRelease).
func TestFioBinsFollowFiosBuiltArithmetic(t *testing.T) {
	t.Parallel()
	ranks := func(n int) Sample {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(i + 1)
		}
		s, err := NewSample(v, nil)
		require.NoError(t, err)
		return s
	}
	for _, tt := range []struct {
		def  Definition
		n    int
		p    float64
		want float64
	}{
		// long double: 100 · 0.01L rounds to exactly 1, so p30 of 100 is the
		// 30th (the literal (long double)30 / 100 · 100 is above 30: the 31st).
		{FioBins, 100, 30, 30},
		{FioBins, 100, 60, 60},
		{FioBins, 1000, 99.9, 1000},
		// double: 1000 · 0.01 is exactly 10 and 99.9 · 10 rounds to 999,
		// so p99.9 of 1000 is the 999th (the literal 99.9 / 100 · 1000 is
		// above 999: the 1000th).
		{FioBinsDouble, 1000, 99.9, 999},
		{FioBinsDouble, 2000, 99.9, 1998},
		{FioBinsDouble, 100, 30, 30},
		{FioBinsDouble, 2000, 99.95, 1999},
	} {
		got, err := ranks(tt.n).Percentile(tt.def, tt.p)
		require.NoError(t, err)
		require.Equal(t, tt.want, got, "%s p%v of 1..%d", tt.def, tt.p, tt.n)
	}
	require.Equal(t, "fio's bin rule (before fio 3.14: in double precision)", FioBinsDouble.Label())
	require.True(t, FioBinsDouble.Valid())
}
