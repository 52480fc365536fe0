package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

// A key belongs to one account while registered; removing it keeps the
// row, so another account may register it then; another's key cannot be
// removed. A member co-signs a run once, and the record never changes.
func TestSSHKeysAndCosignatures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := txStore(t)
	p := newProgram(t, st)
	erin := newUser(t, st, "erin", &p.Customer)
	mallory := newUser(t, st, "mallory", &p.Vendor)
	fp := "SHA256:" + uniqueName(t, "key")

	k, err := st.AddUserSSHKey(ctx, store.UserSSHKey{UserID: erin, Name: "laptop", PublicKey: "ssh-ed25519 AAAA", Fingerprint: fp})
	require.NoError(t, err)
	require.NotZero(t, k.ID)
	err = inSavepoint(st, func(tx *store.Store) error {
		_, err := tx.AddUserSSHKey(ctx, store.UserSSHKey{UserID: mallory, Name: "mine", PublicKey: "ssh-ed25519 AAAA", Fingerprint: fp})
		return err
	})
	require.ErrorIs(t, err, store.ErrConflict, "a registered key is one account's")
	got, err := st.UserSSHKeyByFingerprint(ctx, fp)
	require.NoError(t, err)
	require.Equal(t, erin, got.UserID)
	list, err := st.ListUserSSHKeys(ctx, erin)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "laptop", list[0].Name)

	run, err := st.CreateRun(ctx, store.NewRun{ProgramID: p.ID, ProfileVersionID: newProfileVersion(t, st, p.ID, "prof").ID, CreatedBy: mallory})
	require.NoError(t, err)
	c, err := st.AddReportCosignature(ctx, store.ReportCosignature{RunID: run, ReportVersion: 2, UserID: erin, OrganizationID: p.Customer,
		SSHKeyID: k.ID, Fingerprint: fp, FileName: "MANIFEST.sha256.customer-erin.sig"})
	require.NoError(t, err)
	err = inSavepoint(st, func(tx *store.Store) error {
		_, err := tx.AddReportCosignature(ctx, store.ReportCosignature{RunID: run, ReportVersion: 3, UserID: erin, OrganizationID: p.Customer,
			SSHKeyID: k.ID, Fingerprint: fp, FileName: "MANIFEST.sha256.customer-erin.sig"})
		return err
	})
	require.ErrorIs(t, err, store.ErrConflict, "one co-signature per member and run")
	err = inSavepoint(st, func(tx *store.Store) error {
		_, err := tx.Tx().Exec(ctx, `UPDATE report_cosignatures SET user_id = $1`, mallory)
		return err
	})
	require.ErrorContains(t, err, "report_cosignatures is append-only")

	_, err = st.RemoveUserSSHKey(ctx, mallory, k.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "another's key")
	removed, err := st.RemoveUserSSHKey(ctx, erin, k.ID)
	require.NoError(t, err)
	require.NotNil(t, removed.RemovedAt)
	_, err = st.UserSSHKeyByFingerprint(ctx, fp)
	require.ErrorIs(t, err, store.ErrNotFound)
	list, err = st.ListUserSSHKeys(ctx, erin)
	require.NoError(t, err)
	require.Empty(t, list)

	// The co-signature still names the removed key.
	cs, err := st.ListReportCosignatures(ctx, run)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.Equal(t, c.ID, cs[0].ID)
	require.Equal(t, "laptop", cs[0].KeyName)
	require.Equal(t, "erin", cs[0].UserName)
	require.Equal(t, "customer", cs[0].OrgKind)
	_, err = st.AddUserSSHKey(ctx, store.UserSSHKey{UserID: mallory, Name: "now mine", PublicKey: "ssh-ed25519 AAAA", Fingerprint: fp})
	require.NoError(t, err)
}
