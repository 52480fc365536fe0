package attest

import (
	"crypto/ecdsa"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/attest/dsse"
)

// testChain signs n decisions of one chain and a checkpoint over the last.
func testChain(t *testing.T, s *Signer, n int) ([]SignedDecision, *dsse.Envelope) {
	t.Helper()
	var (
		signed []SignedDecision
		head   *SignedDecision
	)
	kinds := []string{DecisionApprove, DecisionApprove, DecisionStopLoss, DecisionResume, DecisionReject}
	for i := range n {
		d, err := NextDecision(head, Decision{
			Chain:        "program-17",
			Kind:         kinds[i%len(kinds)],
			Actor:        []string{"vera@vendor.example", "carl@customer.example"}[i%2],
			Organisation: []string{"Vendor Inc", "Customer AG"}[i%2],
			Time:         testTime.Add(time.Duration(i) * time.Hour).Add(123 * time.Nanosecond),
			Stage:        "canary-5pct",
			Evidence: DecisionEvidence{
				RunIDs:   []string{"42", "41"},
				Verdicts: map[string]string{"42": VerdictPass, "42/ttft-p99": VerdictPass},
				Digests:  map[string]string{"manifest": "sha256:" + sha256Hex([]byte{byte(i)})},
			},
			Reason: "gates pass on <both> sides & p99 TTFT \"ok\"",
		})
		require.NoError(t, err)
		sd, err := SignDecision(s, d)
		require.NoError(t, err)
		signed = append(signed, sd)
		head = &signed[len(signed)-1]
	}
	cp, err := SignCheckpoint(s, "program-17", head, testTime.Add(100*time.Hour))
	require.NoError(t, err)
	return signed, cp
}

func testDecisionLog(t *testing.T, s *Signer, n int) []byte {
	t.Helper()
	signed, cp := testChain(t, s, n)
	data, err := NewDecisionLog("program-17", signed, cp).Marshal()
	require.NoError(t, err)
	return data
}

type chainTestBundle struct {
	signer    *Signer
	keys      *KeySet
	records   []Decision
	envelopes []*dsse.Envelope
	cp        *dsse.Envelope
}

func setupChain(t *testing.T, n int) *chainTestBundle {
	t.Helper()
	kr, err := OpenKeyring(t.TempDir(), KeyringOptions{Now: keyClock})
	require.NoError(t, err)
	s, err := kr.Active()
	require.NoError(t, err)
	ks, err := kr.KeySet()
	require.NoError(t, err)
	signed, cp := testChain(t, s, n)
	tb := &chainTestBundle{signer: s, keys: ks, cp: cp}
	for _, sd := range signed {
		tb.records = append(tb.records, sd.Record)
		tb.envelopes = append(tb.envelopes, sd.Envelope)
	}
	return tb
}

func requireChainError(t *testing.T, err error, index int, seq int64, reason string) {
	t.Helper()
	require.Error(t, err)
	var ce *ChainError
	require.True(t, errors.As(err, &ce), "not a ChainError: %v", err)
	require.Equal(t, index, ce.Index, err.Error())
	require.Equal(t, seq, ce.Seq, err.Error())
	require.Contains(t, err.Error(), reason)
}

func TestDecisionChainVerifies(t *testing.T) {
	t.Parallel()
	tb := setupChain(t, 5)
	require.NoError(t, VerifyChain(tb.records, tb.envelopes, tb.cp, tb.keys))

	// The hash is over microsecond UTC time and empty collections, so a
	// record read back from PostgreSQL (or with nil slices) hashes the same.
	r := tb.records[2]
	require.Equal(t, 0, r.Time.Nanosecond()%1000)
	back := r
	back.Time = r.Time.In(time.FixedZone("CET", 3600))
	h1, err := r.Hash()
	require.NoError(t, err)
	h2, err := back.Hash()
	require.NoError(t, err)
	require.Equal(t, h1, h2)
	require.Equal(t, h1, tb.records[3].PrevHash)

	empty := Decision{Kind: "approve", Actor: "a", Time: testTime}
	withEmpty := empty
	withEmpty.Evidence = DecisionEvidence{RunIDs: []string{}, Verdicts: map[string]string{}, Digests: map[string]string{}}
	e1, _ := empty.Hash()
	e2, _ := withEmpty.Hash()
	require.Equal(t, e1, e2)

	// The canonical form is RFC 8785: sorted keys, no whitespace, no HTML escaping.
	c, err := tb.records[0].Canonical()
	require.NoError(t, err)
	require.Contains(t, string(c), `{"actor":"vera@vendor.example","chain":"program-17","evidence":{"digests":{"manifest":"sha256:`)
	require.Contains(t, string(c), `"reason":"gates pass on <both> sides & p99 TTFT \"ok\""`)
}

func TestDecisionChainTampering(t *testing.T) {
	t.Parallel()
	tb := setupChain(t, 5)
	clone := func() ([]Decision, []*dsse.Envelope) {
		return append([]Decision(nil), tb.records...), append([]*dsse.Envelope(nil), tb.envelopes...)
	}

	t.Run("edit a field", func(t *testing.T) {
		recs, envs := clone()
		recs[2].Reason = "gates fail"
		requireChainError(t, VerifyChain(recs, envs, tb.cp, tb.keys), 2, 3, "field reason differs")
		recs, envs = clone()
		recs[1].Evidence.Verdicts = map[string]string{"42": VerdictFail}
		requireChainError(t, VerifyChain(recs, envs, tb.cp, tb.keys), 1, 2, "evidence.verdicts")
		recs, envs = clone()
		recs[3].Actor = "mallory@vendor.example"
		requireChainError(t, VerifyChain(recs, envs, tb.cp, tb.keys), 3, 4, "field actor")
	})

	t.Run("edit a field and its signed payload", func(t *testing.T) {
		recs, envs := clone()
		recs[2].Kind = DecisionApprove
		payload, err := recs[2].Canonical()
		require.NoError(t, err)
		forged := *envs[2]
		env, err := dsse.Sign(DecisionPayloadType, payload, dsse.KeySigner{ID: tb.signer.KeyID(), Key: mustKey(t)})
		require.NoError(t, err)
		forged.Payload = env.Payload
		envs[2] = &forged
		requireChainError(t, VerifyChain(recs, envs, tb.cp, tb.keys), 2, 3, "bad signature")
	})

	t.Run("delete a record", func(t *testing.T) {
		recs, envs := clone()
		recs = append(recs[:1], recs[2:]...)
		envs = append(envs[:1], envs[2:]...)
		requireChainError(t, VerifyChain(recs, envs, tb.cp, tb.keys), 1, 2, "from seq 1 to seq 3 (record deleted)")
	})

	t.Run("delete the last record", func(t *testing.T) {
		recs, envs := clone()
		requireChainError(t, VerifyChain(recs[:4], envs[:4], tb.cp, tb.keys), 4, 5, "cut off the end")
	})

	t.Run("delete the first record", func(t *testing.T) {
		recs, envs := clone()
		requireChainError(t, VerifyChain(recs[1:], envs[1:], tb.cp, tb.keys), 0, 1, "from seq 0 to seq 2")
	})

	t.Run("reorder", func(t *testing.T) {
		recs, envs := clone()
		recs[1], recs[2] = recs[2], recs[1]
		envs[1], envs[2] = envs[2], envs[1]
		requireChainError(t, VerifyChain(recs, envs, tb.cp, tb.keys), 1, 2, "seq 3 found where seq 2 belongs")
	})

	t.Run("replace a signature", func(t *testing.T) {
		recs, envs := clone()
		swapped := *envs[3]
		swapped.Signatures = envs[1].Signatures
		envs[3] = &swapped
		requireChainError(t, VerifyChain(recs, envs, tb.cp, tb.keys), 3, 4, "bad signature")
	})

	t.Run("renumber after a deletion", func(t *testing.T) {
		// Deleting record 2 and re-linking the rest needs new signatures.
		recs, envs := clone()
		recs = append(recs[:1], recs[2:]...)
		envs = append(envs[:1], envs[2:]...)
		recs[1].Seq = 2
		recs[1].PrevHash, _ = recs[0].Hash()
		requireChainError(t, VerifyChain(recs, envs, tb.cp, tb.keys), 1, 2, "differs from the signed record")
	})

	t.Run("checkpoint", func(t *testing.T) {
		recs, envs := clone()
		requireChainError(t, VerifyChain(recs, envs, nil, tb.keys), 5, 6, "checkpoint: missing")
		other := setupChain(t, 5)
		requireChainError(t, VerifyChain(recs, envs, other.cp, tb.keys), 5, 6, "checkpoint: bad signature")
		// An older checkpoint does not cover the records after it.
		older, err := SignCheckpoint(tb.signer, "program-17", &SignedDecision{Record: recs[2], Hash: recs[3].PrevHash}, testTime)
		require.NoError(t, err)
		requireChainError(t, VerifyChain(recs, envs, older, tb.keys), 3, 4, "not covered by the checkpoint")
	})

	t.Run("untrusted or revoked key", func(t *testing.T) {
		recs, envs := clone()
		requireChainError(t, VerifyChain(recs, envs, tb.cp, NewKeySet()), 0, 1, "bad signature")
		k := tb.signer.PublicKey()
		k.Status = KeyRevoked
		k.RevokedReason = "compromised"
		err := VerifyChain(recs, envs, tb.cp, NewKeySet(k))
		require.ErrorIs(t, err, ErrRevokedKey, "revoked since an unknown time: nothing it signed holds")
		requireChainError(t, err, 0, 1, "compromised")

		// Revoked between the second and the third record: the third is refused.
		k.RevokedAt = recs[2].Time.Add(-time.Second)
		err = VerifyChain(recs, envs, tb.cp, NewKeySet(k))
		require.ErrorIs(t, err, ErrRevokedKey)
		requireChainError(t, err, 2, 3, "revoked at "+k.RevokedAt.UTC().Truncate(time.Second).Format(time.RFC3339))

		// Revoked after the checkpoint: the log holds, with a warning.
		k.RevokedAt = testTime.Add(200 * time.Hour)
		log := NewDecisionLog(recs[0].Chain, nil, tb.cp)
		for i := range recs {
			log.Records = append(log.Records, DecisionLogEntry{Record: recs[i], Hash: mustHash(t, recs[i]), Envelope: envs[i]})
		}
		report, err := log.Verify(NewKeySet(k))
		require.NoError(t, err)
		require.Len(t, report.Warnings, 1)
		require.Contains(t, report.Warnings[0], "was revoked at "+k.RevokedAt.Format(time.RFC3339)+" (compromised), after it signed")
	})
}

func mustHash(t *testing.T, d Decision) string {
	t.Helper()
	h, err := d.Hash()
	require.NoError(t, err)
	return h
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	kr, err := OpenKeyring(t.TempDir(), KeyringOptions{Now: keyClock})
	require.NoError(t, err)
	s, err := kr.Active()
	require.NoError(t, err)
	return s.priv
}

func TestDecisionLogExport(t *testing.T) {
	t.Parallel()
	tb := setupChain(t, 4)
	signed := make([]SignedDecision, len(tb.records))
	for i := range tb.records {
		h, err := tb.records[i].Hash()
		require.NoError(t, err)
		signed[i] = SignedDecision{Record: tb.records[i], Hash: h, Envelope: tb.envelopes[i]}
	}
	data, err := NewDecisionLog("program-17", signed, tb.cp).Marshal()
	require.NoError(t, err)
	log, err := ParseDecisionLog(data)
	require.NoError(t, err)
	report, err := log.Verify(tb.keys)
	require.NoError(t, err)
	require.Equal(t, 4, report.Records)
	require.EqualValues(t, 4, report.Seq)
	require.Equal(t, signed[3].Hash, report.Head)
	require.Equal(t, []string{tb.signer.KeyID()}, report.KeyIDs)

	// A changed field in the exported file is found.
	tampered := []byte(string(data))
	idx := indexOf(tampered, `"stage": "canary-5pct"`)
	require.Greater(t, idx, 0)
	copy(tampered[idx:], `"stage": "canary-50pc"`)
	log, err = ParseDecisionLog(tampered)
	require.NoError(t, err)
	_, err = log.Verify(tb.keys)
	requireChainError(t, err, 0, 1, "field stage")

	// Unknown fields are refused (they would be unsigned).
	_, err = ParseDecisionLog([]byte(`{"format":"accord-decision-log/v1","chain":"x","records":[],"checkpoint":null,"note":"hi"}`))
	require.Error(t, err)
}

func indexOf(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}
