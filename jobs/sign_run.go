package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// SignRunArgs signs a run's evaluated results (step 8 of a run): in-toto
// statements in DSSE envelopes, and the report bundle, made once and kept,
// so that every download is the same signed bytes.
type SignRunArgs struct {
	RunID int64 `json:"run_id"`
}

func (SignRunArgs) Kind() string { return "sign_run" }

func (SignRunArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueReports, MaxAttempts: 5}
}

// SignRunWorker works SignRunArgs.
type SignRunWorker struct {
	river.WorkerDefaults[SignRunArgs]
	deps Deps
}

// Timeout allows large bundles (raw outputs of long runs).
func (w *SignRunWorker) Timeout(*river.Job[SignRunArgs]) time.Duration { return 30 * time.Minute }

func (w *SignRunWorker) Work(ctx context.Context, job *river.Job[SignRunArgs]) error {
	_, err := SignRun(ctx, w.deps, job.Args.RunID)
	return err
}

// SignRun signs a run and stores its statements and report bundle; it
// returns the stored report.
func SignRun(ctx context.Context, d Deps, runID int64) (store.RunReport, error) {
	st := d.Store
	if d.Keyring == nil {
		return store.RunReport{}, river.JobCancel(errors.New("no signing keyring configured"))
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
	in.data.KeyID, in.data.SignedAt = signer.KeyID(), time.Now().UTC().Format("2006-01-02 15:04 UTC")
	var html bytes.Buffer
	if err := web.Report(in.data).Render(ctx, &html); err != nil {
		return store.RunReport{}, fmt.Errorf("sign run %d: report: %w", runID, err)
	}

	tmp, err := os.CreateTemp("", "accord-bundle-*.tar.gz")
	if err != nil {
		return store.RunReport{}, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	bundle := attest.BundleInput{
		RunID: strconv.FormatInt(runID, 10), Title: in.title, Created: time.Now().UTC(), ReportHTML: html.Bytes(),
		Summary: in.summary, Facts: in.evidence.HostFacts, Evaluation: in.evaluation, Attestations: atts, Keys: keys,
	}
	if bundle.Decisions, err = programDecisionLog(ctx, d, in.data.Run.ProgramID); err != nil {
		return store.RunReport{}, fmt.Errorf("sign run %d: %w", runID, err)
	}
	for _, a := range in.artifacts {
		a := a
		bundle.Artifacts = append(bundle.Artifacts, attest.Artifact{Name: a.Path, Size: a.Size, SHA256: a.SHA256, Open: func(ctx context.Context) (io.ReadCloser, error) {
			rc, _, err := st.Artifacts().Open(ctx, a.SHA256)
			return rc, err
		}})
	}
	written, err := attest.WriteBundle(ctx, tmp, signer, bundle)
	if err != nil {
		return store.RunReport{}, fmt.Errorf("sign run %d: bundle: %w", runID, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return store.RunReport{}, err
	}
	blob, err := io.ReadAll(tmp)
	if err != nil {
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
		digest, err := tx.Artifacts().Put(ctx, blob)
		if err != nil {
			return err
		}
		report, err = tx.AddRunReport(ctx, store.RunReport{RunID: runID, BundleSHA256: digest, Size: int64(len(blob)),
			ManifestSHA256: hex.EncodeToString(manifest[:]), KeyID: signer.KeyID(), Cosigners: []string{}})
		if err != nil {
			return err
		}
		return tx.AddRunNote(ctx, runID, "info", fmt.Sprintf("results signed by %s; report bundle %s (%d bytes)", signer.KeyID(), digest[:12], len(blob)))
	})
	return report, err
}

// reportInputs is what a run's report is made of.
type reportInputs struct {
	evidence   attest.RunEvidence
	data       web.ReportData
	title      string
	summary    json.RawMessage
	evaluation json.RawMessage
	artifacts  []store.RunArtifact
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
	in.data = web.ReportData{Run: run, Program: program.Name, Vendor: program.VendorName, Customer: program.CustomerName}
	in.title = fmt.Sprintf("Run #%d: %s v%d on %s", run.ID, run.ProfileName, run.ProfileVersion, run.HostName)
	ev, err := st.LatestEvaluation(ctx, run.ID)
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
			rc, _, err := st.Artifacts().Open(ctx, a.SHA256)
			if err != nil {
				return in, err
			}
			facts, err = io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return in, err
			}
		}
	}
	if hf, err := st.RunFacts(ctx, run.ID); err == nil {
		in.data.Facts = web.SummarizeFacts(hf)
	}
	rows, err := st.MeasurementSummaries(ctx, run.ID)
	if err != nil {
		return in, err
	}
	metrics := make([]map[string]any, 0, len(rows))
	in.data.Metrics = web.MetricRowsFrom(rows)
	for _, m := range rows {
		metrics = append(metrics, map[string]any{"metric": m.Metric, "step": m.Step, "level": m.Level, "repetition": m.Repetition,
			"summary": m.Summary, "tool_summary": m.ToolSummary, "source": m.Source})
	}
	metricsJSON, err := json.Marshal(metrics)
	if err != nil {
		return in, err
	}
	if sl, err := st.RunStopLoss(ctx, run.ID); err == nil && len(sl) > 0 {
		var b acceptance.StopLossBreach
		if json.Unmarshal(sl, &b) == nil {
			in.data.StopLoss = b.Explanation
		}
	}
	in.evidence = attest.RunEvidence{
		RunID: strconv.FormatInt(run.ID, 10), Host: run.HostName, HostFacts: facts, Metrics: metricsJSON, Verdict: run.Verdict,
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
		if err := json.Unmarshal(pv.Spec, &p); err == nil {
			y, _ := acceptance.ExportProfileYAML(p)
			in.data.ProfileYAML = string(y)
		}
	}
	if run.GateSetVersionID != nil {
		gv, err := st.GetSpecVersionByID(ctx, store.KindGateSet, run.ProgramID, *run.GateSetVersionID)
		if err != nil {
			return in, err
		}
		in.evidence.GateSet = attest.Ref{Name: run.GateSetName, Version: gv.Version, SHA256: strings.TrimPrefix(gv.Digest, "sha256:")}
		var g acceptance.GateSetSpec
		if err := json.Unmarshal(gv.Spec, &g); err == nil {
			y, _ := acceptance.ExportGateSetYAML(g)
			in.data.GateYAML = string(y)
		}
	}
	if in.data.Evaluation != nil {
		for _, c := range in.data.Evaluation.Criteria {
			details, _ := json.Marshal(c)
			in.evidence.Verdicts = append(in.evidence.Verdicts, attest.Verdict{Criterion: c.Name, Severity: string(c.Severity),
				Verdict: string(c.Verdict), Explanation: c.Explanation, Details: details})
		}
	}
	summary := map[string]any{
		"run_id": run.ID, "label": run.Label, "state": run.State, "reason": run.Reason, "verdict": run.Verdict, "emulated": run.Emulated,
		"program": program.Name, "vendor": program.VendorName, "customer": program.CustomerName,
		"profile": in.evidence.Profile, "gate_set": in.evidence.GateSet, "host": run.HostName, "baseline_run_id": run.BaselineRunID,
		"started_at": run.StartedAt, "finished_at": run.FinishedAt, "metrics": json.RawMessage(metricsJSON),
	}
	if in.summary, err = json.MarshalIndent(summary, "", "  "); err != nil {
		return in, err
	}
	return in, nil
}

// programDecisionLog is the program's decision log as `accord verify`
// checks it, for the bundle's decisions.json: nil when the program has no
// decisions yet, or when the stored log does not verify (the rollout page
// names the bad record; a bundle must not carry a log that fails).
func programDecisionLog(ctx context.Context, d Deps, programID int64) (json.RawMessage, error) {
	ds, err := d.Store.ListDecisions(ctx, programID)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	chain, err := d.Store.GetDecisionChain(ctx, programID)
	if err != nil {
		return nil, err
	}
	if err := verifyStoredLog(d.Keyring, programID, ds, chain); err != nil {
		d.Log.Warn("the program's decision log does not verify: the report bundle leaves it out", "program_id", programID, "err", err)
		return nil, nil
	}
	return StoredLog(programID, ds, chain.Checkpoint).Marshal()
}
