package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Role is a member's role in a program.
type Role string

const (
	RoleViewer   Role = "viewer"
	RoleEngineer Role = "engineer"
	RoleApprover Role = "approver"
	RoleOwner    Role = "owner"
)

// Roles lists the roles from least to most powerful.
var Roles = []Role{RoleViewer, RoleEngineer, RoleApprover, RoleOwner}

// ValidRole reports whether r is a known role.
func ValidRole(r string) bool {
	for _, k := range Roles {
		if string(k) == r {
			return true
		}
	}
	return false
}

// Program is a joint test program of one vendor and one customer organisation.
type Program struct {
	ID            int64
	Name          string
	Description   string
	VendorOrgID   int64
	VendorName    string
	CustomerOrgID int64
	CustomerName  string
	CreatedAt     time.Time
}

// ProgramAccess is a program as one user may see it: with the user's role
// (empty for a site admin who is not a member).
type ProgramAccess struct {
	Program
	Role    Role
	IsAdmin bool // access through the site admin role
	// CanManage says the caller may manage the program (members, the audit
	// log): the handlers set it from their authorization policy when they
	// load the program for a request, so that pages offer only what opens.
	CanManage bool
}

const programColumns = `p.id, p.name, p.description, p.vendor_org_id, vo.name, p.customer_org_id, co.name, p.created_at`
const programJoins = ` JOIN organizations vo ON vo.id = p.vendor_org_id JOIN organizations co ON co.id = p.customer_org_id`

func scanProgram(row pgx.Row) (Program, error) {
	var p Program
	err := row.Scan(&p.ID, &p.Name, &p.Description, &p.VendorOrgID, &p.VendorName, &p.CustomerOrgID, &p.CustomerName, &p.CreatedAt)
	return p, err
}

// CreateProgram inserts a program.
func (s *Store) CreateProgram(ctx context.Context, name, description string, vendorOrg, customerOrg int64, createdBy *int64) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO programs (name, description, vendor_org_id, customer_org_id, created_by)
		SELECT $1, $2, v.id, c.id, $5 FROM organizations v, organizations c
		WHERE v.id = $3 AND v.kind = 'vendor' AND c.id = $4 AND c.kind = 'customer'
		RETURNING id`, name, description, vendorOrg, customerOrg, createdBy).Scan(&id)
	if err != nil {
		return 0, notFound(err, "create program (vendor and customer organisations of the right kinds)")
	}
	return id, nil
}

// ProgramFor returns the program if userID may see it: as a member, or as
// a site admin. Anything else is ErrNotFound, whatever the id.
func (s *Store) ProgramFor(ctx context.Context, userID, programID int64) (ProgramAccess, error) {
	var a ProgramAccess
	var role *string
	row := s.db.QueryRow(ctx, `SELECT `+programColumns+`, m.role, u.is_admin
		FROM programs p`+programJoins+`
		JOIN users u ON u.id = $1
		LEFT JOIN program_members m ON m.program_id = p.id AND m.user_id = u.id
		WHERE p.id = $2 AND (m.user_id IS NOT NULL OR u.is_admin)`, userID, programID)
	err := row.Scan(&a.ID, &a.Name, &a.Description, &a.VendorOrgID, &a.VendorName, &a.CustomerOrgID, &a.CustomerName, &a.CreatedAt, &role, &a.IsAdmin)
	if err != nil {
		return a, notFound(err, fmt.Sprintf("program %d", programID))
	}
	if role != nil {
		a.Role = Role(*role)
		a.IsAdmin = false
	}
	return a, nil
}

// ProgramsFor lists the programs a user may see, by name.
func (s *Store) ProgramsFor(ctx context.Context, userID int64) ([]ProgramAccess, error) {
	rows, err := s.db.Query(ctx, `SELECT `+programColumns+`, coalesce(m.role, ''), u.is_admin AND m.user_id IS NULL
		FROM programs p`+programJoins+`
		JOIN users u ON u.id = $1
		LEFT JOIN program_members m ON m.program_id = p.id AND m.user_id = u.id
		WHERE m.user_id IS NOT NULL OR u.is_admin
		ORDER BY lower(p.name)`, userID)
	if err != nil {
		return nil, fmt.Errorf("store: programs for user %d: %w", userID, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ProgramAccess, error) {
		var a ProgramAccess
		var role string
		err := r.Scan(&a.ID, &a.Name, &a.Description, &a.VendorOrgID, &a.VendorName, &a.CustomerOrgID, &a.CustomerName, &a.CreatedAt, &role, &a.IsAdmin)
		a.Role = Role(role)
		return a, err
	})
}

// Member is a user's membership in a program.
type Member struct {
	UserID      int64
	Email       string
	DisplayName string
	OrgName     string
	OrgKind     string
	Role        Role
	Disabled    bool
	AddedAt     time.Time
}

// ListMembers returns a program's members by organisation and name.
func (s *Store) ListMembers(ctx context.Context, programID int64) ([]Member, error) {
	rows, err := s.db.Query(ctx, `SELECT u.id, u.email, u.display_name, coalesce(o.name, ''), coalesce(o.kind, ''), m.role, u.disabled, m.added_at
		FROM program_members m JOIN users u ON u.id = m.user_id LEFT JOIN organizations o ON o.id = u.organization_id
		WHERE m.program_id = $1 ORDER BY o.kind DESC NULLS LAST, lower(u.display_name)`, programID)
	if err != nil {
		return nil, fmt.Errorf("store: members of program %d: %w", programID, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) {
		var m Member
		var role string
		err := r.Scan(&m.UserID, &m.Email, &m.DisplayName, &m.OrgName, &m.OrgKind, &role, &m.Disabled, &m.AddedAt)
		m.Role = Role(role)
		return m, err
	})
}

// ErrWrongOrganization is returned when a user outside the program's two
// organisations is added to it.
var ErrWrongOrganization = fmt.Errorf("the user belongs to neither of the program's organisations")

// ErrLastOwner is returned when a change would leave a program without an
// owner.
var ErrLastOwner = errors.New("the program's last owner cannot be demoted")

// SetMember adds a member or changes their role. Only users of the
// program's vendor or customer organisation can be members, and the last
// owner cannot be demoted (ErrLastOwner). It returns the previous role
// ("" when new).
func (s *Store) SetMember(ctx context.Context, programID, userID int64, role Role) (Role, error) {
	var ok bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM programs p JOIN users u ON u.id = $2
		WHERE p.id = $1 AND u.organization_id IN (p.vendor_org_id, p.customer_org_id))`, programID, userID).Scan(&ok)
	if err != nil {
		return "", fmt.Errorf("store: set member: %w", err)
	}
	if !ok {
		return "", fmt.Errorf("store: set member: %w", ErrWrongOrganization)
	}
	var prev *string
	err = s.db.QueryRow(ctx, `WITH old AS (SELECT role FROM program_members WHERE program_id = $1 AND user_id = $2)
		INSERT INTO program_members (program_id, user_id, role) VALUES ($1, $2, $3)
		ON CONFLICT (program_id, user_id) DO UPDATE SET role = EXCLUDED.role
		WHERE EXCLUDED.role = 'owner' OR program_members.role <> 'owner'
			OR (SELECT count(*) FROM program_members WHERE program_id = $1 AND role = 'owner') > 1
		RETURNING (SELECT role FROM old)`, programID, userID, string(role)).Scan(&prev)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("store: set member: %w", ErrLastOwner)
	}
	if err != nil {
		return "", fmt.Errorf("store: set member: %w", err)
	}
	if prev == nil {
		return "", nil
	}
	return Role(*prev), nil
}

// RemoveMember removes a member; the last owner cannot be removed.
func (s *Store) RemoveMember(ctx context.Context, programID, userID int64) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM program_members WHERE program_id = $1 AND user_id = $2
		AND (role <> 'owner' OR (SELECT count(*) FROM program_members WHERE program_id = $1 AND role = 'owner') > 1)`, programID, userID)
	if err != nil {
		return fmt.Errorf("store: remove member: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: remove member (not a member, or the last owner): %w", ErrNotFound)
	}
	return nil
}

// CountOwners returns how many owners a program has.
func (s *Store) CountOwners(ctx context.Context, programID int64) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM program_members WHERE program_id = $1 AND role = 'owner'`, programID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: count owners: %w", err)
	}
	return n, nil
}

// ProgramCounts counts a program's objects for its overview.
type ProgramCounts struct {
	Hosts, Profiles, GateSets, Runs int
}

// ProgramCounts returns the counts for a program's overview.
func (s *Store) ProgramCounts(ctx context.Context, programID int64) (ProgramCounts, error) {
	var c ProgramCounts
	err := s.db.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM hosts WHERE program_id = $1),
		(SELECT count(*) FROM profiles WHERE program_id = $1),
		(SELECT count(*) FROM gate_sets WHERE program_id = $1),
		(SELECT count(*) FROM runs WHERE program_id = $1)`, programID).Scan(&c.Hosts, &c.Profiles, &c.GateSets, &c.Runs)
	if err != nil {
		return c, fmt.Errorf("store: counts of program %d: %w", programID, err)
	}
	return c, nil
}

// ProgramByID returns a program whatever the caller: for workers only.
func (s *Store) ProgramByID(ctx context.Context, id int64) (Program, error) {
	p, err := scanProgram(s.db.QueryRow(ctx, `SELECT `+programColumns+` FROM programs p`+programJoins+` WHERE p.id = $1`, id))
	if err != nil {
		return p, notFound(err, fmt.Sprintf("program %d", id))
	}
	return p, nil
}
