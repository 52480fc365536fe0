package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AuditEntry is one line of the append-only audit log.
type AuditEntry struct {
	ID          int64
	At          time.Time
	ActorUserID *int64
	ActorLabel  string // email of the actor, or "system"
	Action      string // signin, signin_failed, member_added, role_changed, token_created, ...
	ProgramID   *int64
	Target      string
	Details     map[string]any
	ClientAddr  string
}

// Audit appends an entry.
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	b, err := json.Marshal(details)
	if err != nil {
		return fmt.Errorf("store: audit details: %w", err)
	}
	_, err = s.db.Exec(ctx, `INSERT INTO audit_log (actor_user_id, actor_label, action, program_id, target, details, client_addr)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, e.ActorUserID, e.ActorLabel, e.Action, e.ProgramID, e.Target, b, e.ClientAddr)
	if err != nil {
		return fmt.Errorf("store: audit %s: %w", e.Action, err)
	}
	return nil
}

// AuditFilter selects entries; ProgramID nil means the whole installation.
type AuditFilter struct {
	ProgramID *int64
	Limit     int
}

// ListAudit returns the newest entries first.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 200
	}
	rows, err := s.db.Query(ctx, `SELECT id, at, actor_user_id, actor_label, action, program_id, target, details, client_addr
		FROM audit_log WHERE ($1::bigint IS NULL OR program_id = $1) ORDER BY id DESC LIMIT $2`, f.ProgramID, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("store: list audit: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := r.Scan(&e.ID, &e.At, &e.ActorUserID, &e.ActorLabel, &e.Action, &e.ProgramID, &e.Target, &e.Details, &e.ClientAddr)
		return e, err
	})
}
