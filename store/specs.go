package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SpecKind selects profiles or gate sets: both are versioned the same way.
type SpecKind string

const (
	KindProfile SpecKind = "profile"
	KindGateSet SpecKind = "gate_set"
)

func (k SpecKind) tables() (parent, versions, fk string) {
	if k == KindProfile {
		return "profiles", "profile_versions", "profile_id"
	}
	return "gate_sets", "gate_set_versions", "gate_set_id"
}

// Spec is a profile or gate set with its latest version.
type Spec struct {
	ID            int64
	ProgramID     int64
	Name          string
	LatestVersion int
	LatestDigest  string
	Versions      int
	UpdatedAt     time.Time
	CreatedAt     time.Time
}

// SpecVersion is one immutable version.
type SpecVersion struct {
	ID            int64 // the version row's id (runs point at it)
	SpecID        int64
	Version       int
	Spec          json.RawMessage
	Digest        string
	OwnerOnly     bool
	Note          string
	CreatedBy     *int64
	CreatedByName string
	CreatedAt     time.Time
}

// NewSpecVersion is what a save needs.
type NewSpecVersion struct {
	Name      string
	Spec      json.RawMessage // canonical JSON of the normalized spec
	Digest    string
	OwnerOnly bool
	Note      string
	CreatedBy int64
}

// CreateSpec creates a profile or gate set with its version 1.
func (s *Store) CreateSpec(ctx context.Context, kind SpecKind, programID int64, v NewSpecVersion) (Spec, SpecVersion, error) {
	parent, versions, fk := kind.tables()
	var sp Spec
	var sv SpecVersion
	err := s.db.QueryRow(ctx, `INSERT INTO `+parent+` (program_id, name, created_by) VALUES ($1, $2, $3) RETURNING id, created_at`,
		programID, v.Name, nullID(v.CreatedBy)).Scan(&sp.ID, &sp.CreatedAt)
	if err != nil {
		return sp, sv, fmt.Errorf("store: create %s: %w", kind, err)
	}
	err = s.db.QueryRow(ctx, `INSERT INTO `+versions+` (`+fk+`, version, spec, digest, owner_only, note, created_by)
		VALUES ($1, 1, $2, $3, $4, $5, $6) RETURNING id, created_at`,
		sp.ID, v.Spec, v.Digest, v.OwnerOnly, v.Note, nullID(v.CreatedBy)).Scan(&sv.ID, &sv.CreatedAt)
	if err != nil {
		return sp, sv, fmt.Errorf("store: create %s version: %w", kind, err)
	}
	sp.ProgramID, sp.Name, sp.LatestVersion, sp.LatestDigest, sp.Versions, sp.UpdatedAt = programID, v.Name, 1, v.Digest, 1, sv.CreatedAt
	sv.SpecID, sv.Version, sv.Spec, sv.Digest, sv.OwnerOnly, sv.Note, sv.CreatedBy = sp.ID, 1, v.Spec, v.Digest, v.OwnerOnly, v.Note, &v.CreatedBy
	return sp, sv, nil
}

// ErrUnchanged is returned when a new version would equal the latest.
var ErrUnchanged = fmt.Errorf("the spec is the same as the latest version")

// AddSpecVersion appends a version; it locks the spec row so that two
// concurrent saves get consecutive numbers. A version identical to the
// latest (same digest) is ErrUnchanged.
func (s *Store) AddSpecVersion(ctx context.Context, kind SpecKind, programID, specID int64, v NewSpecVersion) (SpecVersion, error) {
	parent, versions, fk := kind.tables()
	var sv SpecVersion
	var latest int
	var latestDigest string
	err := s.db.QueryRow(ctx, `SELECT coalesce(max(v.version), 0), coalesce((SELECT digest FROM `+versions+` WHERE `+fk+` = p.id ORDER BY version DESC LIMIT 1), '')
		FROM `+parent+` p LEFT JOIN `+versions+` v ON v.`+fk+` = p.id
		WHERE p.id = $1 AND p.program_id = $2 GROUP BY p.id`, specID, programID).Scan(&latest, &latestDigest)
	if err != nil {
		return sv, notFound(err, fmt.Sprintf("%s %d", kind, specID))
	}
	if _, err := s.db.Exec(ctx, `SELECT 1 FROM `+parent+` WHERE id = $1 FOR UPDATE`, specID); err != nil {
		return sv, fmt.Errorf("store: lock %s: %w", kind, err)
	}
	if latestDigest == v.Digest {
		return sv, ErrUnchanged
	}
	err = s.db.QueryRow(ctx, `INSERT INTO `+versions+` (`+fk+`, version, spec, digest, owner_only, note, created_by)
		VALUES ($1, (SELECT coalesce(max(version), 0) + 1 FROM `+versions+` WHERE `+fk+` = $1), $2, $3, $4, $5, $6)
		RETURNING id, version, created_at`, specID, v.Spec, v.Digest, v.OwnerOnly, v.Note, nullID(v.CreatedBy)).Scan(&sv.ID, &sv.Version, &sv.CreatedAt)
	if err != nil {
		return sv, fmt.Errorf("store: add %s version: %w", kind, err)
	}
	if _, err := s.db.Exec(ctx, `UPDATE `+parent+` SET name = $2 WHERE id = $1`, specID, v.Name); err != nil {
		return sv, fmt.Errorf("store: rename %s: %w", kind, err)
	}
	sv.SpecID, sv.Spec, sv.Digest, sv.OwnerOnly, sv.Note, sv.CreatedBy = specID, v.Spec, v.Digest, v.OwnerOnly, v.Note, &v.CreatedBy
	return sv, nil
}

// ListSpecs lists a program's profiles or gate sets with their latest version.
func (s *Store) ListSpecs(ctx context.Context, kind SpecKind, programID int64) ([]Spec, error) {
	parent, versions, fk := kind.tables()
	rows, err := s.db.Query(ctx, `SELECT p.id, p.program_id, p.name, v.version, v.digest, (SELECT count(*) FROM `+versions+` WHERE `+fk+` = p.id), v.created_at, p.created_at
		FROM `+parent+` p JOIN LATERAL (SELECT version, digest, created_at FROM `+versions+` WHERE `+fk+` = p.id ORDER BY version DESC LIMIT 1) v ON true
		WHERE p.program_id = $1 ORDER BY lower(p.name), p.id`, programID)
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", kind, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Spec])
}

// GetSpec returns a profile or gate set of the program.
func (s *Store) GetSpec(ctx context.Context, kind SpecKind, programID, specID int64) (Spec, error) {
	parent, versions, fk := kind.tables()
	rows, err := s.db.Query(ctx, `SELECT p.id, p.program_id, p.name, v.version, v.digest, (SELECT count(*) FROM `+versions+` WHERE `+fk+` = p.id), v.created_at, p.created_at
		FROM `+parent+` p JOIN LATERAL (SELECT version, digest, created_at FROM `+versions+` WHERE `+fk+` = p.id ORDER BY version DESC LIMIT 1) v ON true
		WHERE p.id = $1 AND p.program_id = $2`, specID, programID)
	if err != nil {
		return Spec{}, fmt.Errorf("store: get %s: %w", kind, err)
	}
	sp, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[Spec])
	if err != nil {
		return sp, notFound(err, fmt.Sprintf("%s %d", kind, specID))
	}
	return sp, nil
}

const specVersionColumns = `v.id, v.%s, v.version, v.spec, v.digest, v.owner_only, v.note, v.created_by, coalesce(u.display_name, ''), v.created_at`

func (s *Store) specVersionQuery(kind SpecKind) string {
	parent, versions, fk := kind.tables()
	return fmt.Sprintf(`SELECT `+specVersionColumns+` FROM %s v JOIN %s p ON p.id = v.%s LEFT JOIN users u ON u.id = v.created_by`, fk, versions, parent, fk)
}

func collectVersions(rows pgx.Rows) ([]SpecVersion, error) {
	return pgx.CollectRows(rows, pgx.RowToStructByPos[SpecVersion])
}

// ListSpecVersions returns every version of a spec, newest first.
func (s *Store) ListSpecVersions(ctx context.Context, kind SpecKind, programID, specID int64) ([]SpecVersion, error) {
	rows, err := s.db.Query(ctx, s.specVersionQuery(kind)+` WHERE p.id = $1 AND p.program_id = $2 ORDER BY v.version DESC`, specID, programID)
	if err != nil {
		return nil, fmt.Errorf("store: list %s versions: %w", kind, err)
	}
	return collectVersions(rows)
}

// GetSpecVersion returns one version by number (0: the latest).
func (s *Store) GetSpecVersion(ctx context.Context, kind SpecKind, programID, specID int64, version int) (SpecVersion, error) {
	q := s.specVersionQuery(kind) + ` WHERE p.id = $1 AND p.program_id = $2 AND ($3 = 0 OR v.version = $3) ORDER BY v.version DESC LIMIT 1`
	rows, err := s.db.Query(ctx, q, specID, programID, version)
	if err != nil {
		return SpecVersion{}, fmt.Errorf("store: get %s version: %w", kind, err)
	}
	list, err := collectVersions(rows)
	if err != nil {
		return SpecVersion{}, fmt.Errorf("store: get %s version: %w", kind, err)
	}
	if len(list) == 0 {
		return SpecVersion{}, fmt.Errorf("store: %s %d version %d: %w", kind, specID, version, ErrNotFound)
	}
	return list[0], nil
}

// GetSpecVersionByID returns a version by its row id, within a program.
func (s *Store) GetSpecVersionByID(ctx context.Context, kind SpecKind, programID, versionID int64) (SpecVersion, error) {
	rows, err := s.db.Query(ctx, s.specVersionQuery(kind)+` WHERE v.id = $1 AND p.program_id = $2`, versionID, programID)
	if err != nil {
		return SpecVersion{}, fmt.Errorf("store: get %s version: %w", kind, err)
	}
	list, err := collectVersions(rows)
	if err != nil {
		return SpecVersion{}, fmt.Errorf("store: get %s version %d: %w", kind, versionID, err)
	}
	if len(list) == 0 {
		return SpecVersion{}, fmt.Errorf("store: %s version %d: %w", kind, versionID, ErrNotFound)
	}
	return list[0], nil
}
