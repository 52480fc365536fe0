package acceptance

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/accordlab/accord/acceptance/stats"
)

// EngineVersion names the evaluation engine. It changes whenever a change
// could change a verdict, a number or an explanation, so that a stored
// evaluation says which rules produced it.
const EngineVersion = "accord-evaluate/3"

// DefaultResamples is the number of bootstrap resamples per relative
// criterion and series.
const DefaultResamples = 10_000

// MinResamples is the fewest resamples an evaluation accepts (tests and
// simulations use fewer than the default to run fast).
const MinResamples = 1_000

// MinRateRepetitions is the fewest repetitions per side for a relative
// criterion on a rate metric. A rate has one value per repetition, so its
// interval comes from repetitions alone; with two per side the bootstrap
// has too few distinct resamples to reach a 95 % tail, and in simulation
// (evaluate_sim_test.go) a same-distribution A/A comparison then passes a
// zero margin far more often than 5 %.
const MinRateRepetitions = 3

// EvaluationInput is everything a gate evaluation depends on. Evaluate does
// no I/O: the caller loads the measurements and the facts.
type EvaluationInput struct {
	Gates GateSetSpec
	// Candidate is the run being judged; Baseline the run relative criteria
	// compare with (nil when there is none).
	Candidate []Measurement
	Baseline  []Measurement
	// CandidateFacts and BaselineFacts are the host facts that decide
	// comparability (see ComparabilityFacts); every key given is compared.
	CandidateFacts map[string]string
	BaselineFacts  map[string]string
	// CandidateHosts and BaselineHosts name a multi-host run's hosts by
	// their place in its facts' keys (HostFactPlaces), so that a difference
	// says whose it is; labels only, never compared.
	CandidateHosts map[string]string
	BaselineHosts  map[string]string
	// ProfileDigest and GateDigest identify the specs (GateSetDigest,
	// ProfileDigest); they are recorded and feed the bootstrap seeds.
	ProfileDigest string
	GateDigest    string
	// Resamples per bootstrap; 0 means DefaultResamples.
	Resamples int
	// Contamination says, one line each, what else measured on the
	// candidate's host while it ran (another run's probe): such numbers are
	// not evidence either way, so the run is never judged PASS (or FAIL).
	Contamination []string
}

// Evaluation is the judgement of one run against one gate set. Its
// CanonicalJSON is byte-identical whenever the inputs are.
type Evaluation struct {
	EngineVersion string           `json:"engine_version"`
	Inputs        EvaluationInputs `json:"inputs"`
	GateSet       string           `json:"gate_set"`
	Correction    string           `json:"correction"`
	Verdict       Verdict          `json:"verdict"`
	Explanation   string           `json:"explanation"`
	Comparability Comparability    `json:"comparability"`
	// Criteria in the gate set's order; blocking ones decide Verdict,
	// advisory ones are reported beside.
	Criteria []CriterionResult `json:"criteria"`
	// ClientFlags are the candidate's load levels where the probe's load
	// generator was late or starved, BaselineClientFlags the baseline's;
	// AcceptClientLimited says the gate set judges them anyway.
	ClientFlags         []ClientFlag `json:"client_flags,omitempty"`
	BaselineClientFlags []ClientFlag `json:"baseline_client_flags,omitempty"`
	AcceptClientLimited bool         `json:"accept_client_limited,omitempty"`
	// Contamination is EvaluationInput.Contamination: when it is set, a
	// PASS or FAIL of the criteria is INCONCLUSIVE overall.
	Contamination []string `json:"contamination,omitempty"`
}

// EvaluationInputs are the digests of everything the evaluation read.
type EvaluationInputs struct {
	ProfileDigest        string `json:"profile_digest,omitempty"`
	GateDigest           string `json:"gate_digest,omitempty"`
	CandidateDigest      string `json:"candidate_digest"`
	BaselineDigest       string `json:"baseline_digest,omitempty"`
	CandidateFactsDigest string `json:"candidate_facts_digest"`
	BaselineFactsDigest  string `json:"baseline_facts_digest,omitempty"`
	Resamples            int    `json:"resamples"`
	// Digest covers all of the above and the engine version; bootstrap seeds
	// are derived from it.
	Digest string `json:"digest"`
}

// CriterionResult is the verdict of one criterion over every series it
// applies to.
type CriterionResult struct {
	Index      int           `json:"index"`
	Name       string        `json:"name"`
	Metric     string        `json:"metric"`
	Statistic  Statistic     `json:"statistic"`
	Mode       CriterionMode `json:"mode"`
	Comparator Comparator    `json:"comparator"`
	Threshold  float64       `json:"threshold"`
	// ThresholdUnit is the unit the threshold was written in; Limit is the
	// threshold in Unit, the metric's canonical unit (absolute) or % (relative).
	ThresholdUnit string   `json:"threshold_unit"`
	Limit         float64  `json:"limit"`
	Unit          string   `json:"unit"`
	Severity      Severity `json:"severity"`
	Confidence    float64  `json:"confidence"`
	MinSamples    int      `json:"min_samples,omitempty"`
	// PointEstimate is set when the gate set lets this criterion be judged
	// on a tool's summary alone (point_estimate: true).
	PointEstimate bool `json:"point_estimate,omitempty"`
	// Reference is an isolation criterion's victim measured alone (Step
	// in the series is the victim under interference); Window a drift
	// criterion's window (the series compare its last with its first).
	Reference string   `json:"reference,omitempty"`
	Window    Duration `json:"window,omitempty"`
	Verdict   Verdict  `json:"verdict"`
	// PValue is the criterion's p-value for passing: the largest over its
	// series (it passes only if every series does). Absent when no series
	// had an interval.
	PValue *float64 `json:"p_value,omitempty"`
	// Holm is set for blocking criteria in the corrected family.
	Holm *HolmAdjustment `json:"holm,omitempty"`
	// Worst is the series that decided the verdict.
	Worst       *SeriesKey     `json:"worst,omitempty"`
	Series      []SeriesResult `json:"series"`
	Explanation string         `json:"explanation"`
}

// HolmAdjustment records the criterion's place in Holm's step-down over the
// blocking criteria.
type HolmAdjustment struct {
	Family int `json:"family"` // blocking criteria with a p-value
	Rank   int `json:"rank"`   // 1 = smallest p-value
	// Level is the unadjusted level its p-value is compared with at its
	// rank, α/(family − rank + 1); AdjustedP ≤ Alpha is the decision.
	Level     float64 `json:"level"`
	AdjustedP float64 `json:"adjusted_p"`
	Alpha     float64 `json:"alpha"`
	Rejected  bool    `json:"rejected"`
}

// Interval kinds (SeriesResult.Interval).
const (
	IntervalOrderStatistic  = "order-statistic"
	IntervalOrderStatBoot   = "order-statistic+bootstrap"
	IntervalBootstrap       = "bootstrap"
	IntervalExpandedBoot    = "expanded-bootstrap"
	IntervalStudentT        = "student-t"
	IntervalNone            = "none"
	reasonDecided           = "decided"
	reasonMinSamples        = "min-samples"
	reasonTooFewForBound    = "too-few-samples-for-bound"
	reasonTooFewReps        = "too-few-repetitions"
	reasonStraddles         = "interval-straddles-limit"
	reasonHolm              = "holm-correction"
	reasonNoBaseline        = "no-baseline"
	reasonBaselineNoSeries  = "baseline-missing-series"
	reasonFactsDiffer       = "host-facts-differ"
	reasonNoData            = "no-data"
	reasonBaselineZero      = "baseline-zero"
	reasonUnknownSampleSize = "sample-size-unknown"
	reasonPointEstimate     = "point-estimate-only"
	reasonClientLimited     = "client-limited"
	reasonDefinitionsDiffer = "percentile-definitions-differ"
	reasonNoReference       = "reference-missing-series"
	reasonNoSendTimes       = "no-send-times"
	reasonWindowsOverlap    = "windows-overlap"
)

// SeriesResult is the verdict of a criterion on one series (step × level).
type SeriesResult struct {
	Step    string  `json:"step"`
	Level   string  `json:"level,omitempty"`
	Verdict Verdict `json:"verdict"`
	// Reason is a stable code for why: decided, min-samples,
	// too-few-samples-for-bound, too-few-repetitions,
	// interval-straddles-limit, holm-correction, no-baseline,
	// baseline-missing-series, host-facts-differ, no-data, baseline-zero,
	// sample-size-unknown, point-estimate-only (a tool's summary on a side
	// and the criterion not opted into point estimates),
	// percentile-definitions-differ (two tools' summaries made by different
	// percentile definitions), client-limited (the load generator was late
	// or starved on the level, and the gate set does not accept that).
	Reason string `json:"reason"`
	// Estimate is the statistic (absolute) or the relative difference in %
	// (relative); Lower and Upper are one-sided bounds at the criterion's
	// confidence, each used for the claim on its side.
	Estimate *float64 `json:"estimate,omitempty"`
	Lower    *float64 `json:"lower,omitempty"`
	Upper    *float64 `json:"upper,omitempty"`
	// Interval says how the bounds were made (order-statistic,
	// order-statistic+bootstrap, bootstrap, expanded-bootstrap, student-t)
	// or "none": the verdict then rests on the point estimate alone.
	Interval  string       `json:"interval"`
	Method    string       `json:"method"`
	Candidate SideSummary  `json:"candidate"`
	Baseline  *SideSummary `json:"baseline,omitempty"`
	Resamples int          `json:"resamples,omitempty"`
	Seed      string       `json:"seed,omitempty"`
	// PValue is for the claim that the criterion holds (PASS when ≤ α, or
	// the Holm level); PValueFail for the claim that it does not.
	PValue      *float64 `json:"p_value,omitempty"`
	PValueFail  *float64 `json:"p_value_fail,omitempty"`
	Needed      *Needed  `json:"needed,omitempty"`
	Notes       []string `json:"notes,omitempty"`
	Explanation string   `json:"explanation"`
}

// SideSummary describes one side's data for a series.
type SideSummary struct {
	// N is the number of samples, or of repetitions for rate metrics; 0
	// when unknown (a tool summary without a count).
	N           int64 `json:"n"`
	Repetitions int   `json:"repetitions"`
	// Value is the statistic over all repetitions together; PerRepetition
	// the statistic of each repetition, in repetition order.
	Value         *float64  `json:"value,omitempty"`
	PerRepetition []float64 `json:"per_repetition,omitempty"`
	// Data is samples, histogram or tool-summary.
	Data  string   `json:"data"`
	Tools []string `json:"tools,omitempty"`
	// Definition is the percentile definition Value follows when it is not
	// Accord's nearest rank: a side compared with a tool's summary is read
	// by that tool's definition.
	Definition stats.Definition `json:"definition,omitempty"`
}

// Needed says how much more data would likely decide an INCONCLUSIVE
// series, if the effect stayed as observed.
type Needed struct {
	CandidateSamples     int64  `json:"candidate_samples,omitempty"`
	BaselineSamples      int64  `json:"baseline_samples,omitempty"`
	CandidateRepetitions int    `json:"candidate_repetitions,omitempty"`
	BaselineRepetitions  int    `json:"baseline_repetitions,omitempty"`
	Basis                string `json:"basis"`
}

// CanonicalJSON encodes the evaluation with object keys sorted, no
// insignificant whitespace, no HTML escaping and Go's shortest round-trip
// number formatting (ECMAScript style, as RFC 8785). The evaluation holds no
// maps and no clock readings, so equal inputs give equal bytes.
func (e Evaluation) CanonicalJSON() ([]byte, error) {
	b, err := canonicalJSON(e)
	if err != nil {
		return nil, fmt.Errorf("canonical evaluation: %w", err)
	}
	return b, nil
}

// Evaluate judges the candidate run (and its baseline, for relative
// criteria) against the gate set. It returns an error only for input that
// cannot be evaluated (an invalid gate set, malformed measurements); lack of
// data is a verdict (INCONCLUSIVE), not an error.
func Evaluate(in EvaluationInput) (Evaluation, error) {
	if err := in.Gates.Validate(); err != nil {
		return Evaluation{}, fmt.Errorf("evaluate: gate set: %w", err)
	}
	gates := in.Gates.Normalized()
	resamples := in.Resamples
	if resamples == 0 {
		resamples = DefaultResamples
	}
	if resamples < MinResamples {
		return Evaluation{}, fmt.Errorf("evaluate: %d resamples is too few (at least %d)", resamples, MinResamples)
	}
	cand, err := indexMeasurements(in.Candidate, "candidate")
	if err != nil {
		return Evaluation{}, fmt.Errorf("evaluate: %w", err)
	}
	var base seriesIndex
	if in.Baseline != nil {
		if base, err = indexMeasurements(in.Baseline, "baseline"); err != nil {
			return Evaluation{}, fmt.Errorf("evaluate: %w", err)
		}
	}

	ev := Evaluation{
		EngineVersion: EngineVersion,
		GateSet:       gates.Name,
		Correction:    gates.Correction,
		Inputs: EvaluationInputs{
			ProfileDigest:        in.ProfileDigest,
			GateDigest:           in.GateDigest,
			CandidateDigest:      MeasurementsDigest(in.Candidate),
			CandidateFactsDigest: FactsDigest(in.CandidateFacts),
			Resamples:            resamples,
		},
	}
	if in.Baseline != nil {
		ev.Inputs.BaselineDigest = MeasurementsDigest(in.Baseline)
		ev.Inputs.BaselineFactsDigest = FactsDigest(in.BaselineFacts)
		diffs := CompareFacts(in.CandidateFacts, in.BaselineFacts)
		NameHosts(diffs, in.CandidateHosts, in.BaselineHosts)
		ev.Comparability = Comparability{Checked: true, Comparable: len(diffs) == 0, Differences: diffs,
			NoFacts: len(in.CandidateFacts) == 0 && len(in.BaselineFacts) == 0}
	}
	ev.Inputs.Digest = inputsDigest(ev.Inputs)

	ev.ClientFlags = ClientFlags(in.Candidate)
	if in.Baseline != nil {
		ev.BaselineClientFlags = ClientFlags(in.Baseline)
	}
	ev.AcceptClientLimited = gates.AcceptClientLimited
	e := &evaluator{
		cand: cand, base: base, hasBaseline: in.Baseline != nil,
		comparability: ev.Comparability, resamples: resamples, inputsDigest: ev.Inputs.Digest,
		candFlags: flagsByKey(ev.ClientFlags), baseFlags: flagsByKey(ev.BaselineClientFlags), acceptClient: gates.AcceptClientLimited,
	}
	// Criteria are worked through metric by metric so that only one
	// metric's prepared samples are held at a time; results keep the gate
	// set's order.
	ev.Criteria = make([]CriterionResult, len(gates.Criteria))
	order := make([]int, len(gates.Criteria))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(gates.Criteria[a].Metric, gates.Criteria[b].Metric)
	})
	for _, i := range order {
		c := gates.Criteria[i]
		if e.cacheMetric != c.Metric {
			e.cache = map[sideKey]*preparedSide{}
			e.cacheMetric = c.Metric
		}
		res, err := e.evaluateCriterion(i, c)
		if err == nil {
			err = e.readError()
		}
		if err != nil {
			return Evaluation{}, fmt.Errorf("evaluate: criterion %d (%s): %w", i, c.Name, err)
		}
		ev.Criteria[i] = res
	}
	e.cache = nil

	applyHolm(&ev, gates)
	for i := range ev.Criteria {
		summarizeCriterion(&ev.Criteria[i])
	}
	ev.Verdict, ev.Explanation = overall(ev)
	if len(in.Contamination) > 0 {
		ev.Contamination = slices.Sorted(slices.Values(in.Contamination))
		ev.Verdict, ev.Explanation = contaminated(ev)
	}
	return ev, nil
}

// contaminated is the overall verdict of a run another run measured
// beside: whatever its criteria say, its numbers are not evidence, so a
// PASS or a FAIL becomes INCONCLUSIVE (run it again on a quiet host); an
// INCOMPARABLE or INCONCLUSIVE stays.
func contaminated(ev Evaluation) (Verdict, string) {
	v := ev.Verdict
	if v == Pass || v == Fail {
		v = Inconclusive
	}
	why := fmt.Sprintf("Contaminated: another run measured on the host during this run (%s), so its numbers are not evidence either way; run it again on a quiet host. The criteria alone said %s: %s",
		strings.Join(ev.Contamination, "; "), ev.Verdict, ev.Explanation)
	return v, why
}

func inputsDigest(in EvaluationInputs) string {
	w := newDigestWriter("accord evaluation inputs v1\n", 1<<10)
	for _, s := range []string{EngineVersion, in.ProfileDigest, in.GateDigest, in.CandidateDigest,
		in.BaselineDigest, in.CandidateFactsDigest, in.BaselineFactsDigest} {
		w.str(s)
	}
	w.uvarint(uint64(in.Resamples))
	return w.sum()
}

// applyHolm runs Holm's step-down over the blocking criteria that have a
// p-value, and turns a PASS that does not survive it into INCONCLUSIVE.
// A criterion over several series passes only if all of them do (an
// intersection–union test), so its p-value is the largest of theirs and
// needs no correction across series.
func applyHolm(ev *Evaluation, gates GateSetSpec) {
	var family []int
	for i := range ev.Criteria {
		cr := &ev.Criteria[i]
		cr.PValue = criterionPValue(cr)
		if cr.Severity == Blocking && cr.PValue != nil {
			family = append(family, i)
		}
	}
	if gates.Correction != CorrectionHolm || len(family) < 2 {
		return
	}
	// Holm with one α per family member: criteria may state different
	// confidences; each is compared with its own α scaled by Holm's factor.
	// With equal confidences (the usual case) this is Holm's procedure.
	ps := make([]float64, len(family))
	for j, i := range family {
		ps[j] = *ev.Criteria[i].PValue
	}
	adj := stats.Holm(ps, 1)
	// Step-down: walk in rank order and stop at the first criterion not
	// rejected at its own level.
	byRank := make([]int, len(family))
	for j, a := range adj {
		byRank[a.Rank-1] = j
	}
	stopped := false
	for _, j := range byRank {
		i := family[j]
		cr := &ev.Criteria[i]
		alpha := alphaOf(cr.Confidence)
		level := alpha / float64(len(family)-adj[j].Rank+1)
		rejected := !stopped && ps[j] <= level*(1+1e-12)
		if !rejected {
			stopped = true
		}
		cr.Holm = &HolmAdjustment{
			Family: len(family), Rank: adj[j].Rank, Level: level,
			AdjustedP: adj[j].Adjusted, Alpha: alpha, Rejected: rejected,
		}
		if rejected {
			continue
		}
		for s := range cr.Series {
			sr := &cr.Series[s]
			if sr.Verdict != Pass || sr.PValue == nil {
				continue
			}
			if *sr.PValue <= level*(1+1e-12) && !stepDownStoppedBefore(cr) {
				continue
			}
			holdBackForHolm(cr, sr, level)
		}
	}
}

// stepDownStoppedBefore reports whether the criterion's own p-value was
// under its level, so that only an earlier criterion stopped the step-down.
func stepDownStoppedBefore(cr *CriterionResult) bool {
	return cr.PValue != nil && *cr.PValue <= cr.Holm.Level*(1+1e-12)
}

func criterionPValue(cr *CriterionResult) *float64 {
	var p *float64
	for _, s := range cr.Series {
		if s.PValue == nil {
			continue
		}
		if s.Verdict == Incomparable && s.Reason != reasonDecided {
			return nil // not tested: the comparison is void
		}
		if p == nil || *s.PValue > *p {
			v := *s.PValue
			p = &v
		}
	}
	return p
}

// summarizeCriterion sets the criterion's verdict (worst series), the worst
// series and the explanation.
func summarizeCriterion(cr *CriterionResult) {
	worst := -1
	for i, s := range cr.Series {
		if worst < 0 || worseSeries(s, cr.Series[worst]) {
			worst = i
		}
	}
	if worst < 0 {
		cr.Verdict = Inconclusive
		cr.Explanation = "No series to judge."
		return
	}
	w := cr.Series[worst]
	cr.Verdict = w.Verdict
	k := SeriesKey{Step: w.Step, Level: w.Level}
	cr.Worst = &k
	if len(cr.Series) == 1 {
		cr.Explanation = w.Explanation
		return
	}
	counts := map[Verdict]int{}
	for _, s := range cr.Series {
		counts[s.Verdict]++
	}
	var tally []string
	for _, v := range []Verdict{Fail, Incomparable, Inconclusive, Pass} {
		if counts[v] > 0 {
			tally = append(tally, strconv.Itoa(counts[v])+" "+string(v))
		}
	}
	lead := "worst"
	if cr.Verdict == Pass {
		lead = "closest to the limit"
	}
	cr.Explanation = fmt.Sprintf("Over %d series (%s), the %s is %s: %s", len(cr.Series), joinList(tally), lead, seriesLabel(k), w.Explanation)
}

// worseSeries orders series: worse verdict first; among equals, the larger
// p-value for passing (closer to the limit).
func worseSeries(a, b SeriesResult) bool {
	if a.Verdict != b.Verdict {
		return a.Verdict.severityRank() > b.Verdict.severityRank()
	}
	pa, pb := -1.0, -1.0
	if a.PValue != nil {
		pa = *a.PValue
	}
	if b.PValue != nil {
		pb = *b.PValue
	}
	return pa > pb
}

func overall(ev Evaluation) (Verdict, string) {
	var blocking, failed, incomparable, inconclusive, advisoryNotPass []string
	v := Pass
	for _, cr := range ev.Criteria {
		if cr.Severity != Blocking {
			if cr.Verdict != Pass {
				advisoryNotPass = append(advisoryNotPass, fmt.Sprintf("%s %s", cr.Name, cr.Verdict))
			}
			continue
		}
		blocking = append(blocking, cr.Name)
		v = Worse(v, cr.Verdict)
		switch cr.Verdict {
		case Fail:
			failed = append(failed, cr.Name)
		case Incomparable:
			incomparable = append(incomparable, cr.Name)
		case Inconclusive:
			inconclusive = append(inconclusive, cr.Name)
		}
	}
	first := func(names []string) string {
		for _, cr := range ev.Criteria {
			if cr.Name == names[0] {
				return cr.Explanation
			}
		}
		return ""
	}
	var text string
	switch {
	case len(blocking) == 0:
		text = "PASS: the gate set has no blocking criteria."
	case v == Fail:
		text = fmt.Sprintf("FAIL: %s failed. %s", joinList(quoteAll(failed)), first(failed))
	case v == Incomparable:
		text = fmt.Sprintf("INCOMPARABLE: %s cannot be judged against this baseline. %s", joinList(quoteAll(incomparable)), first(incomparable))
	case v == Inconclusive:
		text = fmt.Sprintf("INCONCLUSIVE: %s need more data. %s", joinList(quoteAll(inconclusive)), first(inconclusive))
	default:
		text = fmt.Sprintf("PASS: all %d blocking criteria passed", len(blocking))
		if ev.Correction == CorrectionHolm && len(blocking) > 1 {
			text += ", with Holm's correction for testing them together"
		}
		text += "."
	}
	if len(advisoryNotPass) > 0 {
		text += " Advisory: " + joinList(advisoryNotPass) + "."
	}
	return v, text
}

func alphaOf(confidence float64) float64 {
	// Rounded so that 1 − 0.9 is 0.1 and shares of resamples compare exactly.
	return math.Round((1-confidence)*1e12) / 1e12
}
