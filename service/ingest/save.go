// Package ingest keeps a run's results (step 6 of a run), one way for a
// run folder collected from a lab host and for a file or a report bundle
// imported by a user: ReadFolder (or runners/parse for a single file)
// reads the measurements, Charts computes the chart data outside any
// transaction, and Save, in the caller's transaction, keeps every file as
// a content-addressed artifact, the host facts, the measurements and the
// chart data, records a stop-loss crossing, ends the run's state and
// enqueues its evaluation.
package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/service/stoploss"
	"github.com/accordlab/accord/store"
)

// Results are what a run leaves: its files and what was read from them.
type Results struct {
	// Files are the run folder (or the imported files), kept as artifacts.
	Files *sshrun.Collection
	// Measurements are what the importers read (nil when they failed).
	Measurements []acceptance.Measurement
	// Warnings become the run's notes.
	Warnings []string
	// Charts are the chart data (Charts), kept with the measurements.
	Charts map[string]json.RawMessage
	// HostID keeps the folder's host facts for the host (a lab run; nil
	// for an import, whose facts file stays an artifact).
	HostID *int64
}

// Outcome is how the run ends.
type Outcome struct {
	// State and Reason are the run's: store.RunEvaluating while it waits
	// for its verdict.
	State, Reason string
	// Breach is the stop-loss line the probe's interim results crossed.
	Breach *acceptance.StopLossBreach
}

// Save keeps a run's results and ends it, in tx: the files, the host
// facts, the measurements with their chart data, the warnings, the
// stop-loss crossing (which halts the rollout stage the run is evidence
// for), the state; a run with a gate set and measurements is then judged
// (env's queue: evaluate_run), a run still evaluating without is done, and
// a run done without a gate set is signed (sign_run).
func Save(ctx context.Context, tx *store.Store, env rollout.Env, run store.Run, res Results, out Outcome) error {
	if err := storeFiles(ctx, tx, run.ID, res.Files); err != nil {
		return err
	}
	if f, ok := res.Files.File(wire.FactsFile); ok && res.HostID != nil {
		raw, err := readFile(f)
		if err != nil {
			return err
		}
		if json.Valid(raw) {
			if _, err := tx.AddHostFacts(ctx, *res.HostID, &run.ID, raw, "sha256:"+f.SHA256); err != nil {
				return err
			}
		} else if err := tx.AddRunNote(ctx, run.ID, "warn", "the host facts ("+wire.FactsFile+") are not valid JSON: comparability with other runs cannot be judged"); err != nil {
			return err
		}
	}
	if len(res.Measurements) > 0 {
		if err := tx.SaveMeasurements(ctx, run.ID, res.Measurements); err != nil {
			return err
		}
		if res.Charts != nil {
			if err := tx.SaveRunCharts(ctx, run.ID, res.Charts); err != nil {
				return err
			}
		}
	}
	for _, warn := range res.Warnings {
		if err := tx.AddRunNote(ctx, run.ID, "warn", warn); err != nil {
			return err
		}
	}
	if out.Breach != nil {
		if err := stoploss.Record(ctx, tx, env, run, out.Breach); err != nil {
			return err
		}
	}
	if err := tx.SetRunState(ctx, run.ID, out.State, out.Reason); err != nil {
		return err
	}
	if run.GateSetVersionID != nil && len(res.Measurements) > 0 {
		return env.Queue.EvaluateRun(ctx, tx, run.ID)
	}
	state := out.State
	if state == store.RunEvaluating {
		reason := "no gate set: results stored without a verdict"
		if run.GateSetVersionID != nil {
			reason = "no measurements: nothing for the gate set to judge"
		}
		if err := tx.SetRunState(ctx, run.ID, store.RunDone, reason); err != nil {
			return err
		}
		state = store.RunDone
	}
	// A run without a gate set is signed as it is, unjudged: its bundle
	// carries its files and its profile (a gated run is signed once its
	// evaluation is stored).
	if state == store.RunDone && run.GateSetVersionID == nil && env.Queue != nil {
		return env.Queue.SignRun(ctx, tx, run.ID)
	}
	return nil
}

// storeFiles keeps every file, content-addressed, each streamed from
// where the collection holds it. The files go in the order of their
// digests: storing content takes a lock on its digest until the
// transaction ends, so two runs storing the same contents (two hosts'
// identical facts, the same profile) in different orders would deadlock.
func storeFiles(ctx context.Context, tx *store.Store, runID int64, c *sshrun.Collection) error {
	files := slices.Clone(c.Files)
	slices.SortStableFunc(files, func(a, b sshrun.File) int { return strings.Compare(a.SHA256, b.SHA256) })
	for _, f := range files {
		blob, err := putFile(ctx, tx, f)
		if err != nil {
			return err
		}
		if blob.SHA256 != f.SHA256 {
			return fmt.Errorf("artifact %s changed between collection and storage", f.Name)
		}
		if err := tx.AddRunArtifact(ctx, store.RunArtifact{RunID: runID, Path: f.Name, SHA256: blob.SHA256, Size: blob.Size}); err != nil {
			return err
		}
	}
	return nil
}

func putFile(ctx context.Context, tx *store.Store, f sshrun.File) (store.Blob, error) {
	r, err := f.Open()
	if err != nil {
		return store.Blob{}, fmt.Errorf("artifact %s: %w", f.Name, err)
	}
	defer r.Close()
	blob, err := tx.Artifacts().Put(ctx, r)
	if err != nil {
		return blob, fmt.Errorf("artifact %s: %w", f.Name, err)
	}
	return blob, nil
}
