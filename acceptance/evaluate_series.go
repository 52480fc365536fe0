package acceptance

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/accordlab/accord/acceptance/stats"
)

type sideKey struct {
	baseline bool
	key      SeriesKey
}

type evaluator struct {
	cand, base    seriesIndex
	hasBaseline   bool
	comparability Comparability
	resamples     int
	inputsDigest  string

	cache       map[sideKey]*preparedSide
	cacheMetric string

	// The load levels where the load generator was late or starved.
	candFlags, baseFlags map[SeriesKey][]ClientFlag
	acceptClient         bool
}

func flagsByKey(flags []ClientFlag) map[SeriesKey][]ClientFlag {
	m := map[SeriesKey][]ClientFlag{}
	for _, f := range flags {
		m[f.Key()] = append(m[f.Key()], f)
	}
	return m
}

// preparedSide is one side's data for one metric in one series.
type preparedSide struct {
	ms   []Measurement
	data string // samples, histogram or tool-summary
	// Distribution metrics with samples: one sorted sample per repetition
	// (repetitions without samples left out), pooled, and the bootstrap side.
	reps   []stats.Sample
	pooled stats.Sample
	side   *stats.Side
	// Rate metrics: one value per repetition, and for a share of requests
	// the requests it was taken over (0 where unknown).
	rates  []float64
	trials []int64
	tools  []string
	notes  []string
	// defs are the percentile definitions of the tools' summaries (a
	// tool-summary side), "" where a measurement does not record one.
	defs []stats.Definition
}

const (
	dataSamples   = "samples"
	dataHistogram = "histogram"
	dataSummary   = "tool-summary"
)

func (e *evaluator) prepared(baseline bool, m Metric, key SeriesKey) (*preparedSide, error) {
	sk := sideKey{baseline, key}
	if p, ok := e.cache[sk]; ok {
		return p, nil
	}
	idx := e.cand
	who := "candidate"
	if baseline {
		idx, who = e.base, "baseline"
	}
	ms := idx[m.ID][key]
	if ms == nil {
		e.cache[sk] = nil
		return nil, nil
	}
	p, err := prepareSide(m, ms)
	if err != nil {
		return nil, fmt.Errorf("%s %s in %s: %w", who, m.ID, seriesLabel(key), err)
	}
	e.cache[sk] = p
	return p, nil
}

func prepareSide(m Metric, ms []Measurement) (*preparedSide, error) {
	p := &preparedSide{ms: ms}
	toolSet := map[string]bool{}
	for _, x := range ms {
		if t := strings.TrimSpace(x.Source.Tool + " " + x.Source.ToolVersion); t != "" {
			toolSet[t] = true
		}
	}
	for t := range toolSet {
		p.tools = append(p.tools, t)
	}
	slices.Sort(p.tools)

	if m.Kind == KindRate {
		p.data = dataSamples
		for _, x := range ms {
			switch {
			case len(x.Values) == 1:
				v := x.Values[0]
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, fmt.Errorf("repetition %d: value is %v", x.Repetition, v)
				}
				p.rates = append(p.rates, v)
				p.trials = append(p.trials, x.Trials)
			case len(x.Values) > 1:
				return nil, fmt.Errorf("repetition %d: a rate metric has one value per repetition, not %d", x.Repetition, len(x.Values))
			default:
				p.notes = append(p.notes, fmt.Sprintf("repetition %d has no value and is left out", x.Repetition))
			}
		}
		return p, nil
	}

	var withValues []Measurement
	for _, x := range ms {
		if x.HasSamples() {
			withValues = append(withValues, x)
		}
	}
	if len(withValues) == 0 {
		p.data = dataSummary
		seen := map[stats.Definition]bool{}
		for _, x := range ms {
			if d := x.Source.PercentileDefinition; !seen[d] {
				seen[d] = true
				p.defs = append(p.defs, d)
			}
		}
		slices.Sort(p.defs)
		return p, nil
	}
	p.data = dataSamples
	for _, x := range ms {
		if !x.HasSamples() {
			p.notes = append(p.notes, fmt.Sprintf("repetition %d has only the tool's summary and is left out", x.Repetition))
			continue
		}
		s, err := x.Sample()
		if err != nil {
			return nil, fmt.Errorf("repetition %d: %w", x.Repetition, err)
		}
		if s.N() == 0 {
			p.notes = append(p.notes, fmt.Sprintf("repetition %d has no samples and is left out", x.Repetition))
			continue
		}
		if s.Min() < 0 {
			return nil, fmt.Errorf("repetition %d: value %v is negative", x.Repetition, s.Min())
		}
		if err := s.Err(); err != nil {
			return nil, fmt.Errorf("repetition %d: %w: %w", x.Repetition, ErrSamplesUnreadable, err)
		}
		if x.Counts != nil {
			p.data = dataHistogram
		}
		p.reps = append(p.reps, s)
	}
	if len(p.reps) > 0 {
		p.pooled = stats.Merge(p.reps...)
	}
	return p, nil
}

func (p *preparedSide) bootSide() (*stats.Side, error) {
	if p.side != nil {
		return p.side, nil
	}
	var err error
	if p.rates != nil {
		reps := make([]stats.Sample, len(p.rates))
		for i, v := range p.rates {
			if reps[i], err = stats.NewSample([]float64{v}, nil); err != nil {
				return nil, err
			}
		}
		p.side, err = stats.NewSide(reps)
	} else {
		p.side, err = stats.NewSide(p.reps)
	}
	return p.side, err
}

// err is the first error reading the side's samples kept outside memory
// (stats.Sample.Err): a figure that needed them is not a figure.
func (p *preparedSide) err() error {
	if p == nil {
		return nil
	}
	for _, s := range append([]stats.Sample{p.pooled}, p.reps...) {
		if err := s.Err(); err != nil {
			return err
		}
	}
	return nil
}

// hasData reports whether the side has anything to judge.
func (p *preparedSide) hasData() bool {
	return p != nil && (len(p.reps) > 0 || len(p.rates) > 0 || p.data == dataSummary)
}

// summary returns the tool's value of stat per repetition (all must have it)
// and the sample count when every repetition states one.
func (p *preparedSide) summary(st Statistic) (values []float64, n int64, ok bool) {
	for _, x := range p.ms {
		v, has := x.ToolSummary[string(st)]
		if !has || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, 0, false
		}
		values = append(values, v)
		c, hasN := x.ToolSummary["n"]
		if !hasN {
			c, hasN = x.ToolSummary["count"]
		}
		if hasN && n >= 0 {
			n += int64(c)
		} else {
			n = -1
		}
	}
	return values, max(n, 0), true
}

// critCtx is what every series of one criterion shares.
type critCtx struct {
	index int
	c     Criterion
	m     Metric
	limit float64 // canonical unit (absolute) or percent (relative)
	conf  float64
	alpha float64
	q     float64 // quantile of a percentile statistic
	isQ   bool
	// against names what a change is measured against in explanations:
	// "against the baseline", or within the run for isolation and drift.
	against string
}

func (cc *critCtx) le() bool { return cc.c.Comparator == LessOrEqual }

func (e *evaluator) evaluateCriterion(index int, c Criterion) (CriterionResult, error) {
	m, _ := LookupMetric(c.Metric) // the gate set is validated
	limit, err := CanonicalThreshold(c)
	if err != nil {
		return CriterionResult{}, err
	}
	unit := string(m.Unit)
	if c.Mode.ComparesTwo() {
		unit = "%"
	}
	cr := CriterionResult{
		Index: index, Name: c.Name, Metric: c.Metric, Statistic: c.Statistic, Mode: c.Mode,
		Comparator: c.Comparator, Threshold: c.Threshold, ThresholdUnit: c.Unit, Limit: limit, Unit: unit,
		Severity: c.Severity, Confidence: c.Confidence, MinSamples: c.MinSamples, PointEstimate: c.PointEstimate,
		Reference: c.Reference, Window: c.Window,
	}
	cc := &critCtx{index: index, c: c, m: m, limit: limit, conf: c.Confidence, alpha: alphaOf(c.Confidence)}
	cc.q, cc.isQ = c.Statistic.Quantile()
	cc.against = againstPhrase(c)

	var keys []SeriesKey
	for _, k := range e.cand.seriesKeys(c.Metric) {
		if c.Step == "" || k.Step == c.Step {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		sr := SeriesResult{Step: c.Step, Verdict: Inconclusive, Reason: reasonNoData, Interval: IntervalNone,
			Method: "no data", Candidate: SideSummary{Data: "none"}}
		where := "any step"
		if c.Step != "" {
			where = "step " + c.Step
		}
		sr.Explanation = fmt.Sprintf("The run produced no %s for %s, so this criterion cannot be judged.", metricLabel(m), where)
		cr.Series = []SeriesResult{sr}
		return cr, nil
	}
	for _, k := range keys {
		sr, err := e.evaluateSeries(cc, k)
		if err != nil {
			return CriterionResult{}, err
		}
		cr.Series = append(cr.Series, sr)
	}
	return cr, nil
}

// evaluateSeries judges one series, and holds it back when the load
// generator was late or starved on it (unless the gate set accepts that):
// then the client, not the server, may have set the tail.
func (e *evaluator) evaluateSeries(cc *critCtx, key SeriesKey) (SeriesResult, error) {
	sr, err := e.evaluateSeriesData(cc, key)
	if err != nil || IsClientMetric(cc.m.ID) {
		return sr, err
	}
	flags := prefixedFlags("the candidate", e.candFlags[key])
	if cc.c.Mode == Relative && e.hasBaseline {
		flags = append(flags, prefixedFlags("the baseline", e.baseFlags[key])...)
	}
	if cc.c.Mode == Isolation {
		flags = append(flags, prefixedFlags("the victim alone", e.candFlags[SeriesKey{Step: cc.c.Reference, Level: key.Level}])...)
	}
	if len(flags) == 0 {
		return sr, nil
	}
	what := fmt.Sprintf("The load generator was late or starved on %s (%s)", seriesLabel(key), strings.Join(flags, "; "))
	if e.acceptClient {
		sr.Notes = append(sr.Notes, "client-limited level judged: the gate set accepts it (accept_client_limited: true)")
		sr.Explanation += " " + what + "; the gate set accepts such levels (accept_client_limited: true), so the verdict stands, but the client may have set part of the tail."
		return sr, nil
	}
	if sr.Verdict == Incomparable {
		sr.Explanation += " " + what + "."
		return sr, nil
	}
	sr.Verdict, sr.Reason = Inconclusive, reasonClientLimited
	sr.PValue, sr.PValueFail = nil, nil
	sr.Needed = &Needed{Basis: "the same level again with a load generator that keeps up (a probe with CPU to spare), or accept_client_limited: true in the gate set"}
	sr.Explanation = what + ": the client, not the server, may have set the tail, so this is not judged. Run the level again on a host with CPU to spare for the probe (or keep other work off its cores), or let the gate set accept such levels (accept_client_limited: true). For information: " + sr.Explanation
	return sr, nil
}

func prefixedFlags(who string, flags []ClientFlag) []string {
	var out []string
	for _, f := range flags {
		out = append(out, fmt.Sprintf("%s's repetition %d: %s", who, f.Repetition, strings.Join(f.Reasons, ", ")))
	}
	return out
}

func (e *evaluator) evaluateSeriesData(cc *critCtx, key SeriesKey) (SeriesResult, error) {
	cs, err := e.prepared(false, cc.m, key)
	if err != nil {
		return SeriesResult{}, err
	}
	sr := SeriesResult{Step: key.Step, Level: key.Level, Interval: IntervalNone}
	sr.Candidate = sideSummary(cc, cs)
	sr.Notes = append(sr.Notes, prefixed("candidate", cs.notes)...)
	if !cs.hasData() {
		sr.Verdict, sr.Reason, sr.Method = Inconclusive, reasonNoData, "no data"
		sr.Explanation = fmt.Sprintf("No repetition of %s has %s values, so it cannot be judged.", seriesLabel(key), metricLabel(cc.m))
		return sr, nil
	}
	switch cc.c.Mode {
	case Absolute:
		return e.absolute(cc, key, cs, sr)
	case Isolation:
		return e.isolation(cc, key, cs, sr)
	case Drift:
		return e.drift(cc, key, cs, sr)
	}
	if !e.hasBaseline {
		sr.Verdict, sr.Reason, sr.Method = Inconclusive, reasonNoBaseline, "no baseline"
		sr.Explanation = fmt.Sprintf("This criterion compares with a baseline run, and none was given; %s is %s.",
			statLabel(cc.c.Statistic, cc.m), orUnknown(sr.Candidate.Value, cc.m.Unit))
		return sr, nil
	}
	bs, err := e.prepared(true, cc.m, key)
	if err != nil {
		return SeriesResult{}, err
	}
	if !bs.hasData() {
		sr.Verdict, sr.Reason, sr.Method = Incomparable, reasonBaselineNoSeries, "no baseline series"
		sr.Explanation = fmt.Sprintf("The baseline run has no %s for %s, so there is nothing to compare with.", metricLabel(cc.m), seriesLabel(key))
		return sr, nil
	}
	b := sideSummary(cc, bs)
	sr.Baseline = &b
	sr.Notes = append(sr.Notes, prefixed("baseline", bs.notes)...)
	sr, err = e.relative(cc, key, cs, bs, sr)
	if err != nil {
		return SeriesResult{}, err
	}
	if !e.comparability.Comparable {
		sr.Verdict, sr.Reason = Incomparable, reasonFactsDiffer
		sr.Needed = nil
		sr.Explanation = fmt.Sprintf("The candidate and baseline hosts differ in %s, so the comparison is void; for information only: %s",
			factList(e.comparability.Differences), sr.Explanation)
	}
	if e.comparability.NoFacts {
		sr.Explanation += " Neither run recorded host facts (imported results carry none), so whether they ran on comparable hosts was not checked."
	}
	return sr, nil
}

func prefixed(who string, notes []string) []string {
	out := make([]string, len(notes))
	for i, n := range notes {
		out[i] = who + ": " + n
	}
	return out
}

// sideSummary describes a side: n, repetitions, the statistic pooled and
// per repetition.
func sideSummary(cc *critCtx, p *preparedSide) SideSummary {
	s := SideSummary{Data: p.data, Tools: p.tools, Repetitions: len(p.ms)}
	switch {
	case p.rates != nil || cc.m.Kind == KindRate:
		s.N = int64(len(p.rates))
		s.Repetitions = len(p.rates)
		if len(p.rates) > 0 {
			s.Value = finiteOrNil(meanOf(p.rates))
			s.PerRepetition = slices.Clone(p.rates)
		}
	case p.data == dataSummary:
		vals, n, ok := p.summary(cc.c.Statistic)
		s.N = n
		if ok {
			s.Value = finiteOrNil(meanOf(vals))
			s.PerRepetition = vals
		}
	default:
		s.N = p.pooled.N()
		s.Repetitions = len(p.reps)
		if len(p.reps) > 0 {
			s.Value = finiteOrNil(sampleStat(p.pooled, cc))
			for _, r := range p.reps {
				s.PerRepetition = append(s.PerRepetition, sampleStat(r, cc))
			}
		}
	}
	return s
}

func sampleStat(s stats.Sample, cc *critCtx) float64 {
	switch {
	case cc.isQ:
		return s.Quantile(cc.q)
	case cc.c.Statistic == StatMean:
		return s.Mean()
	default: // max
		return s.Max()
	}
}

func meanOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// num returns a pointer to v, or nil when v is not a finite number (JSON
// has no NaN or infinity).
func finiteOrNil(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func (e *evaluator) seed(cc *critCtx, key SeriesKey) ([32]byte, string) {
	cj, err := canonicalJSON(cc.c)
	if err != nil { // a validated criterion always encodes
		panic(fmt.Sprintf("acceptance: encode criterion: %v", err))
	}
	w := newDigestWriter("accord bootstrap seed v1\n", 1<<10)
	w.str(e.inputsDigest)
	w.varint(int64(cc.index))
	w.str(string(cj))
	w.str(key.Step)
	w.str(key.Level)
	s := w.raw()
	return s, fmt.Sprintf("%x", s[:16])
}

// decide turns the two p-values into a verdict at level alpha.
func verdictFromP(pPass, pFail, alpha float64) Verdict {
	switch {
	case pPass <= alpha*(1+1e-12):
		return Pass
	case pFail <= alpha*(1+1e-12):
		return Fail
	}
	return Inconclusive
}

// growth is the factor by which the sample size would have to grow for a
// p-value p to reach level a, if the effect stayed and the standard error
// shrank as 1/√n; 0 when p says nothing about the direction (p ≥ 0.5).
func growth(p, a float64) float64 {
	if p >= 0.5 || p <= 0 {
		return 0
	}
	r := stats.NormalQuantile(1-a) / stats.NormalQuantile(1-p)
	return r * r
}

func grow(n int64, f float64) int64 {
	if f <= 0 {
		return 0
	}
	return max(int64(math.Ceil(float64(n)*f)), n+1)
}

// ---- absolute criteria ----

func (e *evaluator) absolute(cc *critCtx, key SeriesKey, cs *preparedSide, sr SeriesResult) (SeriesResult, error) {
	switch {
	case cc.m.Kind == KindRate:
		return absRate(cc, cs, sr), nil
	case cs.data == dataSummary:
		return absSummary(cc, cs, sr), nil
	case cc.c.Statistic == StatMax:
		return absMax(cc, cs, sr), nil
	}
	n := cs.pooled.N()
	sr.Estimate = sr.Candidate.Value
	if cc.c.MinSamples > 0 && n < int64(cc.c.MinSamples) {
		return minSamples(cc, sr, n, "samples"), nil
	}
	if cc.isQ {
		return e.absQuantile(cc, key, cs, sr)
	}
	return e.absMean(cc, key, cs, sr)
}

func minSamples(cc *critCtx, sr SeriesResult, n int64, what string) SeriesResult {
	sr.Verdict, sr.Reason = Inconclusive, reasonMinSamples
	sr.Method = fmt.Sprintf("min_samples %d not reached", cc.c.MinSamples)
	if what == "repetitions" {
		sr.Needed = &Needed{CandidateRepetitions: cc.c.MinSamples, Basis: "min_samples of the criterion"}
		if sr.Baseline != nil {
			sr.Needed.BaselineRepetitions = cc.c.MinSamples
		}
	} else {
		sr.Needed = &Needed{CandidateSamples: int64(cc.c.MinSamples), Basis: "min_samples of the criterion"}
		if sr.Baseline != nil {
			sr.Needed.BaselineSamples = int64(cc.c.MinSamples)
		}
	}
	sr.Explanation = fmt.Sprintf("Only %s %s of %s (the criterion asks for at least %s), so it is not judged; run at least %s.",
		fmtCount(n), what, metricLabel(cc.m), fmtCount(int64(cc.c.MinSamples)), fmtCount(int64(cc.c.MinSamples)))
	return sr
}

func (e *evaluator) absQuantile(cc *critCtx, key SeriesKey, cs *preparedSide, sr SeriesResult) (SeriesResult, error) {
	pooled := cs.pooled
	n, q, a, le := pooled.N(), cc.q, cc.alpha, cc.le()
	u, okU := stats.UpperBoundRank(n, q, cc.conf)
	l, okL := stats.LowerBoundRank(n, q, cc.conf)
	var lower, upper *float64
	if okU {
		upper = finiteOrNil(pooled.At(u))
	}
	if okL {
		lower = finiteOrNil(pooled.At(l))
	}
	var k int64
	var pPass, pFail float64
	if le {
		k = pooled.CountAtMost(cc.limit)
		pPass, pFail = stats.PAtMost(n, q, k), stats.PAbove(n, q, k)
	} else {
		k = pooled.CountBelow(cc.limit)
		pPass, pFail = stats.PAtLeast(n, q, k), stats.PBelow(n, q, k)
	}
	sr.Interval = IntervalOrderStatistic
	sr.Method = fmt.Sprintf("nearest-rank %s of %s pooled samples; one-sided %s bounds from order statistics (exact binomial, distribution-free)",
		cc.c.Statistic, fmtCount(n), fmtConf(cc.conf))
	var bootPass, bootFail float64
	if len(cs.reps) >= 2 {
		side, err := cs.bootSide()
		if err != nil {
			return sr, err
		}
		seed, seedHex := e.seed(cc, key)
		reps := stats.Replicates(stats.NewRand(seed), side, stats.StatQuantile(q), e.resamplesFor())
		// Replicates are bucket values; scale them by exact/bucketed
		// estimate so that the histogram's error cancels to first order.
		if g := side.GridQuantile(q); g > 0 {
			f := pooled.Quantile(q) / g
			for i := range reps {
				reps[i] *= f
			}
		}
		bl, bu := stats.LowerBound(reps, a), stats.UpperBound(reps, a)
		if le {
			bootPass, bootFail = stats.ShareAbove(reps, cc.limit), stats.ShareAtMost(reps, cc.limit)
		} else {
			bootPass, bootFail = stats.ShareBelow(reps, cc.limit), stats.ShareAtLeast(reps, cc.limit)
		}
		pPass, pFail = max(pPass, bootPass), max(pFail, bootFail)
		if upper != nil {
			upper = finiteOrNil(max(*upper, bu))
		}
		if lower != nil {
			lower = finiteOrNil(min(*lower, bl))
		}
		sr.Interval = IntervalOrderStatBoot
		sr.Resamples, sr.Seed = len(reps), seedHex
		sr.Method += fmt.Sprintf(", and from a two-stage bootstrap over the %d repetitions (%s resamples: repetitions, then samples, drawn as multinomial counts on a log-bucketed histogram with ≤ %s relative bucket error, rescaled by the exact/bucketed estimate); the more conservative bound of the two is used",
			len(cs.reps), fmtCount(int64(len(reps))), fmtPctPlain(100*stats.HistogramRelativeError))
	}
	if cs.data == dataHistogram {
		sr.Method += "; values are the input histogram's bucket values"
	}
	sr.Lower, sr.Upper = lower, upper
	absoluteRepetitionT(cc, cs, &sr, &pPass, &pFail, "nearest-rank "+string(cc.c.Statistic))
	sr.PValue, sr.PValueFail = finiteOrNil(pPass), finiteOrNil(pFail)
	sr.Verdict = verdictFromP(pPass, pFail, a)
	sr.Reason = reasonDecided
	if sr.Verdict == Inconclusive {
		sr.Reason = reasonStraddles
		leanPass := pPass < pFail
		frac := float64(k) / float64(n)
		var need int64
		// Order statistics: the smallest n at which the same share of samples
		// under the limit would decide.
		if leanPass {
			need = stats.SamplesToDecide(n, q, frac, a, le)
		} else {
			need = stats.SamplesToDecide(n, q, frac, a, !le)
		}
		if len(cs.reps) >= 2 {
			bp := bootPass
			if !leanPass {
				bp = bootFail
			}
			need = max(need, grow(n, growth(bp, a)))
		}
		boundMissing := (leanPass && le && !okU) || (leanPass && !le && !okL)
		if boundMissing {
			sr.Reason = reasonTooFewForBound
			var minN int64
			if le {
				minN = stats.MinSamplesUpper(q, cc.conf)
			} else {
				minN = stats.MinSamplesLower(q, cc.conf)
			}
			need = max(need, minN)
		}
		if need > 0 {
			sr.Needed = &Needed{CandidateSamples: need, Basis: "samples at which the same distribution would decide, from the binomial tail (and the bootstrap's spread, scaled as 1/√n)"}
		}
	}
	sr.Explanation = explainAbsolute(cc, sr)
	return sr, nil
}

func (e *evaluator) resamplesFor() int { return e.resamples }

func (e *evaluator) absMean(cc *critCtx, key SeriesKey, cs *preparedSide, sr SeriesResult) (SeriesResult, error) {
	side, err := cs.bootSide()
	if err != nil {
		return sr, err
	}
	seed, seedHex := e.seed(cc, key)
	reps := stats.Replicates(stats.NewRand(seed), side, stats.StatMean, e.resamplesFor())
	a := cc.alpha
	sr.Lower, sr.Upper = finiteOrNil(stats.LowerBound(reps, a)), finiteOrNil(stats.UpperBound(reps, a))
	var pPass, pFail float64
	if cc.le() {
		pPass, pFail = stats.ShareAbove(reps, cc.limit), stats.ShareAtMost(reps, cc.limit)
	} else {
		pPass, pFail = stats.ShareBelow(reps, cc.limit), stats.ShareAtLeast(reps, cc.limit)
	}
	sr.Interval, sr.Resamples, sr.Seed = IntervalBootstrap, len(reps), seedHex
	sr.Method = fmt.Sprintf("mean of %s pooled samples; one-sided %s percentile bounds from a bootstrap %s (%s resamples, repetitions then samples within them; a resampled mean of more than %s draws is taken from its normal limit)",
		fmtCount(cs.pooled.N()), fmtConf(cc.conf), repetitionsPhrase(len(cs.reps)), fmtCount(int64(len(reps))), fmtCount(stats.ExactMeanDraws))
	absoluteRepetitionT(cc, cs, &sr, &pPass, &pFail, "mean")
	sr.PValue, sr.PValueFail = finiteOrNil(pPass), finiteOrNil(pFail)
	sr.Verdict, sr.Reason = verdictFromP(pPass, pFail, a), reasonDecided
	if sr.Verdict == Inconclusive {
		sr.Reason = reasonStraddles
		if need := grow(cs.pooled.N(), growth(min(pPass, pFail), a)); need > 0 {
			sr.Needed = &Needed{CandidateSamples: need, Basis: "standard error scaled as 1/√n at the same mean"}
		}
	}
	sr.Explanation = explainAbsolute(cc, sr)
	return sr, nil
}

func absMax(cc *critCtx, cs *preparedSide, sr SeriesResult) SeriesResult {
	v := cs.pooled.Max()
	sr.Estimate = finiteOrNil(v)
	sr.Interval = IntervalNone
	sr.Method = "largest observed value; a maximum has no confidence bound"
	sr.Reason = reasonDecided
	if (cc.le() && v <= cc.limit) || (!cc.le() && v >= cc.limit) {
		sr.Verdict = Pass
	} else {
		sr.Verdict = Fail
	}
	if cc.c.MinSamples > 0 && cs.pooled.N() < int64(cc.c.MinSamples) && sr.Verdict == Pass {
		return minSamples(cc, sr, cs.pooled.N(), "samples")
	}
	sr.Explanation = explainMax(cc, sr, v)
	return sr
}

func absSummary(cc *critCtx, cs *preparedSide, sr SeriesResult) SeriesResult {
	vals, n, ok := cs.summary(cc.c.Statistic)
	sr.Interval = IntervalNone
	if ok && needsPointEstimateOptIn(cc) {
		sr.Estimate = finiteOrNil(meanOf(vals))
		return pointEstimateOnly(cc, sr, "the run", cs.tools)
	}
	if !ok {
		sr.Verdict, sr.Reason, sr.Method = Inconclusive, reasonNoData, "tool summary without this statistic"
		sr.Explanation = fmt.Sprintf("There are no %s samples, and the tool's own summary does not give %s, so it cannot be judged.",
			metricLabel(cc.m), cc.c.Statistic)
		return sr
	}
	v := meanOf(vals)
	sr.Estimate = finiteOrNil(v)
	sr.Method = "the tool's own summary value"
	if len(vals) > 1 {
		sr.Method += fmt.Sprintf(" (mean over %d repetitions)", len(vals))
	}
	sr.Method += "; no samples, so no interval"
	if cc.c.PointEstimate {
		sr.Method += "; judged on the point estimate because the gate set allows it for this criterion (point_estimate: true)"
	}
	if cc.c.MinSamples > 0 {
		if n == 0 {
			sr.Verdict, sr.Reason = Inconclusive, reasonUnknownSampleSize
			sr.Explanation = fmt.Sprintf("%s is %s by the tool's own summary, but the summary does not say how many samples it covers, and the criterion asks for at least %s.",
				capitalize(statLabel(cc.c.Statistic, cc.m)), fmtValue(v, cc.m.Unit), fmtCount(int64(cc.c.MinSamples)))
			return sr
		}
		if n < int64(cc.c.MinSamples) {
			return minSamples(cc, sr, n, "samples")
		}
	}
	sr.Reason = reasonDecided
	if (cc.le() && v <= cc.limit) || (!cc.le() && v >= cc.limit) {
		sr.Verdict = Pass
	} else {
		sr.Verdict = Fail
	}
	sr.Explanation = explainSummary(cc, sr, v, cs.tools)
	return sr
}

func absRate(cc *critCtx, cs *preparedSide, sr SeriesResult) SeriesResult {
	r := len(cs.rates)
	sr.Estimate = sr.Candidate.Value
	if cc.c.MinSamples > 0 && r < cc.c.MinSamples {
		return minSamples(cc, sr, int64(r), "repetitions")
	}
	ti, ok := stats.NewTInterval(cs.rates)
	if !ok {
		sr.Verdict, sr.Reason = Inconclusive, reasonTooFewReps
		sr.Method = "one value per repetition; an interval needs at least 2"
		sr.Needed = &Needed{CandidateRepetitions: 2, Basis: "a rate has one value per repetition; Student's t needs two"}
		sr.Explanation = fmt.Sprintf("%s is %s from a single repetition; a rate has one value per repetition, so a confidence interval needs at least 2 repetitions: run at least 2.",
			capitalize(statLabel(cc.c.Statistic, cc.m)), orUnknown(sr.Estimate, cc.m.Unit))
		return sr
	}
	a := cc.alpha
	sr.Lower, sr.Upper = finiteOrNil(ti.Lower(a)), finiteOrNil(ti.Upper(a))
	var pPass, pFail float64
	if cc.le() {
		pPass, pFail = ti.PAtMost(cc.limit), ti.PAbove(cc.limit)
	} else {
		pPass, pFail = ti.PAtLeast(cc.limit), ti.PBelow(cc.limit)
	}
	sr.Interval = IntervalStudentT
	sr.Method = fmt.Sprintf("Student's t on the mean of %d repetitions (one value each), %d degrees of freedom", r, ti.DF)
	if k, n, ok := pooledShare(cc, cs); ok {
		// A share of requests also varies by which requests failed: the
		// exact binomial test on the pooled count bounds it even when the
		// repetitions agree exactly (no errors in any of them). Both tests
		// must agree for a verdict, and the wider bound is shown.
		bl, bu := stats.ClopperPearson(k, n, a)
		sr.Lower, sr.Upper = finiteOrNil(min(ti.Lower(a), bl)), finiteOrNil(max(ti.Upper(a), bu))
		var bPass, bFail float64
		if cc.le() {
			bPass, bFail = stats.BinomialCDF(k, n, cc.limit), stats.BinomialSF(k, n, cc.limit)
		} else {
			bPass, bFail = stats.BinomialSF(k, n, cc.limit), stats.BinomialCDF(k, n, cc.limit)
		}
		pPass, pFail = max(pPass, bPass), max(pFail, bFail)
		sr.Method += fmt.Sprintf(", and the exact binomial test (Clopper–Pearson bound) on the %s of %s requests pooled; both must agree", fmtCount(k), fmtCount(n))
	}
	sr.PValue, sr.PValueFail = finiteOrNil(pPass), finiteOrNil(pFail)
	sr.Verdict, sr.Reason = verdictFromP(pPass, pFail, a), reasonDecided
	if sr.Verdict == Inconclusive {
		sr.Reason = reasonStraddles
		// The smallest R' with t(1−α; R'−1)·s/√R' ≤ |mean − limit|: the
		// left side falls with R', so double, then bisect.
		s := ti.SE * math.Sqrt(float64(r))
		d := math.Abs(ti.Mean - cc.limit)
		ok := func(rr int) bool { return stats.StudentQuantile(1-a, float64(rr-1))*s/math.Sqrt(float64(rr)) <= d }
		if d > 0 {
			lo, hi := r, 2*r
			for !ok(hi) && hi < 1<<20 {
				lo, hi = hi, 2*hi
			}
			if ok(hi) {
				for hi-lo > 1 {
					mid := lo + (hi-lo)/2
					if ok(mid) {
						hi = mid
					} else {
						lo = mid
					}
				}
				sr.Needed = &Needed{CandidateRepetitions: hi, Basis: "Student's t with the same mean and spread"}
			}
		}
	}
	sr.Explanation = explainAbsolute(cc, sr)
	return sr
}

// pooledShare returns the failed (or hit) count k of the n requests pooled
// over the repetitions, for a share metric whose every repetition says how
// many requests it was taken over.
func pooledShare(cc *critCtx, cs *preparedSide) (k, n int64, ok bool) {
	if cc.m.Unit != UnitRatio || len(cs.trials) != len(cs.rates) || len(cs.rates) == 0 {
		return 0, 0, false
	}
	for i, t := range cs.trials {
		if t <= 0 {
			return 0, 0, false
		}
		k += int64(math.Round(cs.rates[i] * float64(t)))
		n += t
	}
	return k, n, true
}

// ---- relative criteria ----

func (e *evaluator) relative(cc *critCtx, key SeriesKey, cs, bs *preparedSide, sr SeriesResult) (SeriesResult, error) {
	c, b := sr.Candidate.Value, sr.Baseline.Value
	if c != nil && b != nil {
		sr.Estimate = finiteOrNil(stats.RelativeDifference(*c, *b))
	}
	pointOnly := cs.data == dataSummary || bs.data == dataSummary || cc.c.Statistic == StatMax
	if c == nil || b == nil {
		sr.Verdict, sr.Reason, sr.Method = Inconclusive, reasonNoData, "no value to compare"
		sr.Explanation = fmt.Sprintf("%s is missing on one side (the tool's summary lacks it), so no relative change can be computed.",
			capitalize(statLabel(cc.c.Statistic, cc.m)))
		return sr, nil
	}
	if *b == 0 {
		sr.Verdict, sr.Reason, sr.Method = Inconclusive, reasonBaselineZero, "relative change undefined"
		sr.Explanation = fmt.Sprintf("The baseline's %s is 0, so a relative change is undefined.", statLabel(cc.c.Statistic, cc.m))
		return sr, nil
	}
	if pointOnly {
		summaryOnly := cs.data == dataSummary || bs.data == dataSummary
		if summaryOnly && needsPointEstimateOptIn(cc) {
			who := "the candidate"
			switch {
			case cs.data == dataSummary && bs.data == dataSummary:
				who = "both runs"
			case bs.data == dataSummary:
				who = "the baseline"
			}
			return pointEstimateOnly(cc, sr, who, append(slices.Clone(cs.tools), bs.tools...)), nil
		}
		if summaryOnly && cc.isQ {
			var ok bool
			if sr, ok = oneDefinition(cc, cs, bs, sr); !ok {
				return sr, nil
			}
		}
		return relPointOnly(cc, cs, bs, sr), nil
	}
	if cc.m.Kind == KindRate {
		return e.relRate(cc, key, cs, bs, sr)
	}
	nc, nb := cs.pooled.N(), bs.pooled.N()
	if cc.c.MinSamples > 0 && min(nc, nb) < int64(cc.c.MinSamples) {
		return minSamples(cc, sr, min(nc, nb), "samples"), nil
	}
	if cc.isQ {
		// A bootstrap of a quantile that sits at the sample's edge (p99 of
		// 60 samples is the largest) is unreliable; ask for as many samples
		// as a distribution-free bound on that quantile needs.
		minN := stats.MinSamplesUpper(cc.q, cc.conf)
		if nc < minN || nb < minN {
			sr.Verdict, sr.Reason = Inconclusive, reasonTooFewForBound
			sr.Method = fmt.Sprintf("at least %s samples a side are needed to resample %s", fmtCount(minN), cc.c.Statistic)
			sr.Needed = &Needed{CandidateSamples: max(nc, minN), BaselineSamples: max(nb, minN),
				Basis: "samples for the quantile to lie inside the sample (as for a distribution-free bound)"}
			sr.Explanation = fmt.Sprintf("%s changed by %s %s (%s vs %s, n = %s vs %s), but resampling %s needs at least %s samples on each side, so it cannot be judged yet.",
				capitalize(statLabel(cc.c.Statistic, cc.m)), orUnknownPct(sr.Estimate), cc.against, orUnknown(c, cc.m.Unit), orUnknown(b, cc.m.Unit),
				fmtCount(nc), fmtCount(nb), cc.c.Statistic, fmtCount(minN))
			return sr, nil
		}
	}
	st := stats.StatMean
	what := "mean"
	if cc.isQ {
		st = stats.StatQuantile(cc.q)
		what = "nearest-rank " + string(cc.c.Statistic)
	}
	sc, err := cs.bootSide()
	if err != nil {
		return sr, err
	}
	sb, err := bs.bootSide()
	if err != nil {
		return sr, err
	}
	seed, seedHex := e.seed(cc, key)
	reps := stats.RelativeReplicates(stats.NewRand(seed), sc, sb, st, e.resamplesFor())
	if cc.isQ {
		// Replicates are made of bucket values; shift them by the exact minus
		// the bucketed relative difference, so that the histogram's error
		// (up to ±0.2 points) cancels to first order and the interval sits
		// around the exact estimate.
		gc, gb := sc.GridQuantile(cc.q), sb.GridQuantile(cc.q)
		if gb != 0 && sr.Estimate != nil {
			shift := *sr.Estimate - stats.RelativeDifference(gc, gb)
			for i := range reps {
				reps[i] += shift
			}
		}
	}
	a := cc.alpha
	sr.Lower, sr.Upper = finiteOrNil(stats.LowerBound(reps, a)), finiteOrNil(stats.UpperBound(reps, a))
	pPass, pFail := relShares(cc, reps)
	sr.PValue, sr.PValueFail = finiteOrNil(pPass), finiteOrNil(pFail)
	sr.Interval, sr.Resamples, sr.Seed = IntervalBootstrap, len(reps), seedHex
	sr.Method = fmt.Sprintf("percentile bootstrap of 100·(candidate − baseline)/baseline of the pooled %s, %s resamples; each side resampled in two stages (its repetitions, then samples within them)",
		what, fmtCount(int64(len(reps))))
	if cc.isQ {
		sr.Method += fmt.Sprintf(", drawn as multinomial counts on a log-bucketed histogram with ≤ %s relative bucket error and shifted by the exact minus the bucketed difference", fmtPctPlain(100*stats.HistogramRelativeError))
	} else {
		sr.Method += fmt.Sprintf("; a resampled mean of more than %s draws is taken from its normal limit", fmtCount(stats.ExactMeanDraws))
	}
	if rt, ok := repetitionT(cc, cs, bs); ok {
		// The bootstrap resamples a few repetitions, which understates how
		// much whole runs differ (in simulation, 3 repetitions a side with
		// ±15 % run-to-run variation passed an A/A gate 8–17 % of the time
		// at a nominal 5 %). Student's t on each repetition's own statistic
		// counts that variation with the degrees of freedom it has: both
		// tests must agree, and the wider bound is shown.
		addRepetitionT(cc, rt, math.Log1p(cc.limit/100), func(d float64) float64 { return 100 * math.Expm1(d) }, &sr, &pPass, &pFail)
		sr.PValue, sr.PValueFail = finiteOrNil(pPass), finiteOrNil(pFail)
		sr.Method += fmt.Sprintf("; and Student's t on the log of each repetition's own %s (%d vs %d repetitions, %d degrees of freedom), so that run-to-run variation counts: both must agree, and the wider bound is shown",
			what, len(cs.reps), len(bs.reps), rt.DF)
	} else {
		// One repetition on a side cannot show how much whole runs differ;
		// say so rather than imply the interval covers it.
		sr.Method += fmt.Sprintf("; with %d vs %d repetitions the interval covers the sampling within runs only, not run-to-run variation (repeat the runs, 2 or more a side and better %d, to let it show)",
			len(cs.reps), len(bs.reps), MinRateRepetitions)
	}
	sr.Verdict, sr.Reason = verdictFromP(pPass, pFail, a), reasonDecided
	if sr.Verdict == Inconclusive {
		sr.Reason = reasonStraddles
		if f := growth(min(pPass, pFail), a); f > 0 {
			sr.Needed = &Needed{CandidateSamples: grow(nc, f), BaselineSamples: grow(nb, f),
				Basis: "bootstrap spread scaled as 1/√n on both sides at the same difference"}
		}
	}
	sr.Explanation = explainRelative(cc, sr)
	return sr, nil
}

// repetitionLogs is Student's t on the mean log of each repetition's own
// statistic (the criterion's percentile, or the mean): false when the side
// has fewer than two repetitions or a statistic is not positive.
func repetitionLogs(cc *critCtx, p *preparedSide) (stats.TInterval, bool) {
	logs := make([]float64, len(p.reps))
	for i, s := range p.reps {
		v := s.Mean()
		if cc.isQ {
			v = s.Quantile(cc.q)
		}
		if !(v > 0) || math.IsInf(v, 0) {
			return stats.TInterval{}, false
		}
		logs[i] = math.Log(v)
	}
	return stats.NewTInterval(logs)
}

// repetitionT is Student's t on the difference of the mean logs of each
// repetition's own statistic (candidate minus baseline), with the
// conservative min(R_cand, R_base) − 1 degrees of freedom; false when a
// side has fewer than two repetitions or a statistic is not positive.
func repetitionT(cc *critCtx, cs, bs *preparedSide) (stats.TInterval, bool) {
	tc, okC := repetitionLogs(cc, cs)
	tb, okB := repetitionLogs(cc, bs)
	if !okC || !okB || cc.limit <= -100 {
		return stats.TInterval{}, false
	}
	return stats.TInterval{Mean: tc.Mean - tb.Mean, SE: math.Hypot(tc.SE, tb.SE), DF: min(tc.DF, tb.DF)}, true
}

// absoluteRepetitionT adds, for two or more repetitions, Student's t on the
// mean log of each repetition's own statistic against the limit, so that
// run-to-run variation counts: the verdict needs it to agree, and the
// wider bound is shown.
func absoluteRepetitionT(cc *critCtx, cs *preparedSide, sr *SeriesResult, pPass, pFail *float64, what string) {
	rt, ok := repetitionLogs(cc, cs)
	if !ok || !(cc.limit > 0) {
		return
	}
	addRepetitionT(cc, rt, math.Log(cc.limit), math.Exp, sr, pPass, pFail)
	sr.Method += fmt.Sprintf("; and Student's t on the log of each repetition's own %s (%d repetitions, %d degrees of freedom), so that run-to-run variation counts", what, len(cs.reps), rt.DF)
}

// addRepetitionT folds Student's t on the logs (rt, against the limit lim
// on the log scale) into a result: each p-value becomes the larger of the
// two tests' (both must agree), and each bound the wider, mapped back to
// the criterion's scale by fromLog.
func addRepetitionT(cc *critCtx, rt stats.TInterval, lim float64, fromLog func(float64) float64, sr *SeriesResult, pPass, pFail *float64) {
	var tPass, tFail float64
	if cc.le() {
		tPass, tFail = rt.PAtMost(lim), rt.PAbove(lim)
	} else {
		tPass, tFail = rt.PAtLeast(lim), rt.PBelow(lim)
	}
	*pPass, *pFail = max(*pPass, tPass), max(*pFail, tFail)
	if sr.Lower != nil {
		sr.Lower = finiteOrNil(min(*sr.Lower, fromLog(rt.Lower(cc.alpha))))
	}
	if sr.Upper != nil {
		sr.Upper = finiteOrNil(max(*sr.Upper, fromLog(rt.Upper(cc.alpha))))
	}
}

// relShares returns the shares of replicates against the claim (p-values)
// for passing and for failing.
func relShares(cc *critCtx, reps []float64) (pPass, pFail float64) {
	if cc.le() {
		return stats.ShareAbove(reps, cc.limit), stats.ShareAtMost(reps, cc.limit)
	}
	return stats.ShareBelow(reps, cc.limit), stats.ShareAtLeast(reps, cc.limit)
}

func (e *evaluator) relRate(cc *critCtx, key SeriesKey, cs, bs *preparedSide, sr SeriesResult) (SeriesResult, error) {
	rc, rb := len(cs.rates), len(bs.rates)
	if cc.c.MinSamples > 0 && min(rc, rb) < cc.c.MinSamples {
		return minSamples(cc, sr, int64(min(rc, rb)), "repetitions"), nil
	}
	if rc < MinRateRepetitions || rb < MinRateRepetitions {
		sr.Verdict, sr.Reason = Inconclusive, reasonTooFewReps
		sr.Method = fmt.Sprintf("one value per repetition; the bootstrap over repetitions needs at least %d per side", MinRateRepetitions)
		sr.Needed = &Needed{CandidateRepetitions: max(rc, MinRateRepetitions), BaselineRepetitions: max(rb, MinRateRepetitions),
			Basis: "a rate has one value per repetition; its interval comes from repetitions"}
		sr.Explanation = fmt.Sprintf("%s changed by %s %s, from %d vs %d repetitions; a rate has one value per repetition, so its interval comes from repetitions, and that needs at least %d on each side.",
			capitalize(statLabel(cc.c.Statistic, cc.m)), orUnknownPct(sr.Estimate), cc.against, rc, rb, MinRateRepetitions)
		return sr, nil
	}
	sc, err := cs.bootSide()
	if err != nil {
		return sr, err
	}
	sb, err := bs.bootSide()
	if err != nil {
		return sr, err
	}
	exp, err := stats.NewRelativeExpansion(cs.rates, bs.rates)
	if err != nil {
		return sr, err
	}
	seed, seedHex := e.seed(cc, key)
	reps := stats.RelativeReplicates(stats.NewRand(seed), sc, sb, stats.StatRepetitionMean, e.resamplesFor())
	a := cc.alpha
	a2 := exp.Alpha(a)
	sr.Lower, sr.Upper = finiteOrNil(stats.LowerBound(reps, a2)), finiteOrNil(stats.UpperBound(reps, a2))
	sharePass, shareFail := relShares(cc, reps)
	pPass, pFail := exp.PValue(sharePass), exp.PValue(shareFail)
	sr.PValue, sr.PValueFail = finiteOrNil(pPass), finiteOrNil(pFail)
	sr.Interval, sr.Resamples, sr.Seed = IntervalExpandedBoot, len(reps), seedHex
	df := "∞"
	if !math.IsInf(exp.DF, 1) {
		df = fmtNum(exp.DF)
	}
	sr.Method = fmt.Sprintf("bootstrap over repetitions of 100·(candidate − baseline)/baseline of the mean rate, %s resamples, read at the expanded level α' = %s that calibrates the percentile interval to Student's t with %s degrees of freedom (Hesterberg 2015)",
		fmtCount(int64(len(reps))), fmtNum(a2), df)
	sr.Verdict, sr.Reason = verdictFromP(pPass, pFail, a), reasonDecided
	if sr.Verdict == Inconclusive {
		sr.Reason = reasonStraddles
		if f := growth(min(pPass, pFail), a); f > 0 {
			sr.Needed = &Needed{
				CandidateRepetitions: int(grow(int64(rc), f)), BaselineRepetitions: int(grow(int64(rb), f)),
				Basis: "spread of the repetitions scaled as 1/√R at the same difference",
			}
		}
	}
	sr.Explanation = explainRelative(cc, sr)
	return sr, nil
}

// needsPointEstimateOptIn says whether a criterion on a tool's summary
// waits for point_estimate: true: percentiles and means do (a tool's
// summary gives them no interval, and Accord will not judge them on a
// point estimate unasked); a maximum has no interval in any case.
func needsPointEstimateOptIn(cc *critCtx) bool {
	return !cc.c.PointEstimate && (cc.isQ || cc.c.Statistic == StatMean)
}

// pointEstimateOnly is the verdict on a percentile or mean where a side
// has only a tool's summary and the gate set did not opt the criterion
// into point estimates: INCONCLUSIVE, saying what would make it
// judgeable.
func pointEstimateOnly(cc *critCtx, sr SeriesResult, who string, tools []string) SeriesResult {
	sr.Verdict, sr.Reason, sr.Interval = Inconclusive, reasonPointEstimate, IntervalNone
	sr.Method = "not judged: only a tool's own summary on " + who + ", a point estimate without samples, and the criterion does not allow point estimates"
	sr.Needed = &Needed{Basis: "per-request samples or histogram bins on every side (or point_estimate: true on the criterion)"}
	value := ""
	if sr.Estimate != nil {
		if cc.c.Mode == Relative {
			value = fmt.Sprintf(" (it changed by %s %s by those figures)", fmtPct(*sr.Estimate), cc.against)
		} else {
			value = fmt.Sprintf(" (%s)", fmtValue(*sr.Estimate, cc.m.Unit))
		}
	}
	sr.Explanation = fmt.Sprintf("%s is known on %s only from %s%s: a point estimate, with no per-request samples or histogram to bound it, so it is not judged. "+
		"To judge it, import the per-request data (vLLM's --save-detailed result, AIPerf's profile_export.jsonl, fio's json+ output) or run the step with Accord's probe; "+
		"or let the gate set judge this criterion on point estimates (point_estimate: true), which every verdict and report then shows.",
		capitalize(statLabel(cc.c.Statistic, cc.m)), who, toolPhrase(tools), value)
	return sr
}

// oneDefinition makes a percentile comparison with a tool's summary use
// one definition on both sides: a side with samples is read by the
// summary's own definition; two summaries made by different definitions
// (or one that does not say) are not compared. ok is false when the series
// is decided here (INCONCLUSIVE).
func oneDefinition(cc *critCtx, cs, bs *preparedSide, sr SeriesResult) (SeriesResult, bool) {
	def, known := stats.Definition(""), true
	for _, p := range []*preparedSide{cs, bs} {
		if p.data != dataSummary {
			continue
		}
		for _, d := range p.defs {
			switch {
			case d == "":
				known = false
			case def == "":
				def = d
			case def != d:
				sr.Verdict, sr.Reason = Inconclusive, reasonDefinitionsDiffer
				sr.Method = "not compared: the two sides' percentiles follow different definitions"
				sr.Explanation = fmt.Sprintf("The sides' %s come from tools that compute percentiles differently (%s and %s), and without samples Accord cannot read either side by the other's rule, so they are not compared. Import the per-request data, or run the step with Accord's probe.",
					statLabel(cc.c.Statistic, cc.m), def.Label(), d.Label())
				return sr, false
			}
		}
	}
	if !known || def == "" {
		sr.Verdict, sr.Reason = Inconclusive, reasonDefinitionsDiffer
		sr.Method = "not compared: a tool's summary does not say how its percentiles were computed"
		sr.Explanation = fmt.Sprintf("A side's %s is a tool's summary that does not record how the tool computes percentiles (an import made before Accord kept it), so a comparison could mix two definitions. Import the file again.",
			statLabel(cc.c.Statistic, cc.m))
		return sr, false
	}
	p, _ := cc.c.Statistic.Percent()
	for _, side := range []struct {
		p   *preparedSide
		sum *SideSummary
	}{{cs, &sr.Candidate}, {bs, sr.Baseline}} {
		if side.p.data == dataSummary || len(side.p.reps) == 0 {
			continue
		}
		v, err := side.p.pooled.Percentile(def, p)
		if err != nil {
			continue // the pooled sample is not empty: p is a valid percentile
		}
		side.sum.Value = finiteOrNil(v)
		side.sum.PerRepetition = nil
		for _, r := range side.p.reps {
			x, _ := r.Percentile(def, p)
			side.sum.PerRepetition = append(side.sum.PerRepetition, x)
		}
		side.sum.Definition = def
	}
	if c, b := sr.Candidate.Value, sr.Baseline.Value; c != nil && b != nil && *b != 0 {
		sr.Estimate = finiteOrNil(stats.RelativeDifference(*c, *b))
	}
	sr.Notes = append(sr.Notes, fmt.Sprintf("both sides' %s by %s, the tool summary's own definition", cc.c.Statistic, def.Label()))
	return sr, true
}

func relPointOnly(cc *critCtx, cs, bs *preparedSide, sr SeriesResult) SeriesResult {
	d := *sr.Estimate
	sr.Interval = IntervalNone
	switch {
	case cc.c.Statistic == StatMax:
		sr.Method = "relative change of the largest observed values; a maximum has no confidence interval"
	default:
		sr.Method = "relative change of the tools' own summary values; no samples on at least one side, so no interval; judged on the point estimate because the gate set allows it for this criterion (point_estimate: true)"
	}
	if cc.c.MinSamples > 0 {
		nc, nb := sr.Candidate.N, sr.Baseline.N
		if nc == 0 || nb == 0 {
			sr.Verdict, sr.Reason = Inconclusive, reasonUnknownSampleSize
			sr.Explanation = fmt.Sprintf("%s changed by %s %s by the tools' own summaries, but they do not say how many samples they cover, and the criterion asks for at least %s.",
				capitalize(statLabel(cc.c.Statistic, cc.m)), fmtPct(d), cc.against, fmtCount(int64(cc.c.MinSamples)))
			return sr
		}
		if min(nc, nb) < int64(cc.c.MinSamples) {
			return minSamples(cc, sr, min(nc, nb), "samples")
		}
	}
	sr.Reason = reasonDecided
	if (cc.le() && d <= cc.limit) || (!cc.le() && d >= cc.limit) {
		sr.Verdict = Pass
	} else {
		sr.Verdict = Fail
	}
	tools := append(slices.Clone(cs.tools), bs.tools...)
	sr.Explanation = explainRelativePoint(cc, sr, tools)
	return sr
}

// holdBackForHolm turns a passing series into INCONCLUSIVE because it does
// not survive Holm's correction at the given level.
func holdBackForHolm(cr *CriterionResult, sr *SeriesResult, level float64) {
	sr.Verdict, sr.Reason = Inconclusive, reasonHolm
	p := *sr.PValue
	var needed *Needed
	f := growth(p, level)
	if f > 0 {
		needed = &Needed{Basis: "p-value reaching the Holm level, standard error scaled as 1/√n"}
		switch {
		case sr.Candidate.Repetitions > 0 && cr.Statistic == StatRate:
			needed.CandidateRepetitions = int(grow(int64(sr.Candidate.Repetitions), f))
			if sr.Baseline != nil {
				needed.BaselineRepetitions = int(grow(int64(sr.Baseline.Repetitions), f))
			}
		default:
			needed.CandidateSamples = grow(sr.Candidate.N, f)
			if sr.Baseline != nil {
				needed.BaselineSamples = grow(sr.Baseline.N, f)
			}
		}
	}
	sr.Needed = needed
	sr.Explanation += fmt.Sprintf(" On its own that passes at %s, but with Holm's correction over %d blocking criteria it must reach p ≤ %s and its p is %s, so it is held back as inconclusive.",
		fmtConf(cr.Confidence), cr.Holm.Family, fmtP(level), fmtP(p))
	if needed != nil {
		sr.Explanation += " " + neededSentence(needed)
	}
}

// ErrSamplesUnreadable says that samples kept outside memory could not be
// read (the database or a temporary file failed): nothing is wrong with
// the inputs, and evaluating again may succeed.
var ErrSamplesUnreadable = errors.New("samples kept outside memory could not be read")

// readError is the first error reading samples kept outside memory by
// the sides prepared so far.
func (e *evaluator) readError() error {
	for k, p := range e.cache {
		if err := p.err(); err != nil {
			who := "candidate"
			if k.baseline {
				who = "baseline"
			}
			return fmt.Errorf("%s %s in %s: %w: %w", who, e.cacheMetric, seriesLabel(k.key), ErrSamplesUnreadable, err)
		}
	}
	return nil
}
