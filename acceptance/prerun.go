package acceptance

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/accordlab/accord/acceptance/stats"
)

// Before a run: whether its gate set can judge it. A run whose criteria
// cannot be judged (no baseline for a relative criterion, a baseline of
// another shape or on another kind of host, too few requests for the
// percentile asked for) is said to be so before it starts, not after it
// ran for minutes and came out INCONCLUSIVE or INCOMPARABLE.

// Kinds of pre-run warnings.
const (
	WarnNoBaseline     = "no-baseline"
	WarnProfileShape   = "profile-shape"
	WarnHostFacts      = "host-facts"
	WarnTooFewRequests = "too-few-requests"
)

// RunWarning is one thing a run request would not do well. The run may be
// started anyway; the warning is then kept with it.
type RunWarning struct {
	Kind string `json:"kind"`
	// Criterion names the gate the warning is about ("" for the run).
	Criterion string `json:"criterion,omitempty"`
	Message   string `json:"message"`
}

// PreRunInput is what a run request would run and judge.
type PreRunInput struct {
	Profile ProfileSpec
	// Gates is nil when the run has no gate set.
	Gates *GateSetSpec
	// Baseline is nil when no baseline run is chosen.
	Baseline *PreRunBaseline
	// HostFacts are the candidate host's comparable facts as last taken
	// (nil: never taken, so comparability is known only once it runs).
	HostFacts map[string]string
	// Observed is the requests (samples) per metric and series a previous
	// run of the profile had over all its repetitions: the best guess of
	// what this run will have where the profile does not fix it.
	Observed map[string]map[SeriesKey]int64
}

// PreRunBaseline is the chosen baseline run as the gate engine will see it.
type PreRunBaseline struct {
	RunID   int64
	Profile ProfileSpec
	// Facts are its comparable host facts (nil: it recorded none).
	Facts map[string]string
	// Samples is the samples per metric and series it has, over all its
	// repetitions (what a relative criterion compares with).
	Samples map[string]map[SeriesKey]int64
	Verdict string
}

// PreRunCheck lists what would keep the run's criteria from being judged.
func PreRunCheck(in PreRunInput) []RunWarning {
	p := in.Profile.Normalized()
	var out []RunWarning
	if in.Gates == nil {
		return nil
	}
	gates := in.Gates.Normalized()
	relative := false
	for _, c := range gates.Criteria {
		if c.Mode == Relative {
			relative = true
		}
	}
	var base ProfileSpec
	if in.Baseline != nil {
		base = in.Baseline.Profile.Normalized()
		if relative {
			out = append(out, shapeWarnings(p, base, in.Baseline.RunID)...)
			out = append(out, factWarnings(in.HostFacts, in.Baseline)...)
		}
	}
	for _, c := range gates.Criteria {
		m, ok := LookupMetric(c.Metric)
		if !ok {
			continue
		}
		keys := criterionSeries(p, c)
		if c.Mode == Relative {
			if in.Baseline == nil {
				out = append(out, RunWarning{Kind: WarnNoBaseline, Criterion: c.Name, Message: fmt.Sprintf(
					"%s compares with a baseline run, and none is chosen: it would be INCONCLUSIVE. Choose the run to compare with (the local-NVMe path, say).", c.Name)})
				continue
			}
			if missing := missingSeries(keys, in.Baseline.Samples[c.Metric]); len(missing) > 0 && in.Baseline.Samples != nil {
				out = append(out, RunWarning{Kind: WarnProfileShape, Criterion: c.Name, Message: fmt.Sprintf(
					"The baseline run #%d has no %s for %s, so %s would be INCOMPARABLE there; it has %s.",
					in.Baseline.RunID, metricLabel(m), seriesList(missing), c.Name, seriesList(seriesOf(in.Baseline.Samples[c.Metric])))})
			}
		}
		switch c.Mode {
		case Isolation:
			out = append(out, isolationWarnings(p, c)...)
			ref := c
			ref.Step = c.Reference
			out = append(out, sampleWarnings(p, c, m, criterionSeries(p, ref), in)...)
		case Drift:
			out = append(out, driftWarnings(p, c, m, keys, in)...)
			continue // the windows' samples, not the whole step's
		}
		out = append(out, sampleWarnings(p, c, m, keys, in)...)
	}
	return dedupeWarnings(out)
}

// WarnWithinRun is a warning that an isolation or drift criterion does not
// fit the profile (its steps, its windows).
const WarnWithinRun = "within-run"

// isolationWarnings says when the profile does not measure the victim
// alone and beside the aggressor as the criterion names them.
func isolationWarnings(p ProfileSpec, c Criterion) []RunWarning {
	cc := &specChecker{}
	validateIsolationSteps(cc, "criterion", c, p)
	var out []RunWarning
	for _, e := range cc.result() {
		out = append(out, RunWarning{Kind: WarnWithinRun, Criterion: c.Name, Message: fmt.Sprintf("%s would be INCONCLUSIVE: %s.", c.Name, e.Message)})
	}
	return out
}

// driftWarnings says when a drift criterion's windows would not be
// judged: a level shorter than two windows, or a window with too few
// requests for the percentile (from the profile's rate, or a previous
// run's requests spread evenly over its duration).
func driftWarnings(p ProfileSpec, c Criterion, m Metric, keys []SeriesKey, in PreRunInput) []RunWarning {
	var out []RunWarning
	w := c.Window.D()
	for _, k := range keys {
		j := indexOfStep(p, k.Step)
		if j < 0 || p.Steps[j].Inference == nil {
			continue
		}
		d := p.Steps[j].Inference.Duration.D()
		if d <= 0 {
			continue // ended by a request count: its length is known only once it ran
		}
		if d < 2*w {
			out = append(out, RunWarning{Kind: WarnWithinRun, Criterion: c.Name, Message: fmt.Sprintf(
				"%s compares the first and last %s of %s, which lasts %s, shorter than two windows: it would be INCONCLUSIVE. Run the level longer or shorten the window.",
				c.Name, c.Window, seriesLabel(k), Duration(d))})
			continue
		}
		q, isQ := c.Statistic.Quantile()
		if !isQ || c.Statistic == StatP50 {
			continue
		}
		need := stats.MinSamplesUpper(q, c.Confidence)
		n, basis := expectedSamples(p, m, k, in.Observed)
		if basis == "" {
			continue
		}
		perWindow := int64(float64(n) * w.Seconds() / d.Seconds())
		if perWindow < need {
			out = append(out, RunWarning{Kind: WarnTooFewRequests, Criterion: c.Name, Message: fmt.Sprintf(
				"%s needs at least %s requests in each %s window of %s for a bound on the %s; %s gives about %s a window, so it would be INCONCLUSIVE. Send more requests per second or widen the window.",
				c.Name, fmtCount(need), c.Window, seriesLabel(k), c.Statistic, basis, fmtCount(perWindow))})
		}
	}
	return out
}

// criterionSeries are the series of the profile a criterion judges: every
// level of every step (or of its own step) that produces its metric.
func criterionSeries(p ProfileSpec, c Criterion) []SeriesKey {
	var out []SeriesKey
	for _, s := range p.Steps {
		if (c.Step != "" && s.Name != c.Step) || !StepProduces(s, c.Metric) {
			continue
		}
		for _, lv := range StepLevels(s) {
			out = append(out, SeriesKey{Step: s.Name, Level: lv})
		}
	}
	return out
}

// StepLevels are the load levels a step's measurements are labelled with,
// in the order it runs them ("c=8", "r=2.5"; "" for a step without
// levels). A step whose levels are known only once it ran (a gpu-path
// step's paths) has the one level "*".
func StepLevels(s StepSpec) []string {
	switch {
	case s.Kind == StepInference && s.Inference != nil:
		if shares := s.Inference.ReuseSweep(); len(shares) > 0 {
			out := make([]string, len(shares))
			for i, v := range shares {
				out[i] = ReuseLevel(v)
			}
			return out
		}
		l := s.Inference.Load
		values := l.Sweep
		if l.Mode == "rate" {
			if len(values) == 0 {
				values = []float64{l.Rate}
			}
			out := make([]string, len(values))
			for i, v := range values {
				out[i] = RateLevel(v)
			}
			return out
		}
		if len(values) == 0 {
			values = []float64{float64(l.Concurrency)}
		}
		out := make([]string, len(values))
		for i, v := range values {
			out[i] = ConcurrencyLevel(int(v))
		}
		return out
	case s.Kind == StepGPUPath:
		return []string{"*"}
	}
	return []string{""}
}

// ConcurrencyLevel labels a load level of n concurrent streams ("c=8").
func ConcurrencyLevel(n int) string { return "c=" + strconv.Itoa(n) }

// RateLevel labels a load level of an open-loop request rate ("r=2.5").
func RateLevel(r float64) string { return "r=" + strconv.FormatFloat(r, 'g', -1, 64) }

// ReuseLevel labels a level of a prefix-reuse sweep: the share of each
// prompt that is a shared prefix ("reuse=0.25").
func ReuseLevel(share float64) string { return "reuse=" + strconv.FormatFloat(share, 'g', -1, 64) }

// ReuseOfLevel reads the share of a reuse level ("reuse=0.25" → 0.25);
// false for any other label.
func ReuseOfLevel(level string) (float64, bool) {
	num, ok := strings.CutPrefix(level, "reuse=")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(num, 64)
	return v, err == nil
}

// shapeWarnings compares the steps both profiles run: a step of the
// candidate the baseline does not have, or has with other levels or
// another workload, is judged against nothing like it.
func shapeWarnings(cand, base ProfileSpec, baseRun int64) []RunWarning {
	var out []RunWarning
	byName := map[string]StepSpec{}
	for _, s := range base.Steps {
		byName[s.Name] = s
	}
	for _, s := range cand.Steps {
		if !measuring(s.Kind) {
			continue
		}
		b, ok := byName[s.Name]
		switch {
		case !ok:
			out = append(out, RunWarning{Kind: WarnProfileShape, Message: fmt.Sprintf("The baseline run #%d (%s) has no step %q: relative criteria on it would be INCOMPARABLE.", baseRun, base.Name, s.Name)})
		case b.Kind != s.Kind:
			out = append(out, RunWarning{Kind: WarnProfileShape, Message: fmt.Sprintf("Step %q is a %s step here and a %s step in the baseline run #%d.", s.Name, s.Kind, b.Kind, baseRun)})
		default:
			if cl, bl := StepLevels(s), StepLevels(b); !slices.Equal(cl, bl) {
				out = append(out, RunWarning{Kind: WarnProfileShape, Message: fmt.Sprintf("Step %q sweeps %s here and %s in the baseline run #%d: levels the baseline lacks would be INCOMPARABLE.",
					s.Name, strings.Join(cl, ", "), strings.Join(bl, ", "), baseRun)})
			}
			if d := workloadDifferences(s, b); len(d) > 0 {
				out = append(out, RunWarning{Kind: WarnProfileShape, Message: fmt.Sprintf("Step %q asks for other work than in the baseline run #%d (%s): a difference would be the workload's, not the storage's.",
					s.Name, baseRun, strings.Join(d, "; "))})
			}
		}
	}
	return out
}

func measuring(k StepKind) bool {
	return k == StepInference || k == StepFio || k == StepGPUPath || k == StepCommand
}

// workloadDifferences names what differs in the work two steps of the same
// kind ask for (the endpoint and the target may differ: they are the
// paths being compared).
func workloadDifferences(a, b StepSpec) []string {
	var d []string
	diff := func(what string, x, y any) {
		if fmt.Sprint(x) != fmt.Sprint(y) {
			d = append(d, fmt.Sprintf("%s %v vs %v", what, x, y))
		}
	}
	switch {
	case a.Inference != nil && b.Inference != nil:
		x, y := a.Inference, b.Inference
		diff("API", x.API, y.API)
		diff("prompt tokens", tokenText(x.PromptTokens), tokenText(y.PromptTokens))
		diff("output tokens", tokenText(x.OutputTokens), tokenText(y.OutputTokens))
		diff("load mode", x.Load.Mode, y.Load.Mode)
		diff("duration", x.Duration, y.Duration)
		diff("requests", x.Requests, y.Requests)
		diff("dataset", x.Dataset, y.Dataset)
	case a.Fio != nil && b.Fio != nil:
		x, y := a.Fio, b.Fio
		diff("rw", x.RW, y.RW)
		diff("block size", x.BlockSize, y.BlockSize)
		diff("iodepth", x.IODepth, y.IODepth)
		diff("numjobs", x.NumJobs, y.NumJobs)
		diff("runtime", x.Runtime, y.Runtime)
	}
	return d
}

func tokenText(t TokenDist) string {
	if t.Dist == "fixed" || t.Dist == "" {
		return strconv.Itoa(t.Mean)
	}
	return fmt.Sprintf("%s %d (%d–%d)", t.Dist, t.Mean, t.Min, t.Max)
}

// factWarnings compares the candidate host's facts as last taken with the
// baseline's: the engine judges relative criteria INCOMPARABLE when facts
// that matter differ.
func factWarnings(host map[string]string, b *PreRunBaseline) []RunWarning {
	if host == nil || b.Facts == nil {
		return nil
	}
	diffs := CompareFacts(host, b.Facts)
	if len(diffs) == 0 {
		return nil
	}
	parts := make([]string, len(diffs))
	for i, d := range diffs {
		parts[i] = fmt.Sprintf("%s %s here, %s on the baseline", d.Fact, orAbsent(d.Candidate, d.CandidateAbsent), orAbsent(d.Baseline, d.BaselineAbsent))
	}
	return []RunWarning{{Kind: WarnHostFacts, Message: fmt.Sprintf("This host's facts (as last taken) differ from the baseline run #%d's where it matters: %s. Relative criteria would be INCOMPARABLE unless the host changes before the run.",
		b.RunID, strings.Join(parts, "; "))}}
}

func orAbsent(v string, absent bool) string {
	if absent {
		return "unknown"
	}
	return v
}

// sampleWarnings checks that each series will have enough samples for the
// criterion's percentile at its confidence (the order-statistic bound
// exists only from a certain n), and for its min_samples, on the
// candidate and, for relative criteria, on the baseline.
func sampleWarnings(p ProfileSpec, c Criterion, m Metric, keys []SeriesKey, in PreRunInput) []RunWarning {
	need := int64(c.MinSamples)
	what := fmt.Sprintf("its min_samples of %s", fmtCount(need))
	if q, ok := c.Statistic.Quantile(); ok && c.Statistic != StatP50 {
		// As the engine asks: a lower bound for an absolute ≥ criterion,
		// else an upper one (relative criteria resample the quantile, which
		// needs as many).
		n := stats.MinSamplesUpper(q, c.Confidence)
		if c.Mode == Absolute && c.Comparator == GreaterOrEqual {
			n = stats.MinSamplesLower(q, c.Confidence)
		}
		if n > need {
			need, what = n, fmt.Sprintf("a bound on the %s at %s confidence", c.Statistic, fmtConf(c.Confidence))
		}
	}
	if need <= 1 {
		return nil
	}
	var out []RunWarning
	for _, k := range keys {
		n, basis := expectedSamples(p, m, k, in.Observed)
		if basis != "" && n < need {
			out = append(out, RunWarning{Kind: WarnTooFewRequests, Criterion: c.Name, Message: fmt.Sprintf(
				"%s at %s needs at least %s samples for %s; %s gives about %s, so it would be INCONCLUSIVE. Run longer, at more repetitions, or judge a lower percentile.",
				c.Name, seriesLabel(k), fmtCount(need), what, basis, fmtCount(n))})
		}
		if c.Mode == Relative && in.Baseline != nil && in.Baseline.Samples != nil {
			if bn, ok := in.Baseline.Samples[c.Metric][k]; ok && bn < need {
				out = append(out, RunWarning{Kind: WarnTooFewRequests, Criterion: c.Name, Message: fmt.Sprintf(
					"The baseline run #%d has %s samples of %s at %s, fewer than the %s %s needs for %s: it would be INCONCLUSIVE.",
					in.Baseline.RunID, fmtCount(bn), metricLabel(m), seriesLabel(k), fmtCount(need), c.Name, what)})
			}
		}
	}
	return out
}

// expectedSamples guesses how many samples of a per-request metric a
// series will have over all repetitions, and on what basis ("" when it
// cannot tell). A rate metric has one value per repetition.
func expectedSamples(p ProfileSpec, m Metric, k SeriesKey, observed map[string]map[SeriesKey]int64) (int64, string) {
	reps := int64(max(p.Repetitions, 1))
	if m.Kind == KindRate {
		return reps, fmt.Sprintf("the profile's %s repetitions", fmtCount(reps))
	}
	if n, ok := observed[m.ID][k]; ok {
		return n, "a previous run of this profile"
	}
	for _, s := range p.Steps {
		if s.Name != k.Step || s.Inference == nil {
			continue
		}
		in := s.Inference
		perLevel := int64(-1)
		if in.Load.Mode == "rate" && in.Duration > 0 {
			rate := in.Load.Rate
			if v, err := strconv.ParseFloat(strings.TrimPrefix(k.Level, "r="), 64); err == nil {
				rate = v
			}
			perLevel = int64(math.Floor(rate * in.Duration.D().Seconds()))
		}
		if in.Requests > 0 && (perLevel < 0 || int64(in.Requests) < perLevel) {
			perLevel = int64(in.Requests)
		}
		if perLevel < 0 {
			return 0, ""
		}
		// A multi-host run's series are its hosts' requests merged.
		if hosts := stepHosts(p, s.Name); hosts > 1 {
			return perLevel * reps * hosts, fmt.Sprintf("the profile (%s repetitions of about %s requests on each of at least %d hosts)",
				fmtCount(reps), fmtCount(perLevel), hosts)
		}
		return perLevel * reps, fmt.Sprintf("the profile (%s repetitions of about %s requests)", fmtCount(reps), fmtCount(perLevel))
	}
	return 0, ""
}

// stepHosts is how many hosts at least run a step: the fewest each role
// that runs it may have, together (1 for a one-host profile).
func stepHosts(p ProfileSpec, step string) int64 {
	var n int64
	for _, r := range p.Roles {
		if r.RunsStep(step) {
			lo, _ := r.HostLimits()
			n += int64(lo)
		}
	}
	return max(n, 1)
}

func missingSeries(want []SeriesKey, have map[SeriesKey]int64) []SeriesKey {
	var out []SeriesKey
	for _, k := range want {
		if k.Level == "*" {
			continue
		}
		if _, ok := have[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

func seriesOf(m map[SeriesKey]int64) []SeriesKey {
	out := make([]SeriesKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	SortSeriesKeys(out)
	return out
}

func seriesList(keys []SeriesKey) string {
	if len(keys) == 0 {
		return "none"
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = seriesLabel(k)
	}
	return joinList(parts)
}

// SortSeriesKeys orders series by step, then by level as numbers where
// they are ("c=1, c=4, c=16", not "c=1, c=16, c=4").
func SortSeriesKeys(keys []SeriesKey) {
	slices.SortFunc(keys, func(a, b SeriesKey) int {
		if a.Step != b.Step {
			return strings.Compare(a.Step, b.Step)
		}
		return CompareLevels(a.Level, b.Level)
	})
}

// CompareLevels orders two level labels: by kind ("c=", "r=") and then by
// their number; labels without a number by text.
func CompareLevels(a, b string) int {
	pa, va, oka := levelNumber(a)
	pb, vb, okb := levelNumber(b)
	if oka && okb && pa == pb {
		switch {
		case va < vb:
			return -1
		case va > vb:
			return 1
		}
		return 0
	}
	return strings.Compare(a, b)
}

func levelNumber(l string) (string, float64, bool) {
	prefix, num, ok := strings.Cut(l, "=")
	if !ok {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(num, 64)
	return prefix, v, err == nil
}

func dedupeWarnings(ws []RunWarning) []RunWarning {
	seen := map[string]bool{}
	out := ws[:0]
	for _, w := range ws {
		if !seen[w.Message] {
			seen[w.Message] = true
			out = append(out, w)
		}
	}
	return out
}
