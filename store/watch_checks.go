package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// WatchCheck is one check of a production watch as it was: the value
// (nil when the query failed or had no data), the line in force, whether
// the value was past it, and the breaches in a row after the check.
type WatchCheck struct {
	WatchID   int64
	At        time.Time
	Value     *float64
	Line      float64
	PastLine  bool
	Breaches  int
	Triggered bool // this check recorded the stop-loss decision
	Error     string
}

// maxWatchCheckError bounds the error kept with a check.
const maxWatchCheckError = 2000

// AddWatchCheck keeps a check for the watch page's chart.
func (s *Store) AddWatchCheck(ctx context.Context, c WatchCheck) error {
	if len(c.Error) > maxWatchCheckError {
		c.Error = c.Error[:maxWatchCheckError]
	}
	_, err := s.db.Exec(ctx, `INSERT INTO rollout_watch_checks (watch_id, checked_at, value, line, past_line, breaches, triggered, error)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, c.WatchID, c.At, c.Value, c.Line, c.PastLine, c.Breaches, c.Triggered, c.Error)
	if err != nil {
		return fmt.Errorf("store: add check of watch %d: %w", c.WatchID, err)
	}
	return nil
}

// ListWatchChecks returns a watch's checks at or after since, oldest
// first, at most limit of them (the newest when there are more).
func (s *Store) ListWatchChecks(ctx context.Context, watchID int64, since time.Time, limit int) ([]WatchCheck, error) {
	rows, err := s.db.Query(ctx, `SELECT watch_id, checked_at, value, line, past_line, breaches, triggered, error FROM (
			SELECT * FROM rollout_watch_checks WHERE watch_id = $1 AND checked_at >= $2 ORDER BY checked_at DESC, id DESC LIMIT $3
		) newest ORDER BY checked_at, id`, watchID, since, limit)
	if err != nil {
		return nil, fmt.Errorf("store: checks of watch %d: %w", watchID, err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WatchCheck, error) {
		var c WatchCheck
		err := r.Scan(&c.WatchID, &c.At, &c.Value, &c.Line, &c.PastLine, &c.Breaches, &c.Triggered, &c.Error)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: checks of watch %d: %w", watchID, err)
	}
	return list, nil
}

// EachWatchCheck calls fn with every kept check of the watch, oldest
// first, one row at a time (a CSV of months of checks is not held whole).
func (s *Store) EachWatchCheck(ctx context.Context, watchID int64, fn func(WatchCheck) error) error {
	rows, err := s.db.Query(ctx, `SELECT watch_id, checked_at, value, line, past_line, breaches, triggered, error
		FROM rollout_watch_checks WHERE watch_id = $1 ORDER BY checked_at, id`, watchID)
	if err != nil {
		return fmt.Errorf("store: checks of watch %d: %w", watchID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var c WatchCheck
		if err := rows.Scan(&c.WatchID, &c.At, &c.Value, &c.Line, &c.PastLine, &c.Breaches, &c.Triggered, &c.Error); err != nil {
			return fmt.Errorf("store: checks of watch %d: %w", watchID, err)
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: checks of watch %d: %w", watchID, err)
	}
	return nil
}

// LastWatchCheckWithinLine is when the watch last had a value within its
// line before before: the latest moment its value is known to have been
// fine. ErrNotFound when no check before then had one.
func (s *Store) LastWatchCheckWithinLine(ctx context.Context, watchID int64, before time.Time) (time.Time, error) {
	var at time.Time
	err := s.db.QueryRow(ctx, `SELECT checked_at FROM rollout_watch_checks
		WHERE watch_id = $1 AND checked_at < $2 AND value IS NOT NULL AND NOT past_line
		ORDER BY checked_at DESC, id DESC LIMIT 1`, watchID, before).Scan(&at)
	if err != nil {
		return at, notFound(err, fmt.Sprintf("check within the line of watch %d", watchID))
	}
	return at, nil
}

// PruneWatchChecks removes checks older than before.
func (s *Store) PruneWatchChecks(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM rollout_watch_checks WHERE checked_at < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("store: prune watch checks: %w", err)
	}
	return tag.RowsAffected(), nil
}
