package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/parse"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/store"
)

// finish is step 6 of a run: keep every collected file as an artifact, the
// host facts, and the canonical measurements, and enqueue evaluate_run, all
// in one fenced transaction.
func (w *ExecuteRunWorker) finish(ctx context.Context, run store.Run, host store.Host, lease store.Lease, profile acceptance.ProfileSpec, out runners.Outcome, breach *acceptance.StopLossBreach) error {
	st := w.deps.Store
	measurements, warnings, importErr := ImportCollection(out.Collection, profile, w.deps.Version)
	state, reason := store.RunEvaluating, "judging the results"
	switch {
	case breach != nil:
		state, reason = store.RunFailed, "stopped by the stop-loss: "+breach.Explanation
	case out.Crashed:
		state, reason = store.RunFailed, "the probe stopped without writing a status (crashed or killed on the host)"
	case out.Status == nil:
		state, reason = store.RunFailed, "the probe's status is missing"
	case out.Status.State != wire.StateDone:
		state, reason = store.RunFailed, fmt.Sprintf("the probe ended %s: %s", out.Status.State, out.Status.Reason)
	case importErr != nil:
		state, reason = store.RunFailed, "the results could not be read: "+importErr.Error()
	}
	return st.InTx(ctx, func(tx *store.Store) error {
		if err := tx.CheckFence(ctx, lease); err != nil {
			return err
		}
		if err := storeCollection(ctx, tx, run.ID, out.Collection); err != nil {
			return err
		}
		if f, ok := out.Collection.File(wire.FactsFile); ok {
			facts, err := readAll(f)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(facts)
			if json.Valid(facts) {
				if _, err := tx.AddHostFacts(ctx, host.ID, &run.ID, facts, "sha256:"+hex.EncodeToString(sum[:])); err != nil {
					return err
				}
			}
		}
		if importErr == nil && len(measurements) > 0 {
			if err := tx.SaveMeasurements(ctx, run.ID, measurements); err != nil {
				return err
			}
			if err := precomputeCharts(ctx, tx, run, measurements, out.Collection); err != nil {
				return err
			}
		}
		for _, warn := range warnings {
			if err := tx.AddRunNote(ctx, run.ID, "warn", warn); err != nil {
				return err
			}
		}
		if breach != nil {
			if err := tx.RecordStopLoss(ctx, run.ID, breach); err != nil {
				return err
			}
			if err := onRunStopLoss(ctx, tx, w.deps, run, breach); err != nil {
				return err
			}
		}
		if err := tx.SetRunState(ctx, run.ID, state, reason); err != nil {
			return err
		}
		if run.GateSetVersionID != nil && importErr == nil && len(measurements) > 0 {
			return insertTx(ctx, tx, EvaluateRunArgs{RunID: run.ID})
		}
		if state == store.RunEvaluating {
			return tx.SetRunState(ctx, run.ID, store.RunDone, "no gate set: results stored without a verdict")
		}
		return nil
	})
}

// storeCollection keeps every file of the run folder, content-addressed.
func storeCollection(ctx context.Context, tx *store.Store, runID int64, c *sshrun.Collection) error {
	for _, f := range c.Files {
		data, err := readAll(f)
		if err != nil {
			return err
		}
		digest, err := tx.Artifacts().Put(ctx, data)
		if err != nil {
			return err
		}
		if digest != f.SHA256 {
			return fmt.Errorf("artifact %s changed between collection and storage", f.Name)
		}
		if err := tx.AddRunArtifact(ctx, store.RunArtifact{RunID: runID, Path: f.Name, SHA256: digest, Size: f.Size}); err != nil {
			return err
		}
	}
	return nil
}

func readAll(f sshrun.File) ([]byte, error) {
	r, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// ImportCollection turns a collected run folder into canonical
// measurements: each step result names its output's format, and the
// importer of that format reads it (runners/parse). A failed import fails
// the whole run's results: nothing partial is stored.
func ImportCollection(c *sshrun.Collection, profile acceptance.ProfileSpec, probeVersion string) ([]acceptance.Measurement, []string, error) {
	steps := map[string]acceptance.StepSpec{}
	for _, s := range profile.Steps {
		steps[s.Name] = s
	}
	var all []acceptance.Measurement
	var warnings []string
	for _, f := range c.Files {
		if path.Base(f.Name) != wire.StepResultFile || !strings.HasPrefix(f.Name, wire.OutputDir+"/") {
			continue
		}
		raw, err := readAll(f)
		if err != nil {
			return nil, nil, err
		}
		var res wire.StepResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		if res.Error != "" {
			warnings = append(warnings, fmt.Sprintf("step %s (repetition %d%s) failed on the host: %s", res.Step, res.Repetition, levelText(res.Level), res.Error))
			continue
		}
		ms, warns, err := importStepResult(c, path.Dir(f.Name), res, steps[res.Step], probeVersion)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, ms...)
		warnings = append(warnings, warns...)
	}
	return all, warnings, nil
}

func levelText(level string) string {
	if level == "" {
		return ""
	}
	return ", level " + level
}

func importStepResult(c *sshrun.Collection, dir string, res wire.StepResult, step acceptance.StepSpec, probeVersion string) ([]acceptance.Measurement, []string, error) {
	opts := parse.Options{Step: res.Step, Level: res.Level, Repetition: res.Repetition, ToolVersion: probeVersion, Result: &res}
	if step.Inference != nil {
		opts.SLO = step.Inference.SLO
	}
	var all []acceptance.Measurement
	var warnings []string
	importFile := func(format parse.Format, name string) error {
		f, ok := c.File(path.Join(dir, name))
		if !ok {
			return fmt.Errorf("step %s: %s is missing from the run folder", res.Step, path.Join(dir, name))
		}
		data, err := readAll(f)
		if err != nil {
			return err
		}
		opts.Name = f.Name
		ms, warns, err := parse.Import(format, data, opts)
		if err != nil {
			return err
		}
		all = append(all, ms...)
		warnings = append(warnings, warns...)
		return nil
	}
	switch res.Format {
	case "", "none", "text":
	case string(parse.FormatProbeRequests):
		if err := importFile(parse.FormatProbeRequests, wire.RequestsFile); err != nil {
			return nil, nil, err
		}
	case string(parse.FormatFio):
		if err := importFile(parse.FormatFio, wire.FioOutputFile); err != nil {
			return nil, nil, err
		}
	default:
		if len(res.Files) == 0 {
			return nil, nil, fmt.Errorf("step %s: the result names no output file", res.Step)
		}
		if err := importFile(parse.Format(res.Format), path.Base(res.Files[0])); err != nil {
			return nil, nil, err
		}
	}
	// Telemetry is context, not evidence: a problem with it is a warning.
	if _, ok := c.File(path.Join(dir, wire.TelemetryFile)); ok {
		if err := importFile(parse.FormatProbeTelemetry, wire.TelemetryFile); err != nil {
			warnings = append(warnings, fmt.Sprintf("step %s: telemetry not imported: %v", res.Step, err))
		}
	}
	return all, warnings, nil
}
