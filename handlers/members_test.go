package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// Owners add members, change roles and remove members; every change is in
// the audit log; the last owner can be neither demoted nor removed.
func TestMemberManagementKeepsAnOwner(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	userID := func(email string) int64 {
		var id int64
		require.NoError(t, pb.pool.QueryRow(ctx, `SELECT id FROM users WHERE email = $1`, email).Scan(&id))
		return id
	}
	roleOf := func(id int64) string {
		var role string
		err := pb.pool.QueryRow(ctx, `SELECT role FROM program_members WHERE program_id = $1 AND user_id = $2`, pb.programID, id).Scan(&role)
		if err != nil {
			return "none"
		}
		return role
	}
	audited := func(action string, id int64) int {
		var n int
		require.NoError(t, pb.pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = $1 AND program_id = $2 AND target = $3`,
			action, pb.programID, fmt.Sprintf("user %d", id)).Scan(&n))
		return n
	}
	var customerOrg int64
	require.NoError(t, pb.pool.QueryRow(ctx, `SELECT organization_id FROM users WHERE email = 'own@customer.example'`).Scan(&customerOrg))
	owner := userID("own@customer.example")
	newcomer := pb.createUser(t, "new@customer.example", &customerOrg, false)
	set := func(id int64, role string) *http.Response {
		return pb.postForm(t, pb.owner, pb.url("/members"), url.Values{"user_id": {fmt.Sprint(id)}, "role": {role}})
	}

	require.Equal(t, http.StatusSeeOther, set(newcomer, "viewer").StatusCode)
	require.Equal(t, "viewer", roleOf(newcomer))
	require.Equal(t, 1, audited("member_added", newcomer))
	require.Equal(t, http.StatusSeeOther, set(newcomer, "owner").StatusCode)
	require.Equal(t, "owner", roleOf(newcomer))
	require.Equal(t, 1, audited("role_changed", newcomer))

	// Two owners: either may step down, but not both.
	require.Equal(t, http.StatusSeeOther, set(newcomer, "engineer").StatusCode)
	require.Equal(t, "engineer", roleOf(newcomer))
	require.Equal(t, http.StatusUnprocessableEntity, set(owner, "viewer").StatusCode, "the last owner cannot be demoted")
	require.Equal(t, "owner", roleOf(owner))
	require.Equal(t, 0, audited("role_changed", owner))
	res := pb.postForm(t, pb.owner, pb.url(fmt.Sprintf("/members/%d/remove", owner)), nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, "nor removed")
	require.Equal(t, "owner", roleOf(owner))

	// Someone of neither organisation cannot join.
	other := pb.createOrg(t, "Elsewhere", "vendor")
	stranger := pb.createUser(t, "someone@elsewhere.example", &other, false)
	require.Equal(t, http.StatusUnprocessableEntity, set(stranger, "viewer").StatusCode)
	require.Equal(t, "none", roleOf(stranger))

	// An engineer may not manage members.
	res = pb.postForm(t, pb.engineer, pb.url("/members"), url.Values{"user_id": {fmt.Sprint(newcomer)}, "role": {"owner"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.Equal(t, "engineer", roleOf(newcomer))

	res = pb.postForm(t, pb.owner, pb.url(fmt.Sprintf("/members/%d/remove", newcomer)), nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "none", roleOf(newcomer))
	require.Equal(t, 1, audited("member_removed", newcomer))
}
