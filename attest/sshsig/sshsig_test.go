package sshsig

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

const testNamespace = "accord-test@accordlab"

type testBundle struct {
	dir    string
	signer ssh.Signer
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	signer, err := ssh.NewSignerFromSigner(priv)
	require.NoError(t, err)
	return &testBundle{dir: t.TempDir(), signer: signer}
}

func requireTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s is required for this test: %v", name, err)
	}
}

func TestSignVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	msg := []byte("6f1ed002ab5595859014ebf0951522d9  summary.json\n")

	sig, err := Sign(tb.signer, bytes.NewReader(msg), testNamespace)
	require.NoError(t, err)
	armored := sig.Armor()
	require.True(t, bytes.HasPrefix(armored, []byte(armorBegin+"\n")))
	for _, line := range strings.Split(strings.TrimSpace(string(armored)), "\n") {
		require.LessOrEqual(t, len(line), armorWidth)
	}

	parsed, err := Unarmor(armored)
	require.NoError(t, err)
	require.Equal(t, sig.Marshal(), parsed.Marshal())
	require.NoError(t, Verify(parsed, bytes.NewReader(msg), testNamespace))

	require.ErrorIs(t, Verify(parsed, bytes.NewReader(msg), "other@accordlab"), ErrInvalid)
	changed := bytes.Clone(msg)
	changed[0] ^= 1
	require.ErrorIs(t, Verify(parsed, bytes.NewReader(changed), testNamespace), ErrInvalid)

	// A signature blob whose algorithm does not fit the key is refused
	// before any cryptography.
	forged := *parsed
	forged.Signature = &ssh.Signature{Format: ssh.KeyAlgoED25519, Blob: parsed.Signature.Blob}
	require.ErrorIs(t, Verify(&forged, bytes.NewReader(msg), testNamespace), ErrInvalid)
}

func TestParseRejectsMalformed(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	sig, err := Sign(tb.signer, strings.NewReader("x"), testNamespace)
	require.NoError(t, err)
	blob := sig.Marshal()

	cases := map[string][]byte{
		"empty":       nil,
		"bad magic":   append([]byte("SSHSIX"), blob[6:]...),
		"bad version": append(append([]byte(magic), 0, 0, 0, 2), blob[10:]...),
		"truncated":   blob[:len(blob)-3],
		"trailing":    append(bytes.Clone(blob), 0),
	}
	for name, b := range cases {
		_, err := Parse(b)
		require.ErrorIs(t, err, ErrInvalid, name)
	}
	_, err = Unarmor([]byte("-----BEGIN SSH SIGNATURE-----\n!!!\n-----END SSH SIGNATURE-----\n"))
	require.ErrorIs(t, err, ErrInvalid)
	_, err = Unarmor(blob)
	require.ErrorIs(t, err, ErrInvalid)
}

// ssh-keygen, the tool a third party uses, must accept what we sign.
func TestSSHKeygenVerifiesOurSignature(t *testing.T) {
	t.Parallel()
	requireTool(t, "ssh-keygen")
	tb := setup(t)
	msg := []byte("hello from accord\n")
	sig, err := Sign(tb.signer, bytes.NewReader(msg), testNamespace)
	require.NoError(t, err)

	msgPath := filepath.Join(tb.dir, "msg")
	sigPath := filepath.Join(tb.dir, "msg.sig")
	allowed := filepath.Join(tb.dir, "allowed_signers")
	require.NoError(t, os.WriteFile(msgPath, msg, 0o600))
	require.NoError(t, os.WriteFile(sigPath, sig.Armor(), 0o600))
	line := `accord-signer namespaces="` + testNamespace + `" ` + string(ssh.MarshalAuthorizedKey(tb.signer.PublicKey()))
	require.NoError(t, os.WriteFile(allowed, []byte(line), 0o600))

	verify := func(ns string, data []byte) error {
		cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", allowed, "-I", "accord-signer", "-n", ns, "-s", sigPath)
		cmd.Stdin = bytes.NewReader(data)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: out}
		}
		return nil
	}
	require.NoError(t, verify(testNamespace, msg))
	require.Error(t, verify("other@accordlab", msg), "wrong namespace must fail")
	require.Error(t, verify(testNamespace, append(bytes.Clone(msg), '!')), "changed message must fail")
}

// Co-signers sign with their own ssh-keygen and keys: we must accept those.
func TestVerifySSHKeygenSignatures(t *testing.T) {
	t.Parallel()
	requireTool(t, "ssh-keygen")
	for _, keyType := range []string{"ed25519", "ecdsa", "rsa"} {
		t.Run(keyType, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			key := filepath.Join(dir, "id")
			out, err := exec.Command("ssh-keygen", "-q", "-t", keyType, "-N", "", "-C", "cosigner", "-f", key).CombinedOutput()
			require.NoError(t, err, string(out))
			msg := filepath.Join(dir, "MANIFEST.sha256")
			require.NoError(t, os.WriteFile(msg, []byte("abc  report.html\n"), 0o600))
			out, err = exec.Command("ssh-keygen", "-Y", "sign", "-f", key, "-n", testNamespace, msg).CombinedOutput()
			require.NoError(t, err, string(out))

			armored, err := os.ReadFile(msg + ".sig")
			require.NoError(t, err)
			sig, err := Unarmor(armored)
			require.NoError(t, err)
			pubText, err := os.ReadFile(key + ".pub")
			require.NoError(t, err)
			pub, _, _, _, err := ssh.ParseAuthorizedKey(pubText)
			require.NoError(t, err)
			require.Equal(t, pub.Marshal(), sig.PublicKey.Marshal())

			data, err := os.ReadFile(msg)
			require.NoError(t, err)
			require.NoError(t, Verify(sig, bytes.NewReader(data), testNamespace))
			require.ErrorIs(t, Verify(sig, bytes.NewReader(append(data, ' ')), testNamespace), ErrInvalid)
			require.ErrorIs(t, Verify(sig, bytes.NewReader(data), "file"), ErrInvalid)
		})
	}
}

func FuzzUnarmor(f *testing.F) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	signer, err := ssh.NewSignerFromSigner(priv)
	if err != nil {
		f.Fatal(err)
	}
	sig, err := Sign(signer, strings.NewReader("seed"), testNamespace)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sig.Armor())
	f.Add(sig.Marshal())
	f.Add([]byte(armorBegin + "\n" + armorEnd))
	f.Add([]byte(armorBegin + "\nU1NIU0lHAAAAAQ==\n" + armorEnd))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte) (*Signature, error){Unarmor, Parse} {
			s, err := parse(data)
			if err != nil {
				continue
			}
			// What parses must re-encode to something that parses the same.
			again, err := Parse(s.Marshal())
			if err != nil {
				t.Fatalf("re-parse of marshalled signature: %v", err)
			}
			if !bytes.Equal(again.Marshal(), s.Marshal()) {
				t.Fatal("marshal is not stable")
			}
			fromArmor, err := Unarmor(s.Armor())
			if err != nil || !bytes.Equal(fromArmor.Marshal(), s.Marshal()) {
				t.Fatalf("armor round trip: %v", err)
			}
			// Verification of arbitrary input must fail cleanly, not panic.
			_ = Verify(s, strings.NewReader("seed"), s.Namespace)
		}
	})
}
