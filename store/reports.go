package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RunAttestation is one signed in-toto statement of a run (a DSSE envelope).
type RunAttestation struct {
	RunID         int64
	Name          string
	PredicateType string
	KeyID         string
	Envelope      json.RawMessage
	CreatedAt     time.Time
}

// SaveAttestation stores (or replaces, on re-signing) a run's statement.
func (s *Store) SaveAttestation(ctx context.Context, a RunAttestation) error {
	_, err := s.db.Exec(ctx, `INSERT INTO run_attestations (run_id, name, predicate_type, key_id, envelope) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (run_id, name) DO UPDATE SET predicate_type = EXCLUDED.predicate_type, key_id = EXCLUDED.key_id,
			envelope = EXCLUDED.envelope, created_at = now()`, a.RunID, a.Name, a.PredicateType, a.KeyID, a.Envelope)
	if err != nil {
		return fmt.Errorf("store: attestation %s of run %d: %w", a.Name, a.RunID, err)
	}
	return nil
}

// RunAttestations lists a run's statements by name.
func (s *Store) RunAttestations(ctx context.Context, runID int64) ([]RunAttestation, error) {
	rows, err := s.db.Query(ctx, `SELECT run_id, name, predicate_type, key_id, envelope, created_at FROM run_attestations WHERE run_id = $1 ORDER BY name`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: attestations of run %d: %w", runID, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[RunAttestation])
}

// RunReport is one version of a run's signed report bundle.
type RunReport struct {
	ID             int64
	RunID          int64
	Version        int
	BundleSHA256   string
	Size           int64
	ManifestSHA256 string
	KeyID          string
	Cosigners      []string
	CreatedBy      *int64
	CreatedAt      time.Time
}

// AddRunReport records a bundle version (the blob is in artifacts) and
// wakes the run's live pages, which show its buttons.
func (s *Store) AddRunReport(ctx context.Context, r RunReport) (RunReport, error) {
	if r.Cosigners == nil {
		r.Cosigners = []string{} // the column is NOT NULL: none is an empty list
	}
	err := s.db.QueryRow(ctx, `INSERT INTO run_reports (run_id, version, bundle_sha256, size, manifest_sha256, key_id, cosigners, created_by)
		VALUES ($1, (SELECT coalesce(max(version), 0) + 1 FROM run_reports WHERE run_id = $1), $2, $3, $4, $5, $6, $7)
		RETURNING id, version, created_at`, r.RunID, r.BundleSHA256, r.Size, r.ManifestSHA256, r.KeyID, r.Cosigners, r.CreatedBy).
		Scan(&r.ID, &r.Version, &r.CreatedAt)
	if err != nil {
		return r, fmt.Errorf("store: report of run %d: %w", r.RunID, err)
	}
	return r, s.notifyRun(ctx, r.RunID)
}

// RunLatestReport returns the newest bundle of a run.
func (s *Store) RunLatestReport(ctx context.Context, runID int64) (RunReport, error) {
	rows, err := s.db.Query(ctx, `SELECT id, run_id, version, bundle_sha256, size, manifest_sha256, key_id, cosigners, created_by, created_at
		FROM run_reports WHERE run_id = $1 ORDER BY version DESC LIMIT 1`, runID)
	if err != nil {
		return RunReport{}, fmt.Errorf("store: report of run %d: %w", runID, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[RunReport])
	if err != nil {
		return r, notFound(err, fmt.Sprintf("report of run %d", runID))
	}
	return r, nil
}
