// Package report signs a judged run (step 8 of a run): in-toto
// statements in DSSE envelopes, and the report bundle with the human
// report, the raw outputs and the program's decision log, made once and
// kept, so that every download is the same signed bytes. The report's
// HTML is drawn by a Renderer (web, wired in main): this package draws
// nothing.
package report

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/service/stoploss"
	"github.com/accordlab/accord/store"
)

// Contents are everything the human report shows.
type Contents struct {
	Run        store.Run
	Program    string
	Vendor     string
	Customer   string
	Evaluation *acceptance.Evaluation
	// Measurements are the run's measurement rows; HostFacts its host
	// facts (nil: none, as for an imported run).
	Measurements []store.MeasurementRow
	HostFacts    *store.HostFacts
	ProfileYAML  string
	GateYAML     string
	Artifacts    []store.RunArtifact
	KeyID        string
	SignedAt     string
	StopLoss     string
	// Charts are the run's chart data as its ingest computed it (nil: the
	// run has none); the report draws its charts from them.
	Charts *chartdata.Aggregates
	// Baseline is the run compared with, when there is one.
	Baseline *BaselineContents
	// Limits are the gate set's absolute criteria, drawn on the charts.
	Limits []Limit
	// Hosts are a multi-host run's hosts, each with its facts and its own
	// figures (HostFacts is then nil: no one host stands for the run).
	Hosts []HostContents
}

// BaselineContents are the baseline run's figures the report shows beside
// the run's.
type BaselineContents struct {
	RunID        int64
	Measurements []store.MeasurementRow
	HostFacts    *store.HostFacts
	Charts       *chartdata.Aggregates
}

// Limit is a criterion of the gate set, drawn on the charts: absolute, in
// the metric's canonical unit ("p99 TTFT ≤ 2000 ms"), or relative, the
// allowed change in percent of the baseline's figure ("p99 TTFT ≤ −20 %
// against the baseline"), for Step (or every step).
type Limit struct {
	Metric     string
	Statistic  string
	Step       string
	Comparator acceptance.Comparator
	Value      float64
	Label      string
	// Relative: Value is a change in percent, drawn where the baseline
	// has the statistic (at the baseline's figure × (1 + Value/100)).
	Relative bool
}

// AppliesTo says whether the limit holds for a metric in a step.
func (l Limit) AppliesTo(metric, step string) bool {
	return l.Metric == metric && (l.Step == "" || l.Step == step)
}

// gateLimits reads a gate set's criteria as limits to draw.
func gateLimits(g acceptance.GateSetSpec) []Limit {
	var out []Limit
	for _, c := range g.Criteria {
		m, ok := acceptance.LookupMetric(c.Metric)
		if !ok {
			continue
		}
		op := "≤"
		if c.Comparator == acceptance.GreaterOrEqual {
			op = "≥"
		}
		l := Limit{Metric: c.Metric, Statistic: string(c.Statistic), Step: c.Step, Comparator: c.Comparator}
		switch {
		case c.Mode == acceptance.Absolute:
			v, err := acceptance.ConvertToCanonical(c.Threshold, c.Unit, m)
			if err != nil {
				continue // the gate engine refuses such a criterion and says so in the verdict
			}
			l.Value, l.Label = v, fmt.Sprintf("%s %s %s %s %s", c.Statistic, m.Name, op, strconv.FormatFloat(v, 'g', 6, 64), m.Unit)
		case c.Mode == acceptance.Relative && c.Unit == "%":
			l.Value, l.Relative = c.Threshold, true
			l.Label = fmt.Sprintf("%s %s %s %+g %% against the baseline", c.Statistic, m.Name, op, c.Threshold)
		default:
			continue
		}
		out = append(out, l)
	}
	return out
}

// runCharts reads a run's chart data (nil when it has none).
func runCharts(ctx context.Context, st *store.Store, runID int64) (*chartdata.Aggregates, error) {
	docs, err := st.RunCharts(ctx, runID, chartdata.KeyMeta, chartdata.KeySummary, "cdf:%")
	if err != nil {
		return nil, err
	}
	a, ok, err := chartdata.Decode(docs)
	if err != nil {
		return nil, fmt.Errorf("charts of run %d: %w", runID, err)
	}
	if !ok {
		return nil, nil
	}
	return &a, nil
}

// Signer is what signing a run needs.
type Signer struct {
	Log     *slog.Logger
	Store   *store.Store
	Keyring *attest.Keyring
	// Render writes the report's HTML (web.RenderReport, wired in main).
	Render Renderer
	// BaseURL is the installation's public address, for the links report
	// bundles carry (nil: none).
	BaseURL *url.URL
}

// Renderer writes the human report of a run, one standalone HTML file.
type Renderer func(ctx context.Context, w io.Writer, c Contents) error

// ErrNoKeyring: the installation has no signing keyring; retrying does
// not help.
var ErrNoKeyring = errors.New("no signing keyring configured")

// ErrLogDoesNotVerify: the program's stored decision log does not verify,
// so no bundle is signed with it; retrying does not help.
var ErrLogDoesNotVerify = errors.New("the program's decision log does not verify, so no bundle is signed with it")

// Sign signs a run and stores its statements and report bundle; it
// returns the stored report.
func (d Signer) Sign(ctx context.Context, runID int64) (store.RunReport, error) {
	st := d.Store
	if d.Keyring == nil {
		return store.RunReport{}, ErrNoKeyring
	}
	if d.Render == nil {
		return store.RunReport{}, fmt.Errorf("sign run %d: no report renderer", runID)
	}
	signer, err := d.Keyring.Active()
	if err != nil {
		return store.RunReport{}, fmt.Errorf("sign run %d: %w", runID, err)
	}
	in, err := gatherReport(ctx, st, runID)
	if err != nil {
		return store.RunReport{}, fmt.Errorf("sign run %d: %w", runID, err)
	}
	atts, err := attest.SignRun(signer, in.evidence)
	if err != nil {
		return store.RunReport{}, fmt.Errorf("sign run %d: %w", runID, err)
	}
	keys, err := d.Keyring.PublicKeys()
	if err != nil {
		return store.RunReport{}, err
	}
	now := time.Now().UTC()
	in.data.KeyID, in.data.SignedAt = signer.KeyID(), now.Format("2006-01-02 15:04 UTC")
	var html bytes.Buffer
	if err := d.Render(ctx, &html, in.data); err != nil {
		return store.RunReport{}, fmt.Errorf("sign run %d: report: %w", runID, err)
	}

	tmp, err := os.CreateTemp("", "accord-bundle-*.tar.gz")
	if err != nil {
		return store.RunReport{}, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	bundle := attest.BundleInput{
		RunID: strconv.FormatInt(runID, 10), Title: in.title, Created: now, ReportHTML: html.Bytes(),
		Summary: in.summary, Facts: in.evidence.HostFacts, Evaluation: in.evaluation, Attestations: atts, Keys: keys,
	}
	if bundle.Decisions, err = d.DecisionLog(ctx, signer, in.data.Run.ProgramID, now); err != nil {
		if errors.Is(err, ErrLogDoesNotVerify) {
			if nerr := st.AddRunNote(ctx, runID, "error", "not signed: "+err.Error()); nerr != nil {
				return store.RunReport{}, errors.Join(err, nerr)
			}
		}
		return store.RunReport{}, fmt.Errorf("sign run %d: %w", runID, err)
	}
	if d.BaseURL != nil {
		bundle.LogHeadURL = d.BaseURL.JoinPath("programs", strconv.FormatInt(in.data.Run.ProgramID, 10), "decisions", "head.json").String()
	}
	// Each document the run has: a run without a gate set has the profile.
	bundle.Profile, bundle.GateSet = in.profileDoc, in.gateSetDoc
	for _, a := range in.artifacts {
		a := a
		bundle.Artifacts = append(bundle.Artifacts, attest.Artifact{Name: a.Path, Size: a.Size, SHA256: a.SHA256, Open: func(ctx context.Context) (io.ReadCloser, error) {
			return st.Artifacts().Open(ctx, a.SHA256)
		}})
	}
	written, err := attest.WriteBundle(ctx, tmp, signer, bundle)
	if err != nil {
		return store.RunReport{}, fmt.Errorf("sign run %d: bundle: %w", runID, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return store.RunReport{}, err
	}
	manifest := sha256.Sum256(written.Manifest)
	var report store.RunReport
	err = st.InTx(ctx, func(tx *store.Store) error {
		for _, a := range atts {
			env, err := json.Marshal(a.Envelope)
			if err != nil {
				return err
			}
			pt := attest.BenchmarkPredicateType
			if a.Name == attest.AttestationTestResult {
				pt = attest.TestResultPredicate
			}
			if err := tx.SaveAttestation(ctx, store.RunAttestation{RunID: runID, Name: a.Name, PredicateType: pt, KeyID: signer.KeyID(), Envelope: env}); err != nil {
				return err
			}
		}
		blob, err := tx.Artifacts().Put(ctx, tmp) // streamed from the temporary file
		if err != nil {
			return err
		}
		report, err = tx.AddRunReport(ctx, store.RunReport{RunID: runID, BundleSHA256: blob.SHA256, Size: blob.Size,
			ManifestSHA256: hex.EncodeToString(manifest[:]), KeyID: signer.KeyID(), Cosigners: []string{}})
		if err != nil {
			return err
		}
		return tx.AddRunNote(ctx, runID, "info", fmt.Sprintf("results signed by %s; report bundle %s (%d bytes)", signer.KeyID(), blob.SHA256[:12], blob.Size))
	})
	return report, err
}

// reportInputs is what a run's report is made of.
type reportInputs struct {
	evidence   attest.RunEvidence
	data       Contents
	title      string
	summary    json.RawMessage
	evaluation json.RawMessage
	artifacts  []store.RunArtifact
	// profileDoc and gateSetDoc are the versions' canonical JSON, whose
	// digests the benchmark statement names (nil without the version).
	profileDoc json.RawMessage
	gateSetDoc json.RawMessage
}

// specDocument is a spec version's canonical JSON, checked against its
// stored digest: the document in the bundle must be the one the statement
// names.
func specDocument(doc []byte, err error, digest string) (json.RawMessage, error) {
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(doc)
	if got := acceptance.DigestPrefix + hex.EncodeToString(sum[:]); got != digest {
		return nil, fmt.Errorf("its canonical JSON is %s, the stored version's digest %s", got, digest)
	}
	return doc, nil
}

func gatherReport(ctx context.Context, st *store.Store, runID int64) (reportInputs, error) {
	var in reportInputs
	run, err := st.RunByID(ctx, runID)
	if err != nil {
		return in, err
	}
	program, err := st.ProgramByID(ctx, run.ProgramID)
	if err != nil {
		return in, err
	}
	in.data = Contents{Run: run, Program: program.Name, Vendor: program.VendorName, Customer: program.CustomerName}
	// The verifier writes "Run N: <title>": the title does not repeat the run.
	in.title = fmt.Sprintf("%s v%d", run.ProfileName, run.ProfileVersion)
	if run.HostName != "" {
		in.title += " on " + run.HostName
	}
	if run.Label != "" {
		in.title += " (" + run.Label + ")"
	}
	ev, err := st.RunLatestEvaluation(ctx, run.ID)
	switch {
	case err == nil:
		var e acceptance.Evaluation
		if err := json.Unmarshal(ev.Result, &e); err != nil {
			return in, err
		}
		in.data.Evaluation = &e
		in.evaluation = ev.Canonical
	case errors.Is(err, store.ErrNotFound):
		in.evaluation = json.RawMessage(`null`)
	default:
		return in, err
	}
	if in.artifacts, err = st.RunArtifacts(ctx, run.ID); err != nil {
		return in, err
	}
	in.data.Artifacts = in.artifacts
	facts := []byte(`{}`)
	for _, a := range in.artifacts {
		if a.Path == wire.FactsFile {
			rc, err := st.Artifacts().Open(ctx, a.SHA256)
			if err != nil {
				return in, err
			}
			facts, err = io.ReadAll(rc) // facts.json: a few KiB
			rc.Close()
			if err != nil {
				return in, err
			}
		}
	}
	if run.MultiHost() {
		// Every host's facts and own figures; facts.json holds them all.
		if in.data.Hosts, err = hostsOfRun(ctx, st, run, in.artifacts); err != nil {
			return in, err
		}
		if facts, err = hostFactsJSON(in.data.Hosts); err != nil {
			return in, err
		}
		in.title = fmt.Sprintf("%s v%d on %d hosts (%s)", run.ProfileName, run.ProfileVersion, len(in.data.Hosts), hostNames(in.data.Hosts))
		if run.Label != "" {
			in.title += " (" + run.Label + ")"
		}
	} else {
		switch hf, err := st.RunFacts(ctx, run.ID); {
		case err == nil:
			in.data.HostFacts = &hf
		case !errors.Is(err, store.ErrNotFound):
			return in, err
		}
	}
	rows, err := st.RunMeasurementSummaries(ctx, run.ID)
	if err != nil {
		return in, err
	}
	metrics := make([]map[string]any, 0, len(rows))
	in.data.Measurements = rows
	if in.data.Charts, err = runCharts(ctx, st, run.ID); err != nil {
		return in, err
	}
	if run.BaselineRunID != nil {
		if in.data.Baseline, err = baselineContents(ctx, st, *run.BaselineRunID); err != nil {
			return in, err
		}
	}
	for _, m := range rows {
		metrics = append(metrics, metricRow(m))
	}
	// A multi-host run's hosts' own figures follow the combined ones, each
	// with its host.
	for _, h := range in.data.Hosts {
		for _, m := range h.Measurements {
			metrics = append(metrics, metricRow(m))
		}
	}
	metricsJSON, err := json.Marshal(metrics)
	if err != nil {
		return in, err
	}
	breach, err := stoploss.Recorded(ctx, st, run.ID)
	if err != nil {
		return in, err
	}
	if breach != nil {
		in.data.StopLoss = breach.Explanation
	}
	host := run.HostName
	if len(in.data.Hosts) > 0 {
		host = hostNames(in.data.Hosts)
	}
	in.evidence = attest.RunEvidence{
		RunID: strconv.FormatInt(run.ID, 10), Host: host, HostFacts: facts, Metrics: metricsJSON, Verdict: run.Verdict,
		EngineVersion: acceptance.EngineVersion,
	}
	if run.StartedAt != nil {
		in.evidence.Started = *run.StartedAt
	}
	if run.FinishedAt != nil {
		in.evidence.Finished = *run.FinishedAt
	}
	if run.BaselineRunID != nil {
		in.evidence.BaselineRunID = strconv.FormatInt(*run.BaselineRunID, 10)
	}
	for _, a := range in.artifacts {
		in.evidence.Artifacts = append(in.evidence.Artifacts, attest.ArtifactDigest{Name: a.Path, SHA256: a.SHA256, Size: a.Size})
	}
	if run.ProfileVersionID != nil {
		pv, err := st.GetSpecVersionByID(ctx, store.KindProfile, run.ProgramID, *run.ProfileVersionID)
		if err != nil {
			return in, err
		}
		in.evidence.Profile = attest.Ref{Name: run.ProfileName, Version: pv.Version, SHA256: strings.TrimPrefix(pv.Digest, "sha256:")}
		var p acceptance.ProfileSpec
		if err := json.Unmarshal(pv.Spec, &p); err != nil {
			return in, fmt.Errorf("profile version %d: %w", pv.ID, err)
		}
		y, err := acceptance.ExportProfileYAML(p)
		if err != nil {
			return in, fmt.Errorf("profile version %d: %w", pv.ID, err)
		}
		in.data.ProfileYAML = string(y)
		doc, err := acceptance.ProfileCanonicalJSON(p)
		if in.profileDoc, err = specDocument(doc, err, pv.Digest); err != nil {
			return in, fmt.Errorf("profile version %d: %w", pv.ID, err)
		}
	}
	if run.GateSetVersionID != nil {
		gv, err := st.GetSpecVersionByID(ctx, store.KindGateSet, run.ProgramID, *run.GateSetVersionID)
		if err != nil {
			return in, err
		}
		in.evidence.GateSet = attest.Ref{Name: run.GateSetName, Version: gv.Version, SHA256: strings.TrimPrefix(gv.Digest, "sha256:")}
		var g acceptance.GateSetSpec
		if err := json.Unmarshal(gv.Spec, &g); err != nil {
			return in, fmt.Errorf("gate set version %d: %w", gv.ID, err)
		}
		y, err := acceptance.ExportGateSetYAML(g)
		if err != nil {
			return in, fmt.Errorf("gate set version %d: %w", gv.ID, err)
		}
		in.data.GateYAML = string(y)
		in.data.Limits = gateLimits(g)
		doc, err := acceptance.GateSetCanonicalJSON(g)
		if in.gateSetDoc, err = specDocument(doc, err, gv.Digest); err != nil {
			return in, fmt.Errorf("gate set version %d: %w", gv.ID, err)
		}
	}
	if in.data.Evaluation != nil {
		for _, c := range in.data.Evaluation.Criteria {
			details, err := json.Marshal(c)
			if err != nil {
				return in, fmt.Errorf("criterion %s: %w", c.Name, err)
			}
			in.evidence.Verdicts = append(in.evidence.Verdicts, attest.Verdict{Criterion: c.Name, Severity: string(c.Severity),
				Verdict: string(c.Verdict), Explanation: c.Explanation, Details: details})
		}
	}
	summary := map[string]any{
		"run_id": run.ID, "label": run.Label, "state": run.State, "reason": run.Reason, "verdict": run.Verdict, "emulated": run.Emulated,
		"program": program.Name, "vendor": program.VendorName, "customer": program.CustomerName,
		"profile": in.evidence.Profile, "gate_set": in.evidence.GateSet, "host": host, "baseline_run_id": run.BaselineRunID,
		"started_at": run.StartedAt, "finished_at": run.FinishedAt, "metrics": json.RawMessage(metricsJSON),
	}
	if len(in.data.Hosts) > 0 {
		hosts := make([]map[string]any, len(in.data.Hosts))
		for i, h := range in.data.Hosts {
			hosts[i] = map[string]any{"ordinal": h.Ordinal, "role": h.Role, "host": h.Name, "facts_artifact": h.FactsArtifact}
		}
		summary["hosts"] = hosts
	}
	if in.summary, err = json.MarshalIndent(summary, "", "  "); err != nil {
		return in, err
	}
	return in, nil
}

// baselineContents reads what the report shows of the baseline run.
func baselineContents(ctx context.Context, st *store.Store, runID int64) (*BaselineContents, error) {
	b := &BaselineContents{RunID: runID}
	var err error
	if b.Measurements, err = st.RunMeasurementSummaries(ctx, runID); err != nil {
		return nil, err
	}
	run, err := st.RunByID(ctx, runID)
	if err != nil {
		return nil, err
	}
	// A multi-host baseline has no one host's facts to lay beside the run's.
	if !run.MultiHost() {
		switch hf, err := st.RunFacts(ctx, runID); {
		case err == nil:
			b.HostFacts = &hf
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
	}
	if b.Charts, err = runCharts(ctx, st, runID); err != nil {
		return nil, err
	}
	return b, nil
}

// DecisionLog is the program's decision log as `accord verify` checks it,
// for the bundle's decisions.json (its head carried over to the active key
// first if a revoked key signed it): every bundle carries it (a program
// without decisions gets a checkpoint over the empty chain, signed by signer
// at now). A stored log that does not verify is not signed into a bundle:
// the error wraps ErrLogDoesNotVerify and names the bad record.
func (d Signer) DecisionLog(ctx context.Context, signer *attest.Signer, programID int64, now time.Time) (json.RawMessage, error) {
	// A head a revoked key signed (its carry-over after the revocation
	// failed, or has not come yet) is carried over first: a bundle never
	// carries a log whose head only a revoked key vouches for.
	if _, err := rollout.CarryLogOver(ctx, d.Store, d.Keyring, programID, now); err != nil {
		return nil, err
	}
	log, _, err := rollout.ProgramLog(ctx, d.Store, programID, signer, now)
	if err != nil {
		return nil, err
	}
	keys, err := d.Keyring.KeySet()
	if err != nil {
		return nil, err
	}
	if _, err := log.Verify(keys); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLogDoesNotVerify, err)
	}
	return log.Marshal()
}
