package attest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// A co-signed bundle (co-signed as VERIFY.md says, with ssh-keygen) holds
// to the same rule: every change, removal and addition is caught by both
// procedures, the co-signature and its key line included. The name before
// the co-signer's key is the one thing the installation never signed (the
// files are added after it signed): changing it is not caught, and
// accord verify says the name is the file's claim.
func TestEveryTamperOfACoSignedBundleIsCaught(t *testing.T) {
	t.Parallel()
	attesttest.RequireTools(t, "ssh-keygen")
	kr, err := attest.OpenKeyring(t.TempDir(), attest.KeyringOptions{})
	require.NoError(t, err)
	bundle, keys := attesttest.SampleBundle(t, kr)
	dir := attesttest.Extract(t, bundle)
	key := filepath.Join(t.TempDir(), "id_ed25519")
	keygen, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "erin@customer", "-f", key).CombinedOutput()
	require.NoError(t, err, string(keygen))
	cosign := attesttest.Blocks(t, dir, "sh-cosign")
	require.Len(t, cosign, 1)
	out, err := attesttest.Run(dir, cosign[0], "KEY="+key, "NAME=customer", "WHO=erin@customer.example")
	require.NoError(t, err, out)
	cosigned := attesttest.Pack(t, dir)

	m := attesttest.CheckTampers(t, cosigned, keys)
	attesttest.RequireAllCaught(t, m)
	changed := 0
	for _, o := range m.Outcomes {
		if o.Tamper.Kind == "change" && strings.HasPrefix(o.Tamper.File, attest.FileManifest+".customer.") {
			changed++
		}
	}
	require.Equal(t, 2, changed, "the co-signature and its key line were changed, and caught")

	signers := filepath.Join(dir, attest.FileManifest+".customer.allowed_signers")
	line, err := os.ReadFile(signers)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(signers, []byte(strings.Replace(string(line), "erin@customer.example", "ceo@customer.example", 1)), 0o644))
	out, err = attesttest.Run(dir, attesttest.Procedure(t, dir))
	require.NoError(t, err, "the name before the key is not signed by anyone: %s", out)
	report, err := attest.VerifyBundle(context.Background(), bytes.NewReader(attesttest.Pack(t, dir)), keys)
	require.NoError(t, err)
	var text bytes.Buffer
	require.NoError(t, report.WriteText(&text))
	require.Contains(t, text.String(), "by ceo@customer.example (as its unsigned allowed_signers file says)")
	require.Contains(t, text.String(), "NOT a trusted key")
}
