package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// The audit log is append-only: an entry can be added, never changed,
// deleted or truncated away.
func TestAuditLogIsAppendOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	require.NoError(t, st.Audit(ctx, store.AuditEntry{ActorLabel: "someone@example.com", Action: "signin", Target: "user 1"}))
	for _, sql := range []string{
		`UPDATE audit_log SET action = 'nothing'`,
		`DELETE FROM audit_log`,
		`TRUNCATE audit_log`,
		`TRUNCATE run_reports`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.ErrorContains(t, err, "append-only", sql)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'signin'`).Scan(&n))
	require.Equal(t, 1, n)
}
