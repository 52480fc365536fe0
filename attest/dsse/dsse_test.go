package dsse

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const testType = "application/vnd.in-toto+json"

type testBundle struct {
	ecKey  *ecdsa.PrivateKey
	edKey  ed25519.PrivateKey
	signer KeySigner
	lookup KeyLookup
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	keys := map[string]crypto.PublicKey{"ec": &ec.PublicKey, "ed": ed.Public()}
	return &testBundle{
		ecKey:  ec,
		edKey:  ed,
		signer: KeySigner{ID: "ec", Key: ec},
		lookup: func(id string) (crypto.PublicKey, bool) { k, ok := keys[id]; return k, ok },
	}
}

func TestPAEMatchesSpecExample(t *testing.T) {
	t.Parallel()
	// The worked example of the DSSE v1 protocol description.
	require.Equal(t, "DSSEv1 29 http://example.com/HelloWorld 11 hello world",
		string(PAE("http://example.com/HelloWorld", []byte("hello world"))))
	require.Equal(t, "DSSEv1 0  0 ", string(PAE("", nil)))
}

func TestSignVerify(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	payload := []byte(`{"_type":"https://in-toto.io/Statement/v1"}`)
	env, err := Sign(testType, payload, tb.signer, KeySigner{ID: "ed", Key: tb.edKey})
	require.NoError(t, err)

	data, err := env.Marshal()
	require.NoError(t, err)
	parsed, err := Parse(data)
	require.NoError(t, err)
	ids, got, err := parsed.Verify(tb.lookup)
	require.NoError(t, err)
	require.Equal(t, []string{"ec", "ed"}, ids)
	require.Equal(t, payload, got)

	// Only signatures by keys the verifier knows count.
	_, _, err = parsed.Verify(func(string) (crypto.PublicKey, bool) { return nil, false })
	require.ErrorIs(t, err, ErrInvalid)

	// Changed payload or type breaks the signature.
	changed := *parsed
	changed.Payload = base64.StdEncoding.EncodeToString([]byte(`{"_type":"x"}`))
	_, _, err = changed.Verify(tb.lookup)
	require.ErrorIs(t, err, ErrInvalid)
	changed = *parsed
	changed.PayloadType = "application/json"
	_, _, err = changed.Verify(tb.lookup)
	require.ErrorIs(t, err, ErrInvalid)

	// A signature swapped in from another envelope by a known key fails even
	// though the other signature is good.
	other, err := Sign(testType, []byte("other"), tb.signer)
	require.NoError(t, err)
	swapped := *parsed
	swapped.Signatures = []Signature{parsed.Signatures[1], other.Signatures[0]}
	_, _, err = swapped.Verify(tb.lookup)
	require.ErrorIs(t, err, ErrInvalid)
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"not json":       `nope`,
		"unknown field":  `{"payloadType":"t","payload":"","signatures":[{"sig":"AA=="}],"extra":1}`,
		"duplicate key":  `{"payloadType":"t","payload":"aGk=","payload":"aG8=","signatures":[{"sig":"AA=="}]}`,
		"no type":        `{"payloadType":"","payload":"","signatures":[{"sig":"AA=="}]}`,
		"bad payload":    `{"payloadType":"t","payload":"***","signatures":[{"sig":"AA=="}]}`,
		"no signatures":  `{"payloadType":"t","payload":"","signatures":[]}`,
		"bad signature":  `{"payloadType":"t","payload":"","signatures":[{"sig":"!"}]}`,
		"empty sig":      `{"payloadType":"t","payload":"","signatures":[{"sig":""}]}`,
		"trailing value": `{"payloadType":"t","payload":"","signatures":[{"sig":"AA=="}]} {}`,
	}
	for name, in := range cases {
		_, err := Parse([]byte(in))
		require.ErrorIs(t, err, ErrInvalid, name)
	}
}

// openssl, one of the tools a third party uses, verifies our signature over
// the PAE with the PEM public key.
func TestOpenSSLVerifiesECDSASignature(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatalf("openssl is required: %v", err)
	}
	tb := setup(t)
	dir := t.TempDir()
	payload := []byte(`{"hello":"world"}`)
	env, err := Sign(testType, payload, tb.signer)
	require.NoError(t, err)
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&tb.ecKey.PublicKey)
	require.NoError(t, err)

	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	key := write("key.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	sigPath := write("sig.der", sig)
	pae := write("pae.bin", PAE(testType, payload))
	out, err := exec.Command("openssl", "dgst", "-sha256", "-verify", key, "-signature", sigPath, pae).CombinedOutput()
	require.NoError(t, err, string(out))
	require.True(t, strings.Contains(string(out), "Verified OK"), string(out))

	bad := write("pae-bad.bin", PAE(testType, []byte(`{"hello":"World"}`)))
	out, err = exec.Command("openssl", "dgst", "-sha256", "-verify", key, "-signature", sigPath, bad).CombinedOutput()
	require.Error(t, err, string(out))
}

func FuzzParse(f *testing.F) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	env, err := Sign(testType, []byte(`{"a":1}`), KeySigner{ID: "k", Key: ec})
	if err != nil {
		f.Fatal(err)
	}
	seed, err := env.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"payloadType":"t","payload":"","signatures":[{"keyid":"k","sig":"AA=="}]}`))
	f.Add([]byte(`{"payloadType":"t","payload":"aGk","signatures":[{"sig":"AA"}]}`))
	f.Add([]byte(`[]`))
	lookup := func(id string) (crypto.PublicKey, bool) { return &ec.PublicKey, id == "k" }
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Parse(data)
		if err != nil {
			return
		}
		if e.PayloadType == "" || len(e.Signatures) == 0 {
			t.Fatal("Parse accepted an envelope without type or signatures")
		}
		// Parse(Marshal(e)) must give the same envelope back.
		out, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		require.Equal(t, e, again)
		ids, payload, err := e.Verify(lookup)
		if err == nil && (len(ids) == 0 || payload == nil && e.Payload != "") {
			t.Fatal("verified without a signature")
		}
	})
}
