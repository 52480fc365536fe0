package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/attesttest"
	"github.com/accordlab/accord/store"
)

// A judged run is signed: its statements are stored and its report bundle
// verifies offline with attest and with the standard tools; a changed byte
// is caught.
func TestJudgedRunIsSignedAndItsReportVerifies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	gates := b.saveGates(t, quickGates())
	runID := b.submit(t, b.river, b.saveProfile(t, b.quickProfile(100*time.Millisecond)), &gates, nil)
	b.waitFor(t, runID, 90*time.Second, "settle", settled)
	var rep store.RunReport
	require.Eventually(t, func() bool {
		var err error
		rep, err = b.store.RunLatestReport(ctx, runID)
		return err == nil
	}, 60*time.Second, 200*time.Millisecond, "the run gets a signed report")
	atts, err := b.store.RunAttestations(ctx, runID)
	require.NoError(t, err)
	require.Len(t, atts, 2)

	rc, err := b.store.Artifacts().Open(ctx, rep.BundleSHA256)
	require.NoError(t, err)
	bundle, err := io.ReadAll(rc)
	require.NoError(t, err)
	keys, err := b.deps.Keyring.KeySet()
	require.NoError(t, err)
	report, err := attest.VerifyBundle(ctx, bytes.NewReader(bundle), keys)
	require.NoError(t, err)
	require.True(t, report.Manifest.Trusted)
	require.Len(t, report.Attestations, 2)

	// Offline, with the tools an auditor has.
	dir := t.TempDir()
	path := filepath.Join(dir, "bundle.tar.gz")
	require.NoError(t, os.WriteFile(path, bundle, 0o644))
	out, err := exec.Command("tar", "-xzf", path, "-C", dir).CombinedOutput()
	require.NoError(t, err, string(out))
	entries, _ := os.ReadDir(dir)
	root := ""
	for _, e := range entries {
		if e.IsDir() {
			root = filepath.Join(dir, e.Name())
		}
	}
	require.NotEmpty(t, root)
	cmd := exec.Command("sha256sum", "--strict", "-c", "MANIFEST.sha256")
	cmd.Dir = root
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "artifacts/out/02-read/rep-1/fio.json: OK")
	manifest, err := os.Open(filepath.Join(root, "MANIFEST.sha256"))
	require.NoError(t, err)
	defer manifest.Close()
	cmd = exec.Command("ssh-keygen", "-Y", "verify", "-f", "keys/allowed_signers", "-I", "accord-signer", "-n", attest.Namespace, "-s", "MANIFEST.sha256.sig")
	cmd.Dir, cmd.Stdin = root, manifest
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "Good \"accord-report@accordlab\" signature")
	// The program has no rollout decisions: decisions.json is its empty log
	// (a checkpoint at seq 0), and VERIFY.md says so.
	require.NotNil(t, report.Decisions)
	require.Equal(t, 0, report.Decisions.Records)
	verifyMD, err := os.ReadFile(filepath.Join(root, attest.FileVerifyMD))
	require.NoError(t, err)
	require.Contains(t, string(verifyMD), "was signed: it held no decisions yet")
	// The profile and gate set are in it; their digests are the stored versions'.
	require.Equal(t, []string{attest.FileProfile, attest.FileGateSet}, report.Documents)
	run, err := b.store.RunByID(ctx, runID)
	require.NoError(t, err)
	for _, c := range []struct {
		file string
		kind store.SpecKind
		id   *int64
	}{{attest.FileProfile, store.KindProfile, run.ProfileVersionID}, {attest.FileGateSet, store.KindGateSet, run.GateSetVersionID}} {
		doc, err := os.ReadFile(filepath.Join(root, c.file))
		require.NoError(t, err)
		v, err := b.store.GetSpecVersionByID(ctx, c.kind, b.programID, *c.id)
		require.NoError(t, err)
		sum := sha256.Sum256(doc)
		require.Equal(t, v.Digest, "sha256:"+hex.EncodeToString(sum[:]), "%s recomputes the stored version's digest", c.file)
	}
	html, err := os.ReadFile(filepath.Join(root, "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(html), "PASS")
	require.NotContains(t, string(html), "<script")

	require.Contains(t, string(html), "Customer</span> (customer)", "the report names the customer organisation")
	require.Contains(t, string(html), `<figure id="fig-fio">`, "the report draws the fio latency percentiles")
	require.Contains(t, string(html), `<svg xmlns="http://www.w3.org/2000/svg"`)

	// Every change, removal and added file of this real bundle (the probe's
	// own artifacts/MANIFEST.sha256 in it) is caught by VERIFY.md's
	// standard-tool procedure and by accord verify.
	_, err = os.Stat(filepath.Join(root, "artifacts", "MANIFEST.sha256"))
	require.NoError(t, err, "the probe's run folder has a manifest of its own")
	// Every envelope verifies with securesystemslib's DSSE, every statement
	// reads with in-toto's own bindings.
	require.Equal(t, 3, attesttest.IndependentCheck(t, root, keys), "2 statements, the empty log's checkpoint")
	m := attesttest.CheckTampers(t, bundle, keys)
	attesttest.RequireAllCaught(t, m)
	require.Greater(t, len(m.Outcomes), 80)
}
