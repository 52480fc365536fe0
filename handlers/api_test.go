package handlers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/store"
)

// createTokenViaUI creates an API token on the tokens page and returns the
// token text shown once.
func (b *testBundle) createTokenViaUI(t *testing.T, c *http.Client, scopes ...string) string {
	t.Helper()
	form := url.Values{"name": {"pipeline"}, "expires_days": {"30"}, "scope": scopes}
	req, _ := http.NewRequest(http.MethodPost, b.ts.URL+"/tokens", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := c.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)
	m := regexp.MustCompile(`<pre id="new-token">([^<]+)</pre>`).FindSubmatch(body)
	require.NotNil(t, m, "the new token is shown")
	return string(m[1])
}

func (b *testBundle) apiGet(t *testing.T, token, path string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.ts.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func TestAPITokensLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	vendor := b.createOrg(t, "V", "vendor")
	customer := b.createOrg(t, "C", "customer")
	uid := b.createUser(t, "eng@v.example", &vendor, false)
	pid, err := b.store.CreateProgram(ctx, "P1", "", vendor, customer, nil)
	require.NoError(t, err)
	_, err = b.store.SetMember(ctx, pid, uid, store.RoleEngineer)
	require.NoError(t, err)

	c := b.signIn(t, "eng@v.example")
	token := b.createTokenViaUI(t, c, "read", "run")

	code, body := b.apiGet(t, token, "/api/v1/programs")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, body["programs"], 1)

	// The session cookie alone does not open the API.
	res, _ := b.get(t, c, "/api/v1/programs")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	code, _ = b.apiGet(t, "", "/api/v1/programs")
	require.Equal(t, http.StatusUnauthorized, code)

	// Only its id is stored; the audit log knows it was created.
	var stored string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT id FROM api_tokens`).Scan(&stored))
	require.NotContains(t, stored, ".")
	var audited int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'token_created'`).Scan(&audited))
	require.Equal(t, 1, audited)

	// Revoked: refused at once.
	res = b.postForm(t, c, "/tokens/"+stored+"/revoke", nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	code, _ = b.apiGet(t, token, "/api/v1/programs")
	require.Equal(t, http.StatusUnauthorized, code)

	// Expired: refused.
	now := time.Now()
	require.NoError(t, b.store.CreateAPIToken(ctx, store.APIToken{ID: "expired-one", UserID: uid, Name: "old", Scopes: []string{"read"}, ExpiresAt: now.Add(-time.Minute)}))
	old, err := b.keys.Issue(auth.AudienceAPI, uid, "expired-one", []string{"read"}, now.Add(-time.Hour), now.Add(-time.Minute))
	require.NoError(t, err)
	code, _ = b.apiGet(t, old, "/api/v1/programs")
	require.Equal(t, http.StatusUnauthorized, code)

	// Another user cannot revoke my token.
	other := b.createUser(t, "other@v.example", &vendor, false)
	_ = other
	c2 := b.signIn(t, "other@v.example")
	token2 := b.createTokenViaUI(t, c, "read")
	var id2 string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT id FROM api_tokens WHERE revoked_at IS NULL AND user_id = $1`, uid).Scan(&id2))
	res = b.postForm(t, c2, "/tokens/"+id2+"/revoke", nil)
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	code, _ = b.apiGet(t, token2, "/api/v1/programs")
	require.Equal(t, http.StatusOK, code)
}
