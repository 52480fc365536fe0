package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
)

// Artifacts is the content-addressed blob store behind run artifacts.
// PostgreSQL is the default (PGArtifacts); an object store can implement
// the same interface later.
type Artifacts interface {
	// Put stores data under its SHA-256; storing the same bytes again is a
	// no-op. It returns the digest.
	Put(ctx context.Context, data []byte) (string, error)
	// Open returns the blob with that digest.
	Open(ctx context.Context, sha256hex string) (io.ReadCloser, int64, error)
}

// PGArtifacts keeps blobs in the artifacts table.
type PGArtifacts struct{ db DBTX }

// Artifacts returns the PostgreSQL blob store (inside the Store's
// transaction when it has one).
func (s *Store) Artifacts() *PGArtifacts { return &PGArtifacts{db: s.db} }

// Put stores data once.
func (a *PGArtifacts) Put(ctx context.Context, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	_, err := a.db.Exec(ctx, `INSERT INTO artifacts (sha256, size, content) VALUES ($1, $2, $3) ON CONFLICT (sha256) DO NOTHING`,
		digest, len(data), data)
	if err != nil {
		return "", fmt.Errorf("store: put artifact %s: %w", digest[:12], err)
	}
	return digest, nil
}

// Open reads a blob.
func (a *PGArtifacts) Open(ctx context.Context, digest string) (io.ReadCloser, int64, error) {
	var content []byte
	if err := a.db.QueryRow(ctx, `SELECT content FROM artifacts WHERE sha256 = $1`, digest).Scan(&content); err != nil {
		return nil, 0, notFound(err, "artifact "+digest)
	}
	return io.NopCloser(bytes.NewReader(content)), int64(len(content)), nil
}

// RunArtifact is a file of a run, by its path in the run folder.
type RunArtifact struct {
	RunID  int64
	Path   string
	SHA256 string
	Size   int64
}

// AddRunArtifact links a stored blob to a run's path.
func (s *Store) AddRunArtifact(ctx context.Context, a RunArtifact) error {
	_, err := s.db.Exec(ctx, `INSERT INTO run_artifacts (run_id, path, sha256, size) VALUES ($1, $2, $3, $4)
		ON CONFLICT (run_id, path) DO UPDATE SET sha256 = EXCLUDED.sha256, size = EXCLUDED.size`, a.RunID, a.Path, a.SHA256, a.Size)
	if err != nil {
		return fmt.Errorf("store: run %d artifact %s: %w", a.RunID, a.Path, err)
	}
	return nil
}

// RunArtifacts lists a run's files by path.
func (s *Store) RunArtifacts(ctx context.Context, runID int64) ([]RunArtifact, error) {
	rows, err := s.db.Query(ctx, `SELECT run_id, path, sha256, size FROM run_artifacts WHERE run_id = $1 ORDER BY path`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: run %d artifacts: %w", runID, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[RunArtifact])
}

// RunArtifactByPath returns one file of a run.
func (s *Store) RunArtifactByPath(ctx context.Context, runID int64, path string) (RunArtifact, error) {
	rows, err := s.db.Query(ctx, `SELECT run_id, path, sha256, size FROM run_artifacts WHERE run_id = $1 AND path = $2`, runID, path)
	if err != nil {
		return RunArtifact{}, fmt.Errorf("store: run %d artifact: %w", runID, err)
	}
	a, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[RunArtifact])
	if err != nil {
		return a, notFound(err, "artifact "+path)
	}
	return a, nil
}
