package attest

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Limits are the fixed budgets of reading one bundle. Whatever an archive
// holds, reading it costs at most these: a decompression bomb is refused
// with a *LimitError that names the budget it broke, never by running the
// server out of memory.
type Limits struct {
	// Uncompressed bounds the bytes the gzip stream expands to: tar
	// headers, padding and contents together.
	Uncompressed int64
	// Ratio bounds uncompressed / compressed bytes; it is checked once
	// RatioFloor bytes have been expanded (small files compress well).
	Ratio      int64
	RatioFloor int64
	// Entries bounds the archive's entries.
	Entries int
	// File bounds one file verification reads whole: the manifest,
	// bundle.json, the keys, the report, the decision log, an attestation.
	// Artifacts are streamed and bounded only by Uncompressed.
	File int64
	// Memory bounds what those files and the entries' names occupy in
	// memory together; files beyond it spill to one unlinked temporary
	// file of at most Spill bytes.
	Memory int64
	Spill  int64
}

// DefaultLimits are the budgets of the server and `accord verify`. A
// bundle Accord writes is far inside them: its metadata files are
// kilobytes, and raw outputs compress a few times, not a hundred.
var DefaultLimits = Limits{
	Uncompressed: 8 << 30,
	Ratio:        100,
	RatioFloor:   32 << 20,
	Entries:      10_000,
	File:         16 << 20,
	Memory:       8 << 20,
	Spill:        256 << 20,
}

// LimitError says which budget of Limits a bundle broke.
type LimitError struct {
	// Limit names the budget: "uncompressed size", "compression ratio",
	// "entries", "file size", "memory" or "temporary space".
	Limit string
	// File is the bundle file that broke it, when one did.
	File string
	// Max is the budget (bytes, or a count for entries and the ratio).
	Max int64
}

func (e *LimitError) Error() string {
	var what string
	switch e.Limit {
	case "uncompressed size":
		what = "it expands to more than " + sizeText(e.Max)
	case "compression ratio":
		what = fmt.Sprintf("it expands more than %d times its compressed size", e.Max)
	case "entries":
		what = fmt.Sprintf("it has more than %d entries", e.Max)
	case "file size":
		what = fmt.Sprintf("%s is larger than %s", e.File, sizeText(e.Max))
	case "memory":
		what = "its file names take more than " + sizeText(e.Max)
	case "temporary space":
		what = "its metadata files need more than " + sizeText(e.Max) + " of temporary space"
	default:
		what = "it is too large"
	}
	return fmt.Sprintf("bundle refused: %s (limit on the %s)", what, e.Limit)
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

type bundleEntry struct {
	sha256 string
	size   int64
}

// bundleReader reads a bundle's archive once, streaming: artifacts are
// hashed (and given to the sink), the files verification needs whole are
// held in a heldFiles spool.
type bundleReader struct {
	ctx    context.Context
	sink   ArtifactSink
	limits Limits
	// contents says whether the caller wants the kept files' contents
	// (import) or only the report (verification).
	contents bool

	top   string
	seen  map[string]bool
	files map[string]bundleEntry // covered by the manifest
	held  *heldFiles             // the manifest, signatures, attestations, kept metadata
	atts  map[string]bundleEntry // attestations/ files among held
	sigs  map[string]bool        // MANIFEST.sha256[.NAME].sig / .allowed_signers among held
	// manifest is MANIFEST.sha256, read back once verification starts.
	manifest []byte
}

// keptFiles are held (and hashed) for checks and import.
var keptFiles = map[string]bool{
	FileBundleJSON: true, FileReportHTML: true, FileSummary: true, FileFacts: true,
	FileEvaluation: true, FileDecisions: true, FileKeysJSON: true, FileSignerPEM: true,
	FileProfile: true, FileGateSet: true,
}

// readBundle reads and verifies a bundle within limits; contents asks for
// the kept files' contents in Imported.
func readBundle(ctx context.Context, r io.Reader, trusted *KeySet, sink ArtifactSink, contents bool, limits Limits) (*Imported, error) {
	br := &bundleReader{
		ctx: ctx, sink: sink, limits: limits, contents: contents,
		seen: map[string]bool{}, files: map[string]bundleEntry{},
		held: &heldFiles{limits: limits, mem: map[string][]byte{}, spilled: map[string]span{}},
		atts: map[string]bundleEntry{}, sigs: map[string]bool{},
	}
	defer br.held.close()
	if err := br.read(r); err != nil {
		return nil, err
	}
	return br.verify(trusted)
}

// file returns a held file's bytes; ok is false when the bundle has no
// such file.
func (br *bundleReader) file(name string) (data []byte, ok bool, err error) {
	return br.held.get(name)
}

// kept is file for the metadata verification needs, nil when absent.
func (br *bundleReader) kept(name string) ([]byte, error) {
	b, _, err := br.held.get(name)
	return b, err
}

func (br *bundleReader) read(r io.Reader) error {
	compressed := &countingReader{r: r}
	gz, err := gzip.NewReader(compressed)
	if err != nil {
		return fmt.Errorf("bundle: not a gzip file: %w", err)
	}
	defer gz.Close()
	tr := tar.NewReader(&budgetReader{ctx: br.ctx, r: gz, compressed: compressed, limits: br.limits})
	for n := 0; ; n++ {
		if err := br.ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return readError("read tar", err)
		}
		if n >= br.limits.Entries {
			return &LimitError{Limit: "entries", Max: int64(br.limits.Entries)}
		}
		rel, isDir, err := br.entryName(hdr)
		if err != nil {
			return err
		}
		if isDir {
			continue
		}
		if err := br.held.charge(int64(2*len(rel)) + entryOverhead); err != nil {
			return err
		}
		if err := br.readFile(rel, hdr.Size, tr); err != nil {
			return err
		}
	}
	if br.top == "" {
		return errors.New("bundle: empty archive")
	}
	return nil
}

// entryOverhead approximates what one entry's bookkeeping costs in memory
// beyond its name (map slots, digests).
const entryOverhead = 192

// readError wraps a read error, passing a broken budget through as it is.
func readError(what string, err error) error {
	var le *LimitError
	if errors.As(err, &le) {
		return le
	}
	return fmt.Errorf("bundle: %s: %w", what, err)
}

// entryName checks a tar entry: a regular file or directory, under the one
// top directory, with a clean relative name seen once.
func (br *bundleReader) entryName(hdr *tar.Header) (string, bool, error) {
	name := strings.TrimSuffix(hdr.Name, "/")
	top, rel, _ := strings.Cut(name, "/")
	if br.top == "" {
		br.top = top
	}
	if top != br.top || top == "" || top == "." || top == ".." {
		return "", false, tamper(hdr.Name, "outside the bundle directory "+br.top, nil)
	}
	if hdr.Typeflag == tar.TypeDir {
		return "", true, nil
	}
	if hdr.Typeflag != tar.TypeReg {
		return "", false, tamper(hdr.Name, fmt.Sprintf("not a regular file (type %q)", hdr.Typeflag), nil)
	}
	if err := checkArtifactName(rel); err != nil {
		return "", false, tamper(hdr.Name, "bad file name", err)
	}
	if br.seen[rel] {
		return "", false, tamper(rel, "appears twice in the archive", nil)
	}
	br.seen[rel] = true
	return rel, false, nil
}

func (br *bundleReader) readFile(rel string, size int64, r io.Reader) error {
	switch {
	case rel == FileManifest:
		_, err := br.held.add(rel, size, br.limits.File, r)
		return err
	case isSignatureFile(rel):
		if size > maxSignatureFile {
			return tamper(rel, fmt.Sprintf("%d bytes, more than the %d allowed", size, maxSignatureFile), nil)
		}
		br.sigs[rel] = true
		_, err := br.held.add(rel, size, maxSignatureFile, r)
		return err
	case strings.HasPrefix(rel, dirAttestations):
		sum, err := br.held.add(rel, size, br.limits.File, r)
		if err != nil {
			return err
		}
		br.atts[rel] = bundleEntry{sha256: sum, size: size}
		return nil
	case keptFiles[rel] || strings.HasPrefix(rel, "keys/"):
		sum, err := br.held.add(rel, size, br.limits.File, r)
		if err != nil {
			return err
		}
		br.files[rel] = bundleEntry{sha256: sum, size: size}
		return nil
	}
	h := sha256.New()
	var n int64
	var err error
	if name, ok := strings.CutPrefix(rel, dirArtifacts); ok && br.sink != nil {
		counted := &countingReader{r: io.TeeReader(r, h)}
		if err := br.sink(br.ctx, name, size, counted); err != nil {
			return readError("store artifact "+name, err)
		}
		// Hash whatever the sink left unread.
		if _, err := io.Copy(io.Discard, counted); err != nil {
			return readError("read "+rel, err)
		}
		n = counted.n
	} else {
		n, err = io.Copy(h, r)
		if err != nil {
			return readError("read "+rel, err)
		}
	}
	br.files[rel] = bundleEntry{sha256: hex.EncodeToString(h.Sum(nil)), size: n}
	return nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// budgetReader is the decompressed stream, refused past the uncompressed
// size and compression ratio budgets, and stopped when ctx ends (hashing
// one large entry happens inside a single io.Copy).
type budgetReader struct {
	ctx        context.Context
	r          io.Reader
	compressed *countingReader
	limits     Limits
	n          int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.limits.Uncompressed {
		return n, &LimitError{Limit: "uncompressed size", Max: b.limits.Uncompressed}
	}
	if b.n > b.limits.RatioFloor && b.n > b.limits.Ratio*max(b.compressed.n, 1) {
		return n, &LimitError{Limit: "compression ratio", Max: b.limits.Ratio}
	}
	return n, err
}

// heldFiles keeps the files verification reads whole: in memory while
// they fit the memory budget, otherwise in one unlinked temporary file
// capped at the spill budget. At most one spilled file is read back into
// memory at a time (by the caller).
type heldFiles struct {
	limits    Limits
	memUsed   int64
	mem       map[string][]byte
	spilled   map[string]span
	spill     *os.File
	spillUsed int64
}

type span struct{ off, n int64 }

// charge counts bytes of bookkeeping against the memory budget; they do
// not spill.
func (h *heldFiles) charge(n int64) error {
	if h.memUsed+n > h.limits.Memory {
		return &LimitError{Limit: "memory", Max: h.limits.Memory}
	}
	h.memUsed += n
	return nil
}

// add keeps the size bytes of r under name (at most limit of them) and
// returns their SHA-256.
func (h *heldFiles) add(name string, size, limit int64, r io.Reader) (string, error) {
	if size > limit {
		return "", &LimitError{Limit: "file size", File: name, Max: limit}
	}
	sum := sha256.New()
	if h.memUsed+size <= h.limits.Memory {
		buf := make([]byte, size)
		if _, err := io.ReadFull(io.TeeReader(r, sum), buf); err != nil {
			return "", readError("read "+name, err)
		}
		h.memUsed += size
		h.mem[name] = buf
		return hex.EncodeToString(sum.Sum(nil)), nil
	}
	if h.spillUsed+size > h.limits.Spill {
		return "", &LimitError{Limit: "temporary space", File: name, Max: h.limits.Spill}
	}
	if h.spill == nil {
		f, err := os.CreateTemp("", "accord-bundle-*")
		if err != nil {
			return "", fmt.Errorf("bundle: temporary file: %w", err)
		}
		// Unlinked at once: nothing is left behind whatever happens next.
		if err := os.Remove(f.Name()); err != nil {
			_ = f.Close()
			return "", fmt.Errorf("bundle: temporary file: %w", err)
		}
		h.spill = f
	}
	n, err := io.Copy(io.MultiWriter(&offsetWriter{f: h.spill, off: h.spillUsed}, sum), io.LimitReader(r, size))
	if err != nil {
		return "", readError("spill "+name, err)
	}
	if n != size {
		return "", fmt.Errorf("bundle: read %s: %w", name, io.ErrUnexpectedEOF)
	}
	h.spilled[name] = span{off: h.spillUsed, n: size}
	h.spillUsed += size
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// get returns a held file's bytes (read back when spilled).
func (h *heldFiles) get(name string) ([]byte, bool, error) {
	if b, ok := h.mem[name]; ok {
		return b, true, nil
	}
	s, ok := h.spilled[name]
	if !ok {
		return nil, false, nil
	}
	buf := make([]byte, s.n)
	if _, err := h.spill.ReadAt(buf, s.off); err != nil {
		return nil, false, fmt.Errorf("bundle: read back %s: %w", name, err)
	}
	return buf, true, nil
}

func (h *heldFiles) close() {
	if h.spill != nil {
		_ = h.spill.Close()
	}
}

type offsetWriter struct {
	f   *os.File
	off int64
}

func (w *offsetWriter) Write(p []byte) (int, error) {
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	return n, err
}
