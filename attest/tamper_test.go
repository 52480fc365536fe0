package attest_test

import (
	"testing"

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
	if err != nil {
		t.Fatal(err)
	}
	bundle, keys := attesttest.SampleBundle(t, kr)
	m := attesttest.CheckTampers(t, bundle, keys)
	attesttest.RequireAllCaught(t, m)
}
