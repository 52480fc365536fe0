package attesttest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	testresult "github.com/in-toto/attestation/go/predicates/test_result/v0"
	ita1 "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/accordlab/accord/attest"
)

// Independent checks: every DSSE envelope Accord writes is verified here
// with go-securesystemslib's dsse package (another implementation of DSSE's
// pre-authentication encoding and envelope), against the trusted keys'
// PEM; every in-toto statement is read with in-toto's own Go bindings
// (protojson, unknown fields refused) and validated, and its subjects
// compared with the files. None of attest's verification code runs.

// IndependentVerifier verifies envelopes with securesystemslib, one
// verifier per trusted ECDSA key, under Accord's key id.
func IndependentVerifier(t testing.TB, trusted *attest.KeySet) *dsse.EnvelopeVerifier {
	t.Helper()
	var verifiers []dsse.Verifier
	for _, k := range trusted.Keys() {
		if k.Algorithm != attest.AlgECDSAP256 {
			continue
		}
		pemKey, err := k.PEM()
		require.NoError(t, err)
		sslKey, err := signerverifier.LoadKey(pemKey)
		require.NoError(t, err)
		sslKey.KeyID = k.ID
		v, err := signerverifier.NewECDSASignerVerifierFromSSLibKey(sslKey)
		require.NoError(t, err)
		verifiers = append(verifiers, v)
	}
	require.NotEmpty(t, verifiers, "no ECDSA key to verify with")
	ev, err := dsse.NewEnvelopeVerifier(verifiers...)
	require.NoError(t, err)
	return ev
}

// VerifyEnvelope verifies one DSSE envelope (its JSON) with
// securesystemslib and returns the key id that verified it and the payload.
func VerifyEnvelope(t testing.TB, envelope []byte, trusted *attest.KeySet, payloadType string) (string, []byte) {
	t.Helper()
	var env dsse.Envelope
	require.NoError(t, json.Unmarshal(envelope, &env))
	require.Equal(t, payloadType, env.PayloadType)
	accepted, payload, err := IndependentVerifier(t, trusted).VerifyAndDecode(context.Background(), &env)
	require.NoError(t, err, "securesystemslib's dsse refuses the envelope")
	require.Len(t, accepted, 1)
	require.Equal(t, env.Signatures[0].KeyID, accepted[0].KeyID)
	return accepted[0].KeyID, payload
}

// IndependentCheck verifies every envelope of an extracted bundle
// directory (attestations, decision records, checkpoints) and every
// statement; it returns how many envelopes it verified.
func IndependentCheck(t testing.TB, dir string, trusted *attest.KeySet) int {
	t.Helper()
	n := 0
	atts, err := filepath.Glob(filepath.Join(dir, "attestations", "*.dsse.json"))
	require.NoError(t, err)
	require.NotEmpty(t, atts)
	for _, path := range atts {
		env, err := os.ReadFile(path)
		require.NoError(t, err)
		_, payload := VerifyEnvelope(t, env, trusted, attest.PayloadTypeInToto)
		n++
		checkStatement(t, dir, filepath.Base(path), payload)
	}
	log, err := os.ReadFile(filepath.Join(dir, attest.FileDecisions))
	require.NoError(t, err)
	return n + CheckDecisionLogEnvelopes(t, log, trusted)
}

// CheckDecisionLogEnvelopes verifies every envelope of an exported
// decision log independently and returns how many.
func CheckDecisionLogEnvelopes(t testing.TB, log []byte, trusted *attest.KeySet) int {
	t.Helper()
	var doc struct {
		Records []struct {
			Envelope json.RawMessage `json:"envelope"`
		} `json:"records"`
		Checkpoint         json.RawMessage   `json:"checkpoint"`
		EarlierCheckpoints []json.RawMessage `json:"earlier_checkpoints"`
	}
	require.NoError(t, json.Unmarshal(log, &doc))
	n := 0
	for _, r := range doc.Records {
		VerifyEnvelope(t, r.Envelope, trusted, attest.DecisionPayloadType)
		n++
	}
	for _, cp := range append(doc.EarlierCheckpoints, doc.Checkpoint) {
		VerifyEnvelope(t, cp, trusted, attest.CheckpointPayloadType)
		n++
	}
	return n
}

// checkStatement reads an in-toto statement with in-toto's bindings: valid
// Statement v1, each subject one of the bundle's artifacts by SHA-256, and
// the test-result predicate in the predicate's own schema.
func checkStatement(t testing.TB, dir, file string, payload []byte) {
	t.Helper()
	var st ita1.Statement
	require.NoError(t, protojson.Unmarshal(payload, &st), "%s: not an in-toto statement as in-toto reads it", file)
	require.NoError(t, st.Validate(), file)
	require.Equal(t, ita1.StatementTypeUri, st.GetType())
	for _, sub := range st.GetSubject() {
		data, err := os.ReadFile(filepath.Join(dir, "artifacts", filepath.FromSlash(sub.GetName())))
		require.NoError(t, err, "%s: subject %s", file, sub.GetName())
		sum := sha256.Sum256(data)
		require.Equal(t, hex.EncodeToString(sum[:]), sub.GetDigest()["sha256"], "%s: subject %s", file, sub.GetName())
	}
	if st.GetPredicateType() == attest.TestResultPredicate {
		raw, err := protojson.Marshal(st.GetPredicate())
		require.NoError(t, err)
		var tr testresult.TestResult
		require.NoError(t, protojson.Unmarshal(raw, &tr), "%s: the test-result predicate is not in-toto's schema", file)
		require.Contains(t, []string{"PASSED", "WARNED", "FAILED"}, tr.GetResult())
		for _, c := range tr.GetConfiguration() {
			require.NoError(t, c.Validate(), "%s: configuration %s", file, c.GetName())
		}
	}
}
