package attest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/accordlab/accord/attest/dsse"
	"github.com/accordlab/accord/internal/memwatch"
)

// BenchmarkBundle writes a report bundle whose one artifact of the given
// size streams from its source (as a run's raw outputs stream from the
// artifact store), to a file, and verifies it from that file, as the
// server and `accord verify` do. It reports each one's speed and how far
// the process's memory rose meanwhile: the same at both sizes, since
// nothing is held whole.
func BenchmarkBundle(b *testing.B) {
	for _, size := range []int64{64 << 20, 1 << 30} {
		b.Run(fmt.Sprintf("size=%dMiB", size>>20), func(b *testing.B) {
			for range b.N {
				benchmarkBundle(b, size)
			}
		})
	}
}

func benchmarkBundle(b *testing.B, size int64) {
	ctx := context.Background()
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
	content := func() io.Reader { return io.LimitReader(mrand.NewChaCha8([32]byte{7}), size) }
	h := sha256.New()
	if _, err := io.Copy(h, content()); err != nil {
		b.Fatal(err)
	}
	digest := hex.EncodeToString(h.Sum(nil))
	ev := testEvidence("1")
	ev.Artifacts = []ArtifactDigest{{Name: "raw.bin", SHA256: digest, Size: size}}
	in := testInput(b, s, ks.Keys(), "1", nil)
	if in.Attestations, err = SignRun(s, ev); err != nil {
		b.Fatal(err)
	}
	in.Artifacts = []Artifact{{Name: "raw.bin", Size: size, SHA256: digest, Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(content()), nil
	}}}
	f, err := os.Create(filepath.Join(b.TempDir(), "bundle.tar.gz"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()

	w, start := memwatch.Start(b), time.Now()
	if _, err := WriteBundle(ctx, f, s, in); err != nil {
		b.Fatal(err)
	}
	writeTime := time.Since(start)
	writeRSS, writeHeap := w.Growth(b)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		b.Fatal(err)
	}
	w, start = memwatch.Start(b), time.Now()
	if _, err := VerifyBundle(ctx, f, ks); err != nil {
		b.Fatal(err)
	}
	verifyTime := time.Since(start)
	verifyRSS, verifyHeap := w.Growth(b)
	b.ReportMetric(float64(size)/1e6/writeTime.Seconds(), "write-MB/s")
	b.ReportMetric(float64(size)/1e6/verifyTime.Seconds(), "verify-MB/s")
	b.ReportMetric(float64(writeRSS)/(1<<20), "write-RSS-growth-MiB")
	b.ReportMetric(float64(verifyRSS)/(1<<20), "verify-RSS-growth-MiB")
	b.ReportMetric(float64(max(writeHeap, verifyHeap))/(1<<20), "heap-growth-MiB")
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
