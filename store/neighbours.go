package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Who saw a neighbour.
const (
	SeenByThisRun  = "this run"      // the run's own probe saw the other run active
	SeenByOtherRun = "the other run" // the other run's probe saw this run active
)

// Neighbour is another Accord run found active on a run's host while it
// measured: the run is contaminated.
type Neighbour struct {
	RunID      int64
	OtherDir   string // the other run's folder on the host
	OtherRunID *int64 // when it is a run of this installation
	OtherPID   int
	SeenBy     string
	FirstSeen  time.Time
	LastSeen   time.Time
}

// Describe says what the run's page and its evaluation say of it.
func (n Neighbour) Describe() string {
	who := "another Accord installation's run in " + n.OtherDir
	if n.OtherRunID != nil {
		who = fmt.Sprintf("run #%d", *n.OtherRunID)
	}
	how := "seen by this run's probe"
	if n.SeenBy == SeenByOtherRun {
		how = "whose probe saw this run"
	}
	return fmt.Sprintf("%s was active on the host from %s to %s (%s)", who,
		n.FirstSeen.UTC().Format("15:04:05"), n.LastSeen.UTC().Format("15:04:05 UTC"), how)
}

// SightedNeighbour is what a run's probe reported: another run folder
// active on the host, and the run it is when it belongs to this
// installation (0 otherwise).
type SightedNeighbour struct {
	Dir       string
	RunID     int64
	PID       int
	FirstSeen time.Time
	LastSeen  time.Time
}

// RecordNeighbours stores, fenced by the run's lease, the other runs its
// probe saw active on the host; a sighting of a run of this installation
// is recorded on that run's side too (it is contaminated as much), with
// selfDir as this run's folder. It returns those other runs that were
// judged already: they must be judged again.
func (s *Store) RecordNeighbours(ctx context.Context, runID int64, lease Lease, selfDir string, seen []SightedNeighbour) ([]int64, error) {
	var rejudge []int64
	err := s.InTx(ctx, func(tx *Store) error {
		if err := tx.CheckFence(ctx, lease); err != nil {
			return err
		}
		for _, n := range seen {
			var other *int64
			if n.RunID > 0 && n.RunID != runID {
				var id int64
				err := tx.db.QueryRow(ctx, `SELECT id FROM runs WHERE id = $1`, n.RunID).Scan(&id)
				if err != nil && !errors.Is(err, pgx.ErrNoRows) {
					return fmt.Errorf("store: neighbour run %d: %w", n.RunID, err)
				}
				if err == nil {
					other = &id
				}
			}
			if err := tx.upsertNeighbour(ctx, Neighbour{RunID: runID, OtherDir: n.Dir, OtherRunID: other, OtherPID: n.PID,
				SeenBy: SeenByThisRun, FirstSeen: n.FirstSeen, LastSeen: n.LastSeen}); err != nil {
				return err
			}
			if other == nil {
				continue
			}
			self := runID
			if err := tx.upsertNeighbour(ctx, Neighbour{RunID: *other, OtherDir: selfDir, OtherRunID: &self,
				SeenBy: SeenByOtherRun, FirstSeen: n.FirstSeen, LastSeen: n.LastSeen}); err != nil {
				return err
			}
			var judged bool
			if err := tx.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM evaluations WHERE run_id = $1)`, *other).Scan(&judged); err != nil {
				return fmt.Errorf("store: neighbour run %d: %w", *other, err)
			}
			if judged {
				rejudge = append(rejudge, *other)
			}
			if err := tx.notifyRun(ctx, *other); err != nil {
				return err
			}
		}
		return tx.notifyRun(ctx, runID)
	})
	return rejudge, err
}

func (s *Store) upsertNeighbour(ctx context.Context, n Neighbour) error {
	_, err := s.db.Exec(ctx, `INSERT INTO run_neighbours (run_id, other_dir, other_run_id, other_pid, seen_by, first_seen, last_seen)
		VALUES ($1, $2, $3, nullif($4, 0), $5, $6, $7)
		ON CONFLICT (run_id, other_dir, seen_by) DO UPDATE SET
			first_seen = least(run_neighbours.first_seen, EXCLUDED.first_seen),
			last_seen = greatest(run_neighbours.last_seen, EXCLUDED.last_seen)`,
		n.RunID, truncate(n.OtherDir, 1000), n.OtherRunID, n.OtherPID, n.SeenBy, n.FirstSeen, n.LastSeen)
	if err != nil {
		return fmt.Errorf("store: run %d neighbour: %w", n.RunID, err)
	}
	return nil
}

// RunNeighbours lists the other runs seen active on a run's host while it
// measured, first seen first.
func (s *Store) RunNeighbours(ctx context.Context, runID int64) ([]Neighbour, error) {
	rows, err := s.db.Query(ctx, `SELECT run_id, other_dir, other_run_id, coalesce(other_pid, 0), seen_by, first_seen, last_seen
		FROM run_neighbours WHERE run_id = $1 ORDER BY first_seen, other_dir, seen_by`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: run %d neighbours: %w", runID, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Neighbour])
	if err != nil {
		return nil, fmt.Errorf("store: run %d neighbours: %w", runID, err)
	}
	return out, nil
}
