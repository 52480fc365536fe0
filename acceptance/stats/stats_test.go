package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRankIsNearestRank(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		q    float64
		n    int64
		want int64
	}{
		{0.99, 1000, 990}, {0.99, 1001, 991}, {0.5, 1, 1}, {0.5, 2, 1}, {0.5, 3, 2},
		{0.999, 1_000_000, 999_000}, {0, 10, 1}, {1, 10, 10}, {0.95, 20, 19}, {0.9, 10, 9},
		{0.99, 5_000_000_000, 4_950_000_000},
	} {
		require.Equal(t, tc.want, Rank(tc.q, tc.n), "q=%v n=%d", tc.q, tc.n)
	}
}

func TestSampleQuantilesRawAndWeightedAgree(t *testing.T) {
	t.Parallel()
	raw, err := NewSample([]float64{5, 1, 3, 3, 2, 9, 3}, nil)
	require.NoError(t, err)
	w, err := NewSample([]float64{9, 3, 1, 2, 5, 7}, []int64{1, 3, 1, 1, 1, 0})
	require.NoError(t, err)
	require.Equal(t, int64(7), raw.N())
	require.Equal(t, int64(7), w.N())
	for rank := int64(0); rank <= 8; rank++ {
		require.Equal(t, raw.At(rank), w.At(rank), "rank %d", rank)
	}
	require.Equal(t, 3.0, raw.Quantile(0.5))
	require.Equal(t, 9.0, raw.Quantile(0.99))
	require.Equal(t, int64(5), raw.CountAtMost(3))
	require.Equal(t, int64(2), raw.CountBelow(3))
	require.Equal(t, int64(5), w.CountAtMost(3))
	require.Equal(t, int64(2), w.CountBelow(3))
	require.InDelta(t, 26.0/7, raw.Mean(), 1e-12)
	require.InDelta(t, raw.Mean(), w.Mean(), 1e-12)
	require.InDelta(t, raw.Variance(), w.Variance(), 1e-12)

	_, err = NewSample([]float64{1, math.NaN()}, nil)
	require.ErrorContains(t, err, "NaN")
	_, err = NewSample([]float64{1}, []int64{-1})
	require.ErrorContains(t, err, "negative")
}

func TestMergeEqualsSortingEverything(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var all []float64
	var parts []Sample
	for range 4 {
		v := make([]float64, r.IntN(50))
		for i := range v {
			v[i] = float64(r.IntN(20))
		}
		all = append(all, v...)
		s, err := NewSample(v, nil)
		require.NoError(t, err)
		parts = append(parts, s)
	}
	m := Merge(parts...)
	slices.Sort(all)
	require.Equal(t, int64(len(all)), m.N())
	for i, v := range all {
		require.Equal(t, v, m.At(int64(i+1)), "rank %d", i+1)
	}
	require.Equal(t, all, m.weighted().expand())

	a, _ := NewSample([]float64{1, 2, 4}, []int64{2, 1, 1})
	b, _ := NewSample([]float64{2, 3}, []int64{5, 1})
	// Raw and weighted pool into a weighted sample.
	mixed := Merge(a, parts[0])
	require.True(t, mixed.Weighted())
	require.Equal(t, a.N()+parts[0].N(), mixed.N())
	mw := Merge(a, b)
	require.Equal(t, []float64{1, 2, 3, 4}, mw.values)
	require.Equal(t, []int64{2, 6, 1, 1}, mw.counts)
	require.Equal(t, int64(10), mw.N())
}

func bruteBinomialCDF(k, n int, p float64) float64 {
	var s float64
	for i := 0; i <= k; i++ {
		lc := lgamma(float64(n+1)) - lgamma(float64(i+1)) - lgamma(float64(n-i+1))
		s += math.Exp(lc + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return s
}

func TestBinomialCDFMatchesBruteForce(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 7, 50, 299, 1000} {
		for _, p := range []float64{0.01, 0.3, 0.5, 0.9, 0.99} {
			for k := 0; k < n; k += max(1, n/17) {
				want := bruteBinomialCDF(k, n, p)
				require.InDelta(t, want, BinomialCDF(int64(k), int64(n), p), 1e-10, "n=%d p=%v k=%d", n, p, k)
				require.InDelta(t, 1-want, BinomialSF(int64(k+1), int64(n), p), 1e-10, "n=%d p=%v k=%d", n, p, k)
			}
		}
	}
	// Large n against the normal approximation, which is excellent there.
	n := int64(10_000_000)
	mean, sd := 0.99*float64(n), math.Sqrt(float64(n)*0.99*0.01)
	for _, z := range []float64{-2, -1, 0, 1, 2} {
		k := int64(mean + z*sd)
		require.InDelta(t, NormalCDF((float64(k)+0.5-mean)/sd), BinomialCDF(k, n, 0.99), 2e-3)
	}
}

func TestOrderStatisticBounds(t *testing.T) {
	t.Parallel()
	require.Equal(t, int64(299), MinSamplesUpper(0.99, 0.95))
	require.Equal(t, int64(2995), MinSamplesUpper(0.999, 0.95))
	require.Equal(t, int64(59), MinSamplesUpper(0.95, 0.95))
	require.Equal(t, int64(1), MinSamplesLower(0.99, 0.95))
	require.Equal(t, int64(5), MinSamplesLower(0.5, 0.95))

	_, ok := UpperBoundRank(298, 0.99, 0.95)
	require.False(t, ok)
	u, ok := UpperBoundRank(299, 0.99, 0.95)
	require.True(t, ok)
	require.Equal(t, int64(299), u)

	// Brute force: the smallest u with P(Bin ≤ u−1) ≥ c, the largest l with P(Bin ≥ l) ≥ c.
	for _, n := range []int{10, 100, 1000} {
		for _, q := range []float64{0.5, 0.9, 0.99} {
			wantU, wantL := int64(-1), int64(-1)
			for u := 1; u <= n; u++ {
				if bruteBinomialCDF(u-1, n, q) >= 0.95 {
					wantU = int64(u)
					break
				}
			}
			for l := n; l >= 1; l-- {
				if 1-bruteBinomialCDF(l-1, n, q) >= 0.95 {
					wantL = int64(l)
					break
				}
			}
			gotU, okU := UpperBoundRank(int64(n), q, 0.95)
			gotL, okL := LowerBoundRank(int64(n), q, 0.95)
			require.Equal(t, wantU >= 0, okU, "n=%d q=%v", n, q)
			require.Equal(t, wantL >= 0, okL, "n=%d q=%v", n, q)
			if okU {
				require.Equal(t, wantU, gotU, "upper n=%d q=%v", n, q)
			}
			if okL {
				require.Equal(t, wantL, gotL, "lower n=%d q=%v", n, q)
			}
		}
	}
}

// The exact bounds must cover: over many uniform samples, the 95 % upper
// bound on the median lies below the true median at most 5 % of the time,
// and the p-values agree with the bounds.
func TestOrderStatisticCoverageAndPValues(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	const trials, n, q = 2000, 200, 0.9
	u, _ := UpperBoundRank(n, q, 0.95)
	l, _ := LowerBoundRank(n, q, 0.95)
	missU, missL := 0, 0
	v := make([]float64, n)
	for range trials {
		for i := range v {
			v[i] = r.Float64()
		}
		s, _ := NewSample(v, nil)
		up, lo := s.At(u), s.At(l)
		if up < q {
			missU++
		}
		if lo > q {
			missL++
		}
		// The p-value of "ξ ≤ L" is ≤ α exactly when the upper bound is ≤ L.
		for _, lim := range []float64{0.85, 0.88, 0.9, 0.92, 0.95} {
			require.Equal(t, up <= lim, PAtMost(n, q, s.CountAtMost(lim)) <= 0.05)
			require.Equal(t, lo > lim, PAbove(n, q, s.CountAtMost(lim)) <= 0.05)
			require.Equal(t, lo >= lim, PAtLeast(n, q, s.CountBelow(lim)) <= 0.05)
			require.Equal(t, up < lim, PBelow(n, q, s.CountBelow(lim)) <= 0.05)
		}
	}
	require.LessOrEqual(t, float64(missU)/trials, 0.065)
	require.LessOrEqual(t, float64(missL)/trials, 0.065)
	require.GreaterOrEqual(t, float64(missU)/trials, 0.02) // exact, not wildly conservative
}

func TestSamplesToDecide(t *testing.T) {
	t.Parallel()
	// Every sample under the limit: exactly the minimum for an upper bound.
	require.Equal(t, int64(299), SamplesToDecide(100, 0.99, 1, 0.05, true))
	// 99.5 % under the limit: the p-value falls below 5 % somewhere near
	// q(1−q)·z²/(f−q)² ≈ 1,070 samples.
	got := SamplesToDecide(300, 0.99, 0.995, 0.05, true)
	require.InDelta(t, 1070, got, 250)
	require.LessOrEqual(t, PAtMost(got, 0.99, int64(math.Floor(0.995*float64(got)))), 0.05)
	require.Equal(t, int64(0), SamplesToDecide(300, 0.99, 0.985, 0.05, true))
}

func TestStudentQuantiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ p, df, want float64 }{
		{0.95, 1, 6.313752}, {0.95, 4, 2.131847}, {0.975, 10, 2.228139}, {0.95, 30, 1.697261}, {0.99, 2, 6.964557},
	} {
		require.InDelta(t, tc.want, StudentQuantile(tc.p, tc.df), 1e-5)
		require.InDelta(t, tc.p, StudentCDF(tc.want, tc.df), 1e-6)
	}
	require.InDelta(t, 1.644854, NormalQuantile(0.95), 1e-6)
	require.InDelta(t, 0.975, NormalCDF(1.959964), 1e-6)
}

func TestHolmAgainstHandComputedAdjustments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		p        []float64
		adjusted []float64
		ranks    []int
		levels   []float64
	}{
		{
			// sorted 0.01, 0.02, 0.03, 0.04 → 4·0.01, 3·0.02, 2·0.03, 1·0.04 with running max
			name: "four", p: []float64{0.03, 0.01, 0.04, 0.02},
			adjusted: []float64{0.06, 0.04, 0.06, 0.06}, ranks: []int{3, 1, 4, 2},
			levels: []float64{0.025, 0.0125, 0.05, 0.05 / 3},
		},
		{
			name: "capped at one", p: []float64{0.5, 0.001, 0.6},
			adjusted: []float64{1, 0.003, 1}, ranks: []int{2, 1, 3}, levels: []float64{0.025, 0.05 / 3, 0.05},
		},
		{
			// monotonicity: 0.012 at rank 1 → 0.036; 0.013 at rank 2 → 0.026 raised to 0.036
			name: "running max", p: []float64{0.013, 0.012, 0.2},
			adjusted: []float64{0.036, 0.036, 0.2}, ranks: []int{2, 1, 3}, levels: []float64{0.025, 0.05 / 3, 0.05},
		},
		{
			name: "ties keep input order", p: []float64{0.02, 0.02},
			adjusted: []float64{0.04, 0.04}, ranks: []int{1, 2}, levels: []float64{0.025, 0.05},
		},
		{name: "single", p: []float64{0.04}, adjusted: []float64{0.04}, ranks: []int{1}, levels: []float64{0.05}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Holm(tc.p, 0.05)
			for i := range tc.p {
				require.InDelta(t, tc.adjusted[i], got[i].Adjusted, 1e-12, "adjusted %d", i)
				require.Equal(t, tc.ranks[i], got[i].Rank, "rank %d", i)
				require.InDelta(t, tc.levels[i], got[i].Level, 1e-12, "level %d", i)
			}
		})
	}
}

// chiSquare compares draws of Binomial(n, p) with the exact pmf over cells
// holding at least 5 expected draws (the tails pooled).
func chiSquare(t *testing.T, r *rand.Rand, n int64, p float64, draws int) (stat float64, cells int) {
	counts := map[int64]int{}
	for range draws {
		x := Binomial(r, n, p)
		require.True(t, x >= 0 && x <= n)
		counts[x]++
	}
	mean := float64(n) * p
	sd := math.Sqrt(mean * (1 - p))
	lo := max(0, int64(mean-6*sd-1))
	hi := min(n, int64(mean+6*sd+1))
	var obs, exp float64
	flush := func() {
		if exp > 0 {
			stat += (obs - exp) * (obs - exp) / exp
			cells++
		}
		obs, exp = 0, 0
	}
	prev := BinomialCDF(lo-1, n, p)
	for k := lo; k <= hi; k++ {
		cur := BinomialCDF(k, n, p)
		if k == hi {
			cur = 1
		}
		exp += (cur - prev) * float64(draws)
		prev = cur
		obs += float64(counts[k])
		if k == lo {
			for j, c := range counts {
				if j < lo {
					obs += float64(c)
				}
			}
			exp += BinomialCDF(lo-1, n, p) * float64(draws)
		}
		if k == hi {
			for j, c := range counts {
				if j > hi {
					obs += float64(c)
				}
			}
		}
		if exp >= 5 {
			flush()
		}
	}
	flush()
	return stat, cells
}

func TestBinomialSamplerMatchesThePMF(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		n int64
		p float64
	}{
		{20, 0.1}, {100, 0.05}, {40, 0.5}, {1000, 0.3}, {1000, 0.97}, {100_000, 0.5}, {1_000_000, 0.01},
		{3_000_000, 0.2}, {1_000_000_000, 0.001}, {12, 0.9999},
	} {
		stat, cells := chiSquare(t, r, tc.n, tc.p, 100_000)
		df := float64(cells - 1)
		// 99.9 % point of chi-square ≈ df + 3.1·√(2df) + 7.
		require.Less(t, stat, df+3.1*math.Sqrt(2*df)+7, "n=%d p=%v: chi2=%.1f over %d cells", tc.n, tc.p, stat, cells)
	}
}

func naiveQuantileReplicate(r *rand.Rand, reps [][]float64, q float64) float64 {
	var pooled []float64
	for range reps {
		rep := reps[r.IntN(len(reps))]
		for range rep {
			pooled = append(pooled, rep[r.IntN(len(rep))])
		}
	}
	s, _ := NewSample(pooled, nil)
	return s.Quantile(q)
}

// The tree descent must draw the same distribution as resampling every
// sample: compare quantiles of the two replicate distributions.
func TestQuantileReplicateMatchesNaiveBootstrap(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	reps := make([][]float64, 3)
	samples := make([]Sample, 3)
	for i := range reps {
		reps[i] = make([]float64, 400+100*i)
		for j := range reps[i] {
			reps[i][j] = math.Exp(r.NormFloat64()*0.5 + float64(i)*0.1)
		}
		samples[i], _ = NewSample(reps[i], nil)
	}
	side, err := NewSide(samples)
	require.NoError(t, err)
	for _, q := range []float64{0.5, 0.99} {
		const b = 4000
		tree := Replicates(rand.New(rand.NewPCG(9, 10)), side, StatQuantile(q), b)
		naive := make([]float64, b)
		nr := rand.New(rand.NewPCG(11, 12))
		for i := range naive {
			naive[i] = naiveQuantileReplicate(nr, reps, q)
		}
		slices.Sort(naive)
		for _, pct := range []float64{0.05, 0.25, 0.5, 0.75, 0.95} {
			i := int(pct * b)
			spread := naive[int(0.95*b)] - naive[int(0.05*b)]
			require.InDelta(t, naive[i], tree[i], 0.08*spread+0.002*naive[i], "q=%v pct=%v", q, pct)
		}
	}
}

func TestMeanReplicateNormalAndExactAgree(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(13, 14))
	v := make([]float64, 1500)
	for i := range v {
		v[i] = math.Exp(r.NormFloat64() * 0.3)
	}
	s, _ := NewSample(v, nil)
	side, _ := NewSide([]Sample{s})
	reps := Replicates(rand.New(rand.NewPCG(1, 1)), side, StatMean, 4000)
	// One repetition: the replicates are the ordinary bootstrap of the mean,
	// centred on the mean with standard deviation σ/√n.
	var m, ss float64
	for _, x := range reps {
		m += x
	}
	m /= float64(len(reps))
	for _, x := range reps {
		ss += (x - m) * (x - m)
	}
	sd := math.Sqrt(ss / float64(len(reps)-1))
	want := math.Sqrt(s.Variance() / float64(s.N()))
	require.InDelta(t, s.Mean(), m, 3*want/math.Sqrt(4000)*3)
	require.InDelta(t, want, sd, 0.06*want)

	// Above ExactMeanDraws the normal draw takes over with the same moments.
	big := make([]float64, 20000)
	for i := range big {
		big[i] = math.Exp(r.NormFloat64() * 0.3)
	}
	bs, _ := NewSample(big, nil)
	bside, _ := NewSide([]Sample{bs})
	breps := Replicates(rand.New(rand.NewPCG(1, 2)), bside, StatMean, 4000)
	bwant := math.Sqrt(bs.Variance() / float64(bs.N()))
	require.InDelta(t, bwant, (breps[3800]-breps[200])/(2*1.6449), 0.08*bwant)
}

func TestPercentileBoundsAgreeWithShares(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(15, 16))
	reps := make([]float64, 10000)
	for i := range reps {
		reps[i] = math.Round(r.NormFloat64()*10) / 2 // ties on purpose
	}
	slices.Sort(reps)
	for _, alpha := range []float64{0.05, 0.1, 0.01, 0.025} {
		lo, hi := LowerBound(reps, alpha), UpperBound(reps, alpha)
		for m := -15.0; m <= 15; m += 0.5 {
			require.Equal(t, lo >= m, ShareBelow(reps, m) <= alpha, "alpha=%v m=%v", alpha, m)
			require.Equal(t, lo > m, ShareAtMost(reps, m) <= alpha, "alpha=%v m=%v", alpha, m)
			require.Equal(t, hi <= m, ShareAbove(reps, m) <= alpha, "alpha=%v m=%v", alpha, m)
			require.Equal(t, hi < m, ShareAtLeast(reps, m) <= alpha, "alpha=%v m=%v", alpha, m)
		}
	}
}

func TestExpansionMapsLevelsAndPValuesConsistently(t *testing.T) {
	t.Parallel()
	e, err := NewRelativeExpansion([]float64{100, 104, 98}, []float64{90, 93, 91, 92})
	require.NoError(t, err)
	require.Greater(t, e.Factor, 1.0)
	a := e.Alpha(0.05)
	require.Less(t, a, 0.05)
	for _, share := range []float64{0, a / 2, a * 0.999, a * 1.001, 0.05, 0.2} {
		require.Equal(t, share <= a, e.PValue(share) <= 0.05, "share %v", share)
	}
	_, err = NewRelativeExpansion([]float64{1}, []float64{1, 2})
	require.Error(t, err)
}

func TestLogHistogramRelativeError(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(17, 18))
	for range 100000 {
		v := math.Exp(r.NormFloat64() * 10)
		rep := bucketValue(bucketIndex(v))
		require.LessOrEqual(t, math.Abs(rep-v)/v, HistogramRelativeError*(1+1e-9))
	}
}

func TestTInterval(t *testing.T) {
	t.Parallel()
	ti, ok := NewTInterval([]float64{10, 12, 11, 13})
	require.True(t, ok)
	require.InDelta(t, 11.5, ti.Mean, 1e-12)
	// s = 1.29099, se = 0.645497, t(0.95, 3) = 2.353363
	require.InDelta(t, 11.5+2.353363*0.645497, ti.Upper(0.05), 1e-4)
	require.InDelta(t, 11.5-2.353363*0.645497, ti.Lower(0.05), 1e-4)
	for _, l := range []float64{9, 10, 12, 13, 13.02, 14} {
		require.Equal(t, ti.Upper(0.05) <= l, ti.PAtMost(l) <= 0.05, "l=%v", l)
		require.Equal(t, ti.Lower(0.05) >= l, ti.PAtLeast(l) <= 0.05, "l=%v", l)
	}
	_, ok = NewTInterval([]float64{1})
	require.False(t, ok)
}

// expand lists a weighted sample's values with repetition.
func (s Sample) expand() []float64 {
	var out []float64
	for i, v := range s.values {
		for range s.counts[i] {
			out = append(out, v)
		}
	}
	return out
}

// Raw samples answer order statistics and counts exactly, like a sorted copy,
// including ties, zeros, negatives and values sharing a log bucket.
func TestRawSampleMatchesSorting(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(21, 22))
	for trial := range 50 {
		n := 1 + r.IntN(3000)
		v := make([]float64, n)
		for i := range v {
			switch r.IntN(10) {
			case 0:
				v[i] = 0
			case 1:
				v[i] = -r.Float64()
			case 2:
				v[i] = 100 * (1 + 1e-5*float64(r.IntN(5))) // many values in one bucket
			default:
				v[i] = math.Exp(r.NormFloat64() * 3)
			}
		}
		orig := slices.Clone(v)
		s, err := NewSample(v, nil)
		require.NoError(t, err)
		sorted := slices.Clone(v)
		slices.Sort(sorted)
		for range 20 {
			k := 1 + r.IntN(n)
			require.Equal(t, sorted[k-1], s.At(int64(k)), "trial %d rank %d", trial, k)
			x := sorted[r.IntN(n)] * (1 + 1e-7*float64(r.IntN(3)-1))
			below, _ := slices.BinarySearch(sorted, x)
			atMost := below
			for atMost < n && sorted[atMost] == x {
				atMost++
			}
			require.Equal(t, int64(below), s.CountBelow(x), "trial %d x %v", trial, x)
			require.Equal(t, int64(atMost), s.CountAtMost(x), "trial %d x %v", trial, x)
		}
		require.Equal(t, sorted[0], s.Min())
		require.Equal(t, sorted[n-1], s.Max())
		require.Equal(t, orig, v, "the caller's values are not modified")
	}
}

// Clopper–Pearson bounds: no failures in n gives the exact 1 − α^(1/n)
// (about 3/n at 95 %, the rule of three); the bounds hold the estimate and
// are exact against the binomial tails.
func TestClopperPearson(t *testing.T) {
	t.Parallel()
	lo, up := ClopperPearson(0, 1000, 0.05)
	require.Zero(t, lo)
	require.InDelta(t, 1-math.Pow(0.05, 1.0/1000), up, 1e-9)
	require.InDelta(t, 3.0/1000, up, 0.0001)
	lo, up = ClopperPearson(1000, 1000, 0.05)
	require.Equal(t, 1.0, up)
	require.InDelta(t, math.Pow(0.05, 1.0/1000), lo, 1e-9)
	lo, up = ClopperPearson(30, 1000, 0.05)
	require.Less(t, lo, 0.03)
	require.Greater(t, up, 0.03)
	require.InDelta(t, 0.05, BinomialCDF(30, 1000, up), 1e-9)
	require.InDelta(t, 0.05, BinomialSF(30, 1000, lo), 1e-9)
}
