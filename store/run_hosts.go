package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RunHost is one lab host of a multi-host run, with where its probe
// stands.
type RunHost struct {
	RunID   int64
	Ordinal int // the host's place in the run (roles in order, then as named)
	Role    string
	HostID  int64
	// HostName is the host's name now.
	HostName     string
	RemoteDir    string
	Launched     bool
	EventsOffset int64
	Progress     json.RawMessage
	// State and Reason say what the host is doing (RunHost* states).
	State  string
	Reason string
	// WaitingAt is the barrier its probe waits at, as its stored events
	// say (-1: none).
	WaitingAt    int
	ProbeEndedAt *time.Time
}

// States of a host in a multi-host run.
const (
	RunHostQueued    = "queued"
	RunHostPreparing = "preparing" // connecting, uploading, launching
	RunHostWaiting   = "waiting"   // at a barrier, for the other hosts
	RunHostRunning   = "running"
	RunHostEnded     = "ended"  // its probe ended and its folder was collected
	RunHostFailed    = "failed" // it could not start, or its probe failed
	RunHostStopped   = "stopped"
)

// NewRunHost is a host named for a role in a run request.
type NewRunHost struct {
	Role   string
	HostID int64
}

// AddRunHosts names the hosts of a multi-host run, in order (the
// run's own host_id is the first of them).
func (s *Store) AddRunHosts(ctx context.Context, runID int64, hosts []NewRunHost) error {
	batch := &pgx.Batch{}
	for i, h := range hosts {
		batch.Queue(`INSERT INTO run_hosts (run_id, ordinal, role, host_id) VALUES ($1, $2, $3, $4)`, runID, i, h.Role, h.HostID)
	}
	if err := s.db.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("store: hosts of run %d: %w", runID, err)
	}
	return nil
}

// RunHosts returns the hosts of a multi-host run in order (none for a
// one-host run).
func (s *Store) RunHosts(ctx context.Context, runID int64) ([]RunHost, error) {
	rows, err := s.db.Query(ctx, `SELECT rh.run_id, rh.ordinal, rh.role, rh.host_id, h.name, rh.remote_dir, rh.launched, rh.events_offset,
			rh.progress, rh.state, rh.reason, rh.waiting_at, rh.probe_ended_at
		FROM run_hosts rh JOIN hosts h ON h.id = rh.host_id WHERE rh.run_id = $1 ORDER BY rh.ordinal`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: hosts of run %d: %w", runID, err)
	}
	hosts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[RunHost])
	if err != nil {
		return nil, fmt.Errorf("store: hosts of run %d: %w", runID, err)
	}
	return hosts, nil
}

// SetRunHostState says what one host of a run is doing, and wakes the
// run's live pages.
func (s *Store) SetRunHostState(ctx context.Context, runID int64, ordinal int, state, reason string) error {
	tag, err := s.db.Exec(ctx, `UPDATE run_hosts SET state = $3, reason = $4 WHERE run_id = $1 AND ordinal = $2`,
		runID, ordinal, state, truncate(reason, 2000))
	if err := oneRow(tag, err, fmt.Sprintf("run %d host %d state", runID, ordinal)); err != nil {
		return err
	}
	return s.notifyRun(ctx, runID)
}

// RecordRunHostIntent records, before a host's probe may be launched in
// remoteDir, that it may run from now on: the run's launch window opens
// (RecordLaunchIntent, with no run folder of its own) and the host's
// folder is kept. Call it fenced.
func (s *Store) RecordRunHostIntent(ctx context.Context, runID int64, ordinal int, remoteDir string, limit time.Duration) error {
	if err := s.RecordLaunchIntent(ctx, runID, "", limit); err != nil {
		return err
	}
	tag, err := s.db.Exec(ctx, `UPDATE run_hosts SET remote_dir = $3 WHERE run_id = $1 AND ordinal = $2`, runID, ordinal, remoteDir)
	return oneRow(tag, err, fmt.Sprintf("run %d host %d launch intent", runID, ordinal))
}

// MarkRunHostLaunched records that a host's probe runs in remoteDir (and
// so that the run was launched).
func (s *Store) MarkRunHostLaunched(ctx context.Context, runID int64, ordinal int, remoteDir string) error {
	tag, err := s.db.Exec(ctx, `UPDATE run_hosts SET launched = true, remote_dir = $3 WHERE run_id = $1 AND ordinal = $2`, runID, ordinal, remoteDir)
	if err := oneRow(tag, err, fmt.Sprintf("run %d host %d launched", runID, ordinal)); err != nil {
		return err
	}
	tag, err = s.db.Exec(ctx, `UPDATE runs SET launched = true, attempt = greatest(attempt, 1),
		launch_intent_at = coalesce(launch_intent_at, now()) WHERE id = $1`, runID)
	return oneRow(tag, err, fmt.Sprintf("mark run %d launched", runID))
}

// MarkRunHostProbeEnded records that the probes of the hosts with these
// ordinals are known to be gone (or were never launched: their folders
// were claimed); once every host's is, the run's probe has ended
// (MarkProbeEnded) and its hosts are free. Call it in a transaction
// (InTx): hosts ending together are then counted one after the other.
// Counted side by side, each saw the other's probe still running and
// neither ended the run's, which kept its hosts until the probe's time
// limit.
func (s *Store) MarkRunHostProbeEnded(ctx context.Context, runID int64, ordinals ...int) error {
	tag, err := s.db.Exec(ctx, `UPDATE run_hosts SET probe_ended_at = coalesce(probe_ended_at, now()), waiting_at = -1
		WHERE run_id = $1 AND ordinal = ANY($2)`, runID, ordinals)
	if err != nil {
		return fmt.Errorf("store: run %d hosts %v probe ended: %w", runID, ordinals, err)
	}
	if int(tag.RowsAffected()) != len(ordinals) {
		return fmt.Errorf("store: run %d hosts %v probe ended: %w", runID, ordinals, ErrNotFound)
	}
	// The run's row, locked after the hosts' (in one statement) as every
	// writer of both does, until this transaction ends: a host ending at
	// the same time waits here and then counts these as ended.
	if _, err := s.db.Exec(ctx, `SELECT 1 FROM runs WHERE id = $1 FOR UPDATE`, runID); err != nil {
		return fmt.Errorf("store: lock run %d: %w", runID, err)
	}
	var left int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM run_hosts WHERE run_id = $1 AND probe_ended_at IS NULL`, runID).Scan(&left); err != nil {
		return fmt.Errorf("store: run %d probes: %w", runID, err)
	}
	if left == 0 {
		return s.MarkProbeEnded(ctx, runID)
	}
	return nil
}

// HostFollowUpdate is what one read of a host's event stream yields.
type HostFollowUpdate struct {
	FollowUpdate
	// WaitingAt is the barrier the host's probe waits at after these
	// events (-1: none), nil when they say nothing about barriers.
	WaitingAt *int
}

// AppendHostFollowed stores events read from one host's probe, with the
// new offset, progress and barrier, in one transaction fenced by every
// lease of the run; the run's progress is its least advanced host's.
func (s *Store) AppendHostFollowed(ctx context.Context, runID int64, ordinal int, leases []Lease, u HostFollowUpdate) error {
	return s.InTx(ctx, func(tx *Store) error {
		if err := tx.CheckFences(ctx, leases); err != nil {
			return err
		}
		if err := tx.insertEvents(ctx, runID, &ordinal, u.Events); err != nil {
			return err
		}
		_, err := tx.db.Exec(ctx, `UPDATE run_hosts SET events_offset = greatest(events_offset, $3), progress = coalesce($4, progress),
				waiting_at = coalesce($5, waiting_at)
			WHERE run_id = $1 AND ordinal = $2`, runID, ordinal, u.Offset, nullJSON(u.Progress), u.WaitingAt)
		if err != nil {
			return fmt.Errorf("store: run %d host %d offset: %w", runID, ordinal, err)
		}
		if u.Progress != nil {
			_, err = tx.db.Exec(ctx, `UPDATE runs SET progress = (SELECT progress FROM run_hosts WHERE run_id = $1 AND progress IS NOT NULL
				ORDER BY coalesce((progress->>'fraction')::float8, 0), ordinal LIMIT 1) WHERE id = $1`, runID)
			if err != nil {
				return fmt.Errorf("store: run %d progress: %w", runID, err)
			}
		}
		return tx.notifyRun(ctx, runID)
	})
}
