package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// UserSSHKey is an SSH public key a user registered for signing (co-signing
// reports). Removed keys are kept, so that what they signed stays named.
type UserSSHKey struct {
	ID     int64
	UserID int64
	Name   string
	// PublicKey is the key in authorized_keys form ("ssh-ed25519 AAAA…").
	PublicKey   string
	Fingerprint string // SHA256:… (ssh-keygen -l)
	CreatedAt   time.Time
	RemovedAt   *time.Time
}

const sshKeyColumns = `id, user_id, name, public_key, fingerprint, created_at, removed_at`

// AddUserSSHKey registers a key; a key another account (or this one)
// already registered is ErrConflict.
func (s *Store) AddUserSSHKey(ctx context.Context, k UserSSHKey) (UserSSHKey, error) {
	err := s.db.QueryRow(ctx, `INSERT INTO user_ssh_keys (user_id, name, public_key, fingerprint) VALUES ($1, $2, $3, $4)
		RETURNING id, created_at`, k.UserID, k.Name, k.PublicKey, k.Fingerprint).Scan(&k.ID, &k.CreatedAt)
	if err != nil {
		return k, notFound(err, fmt.Sprintf("ssh key %s of user %d", k.Fingerprint, k.UserID))
	}
	return k, nil
}

// ListUserSSHKeys returns a user's registered keys (not removed), oldest first.
func (s *Store) ListUserSSHKeys(ctx context.Context, userID int64) ([]UserSSHKey, error) {
	rows, err := s.db.Query(ctx, `SELECT `+sshKeyColumns+` FROM user_ssh_keys WHERE user_id = $1 AND removed_at IS NULL ORDER BY id`, userID)
	if err != nil {
		return nil, fmt.Errorf("store: ssh keys of user %d: %w", userID, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[UserSSHKey])
	if err != nil {
		return nil, fmt.Errorf("store: ssh keys of user %d: %w", userID, err)
	}
	return keys, nil
}

// RemoveUserSSHKey removes one of a user's keys (another user's key is
// ErrNotFound); it returns the key as it was.
func (s *Store) RemoveUserSSHKey(ctx context.Context, userID, keyID int64) (UserSSHKey, error) {
	rows, err := s.db.Query(ctx, `UPDATE user_ssh_keys SET removed_at = now() WHERE id = $1 AND user_id = $2 AND removed_at IS NULL
		RETURNING `+sshKeyColumns, keyID, userID)
	if err != nil {
		return UserSSHKey{}, fmt.Errorf("store: remove ssh key %d: %w", keyID, err)
	}
	k, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[UserSSHKey])
	if err != nil {
		return k, notFound(err, fmt.Sprintf("ssh key %d of user %d", keyID, userID))
	}
	return k, nil
}

// UserSSHKeyByFingerprint finds the registered (not removed) key with a
// fingerprint, whoever registered it.
func (s *Store) UserSSHKeyByFingerprint(ctx context.Context, fingerprint string) (UserSSHKey, error) {
	rows, err := s.db.Query(ctx, `SELECT `+sshKeyColumns+` FROM user_ssh_keys WHERE fingerprint = $1 AND removed_at IS NULL`, fingerprint)
	if err != nil {
		return UserSSHKey{}, fmt.Errorf("store: ssh key %s: %w", fingerprint, err)
	}
	k, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[UserSSHKey])
	if err != nil {
		return k, notFound(err, "ssh key "+fingerprint)
	}
	return k, nil
}

// ReportCosignature is a co-signature Accord accepted on a run's report:
// the member, their organisation and the registered key.
type ReportCosignature struct {
	ID             int64
	RunID          int64
	ReportVersion  int
	UserID         int64
	UserName       string
	UserEmail      string
	OrganizationID int64
	OrgName        string
	OrgKind        string
	SSHKeyID       int64
	KeyName        string
	Fingerprint    string
	// FileName is the signature's file in the bundle (MANIFEST.sha256.NAME.sig).
	FileName  string
	CreatedAt time.Time
}

// AddReportCosignature records an accepted co-signature; the same member
// twice on one run is ErrConflict.
func (s *Store) AddReportCosignature(ctx context.Context, c ReportCosignature) (ReportCosignature, error) {
	err := s.db.QueryRow(ctx, `INSERT INTO report_cosignatures (run_id, report_version, user_id, organization_id, ssh_key_id, fingerprint, file_name)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id, created_at`,
		c.RunID, c.ReportVersion, c.UserID, c.OrganizationID, c.SSHKeyID, c.Fingerprint, c.FileName).Scan(&c.ID, &c.CreatedAt)
	if err != nil {
		return c, notFound(err, fmt.Sprintf("co-signature of run %d by user %d", c.RunID, c.UserID))
	}
	return c, nil
}

// ListReportCosignatures returns a run's accepted co-signatures, oldest first.
func (s *Store) ListReportCosignatures(ctx context.Context, runID int64) ([]ReportCosignature, error) {
	rows, err := s.db.Query(ctx, `SELECT c.id, c.run_id, c.report_version, c.user_id, u.display_name, u.email, c.organization_id, o.name, o.kind,
			c.ssh_key_id, k.name, c.fingerprint, c.file_name, c.created_at
		FROM report_cosignatures c JOIN users u ON u.id = c.user_id JOIN organizations o ON o.id = c.organization_id
			JOIN user_ssh_keys k ON k.id = c.ssh_key_id
		WHERE c.run_id = $1 ORDER BY c.id`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: co-signatures of run %d: %w", runID, err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ReportCosignature])
	if err != nil {
		return nil, fmt.Errorf("store: co-signatures of run %d: %w", runID, err)
	}
	return list, nil
}
