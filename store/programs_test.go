package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

func TestPrograms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st      *store.Store
		program programFixture
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		return &testBundle{st: st, program: newProgram(t, st)}
	}

	t.Run("AProgramJoinsAVendorAndACustomer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.program
		_, err := b.st.CreateProgram(ctx, "Backwards", "", p.Customer, p.Vendor, nil)
		require.ErrorIs(t, err, store.ErrNotFound, "the organisations must be of the right kinds")
		_, err = b.st.CreateProgram(ctx, "Alone", "", p.Vendor, p.Vendor, nil)
		require.ErrorIs(t, err, store.ErrNotFound)

		got, err := b.st.ProgramByID(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, "Program", got.Name)
		require.Equal(t, p.Vendor, got.VendorOrgID)
		require.Equal(t, p.Customer, got.CustomerOrgID)
		require.NotEmpty(t, got.VendorName)
		_, err = b.st.ProgramByID(ctx, -1)
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("MembersSeeTheirProgramsAndOthersDoNot", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.program
		other, err := b.st.CreateProgram(ctx, "another", "", p.Vendor, p.Customer, nil)
		require.NoError(t, err)
		eng := p.member(t, b.st, "eng", store.RoleEngineer)
		outsider := newUser(t, b.st, "outsider", &p.Vendor)
		admin, err := b.st.CreateUser(ctx, store.NewUser{Email: uniqueEmail(t, "admin"), DisplayName: "admin", PasswordHash: "x", IsAdmin: true})
		require.NoError(t, err)

		a, err := b.st.ProgramFor(ctx, eng, p.ID)
		require.NoError(t, err)
		require.Equal(t, store.RoleEngineer, a.Role)
		require.False(t, a.IsAdmin)
		_, err = b.st.ProgramFor(ctx, eng, other)
		require.ErrorIs(t, err, store.ErrNotFound, "a program of the same organisations, without membership")
		_, err = b.st.ProgramFor(ctx, outsider, p.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = b.st.ProgramFor(ctx, eng, -1)
		require.ErrorIs(t, err, store.ErrNotFound)

		a, err = b.st.ProgramFor(ctx, admin, other)
		require.NoError(t, err)
		require.True(t, a.IsAdmin, "a site admin sees every program")
		require.Empty(t, a.Role)

		mine, err := b.st.ProgramsFor(ctx, eng)
		require.NoError(t, err)
		require.Len(t, mine, 1)
		require.Equal(t, p.ID, mine[0].ID)
		none, err := b.st.ProgramsFor(ctx, outsider)
		require.NoError(t, err)
		require.Empty(t, none)
		all, err := b.st.ProgramsFor(ctx, admin)
		require.NoError(t, err)
		require.Equal(t, []string{"another", "Program"}, []string{all[0].Name, all[1].Name}, "by name, whatever its case")
		require.True(t, all[0].IsAdmin)
	})

	t.Run("OnlyTheTwoOrganisationsMayJoin", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		elsewhere, err := b.st.CreateOrganization(ctx, uniqueName(t, "Elsewhere"), "customer")
		require.NoError(t, err)
		stranger := newUser(t, b.st, "stranger", &elsewhere)
		_, err = b.st.SetMember(ctx, b.program.ID, stranger, store.RoleViewer)
		require.ErrorIs(t, err, store.ErrWrongOrganization)
		noOrg := newUser(t, b.st, "freelancer", nil)
		_, err = b.st.SetMember(ctx, b.program.ID, noOrg, store.RoleViewer)
		require.ErrorIs(t, err, store.ErrWrongOrganization)
	})

	t.Run("RolesChangeAndTheLastOwnerStays", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.program
		owner := p.member(t, b.st, "owner", store.RoleOwner)
		prev, err := b.st.SetMember(ctx, p.ID, owner, store.RoleOwner)
		require.NoError(t, err)
		require.Equal(t, store.RoleOwner, prev)

		_, err = b.st.SetMember(ctx, p.ID, owner, store.RoleViewer)
		require.ErrorIs(t, err, store.ErrLastOwner)
		require.ErrorIs(t, b.st.RemoveMember(ctx, p.ID, owner), store.ErrNotFound, "the last owner cannot leave")

		second := newUser(t, b.st, "second owner", &p.Customer)
		prev, err = b.st.SetMember(ctx, p.ID, second, store.RoleOwner)
		require.NoError(t, err)
		require.Empty(t, prev, "a new member had no role")
		n, err := b.st.CountOwners(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, 2, n)

		prev, err = b.st.SetMember(ctx, p.ID, owner, store.RoleApprover)
		require.NoError(t, err, "with another owner, one may step down")
		require.Equal(t, store.RoleOwner, prev)
		require.ErrorIs(t, b.st.RemoveMember(ctx, p.ID, second), store.ErrNotFound)
		require.NoError(t, b.st.RemoveMember(ctx, p.ID, owner))
		require.ErrorIs(t, b.st.RemoveMember(ctx, p.ID, owner), store.ErrNotFound, "not a member any more")
		n, err = b.st.CountOwners(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})

	t.Run("AnUnknownRoleIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := newUser(t, b.st, "u", &b.program.Vendor)
		err := inSavepoint(b.st, func(tx *store.Store) error {
			_, err := tx.SetMember(ctx, b.program.ID, u, "superuser")
			return err
		})
		require.ErrorContains(t, err, "program_members_role_check")
		require.False(t, store.ValidRole("superuser"))
		for _, r := range store.Roles {
			require.True(t, store.ValidRole(string(r)))
		}
	})

	t.Run("MembersAreListedVendorFirstThenByName", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.program
		for _, m := range []struct {
			name string
			org  int64
		}{{"zed", p.Customer}, {"Amy", p.Customer}, {"yves", p.Vendor}, {"Bea", p.Vendor}} {
			id := newUser(t, b.st, m.name, &m.org)
			_, err := b.st.SetMember(ctx, p.ID, id, store.RoleViewer)
			require.NoError(t, err)
		}
		members, err := b.st.ListMembers(ctx, p.ID)
		require.NoError(t, err)
		var names []string
		for _, m := range members {
			names = append(names, m.DisplayName)
			require.Equal(t, store.RoleViewer, m.Role)
		}
		require.Equal(t, []string{"Bea", "yves", "Amy", "zed"}, names)
		require.Equal(t, "vendor", members[0].OrgKind)
	})

	t.Run("CountsAreTheProgramsOwn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.program
		other, err := b.st.CreateProgram(ctx, "other", "", p.Vendor, p.Customer, nil)
		require.NoError(t, err)
		newHost(t, b.st, p.ID, "h1")
		newHost(t, b.st, p.ID, "h2")
		newHost(t, b.st, other, "h1")
		pv := newProfileVersion(t, b.st, p.ID, "kv")
		newGateSetVersion(t, b.st, p.ID, "ttft")
		f := runFixture{programFixture: p, Host: newHost(t, b.st, p.ID, "h3"), ProfileVersion: pv}
		f.run(t, b.st)
		c, err := b.st.ProgramCounts(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, store.ProgramCounts{Hosts: 3, Profiles: 1, GateSets: 1, Runs: 1}, c)
	})
}
