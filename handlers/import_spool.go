package handlers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/accordlab/accord/runners/sshrun"
)

// Budgets of an imported bundle's raw outputs. They are stored one at a
// time (streamed into the artifact store) and each is read whole by its
// importer (the importers take bytes), so one is at most what a result
// file import takes; small ones stay in
// memory up to importSpoolMemory, the rest wait in a temporary folder.
const (
	maxImportArtifact = maxResultUpload
	maxImportTotal    = maxBundleUpload
	importSpoolMemory = 8 << 20
)

// importTooLarge says which budget an imported bundle's raw outputs broke.
type importTooLarge struct{ what string }

func (e *importTooLarge) Error() string { return e.what }

// importSpool keeps an imported bundle's artifacts as they are read, as a
// collected run folder (sshrun.Collection) whose big files are temporary
// files.
type importSpool struct {
	dir      string
	files    []sshrun.File
	total    int64
	inMemory int64
}

func newImportSpool() (*importSpool, error) {
	dir, err := os.MkdirTemp("", "accord-import-*")
	if err != nil {
		return nil, fmt.Errorf("import: temporary folder: %w", err)
	}
	return &importSpool{dir: dir}, nil
}

// sink is the attest.ArtifactSink of the import.
func (s *importSpool) sink(ctx context.Context, name string, size int64, r io.Reader) error {
	if size > maxImportArtifact {
		return &importTooLarge{what: fmt.Sprintf("raw output %s is larger than %d MiB, the most an import takes of one file", name, maxImportArtifact>>20)}
	}
	if s.total+size > maxImportTotal {
		return &importTooLarge{what: fmt.Sprintf("its raw outputs come to more than %d MiB, the most an import takes", maxImportTotal>>20)}
	}
	h := sha256.New()
	f := sshrun.File{Name: name, Size: size}
	if s.inMemory+size <= importSpoolMemory {
		var buf bytes.Buffer
		if err := copyExactly(io.MultiWriter(&buf, h), r, name, size); err != nil {
			return err
		}
		f.Data = buf.Bytes()
		s.inMemory += size
	} else {
		f.Path = filepath.Join(s.dir, strconv.Itoa(len(s.files)))
		out, err := os.OpenFile(f.Path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("import: spool %s: %w", name, err)
		}
		err = copyExactly(io.MultiWriter(out, h), r, name, size)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(f.Path) // a failed file keeps no name

			return err
		}
	}
	f.SHA256 = hex.EncodeToString(h.Sum(nil))
	s.files = append(s.files, f)
	s.total += size
	return nil
}

// copyExactly copies the size bytes r announced: fewer is an error, and
// more are not read.
func copyExactly(w io.Writer, r io.Reader, name string, size int64) error {
	n, err := io.Copy(w, io.LimitReader(r, size))
	if err == nil && n != size {
		err = fmt.Errorf("import: %s: %d bytes where %d were announced", name, n, size)
	}
	return err
}

// collection is the spooled artifacts as a run folder, sorted by name.
func (s *importSpool) collection() *sshrun.Collection {
	c := &sshrun.Collection{Files: s.files, Bytes: s.total}
	sort.Slice(c.Files, func(i, j int) bool { return c.Files[i].Name < c.Files[j].Name })
	return c
}

func (s *importSpool) remove() error { return os.RemoveAll(s.dir) }
