package attest

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"

	"github.com/accordlab/accord/attest/dsse"
)

// benchBundle is a bundle with one artifact of size bytes.
func benchBundle(b *testing.B, size int) (*Signer, *KeySet, BundleInput) {
	b.Helper()
	kr, err := OpenKeyring(b.TempDir(), KeyringOptions{Now: keyClock})
	if err != nil {
		b.Fatal(err)
	}
	s, err := kr.Active()
	if err != nil {
		b.Fatal(err)
	}
	ks, err := kr.KeySet()
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		b.Fatal(err)
	}
	ev := testEvidence("1")
	ev.Artifacts = []ArtifactDigest{{Name: "raw.bin", SHA256: sha256Hex(data), Size: int64(size)}}
	atts, err := SignRun(s, ev)
	if err != nil {
		b.Fatal(err)
	}
	return s, ks, BundleInput{RunID: "1", Facts: testFacts, Attestations: atts, Keys: ks.Keys(),
		Artifacts: []Artifact{{Name: "raw.bin", Data: data}}}
}

func BenchmarkWriteBundle64MiB(b *testing.B) {
	s, _, in := benchBundle(b, 64<<20)
	b.SetBytes(64 << 20)
	for b.Loop() {
		if _, err := WriteBundle(context.Background(), &bytes.Buffer{}, s, in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyBundle64MiB(b *testing.B) {
	s, ks, in := benchBundle(b, 64<<20)
	var buf bytes.Buffer
	if _, err := WriteBundle(context.Background(), &buf, s, in); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(64 << 20)
	for b.Loop() {
		if _, err := VerifyBundle(context.Background(), bytes.NewReader(buf.Bytes()), ks); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignDecision(b *testing.B) {
	kr, err := OpenKeyring(b.TempDir(), KeyringOptions{Now: keyClock})
	if err != nil {
		b.Fatal(err)
	}
	s, err := kr.Active()
	if err != nil {
		b.Fatal(err)
	}
	d, err := NextDecision(nil, Decision{Chain: "p", Kind: DecisionApprove, Actor: "a", Time: testTime,
		Evidence: DecisionEvidence{RunIDs: []string{"1"}, Verdicts: map[string]string{"1": VerdictPass}}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := SignDecision(s, d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyChain1000(b *testing.B) {
	kr, err := OpenKeyring(b.TempDir(), KeyringOptions{Now: keyClock})
	if err != nil {
		b.Fatal(err)
	}
	s, err := kr.Active()
	if err != nil {
		b.Fatal(err)
	}
	ks, err := kr.KeySet()
	if err != nil {
		b.Fatal(err)
	}
	var (
		records   []Decision
		envelopes = make([]*dsse.Envelope, 0, 1000)
		head      *SignedDecision
	)
	for range 1000 {
		d, err := NextDecision(head, Decision{Chain: "p", Kind: DecisionApprove, Actor: "a", Time: testTime})
		if err != nil {
			b.Fatal(err)
		}
		sd, err := SignDecision(s, d)
		if err != nil {
			b.Fatal(err)
		}
		records = append(records, sd.Record)
		envelopes = append(envelopes, sd.Envelope)
		head = &sd
	}
	cp, err := SignCheckpoint(s, "p", head, testTime)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := VerifyChain(records, envelopes, cp, ks); err != nil {
			b.Fatal(err)
		}
	}
}
