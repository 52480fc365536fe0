package stats

import "math"

// RegIncBeta is the regularized incomplete beta function I_x(a, b), by the
// continued fraction of Numerical Recipes §6.4 evaluated with the modified
// Lentz method. The fraction converges in O(√max(a, b)) terms, so binomial
// tails for a billion trials still cost only milliseconds.
func RegIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	lbt := lgamma(a+b) - lgamma(a) - lgamma(b) + a*math.Log(x) + b*math.Log1p(-x)
	if x < (a+1)/(a+b+2) {
		return math.Exp(lbt) * betaFraction(a, b, x) / a
	}
	return 1 - math.Exp(lbt)*betaFraction(b, a, 1-x)/b
}

func lgamma(x float64) float64 {
	v, _ := math.Lgamma(x)
	return v
}

func betaFraction(a, b, x float64) float64 {
	const tiny = 1e-300
	const eps = 1e-15
	maxIter := 200 + int(20*math.Sqrt(max(a, b)))
	qab, qap, qam := a+b, a+1, a-1
	c := 1.0
	d := 1 - qab*x/qap
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= maxIter; m++ {
		fm := float64(m)
		m2 := 2 * fm
		aa := fm * (b - fm) * x / ((qam + m2) * (a + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		h *= d * c
		aa = -(a + fm) * (qab + fm) * x / ((a + m2) * (qap + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return h
}

// BinomialCDF is P(X ≤ k) for X ~ Binomial(n, p).
func BinomialCDF(k, n int64, p float64) float64 {
	switch {
	case k < 0:
		return 0
	case k >= n:
		return 1
	case p <= 0:
		return 1
	case p >= 1:
		return 0
	}
	return RegIncBeta(float64(n-k), float64(k+1), 1-p)
}

// BinomialSF is P(X ≥ k) for X ~ Binomial(n, p), computed directly rather
// than as 1 − CDF so that small tails keep their precision.
func BinomialSF(k, n int64, p float64) float64 {
	switch {
	case k <= 0:
		return 1
	case k > n:
		return 0
	case p <= 0:
		return 0
	case p >= 1:
		return 1
	}
	return RegIncBeta(float64(k), float64(n-k+1), p)
}

// NormalCDF is Φ(x).
func NormalCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// NormalQuantile is Φ⁻¹(p).
func NormalQuantile(p float64) float64 { return -math.Sqrt2 * math.Erfcinv(2*p) }

// StudentCDF is the distribution function of Student's t with df degrees of
// freedom (df may be fractional, as Welch–Satterthwaite gives).
func StudentCDF(t, df float64) float64 {
	if math.IsInf(t, 1) {
		return 1
	}
	if math.IsInf(t, -1) {
		return 0
	}
	tail := 0.5 * RegIncBeta(df/2, 0.5, df/(df+t*t))
	if t > 0 {
		return 1 - tail
	}
	return tail
}

// StudentQuantile is the p-quantile of Student's t with df degrees of freedom.
func StudentQuantile(p, df float64) float64 {
	if p == 0.5 {
		return 0
	}
	if p < 0.5 {
		return -StudentQuantile(1-p, df)
	}
	// Bracket, then bisect: the CDF is monotone and cheap.
	lo, hi := 0.0, 1.0
	for StudentCDF(hi, df) < p {
		lo, hi = hi, hi*2
		if hi > 1e12 {
			return math.Inf(1)
		}
	}
	for range 200 {
		mid := (lo + hi) / 2
		if StudentCDF(mid, df) < p {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo <= 1e-12*hi {
			break
		}
	}
	return (lo + hi) / 2
}

// ClopperPearson returns the exact one-sided bounds, each at confidence
// 1 − alpha, on the probability p of a binomial with k successes in n
// trials: lower solves P(X ≥ k | p) = alpha (0 when k = 0), upper solves
// P(X ≤ k | p) = alpha (1 when k = n).
func ClopperPearson(k, n int64, alpha float64) (lower, upper float64) {
	// solve finds p where rising(p) = target, by bisection.
	solve := func(rising func(p float64) float64, target float64) float64 {
		lo, hi := 0.0, 1.0
		for range 100 {
			mid := (lo + hi) / 2
			if rising(mid) < target {
				lo = mid
			} else {
				hi = mid
			}
		}
		return (lo + hi) / 2
	}
	lower, upper = 0, 1
	if k > 0 {
		lower = solve(func(p float64) float64 { return BinomialSF(k, n, p) }, alpha)
	}
	if k < n {
		upper = solve(func(p float64) float64 { return 1 - BinomialCDF(k, n, p) }, 1-alpha)
	}
	return lower, upper
}
