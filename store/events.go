package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RunEvent is a line of a run's live log: an event of the probe (Seq set)
// or a note of the server (Seq nil).
type RunEvent struct {
	ID      int64
	Seq     *int64
	At      time.Time
	Type    string
	Level   string
	Message string
	Data    json.RawMessage
}

// FollowUpdate is what one read of the probe's event stream yields: its
// events, the byte offset after them, and the latest progress.
type FollowUpdate struct {
	Events   []RunEvent
	Offset   int64
	Progress json.RawMessage // nil: unchanged
}

// AppendFollowed stores events read from the probe and the new offset in
// one fenced transaction: a stale worker stores nothing, and a resumed
// follow never stores an event twice (its seq is unique per run).
func (s *Store) AppendFollowed(ctx context.Context, runID int64, lease Lease, u FollowUpdate) error {
	return s.InTx(ctx, func(tx *Store) error {
		if err := tx.CheckFence(ctx, lease); err != nil {
			return err
		}
		if err := tx.insertEvents(ctx, runID, nil, u.Events); err != nil {
			return err
		}
		_, err := tx.db.Exec(ctx, `UPDATE runs SET events_offset = greatest(events_offset, $2), progress = coalesce($3, progress) WHERE id = $1`,
			runID, u.Offset, nullJSON(u.Progress))
		if err != nil {
			return fmt.Errorf("store: run %d offset: %w", runID, err)
		}
		return tx.notifyRun(ctx, runID)
	})
}

// insertEvents stores a probe's events: of the run's one host (host nil)
// or of the host at that ordinal of a multi-host run.
func (s *Store) insertEvents(ctx context.Context, runID int64, host *int, events []RunEvent) error {
	if len(events) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	for _, e := range events {
		batch.Queue(`INSERT INTO run_events (run_id, seq, at, type, level, message, data, host_ordinal) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (run_id, (coalesce(host_ordinal, -1)), seq) DO NOTHING`, runID, e.Seq, e.At, e.Type, e.Level, truncate(e.Message, 4000), nullJSON(e.Data), host)
	}
	if err := s.db.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("store: run %d events: %w", runID, err)
	}
	return nil
}

// AddRunNote adds a server-side line to a run's log.
func (s *Store) AddRunNote(ctx context.Context, runID int64, level, message string) error {
	_, err := s.db.Exec(ctx, `INSERT INTO run_events (run_id, at, type, level, message) VALUES ($1, now(), 'log', $2, $3)`, runID, level, truncate(message, 4000))
	if err != nil {
		return fmt.Errorf("store: run %d note: %w", runID, err)
	}
	return s.notifyRun(ctx, runID)
}

// RunEventsAfter returns a run's log lines after the cursor id, oldest
// first (at most limit).
func (s *Store) RunEventsAfter(ctx context.Context, runID, afterID int64, types []string, limit int) ([]RunEvent, error) {
	rows, err := s.db.Query(ctx, `SELECT id, seq, at, type, level, message, data FROM run_events
		WHERE run_id = $1 AND id > $2 AND type = ANY($3) ORDER BY id LIMIT $4`, runID, afterID, types, limit)
	if err != nil {
		return nil, fmt.Errorf("store: run %d events: %w", runID, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[RunEvent])
}

// RunLastEventID is the id of a run's newest event (0 when it has none):
// a page that shows the run up to it follows its stream from there.
func (s *Store) RunLastEventID(ctx context.Context, runID int64) (int64, error) {
	var id int64
	if err := s.db.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM run_events WHERE run_id = $1`, runID).Scan(&id); err != nil {
		return 0, fmt.Errorf("store: run %d events: %w", runID, err)
	}
	return id, nil
}

// RunLogTail returns the last n log lines of a run, oldest first.
func (s *Store) RunLogTail(ctx context.Context, runID int64, n int) ([]RunEvent, error) {
	rows, err := s.db.Query(ctx, `SELECT * FROM (SELECT id, seq, at, type, level, message, data FROM run_events
		WHERE run_id = $1 AND type = 'log' ORDER BY id DESC LIMIT $2) t ORDER BY id`, runID, n)
	if err != nil {
		return nil, fmt.Errorf("store: run %d log: %w", runID, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[RunEvent])
}

// RunEventsOfType returns every event of some types (for stop-loss
// history, step results), oldest first.
func (s *Store) RunEventsOfType(ctx context.Context, runID int64, types ...string) ([]RunEvent, error) {
	rows, err := s.db.Query(ctx, `SELECT id, seq, at, type, level, message, data FROM run_events
		WHERE run_id = $1 AND type = ANY($2) ORDER BY id`, runID, types)
	if err != nil {
		return nil, fmt.Errorf("store: run %d events: %w", runID, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[RunEvent])
}

// RunHostEventsOfType returns the events of the given types that one host
// of a multi-host run sent (its ordinal in the run), in order.
func (s *Store) RunHostEventsOfType(ctx context.Context, runID int64, ordinal int, types ...string) ([]RunEvent, error) {
	rows, err := s.db.Query(ctx, `SELECT id, seq, at, type, level, message, data FROM run_events
		WHERE run_id = $1 AND host_ordinal = $2 AND type = ANY($3) ORDER BY id`, runID, ordinal, types)
	if err != nil {
		return nil, fmt.Errorf("store: run %d host %d events: %w", runID, ordinal, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[RunEvent])
}
