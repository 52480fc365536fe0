package attest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type bundleTestBundle struct {
	keyring *Keyring
	signer  *Signer
	keys    *KeySet
	bundle  []byte
	runID   string
}

func setupBundle(t *testing.T) *bundleTestBundle {
	t.Helper()
	kr, err := OpenKeyring(t.TempDir(), KeyringOptions{Now: keyClock})
	require.NoError(t, err)
	s, err := kr.Active()
	require.NoError(t, err)
	pub, err := kr.PublicKeys()
	require.NoError(t, err)
	decisions := testDecisionLog(t, s, 3)
	bundle := writeBundle(t, s, testInput(t, s, pub, "42", decisions))
	ks, err := kr.KeySet()
	require.NoError(t, err)
	return &bundleTestBundle{keyring: kr, signer: s, keys: ks, bundle: bundle, runID: "42"}
}

func TestBundleVerifies(t *testing.T) {
	t.Parallel()
	tb := setupBundle(t)

	report, err := VerifyBundle(context.Background(), bytes.NewReader(tb.bundle), tb.keys)
	require.NoError(t, err)
	require.Equal(t, "42", report.RunID)
	require.False(t, report.SelfTrusted)
	require.Equal(t, tb.signer.KeyID(), report.Manifest.KeyID)
	require.Equal(t, KeyActive, report.Manifest.Status)
	require.True(t, report.Manifest.Trusted)

	var names []string
	for _, f := range report.Files {
		names = append(names, f.Name)
	}
	for _, want := range []string{FileVerifyMD, FileReportHTML, FileSummary, FileFacts, FileEvaluation, FileDecisions,
		FileProfile, FileGateSet, tb.signer.PublicKey().PEMFile(),
		FileKeysJSON, FileKeysPEM, FileSignerPEM, FileAllowedSigners, FileBundleJSON,
		"artifacts/fio/kv-cache-4k.json", "artifacts/inference/requests.csv", "artifacts/probe/events.jsonl", "artifacts/status.json",
		"attestations/benchmark.dsse.json", "attestations/test-result.dsse.json"} {
		require.Contains(t, names, want)
	}
	require.Len(t, report.Files, 20, "every file the manifest lists, the attestations too")
	require.Equal(t, []string{FileProfile, FileGateSet}, report.Documents, "the profile and gate set hash to the statement's digests")

	require.Len(t, report.Attestations, 2)
	types := []string{report.Attestations[0].PredicateType, report.Attestations[1].PredicateType}
	require.ElementsMatch(t, []string{TestResultPredicate, BenchmarkPredicateType}, types)
	for _, a := range report.Attestations {
		require.Equal(t, []string{tb.signer.KeyID()}, a.KeyIDs)
		require.Equal(t, 4, a.Subjects)
	}
	require.NotNil(t, report.Decisions)
	require.Equal(t, 3, report.Decisions.Records)

	var text bytes.Buffer
	require.NoError(t, report.WriteText(&text))
	require.Contains(t, text.String(), tb.signer.KeyID())
	require.Contains(t, text.String(), "20 files match the manifest")

	// Without trusted keys the bundle's own keys are used, and said so.
	self, err := VerifyBundle(context.Background(), bytes.NewReader(tb.bundle), nil)
	require.NoError(t, err)
	require.True(t, self.SelfTrusted)
}

func TestWriteBundleRefusesInconsistentInput(t *testing.T) {
	t.Parallel()
	tb := setupBundle(t)
	pub, err := tb.keyring.PublicKeys()
	require.NoError(t, err)

	in := testInput(t, tb.signer, pub, "42", nil)
	in.Facts = []byte(`{"hostname":"another-host"}`)
	_, err = WriteBundle(context.Background(), &bytes.Buffer{}, tb.signer, in)
	require.ErrorContains(t, err, "host facts")

	in = testInput(t, tb.signer, pub, "42", nil)
	in.Artifacts[1].Data = append(bytes.Clone(in.Artifacts[1].Data), '!')
	in.Artifacts[1].SHA256 = ""
	_, err = WriteBundle(context.Background(), &bytes.Buffer{}, tb.signer, in)
	require.ErrorContains(t, err, "attested")

	in = testInput(t, tb.signer, pub, "42", nil)
	in.Artifacts = append(in.Artifacts, Artifact{Name: "../escape", Data: []byte("x")})
	_, err = WriteBundle(context.Background(), &bytes.Buffer{}, tb.signer, in)
	require.ErrorContains(t, err, "contains . or ..")

	// A gated run's gate set document goes with its profile's; a gate set
	// never goes alone.
	in = testInput(t, tb.signer, pub, "42", nil)
	in.GateSet = nil
	_, err = WriteBundle(context.Background(), &bytes.Buffer{}, tb.signer, in)
	require.ErrorContains(t, err, "its document goes with the profile's")
	in = testInput(t, tb.signer, pub, "42", nil)
	in.Profile = nil
	_, err = WriteBundle(context.Background(), &bytes.Buffer{}, tb.signer, in)
	require.ErrorContains(t, err, "a gate set document without the profile's")
}

// The commands of VERIFY.md, run verbatim with the real tools, pass on a
// good bundle, and each tool refuses what it checks when tampered with.
func TestVerifyMarkdownCommandsWithRealTools(t *testing.T) {
	t.Parallel()
	requireTools(t, "bash", "tar", "sha256sum", "ssh-keygen", "openssl", "base64", "grep", "cut", "find", "diff")
	tb := setupBundle(t)
	dir := extract(t, tb.bundle)
	blocks := verifyBlocks(t, dir, "sh")
	require.Len(t, blocks, 5) // sha256sum, ssh-keygen, co-signatures, openssl, profile and gate set
	require.Contains(t, blocks[0], "sha256sum --strict -c MANIFEST.sha256")
	require.Contains(t, blocks[1], "ssh-keygen -Y verify -f keys/allowed_signers -I accord-signer -n accord-report@accordlab -Overify-time=20260314102653Z -s MANIFEST.sha256.sig < MANIFEST.sha256")
	require.Contains(t, blocks[3], "openssl dgst -sha256 -verify keys/signer.pem")

	for i, b := range blocks {
		out, err := runBlock(dir, b)
		require.NoError(t, err, "block %d", i)
		switch i {
		case 3:
			require.Equal(t, 2, strings.Count(out, "Verified OK"), out)
		case 4: // the profile's name has quotes, braces and a backslash in it
			require.Equal(t, "profile.json: OK\ngate-set.json: OK\n", out)
		}
	}

	// The profile or gate set document changed and the manifest made to
	// match (as if re-signed): the statement's digest still refuses it.
	for _, doc := range []string{FileProfile, FileGateSet} {
		changed := extract(t, tb.bundle)
		flipFile(t, filepath.Join(changed, doc))
		out, err := runBlock(changed, blocks[4])
		require.Error(t, err, out)
		require.Contains(t, out, doc+": FAILED")
	}

	// Each file changed in turn: the tool that checks it refuses.
	_, entries := readEntries(t, tb.bundle)
	for _, e := range entries {
		block := 0 // sha256sum
		switch {
		case e.Name == FileProfile || e.Name == FileGateSet:
			block = 4 // against the statement
		case e.Name == FileManifest || e.Name == FileManifestSig:
			block = 1 // ssh-keygen
		case strings.HasPrefix(e.Name, "attestations/"):
			block = 3 // openssl
		}
		changed := extract(t, tb.bundle)
		flipFile(t, filepath.Join(changed, e.Name))
		out, err := runBlock(changed, blocks[block])
		require.Error(t, err, "%s changed, block %d passed: %s", e.Name, block, out)
		if block == 0 {
			require.Contains(t, out, e.Name+": FAILED")
		}
	}

	// A validly signed statement swapped in for another, or one dropped:
	// openssl still verifies what is there, sha256sum refuses.
	swapped := extract(t, tb.bundle)
	other, err := os.ReadFile(filepath.Join(swapped, "attestations/test-result.dsse.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(swapped, "attestations/benchmark.dsse.json"), other, 0o644))
	_, err = runBlock(swapped, blocks[3])
	require.NoError(t, err, "each envelope on its own is validly signed")
	out, err := runBlock(swapped, blocks[0])
	require.Error(t, err, out)
	require.Contains(t, out, "attestations/benchmark.dsse.json: FAILED")
	dropped := extract(t, tb.bundle)
	require.NoError(t, os.Remove(filepath.Join(dropped, "attestations/benchmark.dsse.json")))
	out, err = runBlock(dropped, blocks[0])
	require.Error(t, err, out)
	require.Contains(t, out, "attestations/benchmark.dsse.json")

	// The file list check finds an added file.
	added := extract(t, tb.bundle)
	require.NoError(t, os.WriteFile(filepath.Join(added, "artifacts/extra.csv"), []byte("1\n"), 0o644))
	out, err = runBlock(added, blocks[0])
	require.Error(t, err)
	require.Contains(t, out, "artifacts/extra.csv")
}

// flipFile changes one letter in the middle of a file (swapping its case,
// so base64 stays base64).
func flipFile(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, flipByte(data), 0o644))
}

func flipByte(data []byte) []byte {
	out := bytes.Clone(data)
	for i := len(out) / 2; i < len(out); i++ {
		c := out[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			out[i] ^= 0x20
			return out
		}
	}
	out[len(out)/2] ^= 0x01
	return out
}

func requireTamper(t *testing.T, err error, file string) {
	t.Helper()
	require.Error(t, err)
	var te *TamperError
	require.True(t, errors.As(err, &te), "not a TamperError: %v", err)
	require.Contains(t, err.Error(), file)
}

func TestBundleTamperingIsDetected(t *testing.T) {
	t.Parallel()
	tb := setupBundle(t)
	_, entries := readEntries(t, tb.bundle)
	verify := func(b []byte) error {
		_, err := VerifyBundle(context.Background(), bytes.NewReader(b), tb.keys)
		return err
	}

	t.Run("flip a byte in each file", func(t *testing.T) {
		for _, e := range entries {
			bad := rewrite(t, tb.bundle, func(es []tarEntry) []tarEntry {
				for i := range es {
					if es[i].Name == e.Name {
						es[i].Data = flipByte(es[i].Data)
					}
				}
				return es
			})
			requireTamper(t, verify(bad), e.Name)
		}
	})

	t.Run("drop each file", func(t *testing.T) {
		for _, e := range entries {
			bad := rewrite(t, tb.bundle, func(es []tarEntry) []tarEntry {
				return slices.DeleteFunc(es, func(x tarEntry) bool { return x.Name == e.Name })
			})
			requireTamper(t, verify(bad), e.Name)
		}
	})

	t.Run("swap two files", func(t *testing.T) {
		for _, pair := range [][2]string{
			{"artifacts/status.json", "artifacts/fio/kv-cache-4k.json"},
			{FileSummary, FileEvaluation},
			{"attestations/benchmark.dsse.json", "attestations/test-result.dsse.json"},
		} {
			bad := rewrite(t, tb.bundle, func(es []tarEntry) []tarEntry {
				a := slices.IndexFunc(es, func(x tarEntry) bool { return x.Name == pair[0] })
				b := slices.IndexFunc(es, func(x tarEntry) bool { return x.Name == pair[1] })
				es[a].Data, es[b].Data = es[b].Data, es[a].Data
				return es
			})
			err := verify(bad)
			require.Error(t, err)
			require.True(t, strings.Contains(err.Error(), pair[0]) || strings.Contains(err.Error(), pair[1]), err.Error())
		}
	})

	t.Run("add a file", func(t *testing.T) {
		for _, name := range []string{"artifacts/extra.bin", "notes.txt", "attestations/extra.dsse.json", "MANIFEST.sha256.mallory.sig", "MANIFEST.sha256.x.allowed_signers"} {
			bad := rewrite(t, tb.bundle, func(es []tarEntry) []tarEntry {
				return append(es, tarEntry{Name: name, Data: []byte("extra\n")})
			})
			requireTamper(t, verify(bad), name)
		}
	})

	t.Run("unsafe archive entries", func(t *testing.T) {
		for _, name := range []string{"../evil", "artifacts/../../evil", "/abs"} {
			bad := rewrite(t, tb.bundle, func(es []tarEntry) []tarEntry {
				return append(es, tarEntry{Name: name, Data: []byte("x")})
			})
			require.Error(t, verify(bad), name)
		}
		bad := rewrite(t, tb.bundle, func(es []tarEntry) []tarEntry {
			return append(es, tarEntry{Name: FileSummary, Data: []byte("{}")})
		})
		requireTamper(t, verify(bad), FileSummary)
	})
}

// An attacker who replaces the keys and re-signs everything with their own
// key is refused by verification against the published keys.
func TestBundleWithReplacedKeysIsRefused(t *testing.T) {
	t.Parallel()
	requireTools(t, "ssh-keygen", "bash", "tar", "sha256sum")
	tb := setupBundle(t)

	// Only the allowed_signers file replaced: the manifest catches it.
	mallory, err := OpenKeyring(t.TempDir(), KeyringOptions{Now: keyClock})
	require.NoError(t, err)
	ms, err := mallory.Active()
	require.NoError(t, err)
	onlyKeys := rewrite(t, tb.bundle, func(es []tarEntry) []tarEntry {
		for i := range es {
			if es[i].Name == FileAllowedSigners {
				es[i].Data = MarshalAllowedSigners([]PublicKey{ms.PublicKey()})
			}
		}
		return es
	})
	_, err = VerifyBundle(context.Background(), bytes.NewReader(onlyKeys), tb.keys)
	requireTamper(t, err, FileAllowedSigners)
	dir := extract(t, onlyKeys)
	out, err := runBlock(dir, verifyBlocks(t, dir, "sh")[0])
	require.Error(t, err)
	require.Contains(t, out, FileAllowedSigners+": FAILED")

	// Everything re-signed with Mallory's key and keys.
	forged := writeBundle(t, ms, testInput(t, ms, []PublicKey{ms.PublicKey()}, "42", nil))
	_, err = VerifyBundle(context.Background(), bytes.NewReader(forged), tb.keys)
	requireTamper(t, err, FileManifestSig)
	require.ErrorContains(t, err, FileAllowedSigners)

	// ssh-keygen with the installation's published allowed_signers refuses
	// it too (the bundle's own copy would not: VERIFY.md says so).
	dir = extract(t, forged)
	published := filepath.Join(t.TempDir(), "allowed_signers")
	pub, err := tb.keyring.PublicKeys()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(published, MarshalAllowedSigners(pub), 0o644))
	cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", published, "-I", Principal, "-n", Namespace, "-s", FileManifestSig)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(mustRead(t, filepath.Join(dir, FileManifest)))
	out2, err := cmd.CombinedOutput()
	require.Error(t, err, string(out2))
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// A key's whole life, as three verifiers see it with the installation's
// published keys: ssh-keygen (VERIFY.md's command with the published
// allowed_signers), openssl (the published keys.pem and each key's own PEM)
// and accord verify (the published keys.json). Key A signs, is rotated out
// for B; B signs, is revoked (C takes over). Signatures made while a key
// was in use verify; A's signature dated after the rotation and B's dated
// after the revocation (whoever still holds the key) are refused.
func TestKeyLifeAcrossVerifiers(t *testing.T) {
	t.Parallel()
	requireTools(t, "ssh-keygen", "openssl", "bash", "tar")
	t0 := keyClock()
	now := t0
	kr, err := OpenKeyring(t.TempDir(), KeyringOptions{Now: func() time.Time { return now }})
	require.NoError(t, err)
	keyA, err := kr.Active()
	require.NoError(t, err)
	sign := func(s *Signer, keys []PublicKey, runID string, at time.Time) []byte {
		in := testInput(t, s, keys, runID, emptyLog(t, s, at))
		in.Created = at
		return writeBundle(t, s, in)
	}
	published := func() []PublicKey {
		keys, err := kr.PublicKeys()
		require.NoError(t, err)
		return keys
	}

	byA := sign(keyA, published(), "1", t0.Add(time.Hour))
	rotated := t0.Add(2 * time.Hour)
	_, err = kr.Rotate(rotated)
	require.NoError(t, err)
	keyB, err := kr.Active()
	require.NoError(t, err)
	byB := sign(keyB, published(), "2", rotated.Add(time.Hour))
	// Whoever kept A's private key signs after the rotation, with A's own keys.
	byALate := sign(keyA, []PublicKey{keyA.PublicKey()}, "3", rotated.Add(30*time.Minute))

	revoked := rotated.Add(3 * time.Hour)
	require.NoError(t, kr.Revoke(keyB.KeyID(), "laptop stolen", revoked))
	byBLate := sign(keyB, []PublicKey{keyB.PublicKey()}, "4", revoked.Add(time.Hour))
	keyC, err := kr.Active()
	require.NoError(t, err)
	byC := sign(keyC, published(), "5", revoked.Add(2*time.Hour))

	keys := published()
	require.Len(t, keys, 3)
	keysDir := t.TempDir()
	allowedSigners := filepath.Join(keysDir, "allowed_signers")
	require.NoError(t, os.WriteFile(allowedSigners, MarshalAllowedSigners(keys), 0o644))
	keysPEM, err := MarshalPEM(keys)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(keysDir, "keys.pem"), keysPEM, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(keysDir, "keys"), 0o755))
	for _, k := range keys {
		p, err := k.PEM()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(keysDir, k.PEMFile()), p, 0o644))
	}
	keysJSON, err := MarshalKeysJSON(keys)
	require.NoError(t, err)
	trusted, err := ParseKeysJSON(keysJSON)
	require.NoError(t, err)

	// ssh-keygen: VERIFY.md's manifest check with the published
	// allowed_signers in place of the bundle's own, as VERIFY.md says.
	sshKeygen := func(bundle []byte) error {
		dir := extract(t, bundle)
		block := strings.Replace(verifyBlocks(t, dir, "sh")[1], "-f "+FileAllowedSigners, "-f "+allowedSigners, 1)
		_, err := runBlock(dir, block)
		return err
	}
	// openssl: the benchmark envelope against one PEM file.
	openssl := func(bundle []byte, pemFile string) error {
		dir := extract(t, bundle)
		block := strings.Replace(verifyBlocks(t, dir, "sh")[3], "-verify "+FileSignerPEM, "-verify "+pemFile, 1)
		_, err := runBlock(dir, block)
		return err
	}
	// accord verify with each published form of the keys: keys.json,
	// allowed_signers (its windows, and the comment above each line that
	// says whether a rotation or a revocation ended it) and keys.pem (the
	// active key alone).
	trustedAs := map[string]*KeySet{"keys.json": trusted}
	for _, f := range []string{"allowed_signers", "keys.pem"} {
		ks, err := ParseTrustedKeys(mustRead(t, filepath.Join(keysDir, f)))
		require.NoError(t, err)
		trustedAs[f] = ks
	}
	accordVerifyWith := func(bundle []byte, keysFile string) (string, error) {
		path := filepath.Join(t.TempDir(), "bundle.tar.gz")
		require.NoError(t, os.WriteFile(path, bundle, 0o644))
		var out bytes.Buffer
		err := VerifyFile(context.Background(), path, trustedAs[keysFile], &out)
		return out.String(), err
	}
	accordVerify := func(bundle []byte) (string, error) { return accordVerifyWith(bundle, "keys.json") }
	ownPEM := func(s *Signer) string { return filepath.Join(keysDir, s.PublicKey().PEMFile()) }
	activePEM := filepath.Join(keysDir, "keys.pem")

	for _, c := range []struct {
		name       string
		bundle     []byte
		signer     *Signer
		accordErr  error
		accordSays string
	}{
		{"A before its rotation", byA, keyA, nil, "rotated out at " + rotated.Format(time.RFC3339)},
		{"A after its rotation", byALate, keyA, ErrRotatedOutKey, "was rotated out at " + rotated.Format(time.RFC3339)},
		{"B before its revocation", byB, keyB, nil, "REVOKED at " + revoked.Format(time.RFC3339) + ": laptop stolen"},
		{"B after its revocation", byBLate, keyB, ErrRevokedKey, "was revoked at " + revoked.Format(time.RFC3339) + " (laptop stolen)"},
		{"C, active", byC, keyC, nil, "trusted, active"},
	} {
		valid := c.accordErr == nil
		err := sshKeygen(c.bundle)
		require.Equal(t, valid, err == nil, "%s: ssh-keygen: %v", c.name, err)

		// openssl reads bytes, not times: the key's own PEM verifies what
		// it signed; keys.pem (the active key only) refuses the others.
		require.NoError(t, openssl(c.bundle, ownPEM(c.signer)), "%s: openssl with its own PEM", c.name)
		err = openssl(c.bundle, activePEM)
		require.Equal(t, c.signer == keyC, err == nil, "%s: openssl with keys.pem: %v", c.name, err)

		for _, keysFile := range []string{"keys.json", "allowed_signers"} {
			out, err := accordVerifyWith(c.bundle, keysFile)
			if valid {
				require.NoError(t, err, "%s with %s", c.name, keysFile)
			} else {
				require.ErrorIs(t, err, c.accordErr, "%s with %s", c.name, keysFile)
				out += err.Error()
			}
			require.Contains(t, out, c.accordSays, "%s with %s", c.name, keysFile)
		}
		// keys.pem holds the active key alone: every other key's bundle is
		// refused, the revoked key's above all.
		out, err := accordVerifyWith(c.bundle, "keys.pem")
		if c.signer == keyC {
			require.NoError(t, err, c.name)
			require.Contains(t, out, "trusted, active")
		} else {
			require.ErrorContains(t, err, "is not a trusted key", "%s with keys.pem", c.name)
		}
	}
	out, err := accordVerify(byB)
	require.NoError(t, err)
	require.Contains(t, out, "WARNING: "+FileManifestSig+": key "+keyB.KeyID()+" was revoked at "+revoked.Format(time.RFC3339)+" (laptop stolen), after this bundle was signed")
}

// Co-signing as the other side's engineer does it: VERIFY.md's co-sign
// commands with a key made by ssh-keygen, the directory packed again with tar.
func TestCoSigningWithSSHKeygen(t *testing.T) {
	t.Parallel()
	requireTools(t, "ssh-keygen", "bash", "tar")
	tb := setupBundle(t)
	dir := extract(t, tb.bundle)

	keyDir := t.TempDir()
	key := filepath.Join(keyDir, "id_ed25519")
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "erin@customer", "-f", key).CombinedOutput()
	require.NoError(t, err, string(out))
	cosign := verifyBlocks(t, dir, "sh-cosign")
	require.Len(t, cosign, 1)
	_, err = runBlock(dir, cosign[0], "KEY="+key, "NAME=customer", "WHO=erin@customer.example")
	require.NoError(t, err)

	// VERIFY.md's own checks pass, the co-signature loop included.
	for i, b := range verifyBlocks(t, dir, "sh") {
		_, err := runBlock(dir, b)
		require.NoError(t, err, "block %d", i)
	}

	cosigned := pack(t, dir)
	report, err := VerifyBundle(context.Background(), bytes.NewReader(cosigned), tb.keys)
	require.NoError(t, err)
	require.Len(t, report.CoSignatures, 1)
	cs := report.CoSignatures[0]
	require.Equal(t, "MANIFEST.sha256.customer.sig", cs.File)
	require.Equal(t, "erin@customer.example", cs.Principal)
	require.Equal(t, AlgEd25519, cs.Algorithm)
	require.False(t, cs.Trusted, "the co-signer's key is not among the trusted keys yet")

	// Once the co-signer's key is pinned, the co-signature is trusted.
	signersLine := mustRead(t, filepath.Join(dir, "MANIFEST.sha256.customer.allowed_signers"))
	cosigners, err := ParseTrustedKeys(signersLine)
	require.NoError(t, err)
	both := NewKeySet(append(tb.keys.Keys(), cosigners.Keys()...)...)
	report, err = VerifyBundle(context.Background(), bytes.NewReader(cosigned), both)
	require.NoError(t, err)
	require.True(t, report.CoSignatures[0].Trusted)

	// A co-signature in another namespace, or over another manifest, fails.
	wrongNS := filepath.Join(keyDir, "wrong.sig")
	cmd := exec.Command("ssh-keygen", "-Y", "sign", "-f", key, "-n", "file")
	cmd.Stdin = bytes.NewReader(mustRead(t, filepath.Join(dir, FileManifest)))
	sigOut, err := cmd.Output()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(wrongNS, sigOut, 0o644))
	bad := rewrite(t, cosigned, func(es []tarEntry) []tarEntry {
		for i := range es {
			if es[i].Name == "MANIFEST.sha256.customer.sig" {
				es[i].Data = sigOut
			}
		}
		return es
	})
	_, err = VerifyBundle(context.Background(), bytes.NewReader(bad), tb.keys)
	requireTamper(t, err, "MANIFEST.sha256.customer.sig")
}

// The server's path: a co-signature uploaded by the other side, added with
// AddCoSignature; an ECDSA key made by ssh-keygen this time.
func TestAddCoSignature(t *testing.T) {
	t.Parallel()
	requireTools(t, "ssh-keygen")
	tb := setupBundle(t)
	keyDir := t.TempDir()
	key := filepath.Join(keyDir, "id_ecdsa")
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ecdsa", "-b", "256", "-N", "", "-f", key).CombinedOutput()
	require.NoError(t, err, string(out))

	_, entries := readEntries(t, tb.bundle)
	manifest := entries[slices.IndexFunc(entries, func(e tarEntry) bool { return e.Name == FileManifest })].Data
	cmd := exec.Command("ssh-keygen", "-Y", "sign", "-f", key, "-n", Namespace)
	cmd.Stdin = bytes.NewReader(manifest)
	sig, err := cmd.Output()
	require.NoError(t, err)
	line := []byte(`vendor-qa namespaces="` + Namespace + `" ` + string(mustRead(t, key+".pub")))

	var cosigned bytes.Buffer
	require.NoError(t, AddCoSignature(context.Background(), bytes.NewReader(tb.bundle), &cosigned,
		CoSignature{Name: "vendor-qa", Signature: sig, AllowedSigners: line}))
	report, err := VerifyBundle(context.Background(), bytes.NewReader(cosigned.Bytes()), tb.keys)
	require.NoError(t, err)
	require.Len(t, report.CoSignatures, 1)
	require.Equal(t, "vendor-qa", report.CoSignatures[0].Principal)

	// A signature over something else, or by a key the line does not name, is refused.
	cmd = exec.Command("ssh-keygen", "-Y", "sign", "-f", key, "-n", Namespace)
	cmd.Stdin = strings.NewReader("another manifest\n")
	other, err := cmd.Output()
	require.NoError(t, err)
	err = AddCoSignature(context.Background(), bytes.NewReader(tb.bundle), &bytes.Buffer{},
		CoSignature{Name: "vendor-qa", Signature: other, AllowedSigners: line})
	require.ErrorContains(t, err, "not over this bundle")
	err = AddCoSignature(context.Background(), bytes.NewReader(tb.bundle), &bytes.Buffer{},
		CoSignature{Name: "vendor-qa", Signature: sig, AllowedSigners: []byte(tb.signer.PublicKey().AllowedSignersLine())})
	require.ErrorContains(t, err, "does not list")
	err = AddCoSignature(context.Background(), bytes.NewReader(cosigned.Bytes()), &bytes.Buffer{},
		CoSignature{Name: "vendor-qa", Signature: sig, AllowedSigners: line})
	require.ErrorContains(t, err, "already has")
}

func TestImportBundleWithPinnedKey(t *testing.T) {
	t.Parallel()
	tb := setupBundle(t)

	// The user pins the other installation's key as an allowed_signers line.
	pinned, err := ParseTrustedKeys([]byte(tb.signer.PublicKey().AllowedSignersLine() + "\n"))
	require.NoError(t, err)
	stored := map[string][]byte{}
	sink := func(_ context.Context, name string, size int64, r io.Reader) error {
		b, err := io.ReadAll(r)
		require.EqualValues(t, size, len(b))
		stored[name] = b
		return err
	}
	imp, err := ImportBundle(context.Background(), bytes.NewReader(tb.bundle), pinned, sink)
	require.NoError(t, err)
	require.JSONEq(t, `{"run":"42","verdict":"FAIL"}`, string(imp.Summary))
	require.Equal(t, testFacts, []byte(imp.Facts))
	require.Len(t, imp.Artifacts, 4)
	for _, a := range imp.Artifacts {
		require.Equal(t, testArtifacts()[a.Name], stored[a.Name], a.Name)
		require.Equal(t, sha256Hex(stored[a.Name]), a.SHA256)
	}
	require.Len(t, imp.Statements, 2)

	// Pinned as PEM, the same works; pinned to another key, it is refused.
	pemKey, err := tb.signer.PublicKey().PEM()
	require.NoError(t, err)
	pinned, err = ParseTrustedKeys(pemKey)
	require.NoError(t, err)
	_, err = ImportBundle(context.Background(), bytes.NewReader(tb.bundle), pinned, nil)
	require.NoError(t, err)

	other, err := OpenKeyring(t.TempDir(), KeyringOptions{Now: keyClock})
	require.NoError(t, err)
	otherSigner, err := other.Active()
	require.NoError(t, err)
	otherPEM, err := otherSigner.PublicKey().PEM()
	require.NoError(t, err)
	pinned, err = ParseTrustedKeys(otherPEM)
	require.NoError(t, err)
	_, err = ImportBundle(context.Background(), bytes.NewReader(tb.bundle), pinned, nil)
	requireTamper(t, err, FileManifestSig)
}

func TestVerifyFile(t *testing.T) {
	t.Parallel()
	tb := setupBundle(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "run-42.tar.gz")
	require.NoError(t, os.WriteFile(path, tb.bundle, 0o644))
	var out bytes.Buffer
	require.NoError(t, VerifyFile(context.Background(), path, tb.keys, &out))
	require.Contains(t, out.String(), "OK: "+path+" verified")

	bad := filepath.Join(dir, "bad.tar.gz")
	require.NoError(t, os.WriteFile(bad, rewrite(t, tb.bundle, func(es []tarEntry) []tarEntry {
		for i := range es {
			if es[i].Name == FileEvaluation {
				es[i].Data = []byte(`{"criteria":3,"verdict":"PASS"}`)
			}
		}
		return es
	}), 0o644))
	out.Reset()
	err := VerifyFile(context.Background(), bad, tb.keys, &out)
	requireTamper(t, err, FileEvaluation)
}
