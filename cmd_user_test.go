package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// accord user create makes the first admin (with a generated password it
// prints once), puts users in organisations, refuses a second account for
// the same email, and records each creation in the audit log.
func TestUserCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.NewDatabase(t)
	env := envMap(map[string]string{"DATABASE_URL": dbURL, "ACCORD_MIGRATE_ON_START": "true"})
	run := func(stdin string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := cmdUser(ctx, args, env, strings.NewReader(stdin), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, errOut := run("", "create", "--email", "root@lab.example", "--name", "Root", "--admin")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "created root@lab.example (site administrator)")
	m := regexp.MustCompile(`(?m)^password: (\S{20})$`).FindStringSubmatch(out)
	require.NotNil(t, m, "the generated password is printed once: %s", out)

	pool, err := store.Open(ctx, dbURL, 2)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool)
	root, err := st.UserByEmail(ctx, "root@lab.example")
	require.NoError(t, err)
	require.True(t, root.IsAdmin)
	require.True(t, auth.CheckPassword(root.PasswordHash, m[1]), "the printed password signs in")

	code, out, errOut = run("s3cret-from-a-vault\n", "create", "--email", "eng@vendor.example", "--name", "Eng", "--org", "Array Vendor", "--org-kind", "vendor", "--password-stdin")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "password:", "a password given on stdin is not echoed")
	eng, err := st.UserByEmail(ctx, "eng@vendor.example")
	require.NoError(t, err)
	require.False(t, eng.IsAdmin)
	require.NotNil(t, eng.OrganizationID)
	require.True(t, auth.CheckPassword(eng.PasswordHash, "s3cret-from-a-vault"))

	code, _, errOut = run("", "create", "--email", "eng@vendor.example", "--name", "Again")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "an account with the email eng@vendor.example exists already")
	code, _, errOut = run("", "create", "--email", "x@y.example", "--name", "X", "--org", "Nowhere")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `give --org-kind vendor or customer`)
	code, _, errOut = run("", "create", "--email", "x@y.example")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--email and --name are required")

	var created int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'user_created'`).Scan(&created))
	require.Equal(t, 2, created)
}
