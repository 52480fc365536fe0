package submit

import (
	"encoding/xml"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/accordlab/accord/acceptance"
)

// ---------------------------------------------------------------------------
// JUnit XML.

// The commonly used JUnit format (Ant's, as Jenkins, GitLab, GitHub
// reporters, Azure and Buildkite read it): testsuites > testsuite >
// properties, testcase (failure | error | skipped, system-out), system-out.
type junitTestSuites struct {
	XMLName  xml.Name         `xml:"testsuites"`
	Name     string           `xml:"name,attr"`
	Tests    int              `xml:"tests,attr"`
	Failures int              `xml:"failures,attr"`
	Errors   int              `xml:"errors,attr"`
	Skipped  int              `xml:"skipped,attr"`
	Time     string           `xml:"time,attr"`
	Suites   []junitTestSuite `xml:"testsuite"`
}

type junitTestSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Hostname   string          `xml:"hostname,attr,omitempty"`
	ID         int             `xml:"id,attr"`
	Package    string          `xml:"package,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitTestCase `xml:"testcase"`
	SystemOut  *junitText      `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitTestCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// junitText is multi-line output, kept readable as CDATA.
type junitText struct {
	Text string `xml:",cdata"`
}

func cdata(s string) *junitText { return &junitText{Text: xmlText(s)} }

// xmlText replaces what XML 1.0 cannot carry (control characters, invalid
// UTF-8) with U+FFFD: CDATA sections are written unescaped.
func xmlText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20, r >= 0xD800 && r <= 0xDFFF, r == 0xFFFE, r == 0xFFFF, r == utf8.RuneError:
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// junitTimestamp is the form the strict Ant schema accepts: no zone; the
// time is UTC (the properties carry it with its zone).
const junitTimestamp = "2006-01-02T15:04:05"

// junitDocument describes the run (or, with cause, the error that stopped
// the command) as JUnit XML.
func (s *submitter) junitDocument(cause error) []byte {
	suite := junitTestSuite{Name: "accord submit", Package: "accord"}
	if s.run.ID != 0 {
		suite.Name = s.run.Profile + " × " + s.run.Host
		suite.Hostname = s.run.Host
		start := s.run.CreatedAt
		if s.run.StartedAt != nil {
			start = *s.run.StartedAt
		}
		suite.Timestamp = start.UTC().Format(junitTimestamp)
		if s.run.FinishedAt != nil {
			suite.Time = seconds(s.run.FinishedAt.Sub(start))
		}
	}
	suite.Properties = s.junitProperties()
	classname := "accord"
	if s.run.GateSet != "" {
		classname = s.run.GateSet
	}

	switch {
	case cause != nil:
		name := "submit"
		if s.run.ID != 0 {
			name = fmt.Sprintf("run %d", s.run.ID)
		}
		msg := oneLine(cause.Error())
		suite.Cases = append(suite.Cases, junitTestCase{Name: name, Classname: classname, Time: seconds(0),
			Error: &junitProblem{Message: msg, Type: "error", Text: xmlText(msg)}})
	case s.eval == nil:
		suite.Cases = append(suite.Cases, junitTestCase{Name: fmt.Sprintf("run %d", s.run.ID), Classname: classname, Time: seconds(0),
			SystemOut: cdata("The run finished; it had no gate set, so no criterion was judged.")})
	default:
		for _, c := range s.eval.Criteria {
			suite.Cases = append(suite.Cases, s.junitCase(classname, c))
		}
		suite.SystemOut = cdata(s.junitSuiteOut())
	}
	if cause == nil && s.reportErr != nil {
		msg := s.reportErr.Error()
		suite.Cases = append(suite.Cases, junitTestCase{Name: "signed report", Classname: classname, Time: seconds(0),
			Error: &junitProblem{Message: msg, Type: "error", Text: xmlText(msg)}})
	}
	for _, c := range suite.Cases {
		suite.Tests++
		switch {
		case c.Failure != nil:
			suite.Failures++
		case c.Error != nil:
			suite.Errors++
		case c.Skipped != nil:
			suite.Skipped++
		}
	}
	if suite.Time == "" {
		suite.Time = seconds(0)
	}
	doc := junitTestSuites{Name: "accord", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Skipped: suite.Skipped,
		Time: suite.Time, Suites: []junitTestSuite{suite}}
	out, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		// Only unsupported types fail to marshal; ours are strings and ints.
		panic(fmt.Sprintf("junit: %v", err))
	}
	return append(append([]byte(xml.Header), out...), '\n')
}

func (s *submitter) junitProperties() []junitProperty {
	var props []junitProperty
	add := func(name, value string) {
		if value != "" {
			props = append(props, junitProperty{Name: "accord." + name, Value: value})
		}
	}
	add("server", s.opts.server.Redacted())
	if s.program.ID != 0 {
		add("program", fmt.Sprintf("%d %s", s.program.ID, s.program.Name))
	}
	if s.run.ID == 0 {
		return props
	}
	add("run_id", strconv.FormatInt(s.run.ID, 10))
	add("state", s.run.State)
	add("verdict", s.verdict())
	add("url", s.run.URL)
	add("profile", s.run.Profile)
	add("host", s.run.Host)
	add("gate_set", s.run.GateSet)
	add("label", s.run.Label)
	if s.run.BaselineRunID != nil {
		add("baseline_run_id", strconv.FormatInt(*s.run.BaselineRunID, 10))
	}
	add("created_at", s.run.CreatedAt.Format(time.RFC3339Nano))
	if s.run.StartedAt != nil {
		add("started_at", s.run.StartedAt.Format(time.RFC3339Nano))
	}
	if s.run.FinishedAt != nil {
		add("finished_at", s.run.FinishedAt.Format(time.RFC3339Nano))
	}
	if s.eval != nil {
		in := s.eval.Inputs
		add("engine_version", s.eval.EngineVersion)
		add("evaluation_digest", in.Digest)
		add("profile_digest", in.ProfileDigest)
		add("gate_digest", in.GateDigest)
		add("candidate_digest", in.CandidateDigest)
		add("candidate_facts_digest", in.CandidateFactsDigest)
		add("baseline_digest", in.BaselineDigest)
		add("baseline_facts_digest", in.BaselineFactsDigest)
	}
	if s.report != nil {
		add("report_file", s.report.File)
		add("report_sha256", s.report.SHA256)
	} else if s.reportNote != "" {
		add("report", s.reportNote)
	}
	return props
}

// junitCase maps one criterion: PASS passes, FAIL is a failure, and
// INCONCLUSIVE or INCOMPARABLE are skipped (or failures with
// --junit-undecided=failure); an advisory criterion never fails the suite.
func (s *submitter) junitCase(classname string, c acceptance.CriterionResult) junitTestCase {
	tc := junitTestCase{Name: c.Name, Classname: classname, Time: seconds(0), SystemOut: cdata(criterionDetails(c))}
	rule := criterionRule(c)
	explanation := strings.TrimSpace(c.Explanation)
	msg := fmt.Sprintf("%s: %s: %s", c.Verdict, rule, oneLine(explanation))
	switch {
	case c.Verdict == acceptance.Pass:
	case c.Severity == acceptance.Advisory:
		tc.Skipped = &junitSkipped{Message: "advisory criterion (does not decide the verdict): " + msg}
	case c.Verdict == acceptance.Fail:
		tc.Failure = &junitProblem{Message: msg, Type: string(c.Verdict), Text: xmlText(explanation)}
	case s.opts.junitUndecided == "failure":
		tc.Failure = &junitProblem{Message: msg, Type: string(c.Verdict), Text: xmlText(explanation)}
	default:
		tc.Skipped = &junitSkipped{Message: msg}
	}
	return tc
}

// criterionDetails is a criterion's numbers for the test case's output.
func criterionDetails(c acceptance.CriterionResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s (%s, %s", c.Verdict, criterionRule(c), c.Mode, c.Severity)
	if c.Confidence > 0 {
		fmt.Fprintf(&b, ", confidence %g", c.Confidence)
	}
	b.WriteString(")\n")
	if c.Unit != "" {
		fmt.Fprintf(&b, "limit: %g %s\n", c.Limit, c.Unit)
	}
	if c.PValue != nil {
		fmt.Fprintf(&b, "p-value: %.4g\n", *c.PValue)
	}
	for _, sr := range c.Series {
		series := sr.Step
		if sr.Level != "" {
			series += " level " + sr.Level
		}
		fmt.Fprintf(&b, "- %s: %s (%s)", series, sr.Verdict, sr.Reason)
		if sr.Estimate != nil {
			fmt.Fprintf(&b, " estimate %.6g", *sr.Estimate)
		}
		if sr.Lower != nil || sr.Upper != nil {
			fmt.Fprintf(&b, " bounds [%s, %s] (%s)", optNum(sr.Lower), optNum(sr.Upper), sr.Interval)
		}
		fmt.Fprintf(&b, " n=%d repetitions=%d\n", sr.Candidate.N, sr.Candidate.Repetitions)
		if sr.Explanation != "" {
			fmt.Fprintf(&b, "  %s\n", oneLine(sr.Explanation))
		}
	}
	if c.Explanation != "" {
		fmt.Fprintf(&b, "%s\n", strings.TrimSpace(c.Explanation))
	}
	return b.String()
}

func optNum(f *float64) string {
	if f == nil {
		return "–"
	}
	return fmt.Sprintf("%.6g", *f)
}

func (s *submitter) junitSuiteOut() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %d: %s\n", s.run.ID, s.verdict())
	if s.eval.Explanation != "" {
		fmt.Fprintf(&b, "%s\n", strings.TrimSpace(s.eval.Explanation))
	}
	if cmp := s.eval.Comparability; cmp.Checked && !cmp.Comparable {
		b.WriteString("The hosts' facts differ:\n")
		for _, d := range cmp.Differences {
			fmt.Fprintf(&b, "- %+v\n", d)
		}
	}
	if s.run.URL != "" {
		fmt.Fprintf(&b, "%s\n", s.run.URL)
	}
	return b.String()
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(max(d, 0).Seconds(), 'f', 3, 64)
}
