package attest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

func TestKeyringFirstUse(t *testing.T) {
	t.Parallel()
	requireTools(t, "openssl", "ssh-keygen")
	dir := filepath.Join(t.TempDir(), "data", "signing")
	kr, err := OpenKeyring(dir, KeyringOptions{Now: func() time.Time { return testTime }})
	require.NoError(t, err)
	s, err := kr.Active()
	require.NoError(t, err)

	info, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm())
	keyFile := filepath.Join(dir, "key-"+fileSafeID(s.KeyID())+".pem")
	info, err = os.Stat(keyFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o400), info.Mode().Perm())
	pemText := mustRead(t, keyFile)
	require.True(t, bytes.HasPrefix(pemText, []byte("-----BEGIN PRIVATE KEY-----\n")), "PKCS#8 PEM")

	// openssl reads the private key and derives the same public key.
	out, err := exec.Command("openssl", "pkey", "-in", keyFile, "-pubout").Output()
	require.NoError(t, err)
	pubPEM, err := s.PublicKey().PEM()
	require.NoError(t, err)
	require.Equal(t, string(pubPEM), string(out))

	// The key id is what ssh-keygen prints as the key's fingerprint.
	pubFile := filepath.Join(t.TempDir(), "k.pub")
	require.NoError(t, os.WriteFile(pubFile, ssh.MarshalAuthorizedKey(s.PublicKey().SSH), 0o644))
	out, err = exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", pubFile).Output()
	require.NoError(t, err)
	require.Equal(t, s.KeyID(), strings.Fields(string(out))[1])
	require.True(t, strings.HasPrefix(s.KeyID(), "SHA256:"))

	// Opening again uses the same key; nothing is in the environment.
	again, err := OpenKeyring(dir, KeyringOptions{Now: keyClock})
	require.NoError(t, err)
	s2, err := again.Active()
	require.NoError(t, err)
	require.Equal(t, s.KeyID(), s2.KeyID())
	keys, err := again.PublicKeys()
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.Equal(t, KeyActive, keys[0].Status)
	require.Equal(t, testTime, keys[0].Created)
}

func TestKeyringConcurrentFirstUseMakesOneKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ids := make([]string, 6)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			kr, err := OpenKeyring(dir, KeyringOptions{Now: keyClock})
			if err != nil {
				t.Error(err)
				return
			}
			s, err := kr.Active()
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = s.KeyID()
		})
	}
	wg.Wait()
	for _, id := range ids {
		require.Equal(t, ids[0], id)
	}
	kr, err := OpenKeyring(dir, KeyringOptions{Now: keyClock})
	require.NoError(t, err)
	keys, err := kr.PublicKeys()
	require.NoError(t, err)
	require.Len(t, keys, 1)
}

func TestKeyringConfiguredKeyFile(t *testing.T) {
	t.Parallel()
	requireTools(t, "openssl")
	keyDir := t.TempDir()
	keyFile := filepath.Join(keyDir, "accord-signing.pem")
	out, err := exec.Command("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyFile).CombinedOutput()
	require.NoError(t, err, string(out))

	require.NoError(t, os.Chmod(keyFile, 0o644))
	_, err = OpenKeyring(t.TempDir(), KeyringOptions{KeyFile: keyFile, Now: keyClock})
	require.ErrorContains(t, err, "group or other access")

	require.NoError(t, os.Chmod(keyFile, 0o400))
	dir := t.TempDir()
	// A keyring that had generated its own key first: the configured file takes over.
	first, err := OpenKeyring(dir, KeyringOptions{Now: keyClock})
	require.NoError(t, err)
	generated, err := first.Active()
	require.NoError(t, err)

	kr, err := OpenKeyring(dir, KeyringOptions{KeyFile: keyFile, Now: keyClock})
	require.NoError(t, err)
	s, err := kr.Active()
	require.NoError(t, err)
	out, err = exec.Command("openssl", "pkey", "-in", keyFile, "-pubout").Output()
	require.NoError(t, err)
	pubPEM, err := s.PublicKey().PEM()
	require.NoError(t, err)
	require.Equal(t, string(out), string(pubPEM))

	keys, err := kr.PublicKeys()
	require.NoError(t, err)
	require.Len(t, keys, 2)
	require.Equal(t, generated.KeyID(), keys[0].ID)
	require.Equal(t, KeyRetired, keys[0].Status)
	require.Equal(t, KeyActive, keys[1].Status)

	_, err = kr.Rotate(testTime)
	require.ErrorIs(t, err, ErrExternalKey)

	// An RSA key is refused.
	rsaFile := filepath.Join(keyDir, "rsa.pem")
	out, err = exec.Command("openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", rsaFile).CombinedOutput()
	require.NoError(t, err, string(out))
	require.NoError(t, os.Chmod(rsaFile, 0o400))
	_, err = OpenKeyring(t.TempDir(), KeyringOptions{KeyFile: rsaFile})
	require.ErrorContains(t, err, "want ECDSA P-256")
}

func TestKeyringRevokeActiveRotates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kr, err := OpenKeyring(dir, KeyringOptions{Now: keyClock})
	require.NoError(t, err)
	old, err := kr.Active()
	require.NoError(t, err)
	require.ErrorContains(t, kr.Revoke(old.KeyID(), " ", testTime), "reason is required")
	require.NoError(t, kr.Revoke(old.KeyID(), "key file copied to a backup tape", testTime))

	cur, err := kr.Active()
	require.NoError(t, err)
	require.NotEqual(t, old.KeyID(), cur.KeyID())
	_, err = os.Stat(filepath.Join(dir, "key-"+fileSafeID(old.KeyID())+".pem"))
	require.ErrorIs(t, err, os.ErrNotExist, "a revoked key's private key is deleted")

	keys, err := kr.PublicKeys()
	require.NoError(t, err)
	require.Len(t, keys, 2)
	require.Equal(t, KeyRevoked, keys[0].Status)
	require.Equal(t, "key file copied to a backup tape", keys[0].RevokedReason)
	require.Equal(t, testTime, keys[0].RevokedAt)
	require.ErrorContains(t, kr.Revoke(old.KeyID(), "again", testTime), "already revoked")
}

func TestPublishedKeyFormats(t *testing.T) {
	t.Parallel()
	kr, err := OpenKeyring(t.TempDir(), KeyringOptions{Now: keyClock})
	require.NoError(t, err)
	_, err = kr.Rotate(testTime)
	require.NoError(t, err)
	_, err = kr.Rotate(testTime.Add(time.Hour))
	require.NoError(t, err)
	keys, err := kr.PublicKeys()
	require.NoError(t, err)
	require.NoError(t, kr.Revoke(keys[0].ID, "test", testTime))
	keys, err = kr.PublicKeys()
	require.NoError(t, err)

	doc, err := MarshalKeysJSON(keys)
	require.NoError(t, err)
	var raw struct {
		Keys []map[string]any `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(doc, &raw))
	require.Len(t, raw.Keys, 3)
	for _, field := range []string{"id", "algorithm", "public_key_pem", "status", "created"} {
		require.Contains(t, raw.Keys[0], field)
	}
	require.Equal(t, "test", raw.Keys[0]["revoked_reason"])

	ks, err := ParseTrustedKeys(doc)
	require.NoError(t, err)
	require.Equal(t, 3, ks.Len())
	for _, k := range keys {
		got, ok := ks.Lookup(k.ID)
		require.True(t, ok)
		require.Equal(t, k.Status, got.Status)
	}

	require.Equal(t, "keys/"+fileSafeID(keys[0].ID)+".pem", raw.Keys[0]["pem_file"])
	require.Equal(t, testTime.Format(time.RFC3339Nano), raw.Keys[0]["retired_at"], "rotated out when the second key was made")
	require.Equal(t, testTime.Add(time.Hour).Format(time.RFC3339Nano), raw.Keys[1]["retired_at"])
	require.NotContains(t, raw.Keys[2], "retired_at")

	// allowed_signers: every key, each with its window in the fixed form:
	// from its making to its rotation or revocation, to the second.
	allowed := MarshalAllowedSigners(keys)
	var lines []string
	for _, l := range strings.Split(string(allowed), "\n") {
		if strings.HasPrefix(l, "accord-signer ") {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 3)
	opts := func(after, before string) string {
		o := `accord-signer namespaces="accord-report@accordlab",valid-after="` + after + `"`
		if before != "" {
			o += `,valid-before="` + before + `"`
		}
		return o + " ecdsa-sha2-nistp256 AAAA"
	}
	require.True(t, strings.HasPrefix(lines[0], opts("20260212092653Z", "20260314092653Z")), lines[0])
	require.True(t, strings.HasPrefix(lines[1], opts("20260314092653Z", "20260314102653Z")), lines[1])
	require.True(t, strings.HasPrefix(lines[2], opts("20260314102653Z", "")), lines[2])
	require.Contains(t, string(allowed), "# "+keys[0].ID+" revoked, made 2026-02-12T09:26:53Z, rotated out 2026-03-14T09:26:53Z, revoked 2026-03-14T09:26:53Z: test\n")
	ks, err = ParseTrustedKeys(allowed)
	require.NoError(t, err)
	require.Equal(t, 3, ks.Len())
	for i, k := range keys {
		got, ok := ks.Lookup(k.ID)
		require.True(t, ok)
		require.Equal(t, k.ValidAfter(), got.ValidAfter(), "key %d", i)
		require.Equal(t, k.ValidBefore(), got.ValidBefore(), "key %d", i)
	}

	// keys.pem holds the active key only (openssl reads the first block);
	// every key has its own PEM.
	pemText, err := MarshalPEM(keys)
	require.NoError(t, err)
	ks, err = ParseTrustedKeys(pemText)
	require.NoError(t, err)
	require.Equal(t, 1, ks.Len())
	_, ok := ks.Lookup(keys[2].ID)
	require.True(t, ok)

	// A keys.json whose id is not its key's fingerprint is refused.
	forged := strings.Replace(string(doc), keys[1].ID, keys[2].ID, 1)
	_, err = ParseKeysJSON([]byte(forged))
	require.ErrorContains(t, err, "not the key's fingerprint")

	// allowed_signers lines for other namespaces do not count.
	other := strings.ReplaceAll(string(allowed), Namespace, "git")
	_, err = ParseTrustedKeys([]byte(other))
	require.ErrorContains(t, err, "no allowed_signers line")
}

func TestParseAllowedSignersForms(t *testing.T) {
	t.Parallel()
	kr, err := OpenKeyring(t.TempDir(), KeyringOptions{Now: keyClock})
	require.NoError(t, err)
	s, err := kr.Active()
	require.NoError(t, err)
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey().SSH)))

	keys, err := ParseAllowedSigners([]byte(strings.Join([]string{
		"# comment",
		`"erin@customer.example,qa@customer.example" namespaces="file,accord-report@accordlab" ` + key + " erin's key",
		"carl@customer.example\t" + key,
		`git-only namespaces="git" ` + key,
	}, "\n")))
	require.NoError(t, err)
	require.Len(t, keys, 2)
	require.Equal(t, "erin@customer.example", keys[0].Principal)
	require.Equal(t, s.KeyID(), keys[0].ID)
	require.Equal(t, "carl@customer.example", keys[1].Principal)

	_, err = ParseAllowedSigners([]byte("ca cert-authority " + key))
	require.ErrorContains(t, err, "cert-authority")
	_, err = ParseAllowedSigners([]byte("nobody"))
	require.ErrorContains(t, err, "no key")
}
