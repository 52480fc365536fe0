package acceptance

import (
	"fmt"
	"slices"

	"github.com/accordlab/accord/acceptance/stats"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Plain-English explanations. Each names the statistic, its value, the
// bound that decided (with n and repetitions) and the limit, in words a
// customer engineer can check against the numbers beside them.

func seriesLabel(k SeriesKey) string {
	s := "step " + k.Step
	if k.Level != "" {
		s += " at " + k.Level
	}
	return s
}

var acronymMetrics = map[string]bool{MetricTTFT: true, MetricTPOT: true, MetricITL: true, MetricE2EL: true}

// metricLabel is how a metric is named mid-sentence: TTFT, read completion
// latency, GPU utilisation.
func metricLabel(m Metric) string {
	if acronymMetrics[m.ID] {
		return strings.ToUpper(m.ID)
	}
	first, _, _ := strings.Cut(m.Name, " ")
	if len(first) > 1 && strings.ToUpper(first) == first {
		return m.Name
	}
	r, size := utf8.DecodeRuneInString(m.Name)
	return string(unicode.ToLower(r)) + m.Name[size:]
}

// statLabel is "p99 TTFT", "mean TPOT", "max E2EL" or, for rates, the metric.
func statLabel(st Statistic, m Metric) string {
	if st == StatRate {
		return metricLabel(m)
	}
	return string(st) + " " + metricLabel(m)
}

// capitalize starts a sentence; a percentile name (p99) stays as it is.
func capitalize(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError || (r == 'p' && len(s) > 1 && s[1] >= '0' && s[1] <= '9') {
		return s
	}
	return string(unicode.ToUpper(r)) + s[size:]
}

// fmtNum writes about four significant digits, with thousands separators
// from 1,000 up: 1,412; 14.23; 0.01234.
func fmtNum(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	a := math.Abs(v)
	if a >= 999.5 {
		return fmtCount(int64(math.Round(v)))
	}
	if a < 1e-4 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	dec := max(3-int(math.Floor(math.Log10(a))), 0)
	return trimZeros(strconv.FormatFloat(v, 'f', dec, 64))
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	return s
}

func fmtCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtValue(v float64, u Unit) string {
	switch u {
	case UnitMicrosecond:
		return fmtNum(v) + " µs"
	case UnitRatio: // a share, shown as a percentage: 0.0012 → 0.12 %
		return fmtPctPlain(100 * v)
	case UnitBytesPerSec:
		for _, s := range []struct {
			f    float64
			name string
		}{{1e12, "TB/s"}, {1e9, "GB/s"}, {1e6, "MB/s"}, {1e3, "KB/s"}} {
			if math.Abs(v) >= s.f {
				return fmtNum(v/s.f) + " " + s.name
			}
		}
		return fmtNum(v) + " B/s"
	}
	return fmtNum(v) + " " + string(u)
}

// fmtPct writes a signed relative change: +31.2 %, −0.42 %.
func fmtPct(v float64) string {
	sign := "+"
	if v < 0 {
		sign = "−"
	}
	if v == 0 {
		sign = ""
	}
	return sign + fmtPctPlain(math.Abs(v))
}

func fmtPctPlain(v float64) string {
	a := math.Abs(v)
	var s string
	switch {
	case math.IsInf(v, 0) || math.IsNaN(v):
		s = strconv.FormatFloat(v, 'g', -1, 64)
	case a >= 999.5:
		s = fmtCount(int64(math.Round(v)))
	case a < 0.0005:
		s = "0"
	default: // three significant digits
		dec := max(2-int(math.Floor(math.Log10(a))), 0)
		s = trimZeros(strconv.FormatFloat(v, 'f', dec, 64))
	}
	return s + " %"
}

func fmtConf(c float64) string { return trimZeros(strconv.FormatFloat(c*100, 'f', 2, 64)) + " %" }

func fmtP(p float64) string {
	if p < 1e-4 {
		return "< 0.0001"
	}
	return strconv.FormatFloat(p, 'g', 3, 64)
}

func orUnknown(v *float64, u Unit) string {
	if v == nil {
		return "unknown"
	}
	return fmtValue(*v, u)
}

func orUnknownPct(v *float64) string {
	if v == nil {
		return "an unknown amount"
	}
	return fmtPct(*v)
}

func joinList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	case 2:
		return items[0] + " and " + items[1]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}

func factList(diffs []FactDiff) string {
	parts := make([]string, len(diffs))
	for i, d := range diffs {
		c, b := d.Candidate, d.Baseline
		if d.CandidateAbsent {
			c = "unknown"
		}
		if d.BaselineAbsent {
			b = "unknown"
		}
		if d.CandidateHost != "" || d.BaselineHost != "" {
			// A multi-host run's fact: whose it is on each side.
			parts[i] = fmt.Sprintf("%s (%s on host %s vs %s on the baseline's host %s)", d.Fact, c, orDash(d.CandidateHost), b, orDash(d.BaselineHost))
			continue
		}
		parts[i] = fmt.Sprintf("%s (%s vs %s)", d.Fact, c, b)
	}
	return joinList(parts)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func repetitionsPhrase(r int) string {
	if r == 1 {
		return "in 1 repetition"
	}
	return fmt.Sprintf("over %d repetitions", r)
}

// sizePhrase is "n = 12,000 over 3 repetitions" (distributions) or
// "3 repetitions" (rates).
func sizePhrase(cc *critCtx, s SideSummary) string {
	if cc.m.Kind == KindRate {
		return fmt.Sprintf("%d repetitions", s.Repetitions)
	}
	return fmt.Sprintf("n = %s %s", fmtCount(s.N), repetitionsPhrase(s.Repetitions))
}

func neededSentence(n *Needed) string {
	switch {
	case n == nil:
		return ""
	case n.CandidateSamples > 0 && n.BaselineSamples > 0:
		return fmt.Sprintf("About %s samples on the candidate side and %s on the baseline side would likely decide it.",
			fmtCount(n.CandidateSamples), fmtCount(n.BaselineSamples))
	case n.CandidateSamples > 0:
		return fmt.Sprintf("About %s samples would likely decide it.", fmtCount(n.CandidateSamples))
	case n.CandidateRepetitions > 0 && n.BaselineRepetitions > 0:
		return fmt.Sprintf("About %d repetitions of the candidate and %d of the baseline would likely decide it.",
			n.CandidateRepetitions, n.BaselineRepetitions)
	case n.CandidateRepetitions > 0:
		return fmt.Sprintf("About %d repetitions would likely decide it.", n.CandidateRepetitions)
	}
	return ""
}

func boundsPhrase(cc *critCtx, sr SeriesResult, fmtV func(float64) string) string {
	conf := fmtConf(cc.conf)
	switch {
	case sr.Lower != nil && sr.Upper != nil:
		return fmt.Sprintf("%s bounds %s to %s", conf, fmtV(*sr.Lower), fmtV(*sr.Upper))
	case sr.Upper != nil:
		return fmt.Sprintf("%s upper bound %s", conf, fmtV(*sr.Upper))
	case sr.Lower != nil:
		return fmt.Sprintf("%s lower bound %s, no upper bound yet", conf, fmtV(*sr.Lower))
	}
	return "no bounds yet"
}

func explainAbsolute(cc *critCtx, sr SeriesResult) string {
	fv := func(v float64) string { return fmtValue(v, cc.m.Unit) }
	stat := capitalize(statLabel(cc.c.Statistic, cc.m))
	est := orUnknown(sr.Estimate, cc.m.Unit)
	size := sizePhrase(cc, sr.Candidate)
	limit := fv(cc.limit)
	conf := fmtConf(cc.conf)
	word := "limit"
	if !cc.le() {
		word = "minimum"
	}
	bound := func(p *float64, which string) string {
		if p == nil {
			return fmt.Sprintf("no %s %s bound", conf, which)
		}
		return fmt.Sprintf("%s %s bound %s", conf, which, fv(*p))
	}
	switch {
	case sr.Verdict == Pass && cc.le():
		return fmt.Sprintf("%s is %s (%s, %s), under the %s limit.", stat, est, bound(sr.Upper, "upper"), size, limit)
	case sr.Verdict == Pass:
		return fmt.Sprintf("%s is %s (%s, %s), clearing the %s minimum.", stat, est, bound(sr.Lower, "lower"), size, limit)
	case sr.Verdict == Fail && cc.le():
		return fmt.Sprintf("%s is %s (%s, %s), above the %s limit.", stat, est, bound(sr.Lower, "lower"), size, limit)
	case sr.Verdict == Fail:
		return fmt.Sprintf("%s is %s (%s, %s), below the %s minimum.", stat, est, bound(sr.Upper, "upper"), size, limit)
	case sr.Reason == reasonTooFewForBound:
		which, minN := "upper", stats.MinSamplesUpper(cc.q, cc.conf)
		if !cc.le() {
			which, minN = "lower", stats.MinSamplesLower(cc.q, cc.conf)
		}
		text := fmt.Sprintf("%s is %s from %s, on the passing side of the %s %s, but a distribution-free %s %s bound on %s needs at least %s samples, so it cannot pass yet.",
			stat, est, size, limit, word, conf, which, cc.c.Statistic, fmtCount(minN))
		if n := sr.Needed; n != nil && n.CandidateSamples > minN {
			text += " " + neededSentence(n)
		}
		return text
	}
	return strings.TrimSpace(fmt.Sprintf("%s is %s, but its %s (%s) straddle the %s %s, so more data is needed. %s",
		stat, est, boundsPhrase(cc, sr, fv), size, limit, word, neededSentence(sr.Needed)))
}

func explainMax(cc *critCtx, sr SeriesResult, v float64) string {
	label := metricLabel(cc.m)
	val, limit := fmtValue(v, cc.m.Unit), fmtValue(cc.limit, cc.m.Unit)
	size := sizePhrase(cc, sr.Candidate)
	switch {
	case cc.le() && sr.Verdict == Pass:
		return fmt.Sprintf("The largest %s is %s (%s), under the %s limit; a maximum has no confidence bound, so this rests on the observed value alone (interval: none).", label, val, size, limit)
	case cc.le():
		return fmt.Sprintf("The largest %s is %s (%s), above the %s limit: a certain failure, since the true maximum can only be larger.", label, val, size, limit)
	case sr.Verdict == Pass:
		return fmt.Sprintf("The largest %s is %s (%s), at or above the %s minimum: certain, since the true maximum can only be larger.", label, val, size, limit)
	}
	return fmt.Sprintf("The largest %s is %s (%s), below the %s minimum; a maximum has no confidence bound, so this rests on the observed value alone (interval: none).", label, val, size, limit)
}

// toolPhrase names the tools' own summaries a figure comes from: "fio
// 3.33's own summary", "the own summaries of vllm-bench and aiperf" (each
// tool once).
func toolPhrase(tools []string) string {
	var names []string
	for _, t := range tools {
		if !slices.Contains(names, t) {
			names = append(names, t)
		}
	}
	switch len(names) {
	case 0:
		return "the tool's own summary"
	case 1:
		return names[0] + "'s own summary"
	}
	return "the own summaries of " + joinList(names)
}

func explainSummary(cc *critCtx, sr SeriesResult, v float64, tools []string) string {
	stat := capitalize(statLabel(cc.c.Statistic, cc.m))
	side := "under the"
	word := "limit"
	switch {
	case cc.le() && sr.Verdict == Fail:
		side = "above the"
	case !cc.le() && sr.Verdict == Pass:
		side, word = "clearing the", "minimum"
	case !cc.le():
		side, word = "below the", "minimum"
	}
	return fmt.Sprintf("%s is %s by %s; there are no samples, so there is no confidence interval (interval: none) and the verdict rests on the point estimate alone%s: %s %s %s.",
		stat, fmtValue(v, cc.m.Unit), toolPhrase(tools), pointEstimateAllowed(cc), side, fmtValue(cc.limit, cc.m.Unit), word)
}

// pointEstimateAllowed says, in a verdict resting on a point estimate, that
// the gate set asked for it.
func pointEstimateAllowed(cc *critCtx) string {
	if cc.c.PointEstimate {
		return ", as the gate set allows for this criterion (point_estimate: true)"
	}
	return ""
}

func relativeSizes(cc *critCtx, sr SeriesResult) string {
	b := sr.Baseline
	if cc.m.Kind == KindRate {
		return fmt.Sprintf("%d vs %d repetitions", sr.Candidate.Repetitions, b.Repetitions)
	}
	return fmt.Sprintf("n = %s vs %s over %d vs %d repetitions", fmtCount(sr.Candidate.N), fmtCount(b.N), sr.Candidate.Repetitions, b.Repetitions)
}

func explainRelative(cc *critCtx, sr SeriesResult) string {
	stat := capitalize(statLabel(cc.c.Statistic, cc.m))
	d := orUnknownPct(sr.Estimate)
	vals := fmt.Sprintf("%s vs %s", orUnknown(sr.Candidate.Value, cc.m.Unit), orUnknown(sr.Baseline.Value, cc.m.Unit))
	size := relativeSizes(cc, sr)
	conf := fmtConf(cc.conf)
	margin := fmtPct(cc.limit)
	bound := func(p *float64, which string) string {
		if p == nil {
			return fmt.Sprintf("no %s %s bound", conf, which)
		}
		return fmt.Sprintf("%s %s bound %s", conf, which, fmtPct(*p))
	}
	head := fmt.Sprintf("%s changed by %s %s", stat, d, cc.against)
	switch {
	case sr.Verdict == Pass && !cc.le():
		return fmt.Sprintf("%s (%s; %s, %s), clearing the required %s.", head, vals, bound(sr.Lower, "lower"), size, margin)
	case sr.Verdict == Pass:
		return fmt.Sprintf("%s (%s; %s, %s), within the allowed %s.", head, vals, bound(sr.Upper, "upper"), size, margin)
	case sr.Verdict == Fail && !cc.le():
		return fmt.Sprintf("%s (%s; %s, %s), short of the required %s.", head, vals, bound(sr.Upper, "upper"), size, margin)
	case sr.Verdict == Fail:
		return fmt.Sprintf("%s (%s; %s, %s), beyond the allowed %s.", head, vals, bound(sr.Lower, "lower"), size, margin)
	}
	return strings.TrimSpace(fmt.Sprintf("%s (%s; %s, %s), which straddle the %s margin, so more data is needed. %s",
		head, vals, boundsPhrase(cc, sr, fmtPct), size, margin, neededSentence(sr.Needed)))
}

func explainRelativePoint(cc *critCtx, sr SeriesResult, tools []string) string {
	stat := capitalize(statLabel(cc.c.Statistic, cc.m))
	vals := fmt.Sprintf("%s vs %s", orUnknown(sr.Candidate.Value, cc.m.Unit), orUnknown(sr.Baseline.Value, cc.m.Unit))
	var why string
	if cc.c.Statistic == StatMax {
		why = "a maximum has no confidence interval"
	} else {
		why = "by " + toolPhrase(tools) + ", without samples on at least one side there is no confidence interval"
	}
	side := map[bool]map[Verdict]string{
		true:  {Pass: "within the allowed", Fail: "beyond the allowed"},
		false: {Pass: "clearing the required", Fail: "short of the required"},
	}[cc.le()][sr.Verdict]
	return fmt.Sprintf("%s changed by %s %s (%s); %s (interval: none), so the verdict rests on the point estimate alone%s: %s %s.",
		stat, fmtPct(*sr.Estimate), cc.against, vals, why, pointEstimateAllowed(cc), side, fmtPct(cc.limit))
}
