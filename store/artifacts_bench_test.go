package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/accordlab/accord/internal/memwatch"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// BenchmarkArtifactRoundTrip1GiB stores a 1 GiB artifact from a stream
// and reads it back, and prints how far memory rose meanwhile (the peak
// resident set and the peak Go heap above where they stood): streaming
// keeps it flat, whatever the size. It fails above 64 MiB.
func BenchmarkArtifactRoundTrip1GiB(b *testing.B) {
	ctx := context.Background()
	st := store.New(storetest.NewPool(b))
	const size = 1 << 30
	content := func(seed byte) io.Reader { return io.LimitReader(rand.NewChaCha8([32]byte{seed}), size) }
	for i := range b.N {
		seed := byte(i + 1)
		h := sha256.New()
		if _, err := io.Copy(h, content(seed)); err != nil {
			b.Fatal(err)
		}
		want := hex.EncodeToString(h.Sum(nil))

		w := memwatch.Start(b)
		blob, err := st.Artifacts().Put(ctx, content(seed))
		if err != nil {
			b.Fatal(err)
		}
		rd, err := st.Artifacts().Open(ctx, blob.SHA256)
		if err != nil {
			b.Fatal(err)
		}
		h.Reset()
		n, err := io.Copy(h, rd)
		if err != nil {
			b.Fatal(err)
		}
		rd.Close()
		rss, heap := w.Growth(b)
		if blob.SHA256 != want || hex.EncodeToString(h.Sum(nil)) != want || n != size || blob.Size != size {
			b.Fatalf("not byte-exact: stored %s (%d bytes), read %d bytes, want %s", blob.SHA256, blob.Size, n, want)
		}
		b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-growth-MiB")
		b.ReportMetric(float64(heap)/(1<<20), "peak-heap-growth-MiB")
		if rss > 64<<20 {
			b.Errorf("memory grew by %d MiB storing and reading 1 GiB: it must stay under 64 MiB", rss>>20)
		}
	}
}
