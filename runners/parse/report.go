package parse

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/accordlab/accord/acceptance"
)

// Report says what one import read, what it ignored and why, and how the
// tool's own figures compare with Accord's under the tool's definition. It
// is what the import page shows, what the API answers and what is stored
// beside the imported file, so that no field the file has and Accord knows
// vanishes without a line saying so.
type Report struct {
	Input       string `json:"input"`
	Format      Format `json:"format"`
	Tool        string `json:"tool"`
	ToolVersion string `json:"tool_version,omitempty"`
	// Step is the step the measurements were imported as.
	Step string `json:"step,omitempty"`
	// Measurements is how many measurements the import made.
	Measurements int `json:"measurements"`
	// Read lists the fields measurements were taken from.
	Read []ReadField `json:"read"`
	// Ignored lists every field present in the file that no measurement
	// was taken from, with the reason.
	Ignored []IgnoredField `json:"ignored"`
	// Warnings are things to know about what was read (fallbacks, skipped
	// text, failed requests).
	Warnings []string `json:"warnings,omitempty"`
	// Figures lay the tool's own numbers beside Accord's, per measurement.
	Figures []MeasurementFigures `json:"figures,omitempty"`
	// Jobs is fio's per-job (or per-client) view beside the per-direction
	// sums the measurements hold.
	Jobs []JobView `json:"jobs,omitempty"`
}

// ReadField is a field measurements were read from.
type ReadField struct {
	Field  string `json:"field"`
	Metric string `json:"metric"`
	Note   string `json:"note,omitempty"`
}

// IgnoredField is a field the file has that Accord did not import.
type IgnoredField struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// MeasurementFigures are the tool figures of one measurement.
type MeasurementFigures struct {
	Metric     string                  `json:"metric"`
	Step       string                  `json:"step,omitempty"`
	Level      string                  `json:"level,omitempty"`
	Repetition int                     `json:"repetition,omitempty"`
	Figures    []acceptance.ToolFigure `json:"figures"`
}

// JobView is one fio job (or one client in client/server mode) as fio
// reported it, with Accord's figures from the job's own bins.
type JobView struct {
	Name    string               `json:"name"`
	Client  string               `json:"client,omitempty"`
	GroupID int                  `json:"group_id"`
	Figures []MeasurementFigures `json:"figures"`
}

// Result is an import's measurements and its report.
type Result struct {
	Measurements []acceptance.Measurement
	Report       Report
}

func newReport(in string, f Format, tool string) *Report {
	return &Report{Input: in, Format: f, Tool: tool}
}

func (r *Report) read(field, metric, note string) {
	r.Read = append(r.Read, ReadField{Field: field, Metric: metric, Note: note})
}

func (r *Report) ignore(field, reason string) {
	r.Ignored = append(r.Ignored, IgnoredField{Field: field, Reason: reason})
}

func (r *Report) warn(format string, args ...any) {
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...))
}

// finish dedupes the lists (fio's jobs repeat the same fields), adds the
// figures and sorts everything so that the same file gives the same
// report.
func (r *Report) finish(ms []acceptance.Measurement) error {
	r.Measurements = len(ms)
	r.Read = dedupe(r.Read, func(a ReadField) string { return a.Field + "\x00" + a.Metric })
	r.Ignored = dedupe(r.Ignored, func(a IgnoredField) string { return a.Field })
	sort.SliceStable(r.Ignored, func(i, j int) bool { return r.Ignored[i].Field < r.Ignored[j].Field })
	if r.Read == nil {
		r.Read = []ReadField{}
	}
	if r.Ignored == nil {
		r.Ignored = []IgnoredField{}
	}
	figs, err := figuresOf(ms)
	if err != nil {
		return err
	}
	r.Figures = figs
	return nil
}

func figuresOf(ms []acceptance.Measurement) ([]MeasurementFigures, error) {
	var out []MeasurementFigures
	for _, m := range ms {
		f, err := acceptance.ToolFigures(m)
		if err != nil {
			return nil, err
		}
		if len(f) > 0 {
			out = append(out, MeasurementFigures{Metric: m.Metric, Step: m.Step, Level: m.Level, Repetition: m.Repetition, Figures: f})
		}
	}
	return out, nil
}

func dedupe[T any](xs []T, key func(T) string) []T {
	seen := map[string]bool{}
	out := xs[:0]
	for _, x := range xs {
		k := key(x)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, x)
	}
	return out
}

// Lines gives the report as short lines for run notes and flashes: one per
// ignored field and warning.
func (r Report) Lines() []string {
	var out []string
	out = append(out, r.Warnings...)
	for _, ig := range r.Ignored {
		out = append(out, "ignored "+ig.Field+": "+ig.Reason)
	}
	return out
}

// JSON encodes the report for the run's artifacts, indented.
func (r Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("parse: encode import report: %w", err)
	}
	return append(b, '\n'), nil
}

// ReportFile is the name of the stored report beside an imported file.
const ReportFile = "import-report.json"

// objectLedger tracks which keys of one JSON object were read, so that the
// rest are reported as ignored with a reason.
type objectLedger struct {
	prefix string
	keys   []string
	used   map[string]bool
}

func newLedger(prefix string, obj map[string]json.RawMessage) *objectLedger {
	l := &objectLedger{prefix: prefix, used: map[string]bool{}}
	for k := range obj {
		l.keys = append(l.keys, k)
	}
	slices.Sort(l.keys)
	return l
}

func (l *objectLedger) use(keys ...string) {
	for _, k := range keys {
		l.used[k] = true
	}
}

// close reports every unused key, with the reason reasons gives (by exact
// key, then by a matching prefix ending in "*"), or def.
func (l *objectLedger) close(r *Report, reasons map[string]string, def string) {
	for _, k := range l.keys {
		if l.used[k] {
			continue
		}
		reason, ok := reasons[k]
		if !ok {
			for pat, why := range reasons {
				if strings.HasSuffix(pat, "*") && strings.HasPrefix(k, strings.TrimSuffix(pat, "*")) {
					reason, ok = why, true
					break
				}
			}
		}
		if !ok {
			reason = def
		}
		r.ignore(l.prefix+k, reason)
	}
}
