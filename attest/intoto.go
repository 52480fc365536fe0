package attest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/accordlab/accord/attest/dsse"
	"github.com/accordlab/accord/attest/internal/strictjson"
)

// in-toto attestation framework identifiers. The statement and predicate
// types are our own JSON structs: the attestation library's generated Go
// structs are protobuf messages whose encoding/json keys are wrong.
const (
	StatementType          = "https://in-toto.io/Statement/v1"
	PayloadTypeInToto      = "application/vnd.in-toto+json"
	TestResultPredicate    = "https://in-toto.io/attestation/test-result/v0.1"
	BenchmarkPredicateType = "https://accordlab.dev/attestation/benchmark/v1"
)

// Verdicts of the acceptance engine (acceptance's gate evaluation).
const (
	VerdictPass         = "PASS"
	VerdictFail         = "FAIL"
	VerdictInconclusive = "INCONCLUSIVE"
	VerdictIncomparable = "INCOMPARABLE"
)

// Results of the in-toto test-result predicate.
const (
	ResultPassed = "PASSED"
	ResultWarned = "WARNED"
	ResultFailed = "FAILED"
)

// TestResultOf maps an Accord verdict to the test-result predicate's result:
// PASS → PASSED, FAIL → FAILED, and INCONCLUSIVE and INCOMPARABLE → WARNED
// (the run neither showed the gate met nor broken: more repetitions, or a
// comparable baseline, are needed).
func TestResultOf(verdict string) (string, error) {
	switch verdict {
	case VerdictPass:
		return ResultPassed, nil
	case VerdictFail:
		return ResultFailed, nil
	case VerdictInconclusive, VerdictIncomparable:
		return ResultWarned, nil
	default:
		return "", fmt.Errorf("attest: unknown verdict %q", verdict)
	}
}

// Statement is an in-toto Statement v1.
type Statement struct {
	Type          string          `json:"_type"`
	Subject       []Subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

// Subject names an artifact by digest; Name is the artifact's path relative
// to the bundle's artifacts/ directory.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// ResourceDescriptor is the in-toto v1 resource descriptor (the fields we use).
type ResourceDescriptor struct {
	Name             string            `json:"name,omitempty"`
	URI              string            `json:"uri,omitempty"`
	Digest           map[string]string `json:"digest,omitempty"`
	DownloadLocation string            `json:"downloadLocation,omitempty"`
	MediaType        string            `json:"mediaType,omitempty"`
	Annotations      map[string]any    `json:"annotations,omitempty"`
}

// TestResult is the in-toto test-result v0.1 predicate.
type TestResult struct {
	Result        string               `json:"result"`
	Configuration []ResourceDescriptor `json:"configuration"`
	URL           string               `json:"url,omitempty"`
	PassedTests   []string             `json:"passedTests"`
	WarnedTests   []string             `json:"warnedTests"`
	FailedTests   []string             `json:"failedTests"`
}

// Ref names a versioned spec (a profile or gate set version) by digest.
type Ref struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	// SHA256 is the hex SHA-256 of the spec's canonical JSON as stored.
	SHA256 string `json:"sha256"`
}

// Verdict is one criterion's verdict with its explanation.
type Verdict struct {
	// Criterion is the gate criterion's name; Step, when set, the profile
	// step (or sweep level) it was judged on.
	Criterion string `json:"criterion"`
	Step      string `json:"step,omitempty"`
	Severity  string `json:"severity,omitempty"`
	Verdict   string `json:"verdict"`
	// Explanation is the human sentence; Details the numbers behind it
	// (statistic, interval, n, ...) as the acceptance engine gives them.
	Explanation string          `json:"explanation"`
	Details     json.RawMessage `json:"details,omitempty"`
}

// Benchmark is Accord's benchmark predicate (BenchmarkPredicateType). A
// run without a gate set has no GateSet and no Verdict (both left out).
type Benchmark struct {
	RunID         string    `json:"runId"`
	Profile       Ref       `json:"profile"`
	GateSet       Ref       `json:"gateSet,omitzero"`
	BaselineRunID string    `json:"baselineRunId,omitempty"`
	Host          string    `json:"host,omitempty"`
	HostFacts     string    `json:"hostFactsSha256"`
	Metrics       any       `json:"metrics"`
	Verdict       string    `json:"verdict,omitempty"`
	Verdicts      []Verdict `json:"verdicts"`
	EngineVersion string    `json:"engineVersion"`
	StartedOn     time.Time `json:"startedOn"`
	FinishedOn    time.Time `json:"finishedOn"`
}

// RunEvidence is what the statements of one evaluated run are made from.
type RunEvidence struct {
	RunID string
	// URL of the run's page, if the installation has a public address.
	URL string
	// Artifacts are the run's stored artifacts; their names are paths under
	// the bundle's artifacts/ directory and SHA256 their hex digests.
	Artifacts []ArtifactDigest
	Profile   Ref
	// GateSet is the zero Ref for a run without a gate set: it gets the
	// benchmark statement alone (no test-result: nothing judged it).
	GateSet Ref
	// BaselineRunID is the baseline run of relative criteria, if any.
	BaselineRunID string
	Host          string
	// HostFacts is the exact host facts JSON that the bundle's facts.json
	// will hold: its digest is attested.
	HostFacts []byte
	// Metrics is the canonical metrics summary (JSON).
	Metrics json.RawMessage
	// Verdict is the overall verdict (blocking criteria decide it).
	Verdict       string
	Verdicts      []Verdict
	EngineVersion string
	Started       time.Time
	Finished      time.Time
}

// ArtifactDigest names one artifact by SHA-256.
type ArtifactDigest struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Attestation is a signed statement with the bundle file name it goes to
// (attestations/NAME.dsse.json).
type Attestation struct {
	Name     string
	Envelope *dsse.Envelope
}

// Attestation names in bundles.
const (
	AttestationTestResult = "test-result"
	AttestationBenchmark  = "benchmark"
)

// Gated reports whether the run had a gate set.
func (ev RunEvidence) Gated() bool { return ev.GateSet != Ref{} }

// RunStatements builds the test-result and the benchmark statements of a
// run; a run without a gate set has no test-result statement (testResult
// is the zero Statement) and no verdict.
func RunStatements(ev RunEvidence) (testResult, benchmark Statement, err error) {
	if ev.RunID == "" {
		return Statement{}, Statement{}, errors.New("attest: run statements: empty run id")
	}
	subjects, err := subjectsOf(ev.Artifacts)
	if err != nil {
		return Statement{}, Statement{}, err
	}
	if !isHexDigest(ev.Profile.SHA256) || (ev.Gated() && !isHexDigest(ev.GateSet.SHA256)) {
		return Statement{}, Statement{}, errors.New("attest: run statements: profile and gate set need sha256 digests")
	}
	if !ev.Gated() && (ev.Verdict != "" || len(ev.Verdicts) > 0) {
		return Statement{}, Statement{}, errors.New("attest: run statements: a verdict without a gate set")
	}
	if len(ev.HostFacts) == 0 || !json.Valid(ev.HostFacts) {
		return Statement{}, Statement{}, errors.New("attest: run statements: host facts must be JSON")
	}
	factsDigest := sha256Hex(ev.HostFacts)
	var metrics any = json.RawMessage("null")
	if len(ev.Metrics) > 0 {
		if !json.Valid(ev.Metrics) {
			return Statement{}, Statement{}, errors.New("attest: run statements: metrics are not JSON")
		}
		metrics = ev.Metrics
	}
	verdicts := ev.Verdicts
	if verdicts == nil {
		verdicts = []Verdict{}
	}
	bm := Benchmark{
		RunID:         ev.RunID,
		Profile:       ev.Profile,
		GateSet:       ev.GateSet,
		BaselineRunID: ev.BaselineRunID,
		Host:          ev.Host,
		HostFacts:     factsDigest,
		Metrics:       metrics,
		Verdict:       ev.Verdict,
		Verdicts:      verdicts,
		EngineVersion: ev.EngineVersion,
		StartedOn:     ev.Started.UTC(),
		FinishedOn:    ev.Finished.UTC(),
	}
	if benchmark, err = newStatement(subjects, BenchmarkPredicateType, bm); err != nil || !ev.Gated() {
		return Statement{}, benchmark, err
	}
	tr, err := testResultOf(ev, factsDigest)
	if err != nil {
		return Statement{}, Statement{}, err
	}
	testResult, err = newStatement(subjects, TestResultPredicate, tr)
	return testResult, benchmark, err
}

// testResultOf is a gated run's test-result predicate: its verdict, and
// each criterion passed, warned or failed.
func testResultOf(ev RunEvidence, factsDigest string) (TestResult, error) {
	overall, err := TestResultOf(ev.Verdict)
	if err != nil {
		return TestResult{}, err
	}
	tr := TestResult{
		Result: overall,
		Configuration: []ResourceDescriptor{
			{Name: "profile/" + ev.Profile.Name, Digest: map[string]string{"sha256": ev.Profile.SHA256},
				Annotations: map[string]any{"version": ev.Profile.Version}},
			{Name: "gate-set/" + ev.GateSet.Name, Digest: map[string]string{"sha256": ev.GateSet.SHA256},
				Annotations: map[string]any{"version": ev.GateSet.Version}},
			{Name: "facts.json", Digest: map[string]string{"sha256": factsDigest}, MediaType: "application/json"},
		},
		URL:         ev.URL,
		PassedTests: []string{},
		WarnedTests: []string{},
		FailedTests: []string{},
	}
	for _, v := range ev.Verdicts {
		res, err := TestResultOf(v.Verdict)
		if err != nil {
			return TestResult{}, fmt.Errorf("attest: criterion %q: %w", v.Criterion, err)
		}
		name := v.Criterion
		if v.Step != "" {
			name += " @ " + v.Step
		}
		switch res {
		case ResultPassed:
			tr.PassedTests = append(tr.PassedTests, name)
		case ResultWarned:
			tr.WarnedTests = append(tr.WarnedTests, name)
		default:
			tr.FailedTests = append(tr.FailedTests, name)
		}
	}
	return tr, nil
}

// SignRun builds and signs the two statements of a run.
func SignRun(s *Signer, ev RunEvidence) ([]Attestation, error) {
	tr, bm, err := RunStatements(ev)
	if err != nil {
		return nil, err
	}
	var out []Attestation
	for _, st := range []struct {
		name string
		st   Statement
	}{{AttestationTestResult, tr}, {AttestationBenchmark, bm}} {
		if st.st.Type == "" {
			continue // a run without a gate set: no test-result
		}
		env, err := SignStatement(s, st.st)
		if err != nil {
			return nil, fmt.Errorf("attest: sign %s statement: %w", st.name, err)
		}
		out = append(out, Attestation{Name: st.name, Envelope: env})
	}
	return out, nil
}

// SignStatement wraps a statement in a DSSE envelope.
func SignStatement(s *Signer, st Statement) (*dsse.Envelope, error) {
	payload, err := marshalNoEscape(st)
	if err != nil {
		return nil, err
	}
	return s.SignDSSE(PayloadTypeInToto, payload)
}

// ParseStatement reads an in-toto Statement v1 payload strictly.
func ParseStatement(payload []byte) (Statement, error) {
	var st Statement
	if err := strictjson.Decode(payload, &st); err != nil {
		return Statement{}, fmt.Errorf("attest: statement: %w", err)
	}
	if st.Type != StatementType {
		return Statement{}, fmt.Errorf("attest: statement: _type %q, want %q", st.Type, StatementType)
	}
	if st.PredicateType == "" {
		return Statement{}, errors.New("attest: statement: empty predicateType")
	}
	if len(st.Subject) == 0 {
		return Statement{}, errors.New("attest: statement: no subject")
	}
	for i, s := range st.Subject {
		if s.Name == "" || !isHexDigest(s.Digest["sha256"]) {
			return Statement{}, fmt.Errorf("attest: statement: subject %d needs a name and a sha256 digest", i)
		}
	}
	return st, nil
}

func newStatement(subjects []Subject, predicateType string, predicate any) (Statement, error) {
	p, err := marshalNoEscape(predicate)
	if err != nil {
		return Statement{}, err
	}
	return Statement{Type: StatementType, Subject: subjects, PredicateType: predicateType, Predicate: p}, nil
}

func subjectsOf(artifacts []ArtifactDigest) ([]Subject, error) {
	if len(artifacts) == 0 {
		return nil, errors.New("attest: run statements: no artifacts to attest")
	}
	seen := map[string]bool{}
	subjects := make([]Subject, 0, len(artifacts))
	for _, a := range artifacts {
		if err := checkArtifactName(a.Name); err != nil {
			return nil, err
		}
		if seen[a.Name] {
			return nil, fmt.Errorf("attest: artifact %q listed twice", a.Name)
		}
		seen[a.Name] = true
		if !isHexDigest(a.SHA256) {
			return nil, fmt.Errorf("attest: artifact %q: sha256 %q is not a hex digest", a.Name, a.SHA256)
		}
		subjects = append(subjects, Subject{Name: a.Name, Digest: map[string]string{"sha256": a.SHA256}})
	}
	slices.SortFunc(subjects, func(a, b Subject) int { return strings.Compare(a.Name, b.Name) })
	return subjects, nil
}

func isHexDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// marshalNoEscape is json.Marshal without HTML escaping (payloads are not
// HTML) and without the trailing newline.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("attest: marshal: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
