package stats

import "math"

// Exact, distribution-free confidence bounds on a quantile from order
// statistics. With n independent samples of a continuous distribution, the
// number of samples below the true q-quantile ξ is Binomial(n, q), so
//
//	P(X_(u) ≥ ξ) = P(Binomial(n, q) ≤ u − 1)   and
//	P(X_(l) ≤ ξ) = P(Binomial(n, q) ≥ l).
//
// The one-sided upper bound at confidence c is X_(u) with the smallest u
// such that the first probability is at least c; the lower bound is X_(l)
// with the largest such l. Neither assumes a shape of the distribution.

// UpperBoundRank returns the rank u of the one-sided upper confidence bound
// X_(u) on the q-quantile of n samples at confidence conf, and false when n
// is too small for any order statistic to be an upper bound (see
// MinSamplesUpper).
func UpperBoundRank(n int64, q, conf float64) (int64, bool) {
	if n <= 0 || BinomialCDF(n-1, n, q) < conf {
		return 0, false
	}
	lo, hi := int64(1), n // predicate CDF(u−1) ≥ conf is monotone in u and holds at n
	for lo < hi {
		mid := lo + (hi-lo)/2
		if BinomialCDF(mid-1, n, q) >= conf {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, true
}

// LowerBoundRank returns the rank l of the one-sided lower confidence bound
// X_(l) on the q-quantile of n samples at confidence conf, and false when n
// is too small (see MinSamplesLower).
func LowerBoundRank(n int64, q, conf float64) (int64, bool) {
	if n <= 0 || BinomialSF(1, n, q) < conf {
		return 0, false
	}
	lo, hi := int64(1), n // predicate SF(l) ≥ conf is monotone decreasing and holds at 1
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if BinomialSF(mid, n, q) >= conf {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, true
}

// MinSamplesUpper is the smallest n for which an upper bound on the
// q-quantile exists at confidence conf: 1 − qⁿ ≥ conf. For p99 at 95 % it is
// 299; for p99.9, 2,995.
func MinSamplesUpper(q, conf float64) int64 {
	n := int64(math.Ceil(math.Log(1-conf) / math.Log(q)))
	for n > 1 && BinomialCDF(n-2, n-1, q) >= conf {
		n--
	}
	for BinomialCDF(n-1, n, q) < conf {
		n++
	}
	return max(n, 1)
}

// MinSamplesLower is the smallest n for which a lower bound on the
// q-quantile exists at confidence conf: 1 − (1 − q)ⁿ ≥ conf.
func MinSamplesLower(q, conf float64) int64 { return MinSamplesUpper(1-q, conf) }

// Order-statistic p-values. Each is the p-value of the one-sided binomial
// test that matches the bound above, so that p ≤ 1 − conf exactly when the
// bound decides the claim:
//
//	claim ξ ≤ L holds  (upper bound ≤ L)  ⇔ PAtMost(n, q, #{X ≤ L}) ≤ α
//	claim ξ > L holds  (lower bound > L)  ⇔ PAbove(n, q, #{X ≤ L}) ≤ α
//	claim ξ ≥ L holds  (lower bound ≥ L)  ⇔ PAtLeast(n, q, #{X < L}) ≤ α
//	claim ξ < L holds  (upper bound < L)  ⇔ PBelow(n, q, #{X < L}) ≤ α

// PAtMost is the p-value for "the q-quantile is at most L", given k = #{X ≤ L}.
func PAtMost(n int64, q float64, k int64) float64 { return BinomialSF(k, n, q) }

// PAbove is the p-value for "the q-quantile is above L", given k = #{X ≤ L}.
func PAbove(n int64, q float64, k int64) float64 { return BinomialCDF(k, n, q) }

// PAtLeast is the p-value for "the q-quantile is at least L", given k = #{X < L}.
func PAtLeast(n int64, q float64, k int64) float64 { return BinomialCDF(k, n, q) }

// PBelow is the p-value for "the q-quantile is below L", given k = #{X < L}.
func PBelow(n int64, q float64, k int64) float64 { return BinomialSF(k, n, q) }

// SamplesToDecide estimates how many samples would make an order-statistic
// p-value reach alpha if the share of samples at or under the limit stayed
// at frac: the smallest n' ≥ n with p(n') ≤ alpha, where p is PAtMost (when
// atMost) or PAbove, and k' = ⌊frac·n'⌋. It returns 0 when frac is on the
// wrong side of q (no number of samples would decide the claim).
func SamplesToDecide(n int64, q, frac, alpha float64, atMost bool) int64 {
	p := func(m int64) float64 {
		k := int64(math.Floor(frac * float64(m)))
		if atMost {
			return PAtMost(m, q, k)
		}
		return PAbove(m, q, k)
	}
	if (atMost && frac <= q) || (!atMost && frac >= q) {
		return 0
	}
	lo, hi := max(n, 1), max(n, 1)
	for p(hi) > alpha {
		lo = hi
		hi *= 2
		if hi > 1<<40 { // beyond any run: no useful estimate
			return 0
		}
	}
	for lo < hi { // p is close to monotone in m; the bisection finds a crossing
		mid := lo + (hi-lo)/2
		if p(mid) <= alpha {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}
