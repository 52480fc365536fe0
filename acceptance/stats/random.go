package stats

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

// NewRand returns a PCG generator seeded from the first 16 bytes of a
// digest. Equal digests give equal streams on every run.
func NewRand(seed [32]byte) *rand.Rand {
	return rand.New(rand.NewPCG(binary.BigEndian.Uint64(seed[0:8]), binary.BigEndian.Uint64(seed[8:16])))
}

// Binomial draws from Binomial(n, p): by inversion when n·min(p, 1−p) < 10
// (expected cost under a dozen steps), otherwise by Hörmann's BTRS
// transformed rejection with squeeze ("The generation of binomial random
// variates", J. Stat. Comput. Simul. 46, 1993), which costs about one
// uniform pair and rarely a few logarithms, whatever n is.
func Binomial(r *rand.Rand, n int64, p float64) int64 {
	switch {
	case n <= 0 || p <= 0:
		return 0
	case p >= 1:
		return n
	case p > 0.5:
		return n - Binomial(r, n, 1-p)
	}
	if float64(n)*p < 10 {
		return binomialInversion(r, n, p)
	}
	return binomialBTRS(r, n, p)
}

func binomialInversion(r *rand.Rand, n int64, p float64) int64 {
	q := 1 - p
	s := p / q
	a := float64(n+1) * s
	f0 := math.Exp(float64(n) * math.Log1p(-p))
	for {
		u := r.Float64()
		f := f0
		var x int64
		for u > f {
			u -= f
			x++
			if x > n {
				break // rounding left u above the total mass: draw again
			}
			f *= a/float64(x) - s
		}
		if x <= n {
			return x
		}
	}
}

func binomialBTRS(r *rand.Rand, n int64, p float64) int64 {
	fn := float64(n)
	q := 1 - p
	spq := math.Sqrt(fn * p * q)
	b := 1.15 + 2.53*spq
	a := -0.0873 + 0.0248*b + 0.01*p
	c := fn*p + 0.5
	vr := 0.92 - 4.2/b
	// The rest of the setup is needed only when the quick acceptance below
	// fails (about one draw in seven), so it is computed then.
	var alpha, lpq, hm float64
	for {
		u := r.Float64() - 0.5
		v := r.Float64()
		us := 0.5 - math.Abs(u)
		k := math.Floor((2*a/us+b)*u + c)
		if k < 0 || k > fn {
			continue
		}
		if us >= 0.07 && v <= vr {
			return int64(k)
		}
		if alpha == 0 {
			alpha = (2.83 + 5.1/b) * spq
			lpq = math.Log(p / q)
			m := math.Floor((fn + 1) * p)
			// log f(m), up to the terms that cancel in log f(k) − log f(m).
			hm = stirlingPart(m) + stirlingPart(fn-m) - m*lpq
		}
		v = math.Log(v * alpha / (a/(us*us) + b))
		// log(f(k)/f(m)) for the binomial pmf f, with log j! written as
		// (j+½)·log(j+1) − (j+1) + ½·log 2π + fc(j); the linear terms cancel.
		if v <= hm-stirlingPart(k)-stirlingPart(fn-k)+k*lpq {
			return int64(k)
		}
	}
}

// stirlingPart is (j+½)·log(j+1) + fc(j): log j! without the terms that
// cancel between two binomial pmf values with the same n.
func stirlingPart(j float64) float64 { return (j+0.5)*math.Log(j+1) + stirlingTail(j) }

// stirlingTail is fc(j) = log j! − (j+½)·log(j+1) + (j+1) − ½·log 2π.
func stirlingTail(j float64) float64 {
	if j < 10 {
		return stirlingTable[int(j)]
	}
	k1 := 1 / (j + 1)
	k2 := k1 * k1
	return (1.0/12 - (1.0/360-1.0/1260*k2)*k2) * k1
}

var stirlingTable = func() [10]float64 {
	var t [10]float64
	for j := range t {
		fj := float64(j)
		t[j] = lgamma(fj+1) - (fj+0.5)*math.Log(fj+1) + (fj + 1) - 0.5*math.Log(2*math.Pi)
	}
	return t
}()
