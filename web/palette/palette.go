// Package palette is the one set of colours every chart draws with: the
// run pages' and compare page's ECharts options (web/charts) and the
// signed report's SVG figures (web/svgplot). A series gets its colour by
// its role, so the candidate is the same blue and the baseline the same
// grey wherever they are drawn; colours match the stylesheet's (the
// accent blue, the muted grey, the failure red).
package palette

// Role is what a series is in a comparison.
type Role string

const (
	// None: a series with no role (a host on the trend page, a telemetry
	// line), coloured by its position from Series.
	None Role = ""
	// Candidate: the run being judged (on the compare page, the first run
	// measured against the reference).
	Candidate Role = "candidate"
	// Baseline: what it is judged against (on the compare page, the
	// reference run).
	Baseline Role = "baseline"
	// Other: a further run beside the candidate (the compare page's third
	// run and on), coloured by its position from Others.
	Other Role = "other"
)

// Colours with a meaning.
const (
	CandidateColour = "#1f5fbf"
	BaselineColour  = "#8a94a3"
	LimitColour     = "#b42318"
	GuideColour     = "#9aa4b2"
	InkColour       = "#1c2430"
	MutedColour     = "#5b6675"
)

// Others colours further runs: neither the candidate's blue, the
// baseline's grey, nor the limits' red.
var Others = []string{"#e8710a", "#1b7f3b", "#8e44ad", "#0f9d9a", "#b5892f", "#d4609b"}

// Series colours series without a role, in order (red is left out: it
// means a limit).
var Series = []string{"#1f5fbf", "#e8710a", "#1b7f3b", "#8e44ad", "#0f9d9a", "#b5892f", "#5b6675", "#d4609b"}

// BaselineShades tell several baseline series apart (a report's fio jobs):
// the baseline grey first, then lighter and darker greys.
var BaselineShades = []string{BaselineColour, "#b3bac4", "#6b7380", "#c9ced6"}

// Of is the colour of a series: by role, and for Other and None by its
// position i among the series of that role.
func Of(r Role, i int) string {
	switch r {
	case Candidate:
		return CandidateColour
	case Baseline:
		return BaselineColour
	case Other:
		return Others[i%len(Others)]
	}
	return Series[i%len(Series)]
}
