package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Organization is a vendor or a customer.
type Organization struct {
	ID        int64
	Name      string
	Kind      string // vendor or customer
	CreatedAt time.Time
}

// User is an account. PasswordHash is an argon2id PHC string.
type User struct {
	ID             int64
	Email          string
	DisplayName    string
	PasswordHash   string
	OrganizationID *int64
	OrgName        string
	OrgKind        string
	IsAdmin        bool
	Disabled       bool
	CreatedAt      time.Time
}

const userColumns = `u.id, u.email, u.display_name, u.password_hash, u.organization_id,
	coalesce(o.name, ''), coalesce(o.kind, ''), u.is_admin, u.disabled, u.created_at`

func scanUser(row pgx.Row) (User, error) {
	var u User
	err := row.Scan(&u.ID, &u.Email, &u.DisplayName, &u.PasswordHash, &u.OrganizationID,
		&u.OrgName, &u.OrgKind, &u.IsAdmin, &u.Disabled, &u.CreatedAt)
	return u, err
}

// NewUser is what CreateUser needs.
type NewUser struct {
	Email          string
	DisplayName    string
	PasswordHash   string
	OrganizationID *int64
	IsAdmin        bool
}

// CreateUser inserts a user; a taken email (case-insensitive) is ErrConflict.
func (s *Store) CreateUser(ctx context.Context, u NewUser) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO users (email, display_name, password_hash, organization_id, is_admin)
		VALUES ($1, $2, $3, $4, $5) RETURNING id`,
		strings.TrimSpace(u.Email), u.DisplayName, u.PasswordHash, u.OrganizationID, u.IsAdmin).Scan(&id)
	if err != nil {
		return 0, notFound(err, "create user")
	}
	return id, nil
}

// UserByEmail finds a user by email, case-insensitively.
func (s *Store) UserByEmail(ctx context.Context, email string) (User, error) {
	u, err := scanUser(s.db.QueryRow(ctx, `SELECT `+userColumns+` FROM users u
		LEFT JOIN organizations o ON o.id = u.organization_id WHERE lower(u.email) = lower($1)`, strings.TrimSpace(email)))
	if err != nil {
		return u, notFound(err, "user by email")
	}
	return u, nil
}

// UserByID returns a user.
func (s *Store) UserByID(ctx context.Context, id int64) (User, error) {
	u, err := scanUser(s.db.QueryRow(ctx, `SELECT `+userColumns+` FROM users u
		LEFT JOIN organizations o ON o.id = u.organization_id WHERE u.id = $1`, id))
	if err != nil {
		return u, notFound(err, fmt.Sprintf("user %d", id))
	}
	return u, nil
}

// ListUsers returns every user, for admins and for member pickers.
func (s *Store) ListUsers(ctx context.Context) ([]User, error) {
	rows, err := s.db.Query(ctx, `SELECT `+userColumns+` FROM users u
		LEFT JOIN organizations o ON o.id = u.organization_id ORDER BY lower(u.display_name)`)
	if err != nil {
		return nil, fmt.Errorf("store: list users: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (User, error) { return scanUser(r) })
}

// SetUserDisabled disables or enables an account; a disabled account's
// sessions stop working at once because every request checks the flag.
func (s *Store) SetUserDisabled(ctx context.Context, id int64, disabled bool) error {
	tag, err := s.db.Exec(ctx, `UPDATE users SET disabled = $2 WHERE id = $1`, id, disabled)
	if err != nil {
		return fmt.Errorf("store: disable user %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: disable user %d: %w", id, ErrNotFound)
	}
	return nil
}

// SetUserOrganization moves a user into an organisation.
func (s *Store) SetUserOrganization(ctx context.Context, userID int64, orgID *int64) error {
	tag, err := s.db.Exec(ctx, `UPDATE users SET organization_id = $2 WHERE id = $1`, userID, orgID)
	if err != nil {
		return fmt.Errorf("store: set organisation of user %d: %w", userID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: set organisation of user %d: %w", userID, ErrNotFound)
	}
	return nil
}

// ErrNoSuchOrganization: EnsureOrganization found no organisation of the
// name and was given no kind (vendor or customer) to create it with.
var ErrNoSuchOrganization = errors.New("store: no such organisation")

// EnsureOrganization returns the organisation of the name, creating it of
// the kind when there is none.
func (s *Store) EnsureOrganization(ctx context.Context, name, kind string) (int64, error) {
	o, err := s.OrganizationByName(ctx, name)
	if err == nil {
		return o.ID, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	if kind != "vendor" && kind != "customer" {
		return 0, fmt.Errorf("organisation %q: %w", name, ErrNoSuchOrganization)
	}
	return s.CreateOrganization(ctx, name, kind)
}

// CreateOrganization inserts an organisation; a taken name is ErrConflict.
func (s *Store) CreateOrganization(ctx context.Context, name, kind string) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO organizations (name, kind) VALUES ($1, $2) RETURNING id`, strings.TrimSpace(name), kind).Scan(&id)
	if err != nil {
		return 0, notFound(err, "create organisation")
	}
	return id, nil
}

// ListOrganizations returns all organisations by name.
func (s *Store) ListOrganizations(ctx context.Context) ([]Organization, error) {
	rows, err := s.db.Query(ctx, `SELECT id, name, kind, created_at FROM organizations ORDER BY lower(name)`)
	if err != nil {
		return nil, fmt.Errorf("store: list organisations: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Organization])
}

// OrganizationByName finds an organisation by name, case-insensitively.
func (s *Store) OrganizationByName(ctx context.Context, name string) (Organization, error) {
	rows, err := s.db.Query(ctx, `SELECT id, name, kind, created_at FROM organizations WHERE lower(name) = lower($1)`, name)
	if err != nil {
		return Organization{}, fmt.Errorf("store: organisation by name: %w", err)
	}
	o, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[Organization])
	if err != nil {
		return o, notFound(err, "organisation by name")
	}
	return o, nil
}
