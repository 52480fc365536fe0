package handlers

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The attacks of issue 16, each reproduced against the real server and
// PostgreSQL and refused. (The bundle bomb runs the server as a process of
// its own: attack_bundle_bomb_test.go in package main.)

// An admin disabled an account; its API token stopped answering, and came
// back when the account was enabled again. Disabling now revokes it.
func TestAttackReEnabledAccountBringsItsAPITokenBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	vendor := b.createOrg(t, "V", "vendor")
	uid := b.createUser(t, "eng@v.example", &vendor, false)
	b.createUser(t, "admin@v.example", nil, true)
	token := b.createTokenViaUI(t, b.signIn(t, "eng@v.example"), "read", "run")
	status, _ := b.apiGet(t, token, "/api/v1/programs")
	require.Equal(t, http.StatusOK, status)

	adm := b.signIn(t, "admin@v.example")
	res := b.postForm(t, adm, fmt.Sprintf("/admin/users/%d/disable", uid), nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	status, _ = b.apiGet(t, token, "/api/v1/programs")
	require.Equal(t, http.StatusUnauthorized, status, "disabled")

	res = b.postForm(t, adm, fmt.Sprintf("/admin/users/%d/enable", uid), nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	status, _ = b.apiGet(t, token, "/api/v1/programs")
	require.Equal(t, http.StatusUnauthorized, status, "enabled again: the old token stays revoked")

	var revoked bool
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT revoked_at IS NOT NULL FROM api_tokens WHERE user_id = $1`, uid).Scan(&revoked))
	require.True(t, revoked, "the token's row says revoked (the tokens page shows it)")
	// The account itself works again, and a new token does.
	fresh := b.createTokenViaUI(t, b.signIn(t, "eng@v.example"), "read")
	status, _ = b.apiGet(t, fresh, "/api/v1/programs")
	require.Equal(t, http.StatusOK, status)
}
