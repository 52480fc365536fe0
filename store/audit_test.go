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

func TestAuditList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st      *store.Store
		program int64
		actor   int64
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		p := newProgram(t, st)
		return &testBundle{st: st, program: p.ID, actor: p.member(t, st, "owner", store.RoleOwner)}
	}

	t.Run("NewestFirstWithTheirDetails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.st.Audit(ctx, store.AuditEntry{ActorUserID: &b.actor, ActorLabel: "owner@example.com", Action: "member_added",
			ProgramID: &b.program, Target: "user 7", Details: map[string]any{"role": "viewer"}, ClientAddr: "192.0.2.7"}))
		require.NoError(t, b.st.Audit(ctx, store.AuditEntry{ActorLabel: "system", Action: "role_changed", ProgramID: &b.program}))
		require.NoError(t, b.st.Audit(ctx, store.AuditEntry{ActorLabel: "system", Action: "signin"}))

		all, err := b.st.ListAudit(ctx, store.AuditFilter{})
		require.NoError(t, err)
		require.Len(t, all, 3)
		require.Equal(t, []string{"signin", "role_changed", "member_added"}, []string{all[0].Action, all[1].Action, all[2].Action})
		require.Equal(t, map[string]any{}, all[1].Details, "no details are stored as an empty object")
		added := all[2]
		require.Equal(t, map[string]any{"role": "viewer"}, added.Details)
		require.Equal(t, &b.actor, added.ActorUserID)
		require.Equal(t, "192.0.2.7", added.ClientAddr)
		require.Equal(t, "user 7", added.Target)

		mine, err := b.st.ListAudit(ctx, store.AuditFilter{ProgramID: &b.program, Limit: 1})
		require.NoError(t, err)
		require.Len(t, mine, 1)
		require.Equal(t, "role_changed", mine[0].Action, "the program's newest")
		other := b.program + 1000
		none, err := b.st.ListAudit(ctx, store.AuditFilter{ProgramID: &other})
		require.NoError(t, err)
		require.Empty(t, none)
	})

	t.Run("TheLimitIsBounded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 205 {
			require.NoError(t, b.st.Audit(ctx, store.AuditEntry{ActorLabel: "system", Action: "signin", ProgramID: &b.program}))
		}
		for _, limit := range []int{0, -1, 5000} {
			list, err := b.st.ListAudit(ctx, store.AuditFilter{ProgramID: &b.program, Limit: limit})
			require.NoError(t, err)
			require.Len(t, list, 200, "limit %d", limit)
		}
	})

	t.Run("DetailsThatAreNotJSONAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		err := b.st.Audit(ctx, store.AuditEntry{ActorLabel: "system", Action: "x", Details: map[string]any{"f": func() {}}})
		require.ErrorContains(t, err, "audit details")
	})
}
