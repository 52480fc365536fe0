// Package attesttest checks report bundles the way a third party does: it
// unpacks them with the real tar, runs VERIFY.md's standard-tool procedure
// with bash, and tampers with them file by file. Tests of attest and of the
// packages that sign real runs share it. (attest's in-package tests keep
// small helpers of their own, extract and flipByte: they cannot import
// this package, which imports attest.)
package attesttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/attest"
)

// RequireTools fails the test when a command it runs is not installed.
func RequireTools(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Fatalf("%s is required for this test: %v", n, err)
		}
	}
}

// Extract unpacks a bundle with the real tar into a new directory and
// returns the bundle's top directory.
func Extract(t testing.TB, bundle []byte) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("tar", "xzf", "-", "-C", dir)
	cmd.Stdin = bytes.NewReader(bundle)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	tops, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, tops, 1)
	return filepath.Join(dir, tops[0].Name())
}

// Pack packs an extracted bundle directory again with the real tar.
func Pack(t testing.TB, dir string) []byte {
	t.Helper()
	out, err := pack(dir)
	require.NoError(t, err)
	return out
}

func pack(dir string) ([]byte, error) {
	return exec.Command("tar", "czf", "-", "-C", filepath.Dir(dir), filepath.Base(dir)).Output()
}

var fence = regexp.MustCompile("(?ms)^```([a-z-]+)\n(.*?)^```$")

// Blocks returns VERIFY.md's fenced blocks of one language, in order.
func Blocks(t testing.TB, dir, lang string) []string {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(dir, attest.FileVerifyMD))
	require.NoError(t, err)
	var blocks []string
	for _, m := range fence.FindAllStringSubmatch(string(md), -1) {
		if m[1] == lang {
			blocks = append(blocks, m[2])
		}
	}
	require.NotEmpty(t, blocks, "VERIFY.md has no %s blocks", lang)
	return blocks
}

// Procedure is VERIFY.md's standard-tool procedure: the script that
// VERIFY.md's own one-line command (attest.RunAllCommand, which must be in
// its console block) extracts from it with sed, which is its sh blocks in
// order.
func Procedure(t testing.TB, dir string) string {
	t.Helper()
	require.Contains(t, Blocks(t, dir, "console"), attest.RunAllCommand+"\n")
	extract, _, ok := strings.Cut(attest.RunAllCommand, " | bash ")
	require.True(t, ok)
	cmd := exec.Command("bash", "-c", extract)
	cmd.Dir = dir
	script, err := cmd.Output()
	require.NoError(t, err)
	require.Equal(t, strings.Join(Blocks(t, dir, "sh"), ""), string(script), "the one-line command extracts the sh blocks")
	return string(script)
}

// Run runs a script verbatim with bash -e -o pipefail in dir.
func Run(dir, script string, env ...string) (string, error) {
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, out)
	}
	return string(out), nil
}

// ChangeFile changes one letter in the middle of a file (swapping its
// case, so base64 stays base64), or gives an empty file one byte.
func ChangeFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, ChangeBytes(data), 0o644)
}

// ChangeBytes returns data with one letter's case swapped (or one bit
// flipped where there is no letter; "x" for empty data).
func ChangeBytes(data []byte) []byte {
	if len(data) == 0 {
		return []byte("x")
	}
	out := bytes.Clone(data)
	for i := len(out) / 2; i < len(out); i++ {
		c := out[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			out[i] ^= 0x20
			return out
		}
	}
	out[len(out)/2] ^= 0x01
	return out
}

// Tamper is one change to an extracted bundle.
type Tamper struct {
	Kind  string // "change", "remove" or "add"
	File  string // the path under the bundle's top directory
	Apply func(dir string) error
}

func (tm Tamper) String() string { return tm.Kind + " " + tm.File }

// Files lists every file of an extracted bundle by its path under the top
// directory, sorted.
func Files(t testing.TB, dir string) []string {
	t.Helper()
	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files = append(files, filepath.ToSlash(rel))
		return err
	}))
	slices.Sort(files)
	return files
}

// Tampers lists the tampers of a genuine extracted bundle: every file
// changed, every file removed, and files added in every directory: plain
// ones, ones named like the manifest and its signatures (which only the
// top directory may hold unlisted), a lone co-signature file, ones whose
// names hold a newline or another control character (and a folder whose
// name does), and a symbolic link.
func Tampers(t testing.TB, dir string) []Tamper {
	t.Helper()
	files := Files(t, dir)
	var out []Tamper
	for _, f := range files {
		out = append(out, Tamper{Kind: "change", File: f, Apply: func(d string) error { return ChangeFile(filepath.Join(d, f)) }})
	}
	for _, f := range files {
		out = append(out, Tamper{Kind: "remove", File: f, Apply: func(d string) error { return os.Remove(filepath.Join(d, f)) }})
	}
	dirs := map[string]bool{"": true}
	for _, f := range files {
		for d := filepath.Dir(f); d != "."; d = filepath.Dir(d) {
			dirs[filepath.ToSlash(d)] = true
		}
	}
	have := map[string]bool{}
	for _, f := range files {
		have[f] = true
	}
	add := func(name string, data []byte) {
		if have[name] {
			return
		}
		have[name] = true
		out = append(out, Tamper{Kind: "add", File: name, Apply: func(d string) error {
			path := filepath.Join(d, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			return os.WriteFile(path, data, 0o644)
		}})
	}
	join := func(d, name string) string {
		if d == "" {
			return name
		}
		return d + "/" + name
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		add(join(d, "added.txt"), []byte("added\n"))
		add(join(d, attest.FileManifest), []byte("0000000000000000000000000000000000000000000000000000000000000000  added.txt\n"))
		add(join(d, attest.FileManifest+".extra"), []byte("extra\n"))
		add(join(d, attest.FileManifest+".evil"), []byte("evil\n"))
		add(join(d, attest.FileManifestSig), []byte("-----BEGIN SSH SIGNATURE-----\n-----END SSH SIGNATURE-----\n"))
		add(join(d, attest.FileManifest+".mallory.sig"), []byte("-----BEGIN SSH SIGNATURE-----\n-----END SSH SIGNATURE-----\n"))
		add(join(d, attest.FileManifest+".mallory.allowed_signers"), []byte("mallory ssh-ed25519 AAAA\n"))
	}
	// Names with control characters: a newline makes find print one file
	// as two lines, each of which may pass (at the top, both halves are
	// names the manifest does not list), so that VERIFY.md's line-based
	// comparison would see neither. In every directory, and as a folder.
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		for _, name := range []string{
			attest.FileManifest + "\n" + attest.FileManifestSig,
			attest.FileManifestSig + "\n" + attest.FileManifest + ".mallory.sig",
			"added\n.txt",
			"added\r.txt",
			"added\t.txt",
			"added\x1b[2K.txt",
			"added\x7f.txt",
		} {
			add(join(d, name), []byte("added\n"))
		}
	}
	add(attest.FileManifestSig+"\n"+attest.FileManifest+"/"+attest.FileManifestSig, []byte("in a folder whose name holds a newline\n"))
	add("artifacts/new/deep/added.json", []byte("{}\n"))
	add("attestations/extra"+".dsse.json", []byte("{}\n"))
	out = append(out, Tamper{Kind: "add", File: "artifacts/link (symbolic link to ../facts.json)", Apply: func(d string) error {
		return os.Symlink("../"+attest.FileFacts, filepath.Join(d, "artifacts", "link"))
	}})
	return out
}

// Outcome is what both procedures said of one tamper.
type Outcome struct {
	Tamper Tamper
	// StandardTools is VERIFY.md's procedure's error (nil: not caught).
	StandardTools error
	// Accord is VerifyBundle's error on the bundle packed again (nil: not caught).
	Accord error
}

// Matrix is the outcome of every tamper of a bundle.
type Matrix struct {
	Outcomes []Outcome
}

// Caught counts the tampers each procedure caught.
func (m Matrix) Caught() (standardTools, accord int) {
	for _, o := range m.Outcomes {
		if o.StandardTools != nil {
			standardTools++
		}
		if o.Accord != nil {
			accord++
		}
	}
	return standardTools, accord
}

// Missed lists the tampers a procedure let through.
func (m Matrix) Missed() (standardTools, accord []string) {
	for _, o := range m.Outcomes {
		if o.StandardTools == nil {
			standardTools = append(standardTools, o.Tamper.String())
		}
		if o.Accord == nil {
			accord = append(accord, o.Tamper.String())
		}
	}
	return standardTools, accord
}

// Summary is "standard tools N of M, accord verify N of M".
func (m Matrix) Summary() string {
	st, ac := m.Caught()
	return fmt.Sprintf("standard tools caught %d of %d tampers, accord verify %d of %d", st, len(m.Outcomes), ac, len(m.Outcomes))
}

// CheckTampers checks a genuine bundle and then every tamper of it with
// VERIFY.md's standard-tool procedure (taken from the genuine bundle, as a
// verifier reads the instructions once) and with attest.VerifyBundle
// against trusted. The genuine bundle must pass both.
func CheckTampers(t testing.TB, bundle []byte, trusted *attest.KeySet) Matrix {
	t.Helper()
	RequireTools(t, "bash", "tar", "sha256sum", "find", "sed", "grep", "sort", "diff", "cut", "ssh-keygen", "openssl", "base64")
	genuine := Extract(t, bundle)
	procedure := Procedure(t, genuine)
	out, err := Run(genuine, procedure)
	require.NoError(t, err, "the genuine bundle fails VERIFY.md's procedure")
	require.NotContains(t, out, "FAILED")
	out, err = Run(genuine, attest.RunAllCommand)
	require.NoError(t, err, "the genuine bundle fails VERIFY.md's one-line command")
	require.True(t, strings.HasSuffix(out, "All checks passed.\n"), out)
	_, err = attest.VerifyBundle(context.Background(), bytes.NewReader(bundle), trusted)
	require.NoError(t, err, "the genuine bundle fails accord verify")

	// Each tamper is independent (its own copy, its own bash and tar), so
	// they run a few at a time: a real run's bundle has about 200.
	tampers := Tampers(t, genuine)
	m := Matrix{Outcomes: make([]Outcome, len(tampers))}
	errs := make([]error, len(tampers))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				m.Outcomes[i], errs[i] = checkTamper(t.TempDir(), genuine, procedure, tampers[i], trusted)
			}
		})
	}
	for i := range tampers {
		next <- i
	}
	close(next)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	return m
}

// checkTamper applies tm to a copy of the genuine bundle made under tmp and
// runs both procedures on it. Its error is a failure of the check itself
// (a copy, the tamper or the packing), never a caught tamper.
func checkTamper(tmp, genuine, procedure string, tm Tamper, trusted *attest.KeySet) (Outcome, error) {
	o := Outcome{Tamper: tm}
	dir := filepath.Join(tmp, filepath.Base(genuine))
	if err := os.CopyFS(dir, os.DirFS(genuine)); err != nil {
		return o, fmt.Errorf("%s: copy: %w", tm, err)
	}
	if err := tm.Apply(dir); err != nil {
		return o, fmt.Errorf("%s: %w", tm, err)
	}
	if _, err := Run(dir, procedure); err != nil {
		o.StandardTools = err
	}
	packed, err := pack(dir)
	if err != nil {
		return o, fmt.Errorf("%s: pack: %w", tm, err)
	}
	_, o.Accord = attest.VerifyBundle(context.Background(), bytes.NewReader(packed), trusted)
	return o, nil
}

// RequireAllCaught fails unless both procedures caught every tamper, and
// accord verify named the file of each change and removal.
func RequireAllCaught(t testing.TB, m Matrix) {
	t.Helper()
	t.Log(m.Summary())
	st, ac := m.Missed()
	require.Empty(t, st, "tampers VERIFY.md's standard-tool procedure let through")
	require.Empty(t, ac, "tampers accord verify let through")
	for _, o := range m.Outcomes {
		var te *attest.TamperError
		require.True(t, errors.As(o.Accord, &te), "%s: accord verify's error is not a TamperError: %v", o.Tamper, o.Accord)
		if o.Tamper.Kind == "add" {
			continue
		}
		named := strings.Contains(o.Accord.Error(), o.Tamper.File) ||
			// A changed or missing manifest is caught by its signature.
			(o.Tamper.File == attest.FileManifest && strings.Contains(o.Accord.Error(), attest.FileManifestSig))
		require.True(t, named, "%s: accord verify does not name the file: %v", o.Tamper, o.Accord)
	}
}
