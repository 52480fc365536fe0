// Package runsubmit starts a run (step 1 of a run): the request checked
// against the program's specs, hosts and runs, then the run, its hosts,
// its River job and the audit entry inserted in one transaction. The run
// form, the API and the demo all start runs here.
package runsubmit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

// Request is a run submission.
type Request struct {
	ProgramID        int64
	ProfileVersionID int64
	GateSetVersionID int64 // 0: none
	BaselineRunID    int64 // 0: none
	// HostID is the host of a one-host profile; Roles name the hosts of
	// each role of a multi-host one.
	HostID int64
	Roles  map[string][]int64
	Label  string
	// ConfirmReadiness starts the run although its hosts fail blocking
	// readiness checks (the override is recorded with the run).
	ConfirmReadiness bool
	// Warnings is what the pre-run check said, kept with the run.
	Warnings []acceptance.RunWarning
	// IdempotencyKey (optional) names the request; RequestDigest is its
	// digest (store.RunByIdempotencyKey).
	IdempotencyKey, RequestDigest string
	By                            Actor
}

// Actor is who submits the run, for the run's row and the audit log.
type Actor struct {
	UserID     int64
	Email      string
	ClientAddr string
}

// Result is a submission's outcome: the new run, or why none was started.
type Result struct {
	RunID int64
	// Errors are the request's problems, keyed by form field.
	Errors map[string]string
	// Readiness lists the blocking readiness checks the hosts fail, when
	// the request did not confirm them.
	Readiness []string
}

// Started reports whether the run was inserted.
func (r Result) Started() bool { return r.RunID != 0 }

// Queue enqueues a run's execution in the caller's transaction
// (jobs.Queue: River's InsertTx) and returns the job's id.
type Queue interface {
	ExecuteRun(ctx context.Context, tx *store.Store, runID int64) (int64, error)
}

// ReadinessCheck lists the blocking readiness checks a host fails for a
// profile version's spec (handlers' readiness, from the host's facts).
type ReadinessCheck func(ctx context.Context, host store.Host, profile json.RawMessage) ([]string, error)

// Env is what a submission needs besides the store.
type Env struct {
	Queue Queue
	// Readiness nil checks no readiness (the demo, whose lab host is its
	// own and checked by nobody).
	Readiness ReadinessCheck
}

// maxLabel is the longest label a run takes.
const maxLabel = 200

// Submit checks a request and, when it passes, inserts the run with its
// River job in one transaction.
func Submit(ctx context.Context, st *store.Store, env Env, req Request) (Result, error) {
	if env.Queue == nil {
		return Result{}, errors.New("submit run: no job queue")
	}
	c, err := checkRequest(ctx, st, req)
	if err != nil || len(c.errs) > 0 {
		return Result{Errors: c.errs}, err
	}
	failing, err := readinessFailures(ctx, env.Readiness, c.hosts, c.profileVersion.Spec)
	if err != nil {
		return Result{}, err
	}
	var override json.RawMessage
	if len(failing) > 0 {
		if !req.ConfirmReadiness {
			return Result{Readiness: failing}, nil
		}
		override, _ = json.Marshal(map[string]any{"confirmed_by": req.By.Email, "user_id": req.By.UserID, "failing_checks": failing})
	}
	runID, err := insertRun(ctx, st, env.Queue, req, c, override, failing)
	return Result{RunID: runID}, err
}

// checked is a request's parts as the store has them.
type checked struct {
	errs           map[string]string
	profileVersion store.SpecVersion
	profile        acceptance.ProfileSpec
	// hosts are in run order; runHosts are the run's host rows of a
	// multi-host profile (nil otherwise).
	hosts      []store.Host
	runHosts   []store.NewRunHost
	gateSetID  *int64
	baselineID *int64
}

// checkRequest loads what the request names and notes its problems by
// form field; only a store error is returned as an error.
func checkRequest(ctx context.Context, st *store.Store, req Request) (checked, error) {
	c := checked{errs: map[string]string{}}
	pv, err := st.GetSpecVersionByID(ctx, store.KindProfile, req.ProgramID, req.ProfileVersionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.errs["profile_version"] = "Choose a profile version of this program."
	case err != nil:
		return c, err
	}
	c.profileVersion = pv
	if pv.Spec != nil {
		if err := json.Unmarshal(pv.Spec, &c.profile); err != nil {
			return c, fmt.Errorf("submit run: decode profile version %d: %w", pv.ID, err)
		}
	}
	if c.hosts, c.runHosts, err = requestedHosts(ctx, st, req, c.profile, c.errs); err != nil {
		return c, err
	}
	if c.gateSetID, err = checkGateSet(ctx, st, req, pv, c.errs); err != nil {
		return c, err
	}
	if c.baselineID, err = checkBaseline(ctx, st, req, c.errs); err != nil {
		return c, err
	}
	if len(c.hosts) == 0 && len(c.errs) == 0 {
		c.errs["host"] = "Choose a lab host of this program."
	}
	if len(req.Label) > maxLabel {
		c.errs["label"] = fmt.Sprintf("At most %d characters.", maxLabel)
	}
	return c, nil
}

// checkGateSet finds the request's gate set version (nil: none) and checks
// that it fits the profile; it is not checked when other fields are wrong.
func checkGateSet(ctx context.Context, st *store.Store, req Request, pv store.SpecVersion, errs map[string]string) (*int64, error) {
	if req.GateSetVersionID == 0 {
		return nil, nil
	}
	gv, err := st.GetSpecVersionByID(ctx, store.KindGateSet, req.ProgramID, req.GateSetVersionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		errs["gate_set_version"] = "Choose a gate set version of this program."
		return nil, nil
	case err != nil:
		return nil, err
	case len(errs) > 0:
		return nil, nil
	}
	var gates acceptance.GateSetSpec
	var profile acceptance.ProfileSpec
	if json.Unmarshal(gv.Spec, &gates) == nil && json.Unmarshal(pv.Spec, &profile) == nil {
		if verrs := acceptance.ValidateGateSetForProfile(gates, profile); len(verrs) > 0 {
			errs["gate_set_version"] = "This gate set does not fit the profile: " + verrs.Error()
		}
	}
	return &gv.ID, nil
}

// checkBaseline finds the request's baseline (nil: none): a finished run
// of the program.
func checkBaseline(ctx context.Context, st *store.Store, req Request, errs map[string]string) (*int64, error) {
	if req.BaselineRunID == 0 {
		return nil, nil
	}
	base, err := st.GetRun(ctx, req.ProgramID, req.BaselineRunID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		errs["baseline"] = "Choose a run of this program as the baseline."
	case err != nil:
		return nil, err
	case base.State != store.RunDone:
		errs["baseline"] = "The baseline must be a finished run."
	default:
		return &base.ID, nil
	}
	return nil, nil
}

// readinessFailures lists the blocking readiness checks the hosts fail,
// each named by its host when the run has several.
func readinessFailures(ctx context.Context, check ReadinessCheck, hosts []store.Host, profile json.RawMessage) ([]string, error) {
	if check == nil {
		return nil, nil
	}
	var failing []string
	for _, host := range hosts {
		f, err := check(ctx, host, profile)
		if err != nil {
			return nil, err
		}
		for _, c := range f {
			if len(hosts) > 1 {
				c = host.Name + ": " + c
			}
			failing = append(failing, c)
		}
	}
	return failing, nil
}

// emulated says whether the run's results are labelled emulated: a host
// is an emulator host or the profile says its storage is emulated.
func emulated(profile acceptance.ProfileSpec, hosts []store.Host) bool {
	e := profile.Storage.Transport == acceptance.TransportEmulated
	for _, h := range hosts {
		e = e || h.Emulated
	}
	return e
}

// insertRun inserts the run, its hosts, its River job and the audit entry
// in one transaction.
func insertRun(ctx context.Context, st *store.Store, queue Queue, req Request, c checked, override json.RawMessage, failing []string) (int64, error) {
	host := c.hosts[0]
	var runID int64
	err := st.InTx(ctx, func(tx *store.Store) error {
		var err error
		runID, err = tx.CreateRun(ctx, store.NewRun{
			ProgramID: req.ProgramID, ProfileVersionID: c.profileVersion.ID, GateSetVersionID: c.gateSetID, HostID: host.ID, BaselineRunID: c.baselineID,
			Label: strings.TrimSpace(req.Label), Emulated: emulated(c.profile, c.hosts), ReadinessOverride: override, Warnings: warningsJSON(req.Warnings),
			CreatedBy: req.By.UserID, IdempotencyKey: req.IdempotencyKey, RequestDigest: req.RequestDigest,
		})
		if err != nil {
			return err
		}
		if c.runHosts != nil {
			if err := tx.AddRunHosts(ctx, runID, c.runHosts); err != nil {
				return err
			}
		}
		jobID, err := queue.ExecuteRun(ctx, tx, runID)
		if err != nil {
			return err
		}
		if err := tx.SetRunJob(ctx, runID, jobID); err != nil {
			return err
		}
		return tx.Audit(ctx, auditEntry(req, c, runID, override != nil, failing))
	})
	return runID, err
}

// auditEntry is the audit log's run_submitted entry.
func auditEntry(req Request, c checked, runID int64, overridden bool, failing []string) store.AuditEntry {
	details := map[string]any{"profile_version_id": c.profileVersion.ID, "host": c.hosts[0].Name}
	if c.runHosts != nil {
		byRole := map[string][]string{}
		for i, h := range c.runHosts {
			byRole[h.Role] = append(byRole[h.Role], c.hosts[i].Name)
		}
		details["roles"] = byRole
	}
	if overridden {
		details["readiness_override"] = failing
	}
	if len(req.Warnings) > 0 {
		details["started_despite_warnings"] = len(req.Warnings)
	}
	var actor *int64
	if req.By.UserID != 0 {
		actor = &req.By.UserID
	}
	return store.AuditEntry{ActorUserID: actor, ActorLabel: req.By.Email, Action: "run_submitted", ProgramID: &req.ProgramID,
		Target: fmt.Sprintf("run %d", runID), ClientAddr: req.By.ClientAddr, Details: details}
}

// warningsJSON is the warnings as a run keeps them (nil: none).
func warningsJSON(ws []acceptance.RunWarning) json.RawMessage {
	if len(ws) == 0 {
		return nil
	}
	b, _ := json.Marshal(ws)
	return b
}
