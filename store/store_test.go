package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// InTx commits what fn did when it returns nil and nothing otherwise;
// inside a transaction it is a savepoint, so an inner failure leaves the
// outer work standing.
func TestInTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st *store.Store
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{st: store.New(storetest.NewPool(t))}
	}
	orgExists := func(t *testing.T, st *store.Store, name string) bool {
		t.Helper()
		_, err := st.OrganizationByName(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return false
		}
		require.NoError(t, err)
		return true
	}
	errBoom := errors.New("boom")

	t.Run("CommitsOnNil", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.st.InTx(ctx, func(tx *store.Store) error {
			require.NotNil(t, tx.Tx())
			_, err := tx.CreateOrganization(ctx, "kept", "vendor")
			return err
		}))
		require.True(t, orgExists(t, b.st, "kept"))
		require.Nil(t, b.st.Tx(), "the pool's store has no transaction")
	})

	t.Run("RollsBackOnError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		err := b.st.InTx(ctx, func(tx *store.Store) error {
			if _, err := tx.CreateOrganization(ctx, "dropped", "vendor"); err != nil {
				return err
			}
			return errBoom
		})
		require.ErrorIs(t, err, errBoom, "fn's error comes back as it was")
		require.False(t, orgExists(t, b.st, "dropped"))
	})

	t.Run("ASavepointFailsAloneInsideATransaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.st.InTx(ctx, func(tx *store.Store) error {
			if _, err := tx.CreateOrganization(ctx, "outer", "vendor"); err != nil {
				return err
			}
			err := tx.InTx(ctx, func(inner *store.Store) error {
				if _, err := inner.CreateOrganization(ctx, "inner", "vendor"); err != nil {
					return err
				}
				_, err := inner.CreateOrganization(ctx, "OUTER", "customer") // a taken name
				return err
			})
			require.ErrorIs(t, err, store.ErrConflict)
			return nil // the outer transaction goes on after the failed savepoint
		}))
		require.True(t, orgExists(t, b.st, "outer"))
		require.False(t, orgExists(t, b.st, "inner"), "the savepoint's work is undone")
	})
}
