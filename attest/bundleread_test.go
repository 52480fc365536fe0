package attest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// streamedArchive is a gzip'd tar written by a goroutine as it is read, so
// that a bomb of gigabytes costs only what the reader takes of it.
type streamedEntry struct {
	name string
	size int64
	fill func([]byte) // nil: zeros
}

func streamedArchive(t *testing.T, entries []streamedEntry) *countingReader {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pr.Close() })
	go func() {
		gz, _ := gzip.NewWriterLevel(pw, gzip.BestSpeed)
		tw := tar.NewWriter(gz)
		buf := make([]byte, 1<<20)
		err := func() error {
			for _, e := range entries {
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "accord-run-1/" + e.name, Size: e.size, Mode: 0o644, ModTime: time.Unix(0, 0)}); err != nil {
					return err
				}
				for left := e.size; left > 0; {
					chunk := buf[:min(left, int64(len(buf)))]
					if e.fill != nil {
						e.fill(chunk)
					}
					if _, err := tw.Write(chunk); err != nil {
						return err
					}
					left -= int64(len(chunk))
				}
			}
			if err := tw.Close(); err != nil {
				return err
			}
			return gz.Close()
		}()
		pw.CloseWithError(err)
	}()
	return &countingReader{r: pr}
}

func randomFill(b []byte) { _, _ = rand.Read(b) }

func requireLimit(t *testing.T, err error, limit string) *LimitError {
	t.Helper()
	var le *LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, limit, le.Limit, err.Error())
	require.Contains(t, err.Error(), "limit on the "+limit)
	return le
}

// The attacker's bomb (sixteen 64 MiB attestations of zeros) is refused at
// its first entry's header, having expanded next to nothing.
func TestBundleBombOfLargeAttestationsIsRefusedByFileSize(t *testing.T) {
	t.Parallel()
	var entries []streamedEntry
	for i := range 16 {
		entries = append(entries, streamedEntry{name: fmt.Sprintf("attestations/a%02d.dsse.json", i), size: 64 << 20})
	}
	in := streamedArchive(t, entries)
	_, err := VerifyBundle(context.Background(), in, nil)
	le := requireLimit(t, err, "file size")
	require.Equal(t, "attestations/a00.dsse.json", le.File)
	require.Contains(t, err.Error(), "attestations/a00.dsse.json is larger than 16 MiB")
	require.Less(t, in.n, int64(1<<20), "refused from the header, not after expanding the entry")
}

// One gigabyte of zeros as an artifact (streamed, so no file size applies)
// is refused by the compression ratio once RatioFloor bytes are expanded.
func TestBundleRatioBombIsRefused(t *testing.T) {
	t.Parallel()
	in := streamedArchive(t, []streamedEntry{{name: "artifacts/zeros.bin", size: 1 << 30}})
	_, err := ImportBundle(context.Background(), in, mustKeySet(t), func(ctx context.Context, name string, size int64, r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	requireLimit(t, err, "compression ratio")
	require.Less(t, in.n*DefaultLimits.Ratio, DefaultLimits.RatioFloor+(8<<20), "stopped soon after the floor")
}

func mustKeySet(t *testing.T) *KeySet {
	t.Helper()
	kr, err := OpenKeyring(t.TempDir(), KeyringOptions{})
	require.NoError(t, err)
	ks, err := kr.KeySet()
	require.NoError(t, err)
	return ks
}

// Incompressible bytes past the uncompressed budget are refused.
func TestBundleUncompressedBudget(t *testing.T) {
	t.Parallel()
	limits := DefaultLimits
	limits.Uncompressed = 1 << 20
	in := streamedArchive(t, []streamedEntry{{name: "artifacts/random.bin", size: 4 << 20, fill: randomFill}})
	_, err := readBundle(context.Background(), in, nil, nil, false, limits)
	requireLimit(t, err, "uncompressed size")
	require.Contains(t, err.Error(), "expands to more than 1 MiB")
}

func TestBundleEntriesBudget(t *testing.T) {
	t.Parallel()
	tb := setupBundle(t)
	limits := DefaultLimits
	limits.Entries = 5
	_, err := readBundle(context.Background(), bytes.NewReader(tb.bundle), tb.keys, nil, false, limits)
	requireLimit(t, err, "entries")
	require.Contains(t, err.Error(), "more than 5 entries")

	// Names count against the memory budget: ten thousand long names do
	// not fit in 1 MiB.
	limits = DefaultLimits
	limits.Memory = 1 << 20
	var entries []streamedEntry
	for i := range 2000 {
		entries = append(entries, streamedEntry{name: fmt.Sprintf("artifacts/%04d-%s", i, strings.Repeat("n", 900)), size: 1})
	}
	_, err = readBundle(context.Background(), streamedArchive(t, entries), nil, nil, false, limits)
	requireLimit(t, err, "memory")
}

// Metadata beyond the memory budget spills to an unlinked temporary file
// and the bundle still verifies and imports with the same bytes; past the
// spill budget it is refused.
func TestBundleMetadataSpillsToATemporaryFile(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	tb := setupBundle(t)
	pub, err := tb.keyring.PublicKeys()
	require.NoError(t, err)
	in := testInput(t, tb.signer, pub, "42", testDecisionLog(t, tb.signer, 3))
	report := make([]byte, 300<<10)
	for i := range report {
		report[i] = 'a' + byte(i%26)
	}
	in.ReportHTML = report
	bundle := writeBundle(t, tb.signer, in)

	limits := DefaultLimits
	limits.Memory = 64 << 10
	imp, err := readBundle(context.Background(), bytes.NewReader(bundle), tb.keys, nil, true, limits)
	require.NoError(t, err)
	require.Equal(t, report, imp.ReportHTML, "read back from the temporary file")
	require.Equal(t, 3, imp.Report.Decisions.Records)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left, "the temporary file is unlinked")

	limits.Spill = 128 << 10
	_, err = readBundle(context.Background(), bytes.NewReader(bundle), tb.keys, nil, true, limits)
	requireLimit(t, err, "temporary space")
}

// heldFiles keeps what fits in memory and spills the rest, byte for byte.
func TestHeldFilesSpill(t *testing.T) {
	t.Parallel()
	h := &heldFiles{limits: Limits{Memory: 10, Spill: 100}, mem: map[string][]byte{}, spilled: map[string]span{}}
	defer h.close()
	for _, f := range []struct{ name, data string }{{"a", "0123456789"}, {"b", "spilled one"}, {"c", "spilled two"}} {
		sum, err := h.add(f.name, int64(len(f.data)), 64, strings.NewReader(f.data))
		require.NoError(t, err)
		require.Equal(t, sha256Hex([]byte(f.data)), sum)
	}
	require.Len(t, h.mem, 1)
	require.Len(t, h.spilled, 2)
	for name, want := range map[string]string{"a": "0123456789", "b": "spilled one", "c": "spilled two"} {
		got, ok, err := h.get(name)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, want, string(got))
	}
	_, ok, err := h.get("d")
	require.NoError(t, err)
	require.False(t, ok)
	_, err = h.add("big", 65, 64, strings.NewReader(strings.Repeat("x", 65)))
	requireLimit(t, err, "file size")
	_, err = h.add("e", 80, 128, strings.NewReader(strings.Repeat("x", 80)))
	requireLimit(t, err, "temporary space")
}

// Reading stops when the request ends, even inside one large entry.
func TestBundleReadingStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	in := streamedArchive(t, []streamedEntry{{name: "artifacts/random.bin", size: 1 << 40, fill: randomFill}})
	done := make(chan error, 1)
	go func() { _, err := readBundle(ctx, in, nil, nil, false, DefaultLimits); done <- err }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(30 * time.Second):
		t.Fatal("reading did not stop")
	}
}

func FuzzReadBundle(f *testing.F) {
	kr, err := OpenKeyring(f.TempDir(), KeyringOptions{})
	if err != nil {
		f.Fatal(err)
	}
	s, err := kr.Active()
	if err != nil {
		f.Fatal(err)
	}
	pub, err := kr.PublicKeys()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(writeBundle(f, s, testInput(f, s, pub, "7", nil)))
	f.Add([]byte{0x1f, 0x8b})
	keys, err := kr.KeySet()
	if err != nil {
		f.Fatal(err)
	}
	limits := Limits{Uncompressed: 1 << 20, Ratio: 50, RatioFloor: 64 << 10, Entries: 64, File: 64 << 10, Memory: 32 << 10, Spill: 256 << 10}
	f.Fuzz(func(t *testing.T, data []byte) {
		imp, err := readBundle(context.Background(), bytes.NewReader(data), keys, nil, true, limits)
		if err != nil {
			var le *LimitError
			if errors.As(err, &le) && le.Limit == "" {
				t.Fatalf("a limit error without its limit: %v", err)
			}
			return
		}
		if imp.Report.Manifest.KeyID != s.KeyID() || len(imp.Report.Files) == 0 {
			t.Fatalf("verified without the trusted signer: %+v", imp.Report.Manifest)
		}
		if int64(len(imp.ReportHTML)) > limits.File {
			t.Fatalf("report of %d bytes held past the file budget", len(imp.ReportHTML))
		}
	})
}
