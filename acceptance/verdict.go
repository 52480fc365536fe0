package acceptance

// Verdict is the outcome of a gate criterion, of one of its series, or of a
// whole evaluation.
type Verdict string

const (
	// Pass: the confidence bound clears the limit (or margin).
	Pass Verdict = "PASS"
	// Fail: the opposite confidence bound is past the limit.
	Fail Verdict = "FAIL"
	// Inconclusive: the interval straddles the limit, or there are too few
	// samples or repetitions; more of them would decide (the result says how
	// many).
	Inconclusive Verdict = "INCONCLUSIVE"
	// Incomparable: the candidate and the baseline ran on hosts whose facts
	// differ where it matters, or the baseline lacks the series; the
	// difference is shown.
	Incomparable Verdict = "INCOMPARABLE"
)

// severityRank orders verdicts from best to worst: a criterion over several
// series takes the worst, and so does the overall verdict over the blocking
// criteria. A FAIL is certain news; INCOMPARABLE says the comparison itself
// is void, which more samples will not mend; INCONCLUSIVE says more samples
// would decide.
func (v Verdict) severityRank() int {
	switch v {
	case Pass:
		return 0
	case Inconclusive:
		return 1
	case Incomparable:
		return 2
	case Fail:
		return 3
	}
	return 4
}

// Worse returns the worse of two verdicts.
func Worse(a, b Verdict) Verdict {
	if b.severityRank() > a.severityRank() {
		return b
	}
	return a
}

// Valid reports whether v is one of the four verdicts.
func (v Verdict) Valid() bool { return v.severityRank() < 4 }
