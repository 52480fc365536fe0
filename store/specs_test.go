package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

func TestSpecs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st             *store.Store
		program, other int64
		author         int64
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		p := newProgram(t, st)
		other := p.another(t, st)
		return &testBundle{st: st, program: p.ID, other: other, author: p.member(t, st, "Author", store.RoleEngineer)}
	}
	version := func(name, digest string, author int64) store.NewSpecVersion {
		return store.NewSpecVersion{Name: name, Spec: []byte(`{"d":"` + digest + `"}`), Digest: digest, Note: "note " + digest, CreatedBy: author}
	}

	// Profiles and gate sets are versioned the same way, each in its own tables.
	for _, kind := range []store.SpecKind{store.KindProfile, store.KindGateSet} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()

			t.Run("VersionsAreNumberedAndNeverRepeatTheLatest", func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				sp, v1, err := b.st.CreateSpec(ctx, kind, b.program, version("kv", "sha256:1", b.author))
				require.NoError(t, err)
				require.Equal(t, 1, v1.Version)
				require.Equal(t, 1, sp.LatestVersion)

				v2, err := b.st.AddSpecVersion(ctx, kind, b.program, sp.ID, version("kv renamed", "sha256:2", b.author))
				require.NoError(t, err)
				require.Equal(t, 2, v2.Version)
				_, err = b.st.AddSpecVersion(ctx, kind, b.program, sp.ID, version("kv renamed", "sha256:2", b.author))
				require.ErrorIs(t, err, store.ErrUnchanged, "the same as the latest")
				v3, err := b.st.AddSpecVersion(ctx, kind, b.program, sp.ID, version("kv renamed", "sha256:1", b.author))
				require.NoError(t, err, "an earlier version's content again is a new version")
				require.Equal(t, 3, v3.Version)

				got, err := b.st.GetSpec(ctx, kind, b.program, sp.ID)
				require.NoError(t, err)
				require.Equal(t, "kv renamed", got.Name, "a version may rename the spec")
				require.Equal(t, 3, got.LatestVersion)
				require.Equal(t, "sha256:1", got.LatestDigest)
				require.Equal(t, 3, got.Versions)

				versions, err := b.st.ListSpecVersions(ctx, kind, b.program, sp.ID)
				require.NoError(t, err)
				require.Equal(t, []int{3, 2, 1}, []int{versions[0].Version, versions[1].Version, versions[2].Version})
				require.Equal(t, "Author", versions[0].CreatedByName)
				require.Equal(t, "note sha256:1", versions[0].Note)
			})

			t.Run("VersionsAreReadByNumberOrByID", func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				sp, v1, err := b.st.CreateSpec(ctx, kind, b.program, version("kv", "sha256:1", b.author))
				require.NoError(t, err)
				v2, err := b.st.AddSpecVersion(ctx, kind, b.program, sp.ID, version("kv", "sha256:2", b.author))
				require.NoError(t, err)

				latest, err := b.st.GetSpecVersion(ctx, kind, b.program, sp.ID, 0)
				require.NoError(t, err)
				require.Equal(t, v2.ID, latest.ID, "version 0 is the latest")
				first, err := b.st.GetSpecVersion(ctx, kind, b.program, sp.ID, 1)
				require.NoError(t, err)
				require.Equal(t, v1.ID, first.ID)
				require.JSONEq(t, `{"d":"sha256:1"}`, string(first.Spec))
				_, err = b.st.GetSpecVersion(ctx, kind, b.program, sp.ID, 3)
				require.ErrorIs(t, err, store.ErrNotFound)

				byID, err := b.st.GetSpecVersionByID(ctx, kind, b.program, v1.ID)
				require.NoError(t, err)
				require.Equal(t, 1, byID.Version)
				require.Equal(t, sp.ID, byID.SpecID)
				_, err = b.st.GetSpecVersionByID(ctx, kind, b.program, -1)
				require.ErrorIs(t, err, store.ErrNotFound)
			})

			t.Run("AnotherProgramsSpecIsNotFound", func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				sp, v1, err := b.st.CreateSpec(ctx, kind, b.program, version("kv", "sha256:1", b.author))
				require.NoError(t, err)
				_, err = b.st.GetSpec(ctx, kind, b.other, sp.ID)
				require.ErrorIs(t, err, store.ErrNotFound)
				_, err = b.st.GetSpecVersion(ctx, kind, b.other, sp.ID, 1)
				require.ErrorIs(t, err, store.ErrNotFound)
				_, err = b.st.GetSpecVersionByID(ctx, kind, b.other, v1.ID)
				require.ErrorIs(t, err, store.ErrNotFound)
				_, err = b.st.AddSpecVersion(ctx, kind, b.other, sp.ID, version("kv", "sha256:2", b.author))
				require.ErrorIs(t, err, store.ErrNotFound)
				versions, err := b.st.ListSpecVersions(ctx, kind, b.other, sp.ID)
				require.NoError(t, err)
				require.Empty(t, versions)
				list, err := b.st.ListSpecs(ctx, kind, b.other)
				require.NoError(t, err)
				require.Empty(t, list)
			})

			t.Run("SpecsAreListedByNameWithTheirLatestVersion", func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				for _, name := range []string{"zeta", "Alpha", "beta"} {
					sp, _, err := b.st.CreateSpec(ctx, kind, b.program, version(name, "sha256:"+name, 0))
					require.NoError(t, err)
					if name == "beta" {
						_, err := b.st.AddSpecVersion(ctx, kind, b.program, sp.ID, version(name, "sha256:beta2", 0))
						require.NoError(t, err)
					}
				}
				list, err := b.st.ListSpecs(ctx, kind, b.program)
				require.NoError(t, err)
				require.Equal(t, []string{"Alpha", "beta", "zeta"}, []string{list[0].Name, list[1].Name, list[2].Name})
				require.Equal(t, 2, list[1].LatestVersion)
				require.Equal(t, "sha256:beta2", list[1].LatestDigest)
				require.Equal(t, 2, list[1].Versions)
			})

			t.Run("VersionsAreImmutable", func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				_, _, err := b.st.CreateSpec(ctx, kind, b.program, version("kv", "sha256:1", 0))
				require.NoError(t, err)
				table := map[store.SpecKind]string{store.KindProfile: "profile_versions", store.KindGateSet: "gate_set_versions"}[kind]
				err = inSavepoint(b.st, func(tx *store.Store) error {
					_, err := tx.Tx().Exec(ctx, `UPDATE `+table+` SET digest = 'sha256:forged'`)
					return err
				})
				require.ErrorContains(t, err, table+" is append-only")
			})
		})
	}

	t.Run("ProfilesAndGateSetsAreApart", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, _, err := b.st.CreateSpec(ctx, store.KindProfile, b.program, version("kv", "sha256:p", 0))
		require.NoError(t, err)
		gates, err := b.st.ListSpecs(ctx, store.KindGateSet, b.program)
		require.NoError(t, err)
		require.Empty(t, gates)
	})
}

// Saves of one spec at the same moment get consecutive version numbers:
// none is lost and none is refused.
func TestSpecVersionsSavedConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	p := newProgram(t, st)
	sp, _, err := st.CreateSpec(ctx, store.KindProfile, p.ID, store.NewSpecVersion{Name: "kv", Spec: []byte(`{}`), Digest: "sha256:0"})
	require.NoError(t, err)

	const saves = 8
	var wg sync.WaitGroup
	versions := make([]int, saves)
	errs := make([]error, saves)
	for i := range saves {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = st.InTx(ctx, func(tx *store.Store) error {
				v, err := tx.AddSpecVersion(ctx, store.KindProfile, p.ID, sp.ID, store.NewSpecVersion{Name: "kv",
					Spec: []byte(fmt.Sprintf(`{"i":%d}`, i)), Digest: fmt.Sprintf("sha256:%d", i+1)})
				versions[i] = v.Version
				return err
			})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	slices.Sort(versions)
	require.Equal(t, []int{2, 3, 4, 5, 6, 7, 8, 9}, versions)
}
