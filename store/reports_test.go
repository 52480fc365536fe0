package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

func TestReports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st     *store.Store
		f      runFixture
		run    int64
		bundle string // a stored blob's digest
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		f := newRunFixture(t, st)
		digest := putArtifact(t, st, []byte("a report bundle "+uniqueName(t, "b")))
		return &testBundle{st: st, f: f, run: f.run(t, st), bundle: digest}
	}

	t.Run("ReSigningReplacesAStatement", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, a := range []store.RunAttestation{
			{RunID: b.run, Name: "test-result", PredicateType: "https://in-toto.io/attestation/test-result/v0.1", KeyID: "k1", Envelope: json.RawMessage(`{"sig":"1"}`)},
			{RunID: b.run, Name: "benchmark", PredicateType: "https://accord.dev/benchmark/v1", KeyID: "k1", Envelope: json.RawMessage(`{"sig":"2"}`)},
			{RunID: b.run, Name: "test-result", PredicateType: "https://in-toto.io/attestation/test-result/v0.1", KeyID: "k2", Envelope: json.RawMessage(`{"sig":"3"}`)},
		} {
			require.NoError(t, b.st.SaveAttestation(ctx, a))
		}
		list, err := b.st.RunAttestations(ctx, b.run)
		require.NoError(t, err)
		require.Len(t, list, 2)
		require.Equal(t, []string{"benchmark", "test-result"}, []string{list[0].Name, list[1].Name})
		require.Equal(t, "k2", list[1].KeyID)
		require.JSONEq(t, `{"sig":"3"}`, string(list[1].Envelope))
		none, err := b.st.RunAttestations(ctx, b.f.run(t, b.st))
		require.NoError(t, err)
		require.Empty(t, none)
	})

	t.Run("BundlesAreVersionedPerRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.st.RunLatestReport(ctx, b.run)
		require.ErrorIs(t, err, store.ErrNotFound)
		signer := b.f.member(t, b.st, "cosigner", store.RoleApprover)
		first, err := b.st.AddRunReport(ctx, store.RunReport{RunID: b.run, BundleSHA256: b.bundle, Size: 10, ManifestSHA256: "m1", KeyID: "k1"})
		require.NoError(t, err)
		require.Equal(t, 1, first.Version)
		second, err := b.st.AddRunReport(ctx, store.RunReport{RunID: b.run, BundleSHA256: b.bundle, Size: 11, ManifestSHA256: "m2", KeyID: "k1",
			Cosigners: []string{"SHA256:cosigner"}, CreatedBy: &signer})
		require.NoError(t, err)
		require.Equal(t, 2, second.Version)
		otherRun := b.f.run(t, b.st)
		theirs, err := b.st.AddRunReport(ctx, store.RunReport{RunID: otherRun, BundleSHA256: b.bundle, Size: 10, ManifestSHA256: "m1", KeyID: "k1"})
		require.NoError(t, err)
		require.Equal(t, 1, theirs.Version, "each run counts its own")

		latest, err := b.st.RunLatestReport(ctx, b.run)
		require.NoError(t, err)
		require.Equal(t, second.ID, latest.ID)
		require.Equal(t, []string{"SHA256:cosigner"}, latest.Cosigners)
		require.Equal(t, &signer, latest.CreatedBy)
		r, err := b.st.RunByID(ctx, b.run)
		require.NoError(t, err)
		require.True(t, r.HasReport)
	})

	t.Run("ABundleIsAStoredArtifactAndNeverChanges", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		err := inSavepoint(b.st, func(tx *store.Store) error {
			_, err := tx.AddRunReport(ctx, store.RunReport{RunID: b.run, BundleSHA256: "0000000000000000000000000000000000000000000000000000000000000000", Size: 1, ManifestSHA256: "m", KeyID: "k"})
			return err
		})
		require.ErrorContains(t, err, "run_reports_bundle_sha256_fkey")
		rep, err := b.st.AddRunReport(ctx, store.RunReport{RunID: b.run, BundleSHA256: b.bundle, Size: 10, ManifestSHA256: "m1", KeyID: "k1"})
		require.NoError(t, err)
		for _, sql := range []string{`UPDATE run_reports SET key_id = 'forged' WHERE id = $1`, `DELETE FROM run_reports WHERE id = $1`} {
			err := inSavepoint(b.st, func(tx *store.Store) error {
				_, err := tx.Tx().Exec(ctx, sql, rep.ID)
				return err
			})
			require.ErrorContains(t, err, "run_reports is append-only", sql)
		}
	})
}
