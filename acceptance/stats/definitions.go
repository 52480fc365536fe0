package stats

import (
	"fmt"
	"math"
	"math/big"
)

// Definition names a rule for reading a percentile off a sample. Accord's
// own is NearestRank; the others are the rules of the tools whose figures
// stand beside Accord's, so that a tool's number can be checked against the
// same samples under the tool's own rule, and so that a comparison with a
// tool's summary uses one rule on both sides.
type Definition string

const (
	// NearestRank is X_(⌈q·n⌉): Accord's canonical definition (see Rank).
	NearestRank Definition = "nearest-rank"
	// NumpyLinear is numpy.percentile's default ("linear", Hyndman–Fan
	// type 7): with h = (n − 1)·q, X_(⌊h⌋+1) + (h − ⌊h⌋)·(X_(⌊h⌋+2) −
	// X_(⌊h⌋+1)). vLLM's benchmark, GenAI-Perf and AIPerf use it.
	NumpyLinear Definition = "numpy-linear"
	// FioBins is fio's rule over its latency bins (stat.c,
	// calc_clat_percentiles) from fio 3.14: the first bin whose running
	// count reaches p/100 · N, in x87 extended precision (C's long double
	// on x86-64 Linux, where fio's releases are built). fio's Makefile
	// builds with -O3 -ffast-math, and gcc then computes p/100 · N as
	// p · (N · 0.01L), with 0.01L rounded below 1/100: for N = 100 and
	// p = 30 that is exactly 30, where the source's literal order would
	// be a hair above. The machine code of Debian's fio 3.33 does so, and
	// so does its output (testdata fio-3.33-jsonplus-hundred-ios.json).
	FioBins Definition = "fio-bins"
	// FioBinsDouble is the same rule as fio before 3.14 evaluates it, in
	// double precision (fio 3.14, commit 298d751e, added the long double
	// cast): p · (N · 0.01) as gcc builds it with fio's flags. It differs
	// from FioBins only where p/100 · N falls within a rounding error of a
	// whole count, and then by one bin (N = 1000, p = 99.9: the 999th
	// sample, where FioBins takes the 1000th).
	FioBinsDouble Definition = "fio-bins-double"
)

// Definitions lists the known definitions.
var Definitions = []Definition{NearestRank, NumpyLinear, FioBins, FioBinsDouble}

// Valid reports whether d is a known definition.
func (d Definition) Valid() bool {
	for _, k := range Definitions {
		if d == k {
			return true
		}
	}
	return false
}

// Label says the definition in words, for pages and explanations.
func (d Definition) Label() string {
	switch d {
	case NearestRank:
		return "nearest rank"
	case NumpyLinear:
		return "numpy linear interpolation"
	case FioBins:
		return "fio's bin rule"
	case FioBinsDouble:
		return "fio's bin rule (before fio 3.14: in double precision)"
	}
	return string(d)
}

// Percentile reads the p-th percentile (0 ≤ p ≤ 100, as tools write
// them: 99.9 for p99.9) off the sample by the given definition. FioBins on
// raw samples treats each distinct value as a bin, as fio does with its
// bins' representative values.
func (s Sample) Percentile(d Definition, p float64) (float64, error) {
	if s.n == 0 {
		return math.NaN(), fmt.Errorf("stats: percentile of an empty sample")
	}
	if math.IsNaN(p) || p < 0 || p > 100 {
		return math.NaN(), fmt.Errorf("stats: percentile %v is outside [0, 100]", p)
	}
	switch d {
	case NearestRank:
		return s.Quantile(p / 100), nil
	case NumpyLinear:
		return s.numpyLinear(p / 100), nil
	case FioBins:
		return s.fioBins(p), nil
	case FioBinsDouble:
		return s.fioBinsDouble(p), nil
	}
	return math.NaN(), fmt.Errorf("stats: unknown percentile definition %q", d)
}

// numpyLinear follows numpy.percentile(a, p): q = p / 100, the virtual
// index h = (n − 1)·q, and numpy's own interpolation between the
// neighbours (numpy ≥ 1.22 _lerp: a + (b − a)·t below t = ½, b − (b − a)·(1
// − t) from there, so that it is exact at both ends).
func (s Sample) numpyLinear(q float64) float64 {
	h := float64(s.n-1) * q
	lo := math.Floor(h)
	k := int64(lo) + 1 // 1-based rank of the lower neighbour
	a := s.At(k)
	t := h - lo
	if t == 0 || k >= s.n {
		return a
	}
	b := s.At(k + 1)
	d := b - a
	if t >= 0.5 {
		return b - d*(1-t)
	}
	return a + d*t
}

// extended is the precision of x87's extended format (64-bit significand),
// C's long double on x86-64.
const extended = 64

// fioBins follows fio's calc_clat_percentiles from 3.14, as built: walking
// the bins in order, the first whose running count sum satisfies sum ≥
// p · (N · 0.01L), each product rounded to x87 extended precision.
// Running counts are whole numbers, so that bin is the one holding rank
// ⌈target⌉: the order statistic there (no sort of the sample, which may
// be kept outside memory).
func (s Sample) fioBins(p float64) float64 {
	hundredth := new(big.Float).SetPrec(extended).Quo(big.NewFloat(1), big.NewFloat(100)) // 0.01L
	target := new(big.Float).SetPrec(extended).SetInt64(s.n)
	target.Mul(target, hundredth)
	target.Mul(target, new(big.Float).SetPrec(extended).SetFloat64(p))
	rank, acc := target.Int64()
	if acc == big.Below { // Int64 truncates towards zero: a positive target had a fraction
		rank++
	}
	return s.At(min(max(rank, 1), s.n))
}

// fioBinsDouble follows calc_clat_percentiles of fio before 3.14, as
// built: the first bin whose running count sum satisfies (double) sum ≥ p
// · (N · 0.01), in double precision (x86-64's SSE arithmetic).
func (s Sample) fioBinsDouble(p float64) float64 {
	// The conversions round each product to a double, as the machine code
	// does (Go may otherwise fuse operations). The first running count at
	// or past the target is the one holding rank ⌈target⌉.
	target := float64(p * float64(float64(s.n)*0.01))
	return s.At(min(max(int64(math.Ceil(target)), 1), s.n))
}
