package sshrun

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/accordlab/accord/runners/probe/wire"
)

// Limits bound what Collect accepts from a host.
type Limits struct {
	MaxFileBytes  int64  // one file; default 2 GiB
	MaxTotalBytes int64  // all files; default 8 GiB
	MemoryBytes   int64  // files up to this size stay in memory, larger ones go to a temporary file; default 4 MiB
	TempDir       string // for the temporary files; default os.TempDir()
}

func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = 2 << 30
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = 8 << 30
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = 4 << 20
	}
	return l
}

// File is one collected file of a run folder.
type File struct {
	Name   string // relative to the run folder, slash-separated
	Size   int64
	SHA256 string // hex, computed while reading
	Data   []byte // the content when it fitted in memory
	Path   string // otherwise a temporary file holding it (removed by Collection.Remove)
}

// Open reads the file's content wherever it is kept.
func (f File) Open() (io.ReadCloser, error) {
	if f.Path != "" {
		return os.Open(f.Path)
	}
	return io.NopCloser(bytes.NewReader(f.Data)), nil
}

// Collection is a run folder as collected, every file checked against the
// folder's manifest. Duplicates across runs are the artifact store's
// business.
type Collection struct {
	Files []File // sorted by name; the manifest is one of them
	Bytes int64  // total size
	// Links are symbolic links in the folder, kept out of Files: they carry
	// no content and the manifest lists regular files only.
	Links []string
}

// Remove deletes the temporary files of the collection.
func (c *Collection) Remove() error {
	var errs []error
	for _, f := range c.Files {
		if f.Path != "" {
			if err := os.Remove(f.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// File returns the collected file of that name.
func (c *Collection) File(name string) (File, bool) {
	i := sort.Search(len(c.Files), func(i int) bool { return c.Files[i].Name >= name })
	if i < len(c.Files) && c.Files[i].Name == name {
		return c.Files[i], true
	}
	return File{}, false
}

// ErrTooLarge: a file or the whole folder is over the limits; the error
// is a *LimitError.
var ErrTooLarge = errors.New("sshrun: run folder over the size limit")

// LimitError says which limit was crossed.
type LimitError struct {
	Name  string // the file that crossed it
	Size  int64  // its size, or the total so far with it
	Limit int64
	Total bool // the total limit rather than the per-file one
}

func (e *LimitError) Error() string {
	if e.Total {
		return fmt.Sprintf("sshrun: run folder is over the total limit of %d bytes at %s (%d bytes so far)", e.Limit, e.Name, e.Size)
	}
	return fmt.Sprintf("sshrun: file %s is %d bytes, over the per-file limit of %d bytes", e.Name, e.Size, e.Limit)
}

func (e *LimitError) Is(target error) bool { return target == ErrTooLarge }

// ErrManifest: the collected files do not match the run folder's manifest.
var ErrManifest = errors.New("sshrun: run folder does not match its manifest")

// Collect runs `probe pack`, reads its tar stream hashing every file as it
// comes, enforces limits, and checks the files against MANIFEST.sha256:
// every listed file present with its digest, nothing unlisted. On error
// nothing is left behind (no temporary files).
func (c *Client) Collect(ctx context.Context, runDir string, limits Limits) (*Collection, error) {
	argv, err := c.probeArgv("pack", "--dir", runDir)
	if err != nil {
		return nil, err
	}
	limits = limits.withDefaults()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	stderr := &limitedBuffer{limit: 4 << 10, truncate: true}
	var (
		code int
		serr error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		code, serr = c.Stream(sctx, argv, nil, pw, stderr)
		_ = pw.Close()
	}()

	coll, rerr := readPack(pr, limits)
	if rerr == nil {
		_, rerr = io.Copy(io.Discard, pr) // the tar's padding
	}
	if rerr != nil {
		cancel()
		_ = pr.CloseWithError(rerr)
	}
	<-done
	fail := func(err error) (*Collection, error) {
		if coll != nil {
			_ = coll.Remove()
		}
		return nil, fmt.Errorf("sshrun: collect %s: %w", runDir, err)
	}
	switch {
	case rerr != nil && (errors.Is(rerr, ErrTooLarge) || errors.Is(rerr, ErrManifest)):
		return fail(rerr)
	case serr != nil && !errors.Is(serr, context.Canceled):
		return fail(serr)
	case ctx.Err() != nil:
		return fail(ctx.Err())
	case code != 0:
		return fail(fmt.Errorf("probe pack: exit %d: %s", code, firstLine(stderr.Bytes())))
	case rerr != nil:
		return fail(rerr)
	}
	if err := coll.checkManifest(); err != nil {
		return fail(err)
	}
	return coll, nil
}

// readPack reads a tar stream into a Collection within limits. On error the
// partial collection is returned so that its temporary files can be
// removed.
func readPack(r io.Reader, limits Limits) (*Collection, error) {
	coll := &Collection{}
	seen := map[string]bool{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return coll, fmt.Errorf("read pack: %w", err)
		}
		name, err := cleanName(hdr.Name)
		if err != nil {
			return coll, err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeSymlink:
			coll.Links = append(coll.Links, name)
			continue
		case tar.TypeReg:
		default:
			return coll, fmt.Errorf("read pack: %s: unexpected entry type %q", name, hdr.Typeflag)
		}
		if seen[name] {
			return coll, fmt.Errorf("%w: %s appears twice in the pack", ErrManifest, name)
		}
		seen[name] = true
		if hdr.Size < 0 || hdr.Size > limits.MaxFileBytes {
			return coll, &LimitError{Name: name, Size: hdr.Size, Limit: limits.MaxFileBytes}
		}
		if coll.Bytes+hdr.Size > limits.MaxTotalBytes {
			return coll, &LimitError{Name: name, Size: coll.Bytes + hdr.Size, Limit: limits.MaxTotalBytes, Total: true}
		}
		f, err := readFile(tr, name, hdr.Size, limits)
		if f.Path != "" || f.Data != nil {
			coll.Files = append(coll.Files, f)
		}
		if err != nil {
			return coll, err
		}
		coll.Bytes += f.Size
	}
	sort.Slice(coll.Files, func(i, j int) bool { return coll.Files[i].Name < coll.Files[j].Name })
	return coll, nil
}

func readFile(r io.Reader, name string, size int64, limits Limits) (File, error) {
	f := File{Name: name}
	h := sha256.New()
	if size <= limits.MemoryBytes {
		f.Data = make([]byte, 0, size)
		buf := bytes.NewBuffer(f.Data)
		n, err := io.Copy(io.MultiWriter(buf, h), r)
		f.Data, f.Size = buf.Bytes(), n
		if err != nil {
			return f, fmt.Errorf("read pack: %s: %w", name, err)
		}
	} else {
		tmp, err := os.CreateTemp(limits.TempDir, "accord-artifact-*")
		if err != nil {
			return f, fmt.Errorf("read pack: %s: %w", name, err)
		}
		f.Path = tmp.Name()
		n, err := io.Copy(io.MultiWriter(tmp, h), r)
		f.Size = n
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return f, fmt.Errorf("read pack: %s: %w", name, err)
		}
	}
	if f.Size != size {
		return f, fmt.Errorf("read pack: %s: %d bytes, header says %d", name, f.Size, size)
	}
	f.SHA256 = hex.EncodeToString(h.Sum(nil))
	return f, nil
}

// cleanName turns a tar entry name into a clean path relative to the run
// folder, refusing anything that would leave it.
func cleanName(name string) (string, error) {
	n := strings.TrimPrefix(name, "./")
	n = strings.TrimSuffix(n, "/")
	if n == "" || n == "." {
		return ".", nil
	}
	if strings.HasPrefix(n, "/") || strings.ContainsRune(n, 0) || strings.ContainsRune(n, '\\') {
		return "", fmt.Errorf("read pack: entry %q: unsafe name", name)
	}
	clean := path.Clean(n)
	if clean != n || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("read pack: entry %q: unsafe name", name)
	}
	return clean, nil
}

// checkManifest compares the files with MANIFEST.sha256.
func (c *Collection) checkManifest() error {
	mf, ok := c.File(wire.ManifestFile)
	if !ok {
		return fmt.Errorf("%w: no %s in the pack", ErrManifest, wire.ManifestFile)
	}
	data := mf.Data
	if mf.Path != "" {
		var err error
		if data, err = os.ReadFile(mf.Path); err != nil {
			return fmt.Errorf("read %s: %w", wire.ManifestFile, err)
		}
	}
	want, err := ParseManifest(data)
	if err != nil {
		return err
	}
	var problems []string
	for _, f := range c.Files {
		if f.Name == wire.ManifestFile {
			continue
		}
		sum, listed := want[f.Name]
		switch {
		case !listed:
			problems = append(problems, f.Name+" is not in the manifest")
		case sum != f.SHA256:
			problems = append(problems, fmt.Sprintf("%s hashes to %s, manifest says %s", f.Name, f.SHA256, sum))
		}
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := c.File(name); !ok {
			problems = append(problems, name+" is in the manifest but not in the pack")
		}
	}
	if len(problems) > 0 {
		if len(problems) > 10 {
			problems = append(problems[:10], fmt.Sprintf("and %d more", len(problems)-10))
		}
		return fmt.Errorf("%w: %s", ErrManifest, strings.Join(problems, "; "))
	}
	return nil
}

// ParseManifest reads sha256sum output ("HEX  NAME" or "HEX *NAME" per
// line, with sha256sum's backslash escaping of names holding a newline or
// a backslash) into name → hex digest, names cleaned as in the pack.
func ParseManifest(data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		escaped := strings.HasPrefix(line, `\`)
		if escaped {
			line = line[1:]
		}
		if len(line) < 66 || (line[64] != ' ') || (line[65] != ' ' && line[65] != '*') {
			return nil, fmt.Errorf("%w: line %d: not \"SHA256  NAME\"", ErrManifest, n)
		}
		sum := line[:64]
		if _, err := hex.DecodeString(sum); err != nil || strings.ToLower(sum) != sum {
			return nil, fmt.Errorf("%w: line %d: %q is not a lower-case SHA-256", ErrManifest, n, sum)
		}
		name := line[66:]
		if escaped {
			var err error
			if name, err = unescapeName(name); err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrManifest, n, err)
			}
		}
		clean, err := cleanName(name)
		if err != nil || clean == "." {
			return nil, fmt.Errorf("%w: line %d: bad name %q", ErrManifest, n, name)
		}
		if _, dup := out[clean]; dup {
			return nil, fmt.Errorf("%w: line %d: %s listed twice", ErrManifest, n, clean)
		}
		out[clean] = sum
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	return out, nil
}

// unescapeName undoes sha256sum's escaping: \\ is a backslash, \n a newline
// (and, in newer coreutils, \r a carriage return).
func unescapeName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", errors.New("name ends in a lone backslash")
		}
		i++
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		default:
			return "", fmt.Errorf("unknown escape \\%c", s[i])
		}
	}
	return b.String(), nil
}
