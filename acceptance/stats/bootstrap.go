package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Statistic says what a bootstrap replicate computes.
type Statistic struct {
	// Kind is "quantile", "mean" or "repetition-mean" (rate metrics: one
	// value per repetition, averaged; only repetitions are resampled).
	Kind string
	Q    float64 // for quantiles
}

// Bootstrap statistics.
var (
	StatMean           = Statistic{Kind: "mean"}
	StatRepetitionMean = Statistic{Kind: "repetition-mean"}
)

// StatQuantile is the nearest-rank q-quantile.
func StatQuantile(q float64) Statistic { return Statistic{Kind: "quantile", Q: q} }

// ExactMeanDraws is the largest number of draws of a repetition's resample
// for which a resampled mean is drawn value by value. Above it, the
// resampled sum is drawn from the normal distribution with the bootstrap's
// own mean and variance (m·n·μ, m·n·σ²): the bootstrap distribution of a
// mean is that normal up to its skewness, γ/√(m·n), which is at most 0.14
// for the skewness γ ≈ 6 of a lognormal with σ = 1.
const ExactMeanDraws = 2000

// Side is one side of a comparison (the candidate or the baseline run): the
// samples of each repetition of one series.
//
// A replicate is a two-stage bootstrap resample: first as many repetitions
// as there are, drawn with replacement; then, within each drawn repetition,
// as many samples as it has, drawn with replacement. Repetitions are thus
// resampled as units (their spread counts), not pooled blindly. With one
// repetition this is the ordinary bootstrap.
//
// Quantile replicates never materialize the resample. The samples sit in a
// log-bucketed histogram (HistogramRelativeError), and the resample's bucket
// counts are multinomial; the engine walks a binary tree of bucket ranges
// from the root, drawing how many of each repetition's resampled samples
// fall in the left half with a binomial conditioned on the count in the
// node, and descends towards the rank of the quantile. That is an exact
// draw of the resampled quantile's bucket at O(repetitions × log buckets)
// binomial draws, instead of O(samples).
type Side struct {
	reps  []Sample
	hist  *logHistograms
	means []float64
	vars  []float64
	mult  []int64 // scratch: multiplicity of each repetition in a resample
	count []int64 // scratch: resampled samples of each repetition in a node
	left  []int64 // scratch: of those, how many fall in the node's left half
}

// NewSide builds a side from its repetitions' samples.
func NewSide(reps []Sample) (*Side, error) {
	if len(reps) == 0 {
		return nil, fmt.Errorf("stats: a side needs at least one repetition")
	}
	for i, s := range reps {
		if s.n == 0 {
			return nil, fmt.Errorf("stats: repetition %d has no samples", i+1)
		}
		if m := s.Min(); m < 0 {
			return nil, fmt.Errorf("stats: repetition %d has a negative value %v", i+1, m)
		}
	}
	s := &Side{reps: reps, mult: make([]int64, len(reps)), count: make([]int64, len(reps)), left: make([]int64, len(reps))}
	s.means = make([]float64, len(reps))
	s.vars = make([]float64, len(reps))
	for i, r := range reps {
		s.means[i] = r.Mean()
		s.vars[i] = r.Variance()
	}
	return s, nil
}

// Repetitions is the number of repetitions.
func (s *Side) Repetitions() int { return len(s.reps) }

func (s *Side) drawRepetitions(r *rand.Rand) {
	clear(s.mult)
	for range s.reps {
		s.mult[r.IntN(len(s.reps))]++
	}
}

// Replicate draws one bootstrap replicate of the statistic.
func (s *Side) Replicate(r *rand.Rand, st Statistic) float64 {
	s.drawRepetitions(r)
	switch st.Kind {
	case "quantile":
		return s.quantileReplicate(r, st.Q)
	case "mean":
		return s.meanReplicate(r)
	case "repetition-mean":
		var sum float64
		for i, m := range s.mult {
			sum += float64(m) * s.means[i]
		}
		return sum / float64(len(s.reps))
	}
	panic("stats: unknown bootstrap statistic " + st.Kind)
}

func (s *Side) quantileReplicate(r *rand.Rand, q float64) float64 {
	if s.hist == nil {
		h := newLogHistograms(s.reps)
		s.hist = &h
	}
	h := s.hist
	var total int64
	for i, m := range s.mult {
		s.count[i] = m * s.reps[i].n
		total += s.count[i]
	}
	k := Rank(q, total)
	lo, hi := 0, len(h.values)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		var left int64
		for i, c := range s.count {
			var x int64
			if c > 0 {
				cum := h.cum[i]
				switch wl, wt := cum[mid]-cum[lo], cum[hi]-cum[lo]; wl {
				case 0:
				case wt:
					x = c
				default:
					x = Binomial(r, c, float64(wl)/float64(wt))
				}
			}
			s.left[i] = x
			left += x
		}
		if k <= left {
			copy(s.count, s.left)
			hi = mid
			continue
		}
		k -= left
		for i := range s.count {
			s.count[i] -= s.left[i]
		}
		lo = mid
	}
	return h.values[lo]
}

// GridQuantile is the nearest-rank q-quantile of all repetitions pooled,
// without resampling, as the bucketed histogram gives it: the bucket value
// replicates are made of. Comparing it with the exact quantile of the
// samples measures the histogram's error for this data (at most
// HistogramRelativeError), which the caller can take out of the replicates.
func (s *Side) GridQuantile(q float64) float64 {
	if s.hist == nil {
		h := newLogHistograms(s.reps)
		s.hist = &h
	}
	var total int64
	for _, r := range s.reps {
		total += r.n
	}
	k := Rank(q, total)
	j := sort.Search(len(s.hist.values), func(j int) bool {
		var c int64
		for _, cum := range s.hist.cum {
			c += cum[j+1]
		}
		return c >= k
	})
	return s.hist.values[min(j, len(s.hist.values)-1)]
}

func (s *Side) meanReplicate(r *rand.Rand) float64 {
	var sum, n float64
	for i, m := range s.mult {
		if m == 0 {
			continue
		}
		rep := s.reps[i]
		draws := m * rep.n
		n += float64(draws)
		if draws <= ExactMeanDraws {
			for range draws {
				sum += rep.draw(r.Uint64N(uint64(rep.n)))
			}
			continue
		}
		fd := float64(draws)
		sum += fd*s.means[i] + math.Sqrt(fd*s.vars[i])*r.NormFloat64()
	}
	return sum / n
}

// Replicates draws b replicates of the statistic of one side, sorted.
func Replicates(r *rand.Rand, side *Side, st Statistic, b int) []float64 {
	out := make([]float64, b)
	for i := range out {
		out[i] = side.Replicate(r, st)
	}
	slices.Sort(out)
	return out
}

// RelativeReplicates draws b replicates of the relative difference in
// percent, 100·(θ*cand − θ*base)/θ*base, candidate and baseline resampled
// independently, sorted. A baseline replicate of 0 gives +Inf (or 0 when the
// candidate's is 0 too).
func RelativeReplicates(r *rand.Rand, cand, base *Side, st Statistic, b int) []float64 {
	out := make([]float64, b)
	for i := range out {
		c := cand.Replicate(r, st)
		bv := base.Replicate(r, st)
		out[i] = RelativeDifference(c, bv)
	}
	slices.Sort(out)
	return out
}

// RelativeDifference is 100·(c − b)/b, with 0/0 = 0 and x/0 = ±Inf.
func RelativeDifference(c, b float64) float64 {
	if b == 0 {
		switch {
		case c == 0:
			return 0
		case c > 0:
			return math.Inf(1)
		default:
			return math.Inf(-1)
		}
	}
	return 100 * (c - b) / b
}

// Percentile intervals and p-values from sorted replicates. With
// k = ⌊α·B⌋, the lower bound is the (k+1)-th smallest replicate and the
// upper bound the (k+1)-th largest; the p-values are shares of replicates,
// so that "bound clears the margin" and "p ≤ α" are the same statement:
//
//	lower ≥ m ⇔ #{r < m}/B ≤ α      upper ≤ m ⇔ #{r > m}/B ≤ α
//	lower > m ⇔ #{r ≤ m}/B ≤ α      upper < m ⇔ #{r ≥ m}/B ≤ α

func tailIndex(alpha float64, b int) int { return int(math.Floor(alpha*float64(b) + 1e-9)) }

// LowerBound is the one-sided lower percentile bound at level 1 − alpha.
func LowerBound(sorted []float64, alpha float64) float64 {
	return sorted[min(tailIndex(alpha, len(sorted)), len(sorted)-1)]
}

// UpperBound is the one-sided upper percentile bound at level 1 − alpha.
func UpperBound(sorted []float64, alpha float64) float64 {
	return sorted[max(len(sorted)-1-tailIndex(alpha, len(sorted)), 0)]
}

// ShareBelow is #{r < m}/B; ShareAtMost #{r ≤ m}/B; ShareAbove #{r > m}/B;
// ShareAtLeast #{r ≥ m}/B.
func ShareBelow(sorted []float64, m float64) float64 {
	i, _ := slices.BinarySearch(sorted, m)
	return float64(i) / float64(len(sorted))
}

func ShareAtMost(sorted []float64, m float64) float64 {
	return float64(countAtMost(sorted, m)) / float64(len(sorted))
}

func ShareAbove(sorted []float64, m float64) float64 { return 1 - ShareAtMost(sorted, m) }

func ShareAtLeast(sorted []float64, m float64) float64 { return 1 - ShareBelow(sorted, m) }

func countAtMost(sorted []float64, m float64) int {
	lo, hi := 0, len(sorted)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if sorted[mid] <= m {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// Expansion calibrates a percentile bootstrap over few units (repetitions of
// a rate metric) to Student's t, after Hesterberg's "expanded percentile
// interval" (The American Statistician 69(4), 2015): with R units the
// bootstrap's variance of a mean is (R−1)/R of the usual estimate and its
// tails are normal rather than t, so a nominal 95 % interval covers less.
// The expanded interval reads the replicates at the level α' with
// Φ⁻¹(α') = −Factor·t(1−α; DF).
type Expansion struct {
	Factor float64 // √(usual variance / bootstrap variance)
	// DF is min(R_cand, R_base) − 1, the conservative degrees of freedom
	// for Welch's comparison of two means (never more liberal than
	// Welch–Satterthwaite). In simulation (acceptance's A/A tests) the
	// Satterthwaite value let a zero-margin A/A comparison with 3
	// repetitions per side pass 7 % of the time at a nominal 5 %.
	DF float64
}

// NewRelativeExpansion returns the expansion for the relative difference of
// the means of cand and base (one value per repetition, at least two on each
// side), with the delta-method variances of each side's mean relative to
// its level weighing the two sides' variance corrections.
func NewRelativeExpansion(cand, base []float64) (Expansion, error) {
	if len(cand) < 2 || len(base) < 2 {
		return Expansion{}, fmt.Errorf("stats: expansion needs two repetitions per side, have %d and %d", len(cand), len(base))
	}
	rel := func(v []float64) (vr, boot float64) {
		n := float64(len(v))
		var m float64
		for _, x := range v {
			m += x
		}
		m /= n
		var ss float64
		for _, x := range v {
			ss += (x - m) * (x - m)
		}
		s2 := ss / (n - 1)
		if m != 0 {
			s2 /= m * m
		}
		return s2 / n, s2 / n * (n - 1) / n
	}
	vc, bc := rel(cand)
	vb, bb := rel(base)
	if vc+vb == 0 {
		return Expansion{Factor: 1, DF: math.Inf(1)}, nil
	}
	df := float64(min(len(cand), len(base)) - 1)
	return Expansion{Factor: math.Sqrt((vc + vb) / (bc + bb)), DF: df}, nil
}

// Alpha is the level α' at which to read the replicates for a nominal α.
func (e Expansion) Alpha(alpha float64) float64 {
	t := NormalQuantile(1 - alpha)
	if !math.IsInf(e.DF, 1) {
		t = StudentQuantile(1-alpha, e.DF)
	}
	return NormalCDF(-e.Factor * t)
}

// PValue maps a share of replicates p' to the nominal scale: p ≤ α exactly
// when p' ≤ Alpha(α).
func (e Expansion) PValue(shareBeyond float64) float64 {
	if shareBeyond <= 0 {
		return 0
	}
	if shareBeyond >= 1 {
		return 1
	}
	z := NormalQuantile(1-shareBeyond) / e.Factor
	if math.IsInf(e.DF, 1) {
		return 1 - NormalCDF(z)
	}
	return 1 - StudentCDF(z, e.DF)
}
