package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

func TestAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st     *store.Store
		vendor int64
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		vendor, err := st.CreateOrganization(ctx, uniqueName(t, "Vendor"), "vendor")
		require.NoError(t, err)
		return &testBundle{st: st, vendor: vendor}
	}

	t.Run("UsersAreFoundByEmailWhateverItsCase", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		email := uniqueEmail(t, "Ada.Lovelace")
		id, err := b.st.CreateUser(ctx, store.NewUser{Email: "  " + email + " ", DisplayName: "Ada", PasswordHash: "$argon2id$x", OrganizationID: &b.vendor, IsAdmin: true})
		require.NoError(t, err)

		u, err := b.st.UserByEmail(ctx, strings.ToUpper(email))
		require.NoError(t, err)
		require.Equal(t, id, u.ID)
		require.Equal(t, email, u.Email, "stored without the spaces around it")
		require.Equal(t, "$argon2id$x", u.PasswordHash)
		require.Equal(t, "vendor", u.OrgKind)
		require.True(t, u.IsAdmin)
		require.False(t, u.Disabled)

		byID, err := b.st.UserByID(ctx, id)
		require.NoError(t, err)
		require.Equal(t, u, byID)
	})

	t.Run("ATakenEmailIsAConflict", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		email := uniqueEmail(t, "grace")
		_, err := b.st.CreateUser(ctx, store.NewUser{Email: email, DisplayName: "Grace", PasswordHash: "x"})
		require.NoError(t, err)
		err = inSavepoint(b.st, func(tx *store.Store) error {
			_, err := tx.CreateUser(ctx, store.NewUser{Email: strings.ToUpper(email), DisplayName: "Grace again", PasswordHash: "x"})
			return err
		})
		require.ErrorIs(t, err, store.ErrConflict)
	})

	t.Run("ANameTooLongIsRefusedNotAConflict", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		err := inSavepoint(b.st, func(tx *store.Store) error {
			_, err := tx.CreateUser(ctx, store.NewUser{Email: uniqueEmail(t, "long"), DisplayName: strings.Repeat("n", 201), PasswordHash: "x"})
			return err
		})
		require.Error(t, err)
		require.NotErrorIs(t, err, store.ErrConflict)
		require.NotErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("UnknownUsersAreNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.st.UserByID(ctx, -1)
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = b.st.UserByEmail(ctx, uniqueEmail(t, "nobody"))
		require.ErrorIs(t, err, store.ErrNotFound)
		require.ErrorIs(t, b.st.SetUserDisabled(ctx, -1, true), store.ErrNotFound)
		require.ErrorIs(t, b.st.SetUserOrganization(ctx, -1, &b.vendor), store.ErrNotFound)
	})

	t.Run("DisablingAndMovingAUser", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := newUser(t, b.st, "moved", nil)
		require.NoError(t, b.st.SetUserDisabled(ctx, id, true))
		require.NoError(t, b.st.SetUserOrganization(ctx, id, &b.vendor))
		u, err := b.st.UserByID(ctx, id)
		require.NoError(t, err)
		require.True(t, u.Disabled)
		require.Equal(t, &b.vendor, u.OrganizationID)
		require.NoError(t, b.st.SetUserDisabled(ctx, id, false))
		require.NoError(t, b.st.SetUserOrganization(ctx, id, nil))
		u, err = b.st.UserByID(ctx, id)
		require.NoError(t, err)
		require.False(t, u.Disabled)
		require.Nil(t, u.OrganizationID)
		require.Empty(t, u.OrgName)
	})

	t.Run("UsersAreListedByNameWhateverItsCase", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, name := range []string{"carol", "Alice", "bob"} {
			newUser(t, b.st, name, nil)
		}
		users, err := b.st.ListUsers(ctx)
		require.NoError(t, err)
		var names []string
		for _, u := range users {
			names = append(names, u.DisplayName)
		}
		require.Equal(t, []string{"Alice", "bob", "carol"}, names)
	})

	t.Run("OrganizationNamesAreUniqueWhateverTheirCase", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		name := uniqueName(t, "Customer")
		id, err := b.st.CreateOrganization(ctx, " "+name+" ", "customer")
		require.NoError(t, err)
		o, err := b.st.OrganizationByName(ctx, strings.ToLower(name))
		require.NoError(t, err)
		require.Equal(t, store.Organization{ID: id, Name: name, Kind: "customer", CreatedAt: o.CreatedAt}, o)

		err = inSavepoint(b.st, func(tx *store.Store) error {
			_, err := tx.CreateOrganization(ctx, strings.ToUpper(name), "vendor")
			return err
		})
		require.ErrorIs(t, err, store.ErrConflict)
		_, err = b.st.OrganizationByName(ctx, uniqueName(t, "nobody"))
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("AnOrganizationIsAVendorOrACustomer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		err := inSavepoint(b.st, func(tx *store.Store) error {
			_, err := tx.CreateOrganization(ctx, uniqueName(t, "Reseller"), "reseller")
			return err
		})
		require.ErrorContains(t, err, "organizations_kind_check")
	})

	t.Run("OrganizationsAreListedByName", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.st.CreateOrganization(ctx, "zz "+uniqueName(t, "last"), "customer")
		require.NoError(t, err)
		_, err = b.st.CreateOrganization(ctx, "AA "+uniqueName(t, "first"), "customer")
		require.NoError(t, err)
		orgs, err := b.st.ListOrganizations(ctx)
		require.NoError(t, err)
		require.Len(t, orgs, 3)
		require.True(t, strings.HasPrefix(orgs[0].Name, "AA "))
		require.True(t, strings.HasPrefix(orgs[2].Name, "zz "))
	})
}
