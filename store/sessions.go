package store

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Session is a signed-in browser. The cookie carries its id inside a JWT;
// the row decides whether it is still valid.
type Session struct {
	ID         string
	UserID     int64
	CreatedAt  time.Time
	ExpiresAt  time.Time
	RevokedAt  *time.Time
	ClientAddr string
	UserAgent  string
}

// CreateSession records a new session.
func (s *Store) CreateSession(ctx context.Context, sess Session) error {
	_, err := s.db.Exec(ctx, `INSERT INTO sessions (id, user_id, expires_at, client_addr, user_agent) VALUES ($1, $2, $3, $4, $5)`,
		sess.ID, sess.UserID, sess.ExpiresAt, sess.ClientAddr, truncate(sess.UserAgent, 300))
	if err != nil {
		return fmt.Errorf("store: create session: %w", err)
	}
	return nil
}

// ActiveSession returns the session with its user when the session is
// neither revoked nor expired and the user is not disabled.
func (s *Store) ActiveSession(ctx context.Context, id string) (Session, User, error) {
	var sess Session
	row := s.db.QueryRow(ctx, `SELECT s.id, s.user_id, s.created_at, s.expires_at, s.revoked_at, s.client_addr, s.user_agent, `+userColumns+`
		FROM sessions s JOIN users u ON u.id = s.user_id LEFT JOIN organizations o ON o.id = u.organization_id
		WHERE s.id = $1 AND s.revoked_at IS NULL AND s.expires_at > now() AND NOT u.disabled`, id)
	var u User
	err := row.Scan(&sess.ID, &sess.UserID, &sess.CreatedAt, &sess.ExpiresAt, &sess.RevokedAt, &sess.ClientAddr, &sess.UserAgent,
		&u.ID, &u.Email, &u.DisplayName, &u.PasswordHash, &u.OrganizationID, &u.OrgName, &u.OrgKind, &u.IsAdmin, &u.Disabled, &u.CreatedAt)
	if err != nil {
		return sess, u, notFound(err, "active session")
	}
	return sess, u, nil
}

// RevokeSession ends a session now.
func (s *Store) RevokeSession(ctx context.Context, id string) error {
	_, err := s.db.Exec(ctx, `UPDATE sessions SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL`, id)
	if err != nil {
		return fmt.Errorf("store: revoke session: %w", err)
	}
	return nil
}

// RevokeUserSessions ends every session of a user (password change, disable).
func (s *Store) RevokeUserSessions(ctx context.Context, userID int64) error {
	_, err := s.db.Exec(ctx, `UPDATE sessions SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL`, userID)
	if err != nil {
		return fmt.Errorf("store: revoke sessions of user %d: %w", userID, err)
	}
	return nil
}

// RevokeUserAPITokens revokes every API token of a user (disable): an
// account enabled again starts without tokens.
func (s *Store) RevokeUserAPITokens(ctx context.Context, userID int64) error {
	_, err := s.db.Exec(ctx, `UPDATE api_tokens SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL`, userID)
	if err != nil {
		return fmt.Errorf("store: revoke API tokens of user %d: %w", userID, err)
	}
	return nil
}

// BeginSignInAttempt records an attempt as failed before the password is
// checked, so that it counts towards throttling at once: parallel guesses
// cannot all slip under the limit before any of them is recorded.
// SignInSucceeded corrects it when the password was right.
func (s *Store) BeginSignInAttempt(ctx context.Context, email, addr string) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO signin_attempts (email, client_addr, succeeded) VALUES (lower($1), $2, false) RETURNING id`,
		truncate(email, 320), addr).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("store: record sign-in attempt: %w", err)
	}
	return id, nil
}

// SignInSucceeded marks an attempt as the right password.
func (s *Store) SignInSucceeded(ctx context.Context, id int64) error {
	if _, err := s.db.Exec(ctx, `UPDATE signin_attempts SET succeeded = true WHERE id = $1`, id); err != nil {
		return fmt.Errorf("store: record sign-in success: %w", err)
	}
	return nil
}

// FailedSignIns counts failed attempts since a time, for an email and for
// a client address.
func (s *Store) FailedSignIns(ctx context.Context, email, addr string, since time.Time) (byEmail, byAddr int, err error) {
	err = s.db.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE email = lower($1)),
		count(*) FILTER (WHERE client_addr = $2)
		FROM signin_attempts WHERE at > $3 AND NOT succeeded AND (email = lower($1) OR client_addr = $2)`,
		truncate(email, 320), addr, since).Scan(&byEmail, &byAddr)
	if err != nil {
		return 0, 0, fmt.Errorf("store: count failed sign-ins: %w", err)
	}
	return byEmail, byAddr, nil
}

// APIToken is a personal token for pipelines. The token itself (a JWT) is
// shown once; the row holds its id, scopes and state.
type APIToken struct {
	ID         string
	UserID     int64
	Name       string
	Scopes     []string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
}

// CreateAPIToken records a token.
func (s *Store) CreateAPIToken(ctx context.Context, t APIToken) error {
	_, err := s.db.Exec(ctx, `INSERT INTO api_tokens (id, user_id, name, scopes, expires_at) VALUES ($1, $2, $3, $4, $5)`,
		t.ID, t.UserID, t.Name, t.Scopes, t.ExpiresAt)
	if err != nil {
		return fmt.Errorf("store: create API token: %w", err)
	}
	return nil
}

// ActiveAPIToken returns a token and its user when the token is neither
// revoked nor expired and the user is not disabled; it notes the use.
func (s *Store) ActiveAPIToken(ctx context.Context, id string) (APIToken, User, error) {
	var t APIToken
	var u User
	row := s.db.QueryRow(ctx, `UPDATE api_tokens t SET last_used_at = now()
		FROM users u LEFT JOIN organizations o ON o.id = u.organization_id
		WHERE t.id = $1 AND u.id = t.user_id AND t.revoked_at IS NULL AND t.expires_at > now() AND NOT u.disabled
		RETURNING t.id, t.user_id, t.name, t.scopes, t.created_at, t.expires_at, t.revoked_at, t.last_used_at, `+userColumns, id)
	err := row.Scan(&t.ID, &t.UserID, &t.Name, &t.Scopes, &t.CreatedAt, &t.ExpiresAt, &t.RevokedAt, &t.LastUsedAt,
		&u.ID, &u.Email, &u.DisplayName, &u.PasswordHash, &u.OrganizationID, &u.OrgName, &u.OrgKind, &u.IsAdmin, &u.Disabled, &u.CreatedAt)
	if err != nil {
		return t, u, notFound(err, "active API token")
	}
	return t, u, nil
}

// ListAPITokens returns a user's tokens, newest first.
func (s *Store) ListAPITokens(ctx context.Context, userID int64) ([]APIToken, error) {
	rows, err := s.db.Query(ctx, `SELECT id, user_id, name, scopes, created_at, expires_at, revoked_at, last_used_at
		FROM api_tokens WHERE user_id = $1 ORDER BY created_at DESC`, userID)
	if err != nil {
		return nil, fmt.Errorf("store: list API tokens: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[APIToken])
}

// RevokeAPIToken revokes one of the user's own tokens.
func (s *Store) RevokeAPIToken(ctx context.Context, userID int64, id string) (APIToken, error) {
	rows, err := s.db.Query(ctx, `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now())
		WHERE id = $1 AND user_id = $2
		RETURNING id, user_id, name, scopes, created_at, expires_at, revoked_at, last_used_at`, id, userID)
	if err != nil {
		return APIToken{}, fmt.Errorf("store: revoke API token: %w", err)
	}
	t, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[APIToken])
	if err != nil {
		return t, notFound(err, "revoke API token")
	}
	return t, nil
}

// truncate cuts s to at most n bytes, at a character boundary (PostgreSQL
// refuses text that is not valid UTF-8).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Prune deletes sessions that ended before sessionsBefore and sign-in
// attempts older than attemptsBefore.
func (s *Store) Prune(ctx context.Context, sessionsBefore, attemptsBefore time.Time) (sessions, attempts int64, err error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE coalesce(revoked_at, expires_at) < $1`, sessionsBefore)
	if err != nil {
		return 0, 0, fmt.Errorf("store: prune sessions: %w", err)
	}
	sessions = tag.RowsAffected()
	tag, err = s.db.Exec(ctx, `DELETE FROM signin_attempts WHERE at < $1`, attemptsBefore)
	if err != nil {
		return sessions, 0, fmt.Errorf("store: prune sign-in attempts: %w", err)
	}
	return sessions, tag.RowsAffected(), nil
}
