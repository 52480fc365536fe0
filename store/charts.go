package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// A run's chart aggregates are computed once, at ingest, by
// acceptance/chartdata, and kept in run_charts as JSON documents, one per
// key (chartdata's documents.go lists them); pages read them and only
// assemble chart options. The store keeps the documents as they are.

// SaveRunCharts replaces a run's chart aggregates with docs (key → JSON
// document), in one batch.
func (s *Store) SaveRunCharts(ctx context.Context, runID int64, docs map[string]json.RawMessage) error {
	batch := &pgx.Batch{}
	batch.Queue(`DELETE FROM run_charts WHERE run_id = $1`, runID)
	for key, data := range docs {
		batch.Queue(`INSERT INTO run_charts (run_id, key, data) VALUES ($1, $2, $3)`, runID, key, string(data))
	}
	if err := s.db.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("store: save charts of run %d: %w", runID, err)
	}
	return nil
}

// RunCharts returns a run's aggregates whose keys match one of the LIKE
// patterns (every key when none is given). A run without aggregates gives
// an empty map.
func (s *Store) RunCharts(ctx context.Context, runID int64, patterns ...string) (map[string]json.RawMessage, error) {
	var rows pgx.Rows
	var err error
	if len(patterns) == 0 {
		rows, err = s.db.Query(ctx, `SELECT key, data FROM run_charts WHERE run_id = $1`, runID)
	} else {
		rows, err = s.db.Query(ctx, `SELECT key, data FROM run_charts WHERE run_id = $1 AND key LIKE ANY($2)`, runID, patterns)
	}
	if err != nil {
		return nil, fmt.Errorf("store: charts of run %d: %w", runID, err)
	}
	defer rows.Close()
	out := map[string]json.RawMessage{}
	for rows.Next() {
		var key string
		var data []byte
		if err := rows.Scan(&key, &data); err != nil {
			return nil, fmt.Errorf("store: charts of run %d: %w", runID, err)
		}
		out[key] = data
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: charts of run %d: %w", runID, err)
	}
	return out, nil
}

// ChartOfRuns returns one aggregate (by exact key) of each of the runs
// that has it, by run id. Callers pass run ids they loaded within their
// program.
func (s *Store) ChartOfRuns(ctx context.Context, runIDs []int64, key string) (map[int64]json.RawMessage, error) {
	rows, err := s.db.Query(ctx, `SELECT run_id, data FROM run_charts WHERE run_id = ANY($1) AND key = $2`, runIDs, key)
	if err != nil {
		return nil, fmt.Errorf("store: %s of %d runs: %w", key, len(runIDs), err)
	}
	defer rows.Close()
	out := map[int64]json.RawMessage{}
	for rows.Next() {
		var id int64
		var data []byte
		if err := rows.Scan(&id, &data); err != nil {
			return nil, fmt.Errorf("store: %s of runs: %w", key, err)
		}
		out[id] = data
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s of runs: %w", key, err)
	}
	return out, nil
}
