package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/attesttest"
)

// `accord verify --keys allowed_signers` said "rotated out at" for a key
// that was revoked: allowed_signers' windows do not say what ended them,
// the comment Accord writes above each line does. With each published form
// of the keys, a bundle that whoever kept a revoked key signed after the
// revocation is refused: "revoked at T (reason)" with allowed_signers and
// keys.json, not a trusted key with keys.pem (the active key alone). One
// signed before the revocation verifies, with a warning that says revoked.
func TestVerifyCommandSaysRevokedAt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kr, err := attest.OpenKeyring(t.TempDir(), attest.KeyringOptions{})
	require.NoError(t, err)
	stolen, err := kr.Active()
	require.NoError(t, err)
	keys, err := kr.PublicKeys()
	require.NoError(t, err)
	made := keys[0].Created
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return path
	}
	bundle := func(name string, at time.Time) string {
		in := attesttest.SampleInput(t, stolen, keys, "7", at)
		var buf bytes.Buffer
		_, err := attest.WriteBundle(ctx, &buf, stolen, in)
		require.NoError(t, err)
		return write(name, buf.Bytes())
	}
	before := bundle("before.tar.gz", made.Add(time.Minute))
	revokedAt := made.Add(time.Hour).UTC().Truncate(time.Second)
	require.NoError(t, kr.Revoke(stolen.KeyID(), "laptop stolen", revokedAt))
	after := bundle("after.tar.gz", revokedAt.Add(time.Hour))

	published, err := kr.PublicKeys()
	require.NoError(t, err)
	keysJSON, err := attest.MarshalKeysJSON(published)
	require.NoError(t, err)
	keysPEM, err := attest.MarshalPEM(published)
	require.NoError(t, err)
	files := map[string]string{
		"allowed_signers": write("allowed_signers", attest.MarshalAllowedSigners(published)),
		"keys.json":       write("keys.json", keysJSON),
		"keys.pem":        write("keys.pem", keysPEM),
	}
	verify := func(file, keysFile string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := cmdVerify(ctx, []string{file, "--keys", keysFile}, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	revoked := "key " + stolen.KeyID() + " was revoked at " + revokedAt.Format(time.RFC3339) + " (laptop stolen)"
	for _, f := range []string{"allowed_signers", "keys.json"} {
		code, _, stderr := verify(after, files[f])
		require.Equal(t, 1, code, f)
		require.Contains(t, stderr, "NOT VERIFIED: ", f)
		require.Contains(t, stderr, revoked+", and this signature is dated "+revokedAt.Add(time.Hour).Format(time.RFC3339), f)
		require.NotContains(t, stderr, "rotated out", f)

		code, stdout, _ := verify(before, files[f])
		require.Equal(t, 0, code, f)
		require.Contains(t, stdout, "REVOKED at "+revokedAt.Format(time.RFC3339)+": laptop stolen", f)
		require.Contains(t, stdout, "WARNING: "+attest.FileManifestSig+": "+revoked+", after this bundle was signed", f)
	}
	for _, b := range []string{before, after} {
		code, _, stderr := verify(b, files["keys.pem"])
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "signed by key "+stolen.KeyID()+", which is not a trusted key")
	}
}
