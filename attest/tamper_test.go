package attest_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/attesttest"
)

// Every single-file change, every removal and every added file anywhere in
// a bundle is caught by VERIFY.md's standard-tool procedure (sha256sum,
// find, ssh-keygen, openssl, run as VERIFY.md says) and by accord verify.
// The bundle holds an artifacts/MANIFEST.sha256 of its own, as the probe's
// run folder does.
func TestEveryTamperIsCaughtByBothProcedures(t *testing.T) {
	t.Parallel()
	kr, err := attest.OpenKeyring(t.TempDir(), attest.KeyringOptions{})
	require.NoError(t, err)
	bundle, keys := attesttest.SampleBundle(t, kr)
	m := attesttest.CheckTampers(t, bundle, keys)
	attesttest.RequireAllCaught(t, m)
}

// Every envelope of a bundle verifies with securesystemslib's DSSE, every
// statement reads as in-toto's own bindings read it; a changed envelope is
// refused by that implementation too.
func TestEnvelopesVerifyWithAnIndependentImplementation(t *testing.T) {
	t.Parallel()
	kr, err := attest.OpenKeyring(t.TempDir(), attest.KeyringOptions{})
	require.NoError(t, err)
	bundle, keys := attesttest.SampleBundle(t, kr)
	dir := attesttest.Extract(t, bundle)
	require.Equal(t, 5, attesttest.IndependentCheck(t, dir, keys), "2 statements, 2 decision records, 1 checkpoint")

	env, err := os.ReadFile(filepath.Join(dir, "attestations", "benchmark.dsse.json"))
	require.NoError(t, err)
	var doc dsse.Envelope
	require.NoError(t, json.Unmarshal(env, &doc))
	payload, err := base64.StdEncoding.DecodeString(doc.Payload)
	require.NoError(t, err)
	doc.Payload = base64.StdEncoding.EncodeToString(attesttest.ChangeBytes(payload))
	_, err = attesttest.IndependentVerifier(t, keys).Verify(context.Background(), &doc)
	require.Error(t, err, "securesystemslib accepts a changed statement")
}
