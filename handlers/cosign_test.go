package handlers

import (
	"bytes"
	"context"
	"html"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/attesttest"
	"github.com/accordlab/accord/store"
)

// sshKey makes a fresh Ed25519 key with the real ssh-keygen.
func sshKey(t *testing.T, comment string) (priv, pub string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "id_ed25519")
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path).CombinedOutput()
	require.NoError(t, err, string(out))
	return path, strings.TrimSpace(string(mustReadFile(t, path+".pub")))
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// sshSign signs a manifest as `ssh-keygen -Y sign` does for co-signing.
func sshSign(t *testing.T, key string, manifest []byte) []byte {
	t.Helper()
	cmd := exec.Command("ssh-keygen", "-Y", "sign", "-f", key, "-n", attest.Namespace)
	cmd.Stdin = bytes.NewReader(manifest)
	sig, err := cmd.Output()
	require.NoError(t, err)
	return sig
}

// Issue 16.4, the attack: a vendor engineer uploads a signature made with a
// fresh key of their own, named "customer-signoff" with a customer's
// e-mail as principal. It is refused with the reason, as is every other
// signature that is not a member of the other organisation's, made with a
// key they registered; the customer's owner, with a registered key, signs
// as the page says, and the page and the bundle name them and their
// organisation.
func TestCoSignaturesClaimNobodyElse(t *testing.T) {
	t.Parallel()
	attesttest.RequireTools(t, "ssh-keygen", "tar", "bash")
	pb := setupProgram(t)
	ctx := context.Background()
	run := pb.signedRun(t) // requested by eng@vendor.example
	base := pb.url("/runs/") + itoa64(run)
	bundle := pb.download(t, pb.viewer, base+"/report.tar.gz")
	manifest := fileOf(t, bundle, "/"+attest.FileManifest)
	cosign := func(c *http.Client, fields map[string]string, sig []byte) (int, string) {
		res, page := pb.postMultipart(t, c, base+"/report/cosign", fields, map[string][]byte{"signature": sig})
		return res.StatusCode, html.UnescapeString(page)
	}
	unchanged := func() {
		t.Helper()
		rep, err := pb.store.RunLatestReport(ctx, run)
		require.NoError(t, err)
		require.Equal(t, 1, rep.Version, "no new bundle version")
		require.Empty(t, rep.Cosigners)
		_, page := pb.get(t, pb.viewer, base+"/report")
		require.Contains(t, elementText(t, page, "cosigners"), "nobody yet")
	}

	// The attack, as it was done.
	vendorKey, vendorPub := sshKey(t, "eng@vendor.example")
	forged := sshSign(t, vendorKey, manifest)
	code, page := cosign(pb.engineer, map[string]string{"name": "customer-signoff",
		"allowed_signers": `own@customer.example namespaces="` + attest.Namespace + `" ` + vendorPub}, forged)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "The co-signature was refused: only a member of Customer (customer), the other organisation of this program, may co-sign run #"+
		itoa64(run)+"; you are of Vendor (vendor), the side that requested the run.")
	unchanged()

	// Registering that key does not make the vendor the other side.
	res, page := pb.postPage(t, pb.engineer, "/ssh-keys", url.Values{"name": {"laptop"}, "public_key": {vendorPub}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
	code, page = cosign(pb.engineer, nil, forged)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "only a member of Customer (customer)")
	unchanged()

	// A customer member with an engineer's role or more, with a key they
	// did not register, or with another's registered key: refused.
	customerKey, customerPub := sshKey(t, "own@customer.example")
	code, page = cosign(pb.owner, nil, sshSign(t, customerKey, manifest))
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "which is not one of your registered SSH signing keys: register the key first")
	code, page = cosign(pb.owner, nil, forged)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "which is not one of your registered SSH signing keys")
	unchanged()
	code, _ = cosign(pb.viewer, nil, forged)
	require.Equal(t, http.StatusForbidden, code, "viewers do not co-sign")

	// The customer's owner registers the key (audited) ...
	res, page = pb.postPage(t, pb.owner, "/ssh-keys", url.Values{"name": {"work laptop"}, "public_key": {customerPub}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
	res, page = pb.postPage(t, pb.owner, "/ssh-keys", url.Values{"name": {"again"}, "public_key": {vendorPub}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "is already registered to an account")
	audit, err := pb.store.ListAudit(ctx, store.AuditFilter{})
	require.NoError(t, err)
	require.True(t, hasAudit(audit, "ssh_key_registered", "own@customer.example"), "registering a key is audited")

	// ... and signs in the unpacked bundle with the command the page shows:
	// a file of its own, MANIFEST.sha256.sig left as it was.
	_, page = pb.get(t, pb.owner, base+"/report")
	command := elementText(t, page, "cosign-command")
	owner, err := pb.store.UserByEmail(ctx, "own@customer.example")
	require.NoError(t, err)
	sigFile := "MANIFEST.sha256.customer-own-" + itoa64(owner.ID) + ".sig"
	require.Equal(t, "ssh-keygen -Y sign -f ~/.ssh/id_ed25519 -n "+attest.Namespace+" < MANIFEST.sha256 > "+sigFile, command)
	dir := attesttest.Extract(t, bundle)
	before := mustReadFile(t, filepath.Join(dir, attest.FileManifestSig))
	_, err = attesttest.Run(dir, strings.Replace(command, "~/.ssh/id_ed25519", customerKey, 1))
	require.NoError(t, err)
	require.Equal(t, before, mustReadFile(t, filepath.Join(dir, attest.FileManifestSig)), "the installation's signature is untouched")
	sig := mustReadFile(t, filepath.Join(dir, sigFile))

	// A signature over something else is refused; this one is accepted.
	code, page = cosign(pb.owner, nil, sshSign(t, customerKey, []byte("another manifest\n")))
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "does not verify over this report's MANIFEST.sha256")
	code, page = cosign(pb.owner, nil, sig)
	require.Equal(t, http.StatusSeeOther, code, page)
	code, page = cosign(pb.owner, nil, sig)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "you have already co-signed this report")

	// The page names the member, their organisation and their key.
	_, page = pb.get(t, pb.viewer, base+"/report")
	require.Contains(t, elementText(t, page, "cosigners"), "own <own@customer.example> of Customer (customer), with their registered key “work laptop”")
	audit, err = pb.store.ListAudit(ctx, store.AuditFilter{ProgramID: &pb.programID})
	require.NoError(t, err)
	require.True(t, hasAudit(audit, "report_cosigned", "own@customer.example"))

	// So does the bundle: accord verify shows them, ssh-keygen checks it
	// (VERIFY.md's co-signature loop), the installation's signature holds.
	cosigned := pb.download(t, pb.viewer, base+"/report.tar.gz")
	keys, err := pb.keyring.KeySet()
	require.NoError(t, err)
	report, err := attest.VerifyBundle(ctx, bytes.NewReader(cosigned), keys)
	require.NoError(t, err)
	require.Len(t, report.CoSignatures, 1)
	c := report.CoSignatures[0]
	require.Equal(t, sigFile, c.File)
	require.Equal(t, "own@customer.example", c.Principal)
	require.Contains(t, c.Signer, "own <own@customer.example>, member of Customer (customer); key \"work laptop\"")
	var text bytes.Buffer
	require.NoError(t, report.WriteText(&text))
	require.Contains(t, text.String(), "member of Customer (customer)")
	dir = attesttest.Extract(t, cosigned)
	out, err := attesttest.Run(dir, attesttest.Procedure(t, dir))
	require.NoError(t, err)
	require.Contains(t, out, `Good "`+attest.Namespace+`" signature for own@customer.example`)
}

func hasAudit(entries []store.AuditEntry, action, actor string) bool {
	for _, e := range entries {
		if e.Action == action && e.ActorLabel == actor {
			return true
		}
	}
	return false
}
