package sshrun

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type packEntry struct {
	name string
	body []byte
	typ  byte
}

func makeTar(t testing.TB, entries []packEntry) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Size: int64(len(e.body))}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		require.NoError(t, tw.WriteHeader(hdr))
		if typ == tar.TypeReg {
			_, err := tw.Write(e.body)
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

func manifestOf(files map[string][]byte) []byte {
	var b strings.Builder
	for name, body := range files {
		b.WriteString(sum(body) + "  " + name + "\n")
	}
	return []byte(b.String())
}

func TestParseManifest(t *testing.T) {
	t.Parallel()
	a, b := sum([]byte("a")), sum([]byte("b"))
	got, err := ParseManifest([]byte(a + "  events.jsonl\n" + b + " *./out/01-fio/rep-1/fio.json\n\n"))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"events.jsonl": a, "out/01-fio/rep-1/fio.json": b}, got)

	// sha256sum's escaping of names with a backslash.
	got, err = ParseManifest([]byte(`\` + a + `  odd\\name` + "\n"))
	require.Error(t, err, "a name with a backslash is not a run folder name")
	require.Nil(t, got)

	for _, bad := range []string{
		"nothex  x\n",
		strings.ToUpper(a) + "  x\n",
		a + " x\n",
		a + "  \n",
		a + "  ../etc/passwd\n",
		a + "  /etc/passwd\n",
		a + "  x\n" + b + "  x\n",
		`\` + a + `  x\q` + "\n",
	} {
		_, err := ParseManifest([]byte(bad))
		require.ErrorIs(t, err, ErrManifest, "%q", bad)
	}
}

// TestParseManifestRealSha256sum reads what coreutils writes.
func TestParseManifestRealSha256sum(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string][]byte{"a.txt": []byte("hello\n"), "sub/b.bin": {0, 1, 2}}
	for name, body := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, body, 0o644))
	}
	cmd := exec.Command("sha256sum", "a.txt", "./sub/b.bin")
	cmd.Dir = dir
	out, err := cmd.Output()
	require.NoError(t, err)
	got, err := ParseManifest(out)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a.txt": sum(files["a.txt"]), "sub/b.bin": sum(files["sub/b.bin"])}, got)
}

func TestReadPack(t *testing.T) {
	t.Parallel()
	files := map[string][]byte{
		"events.jsonl":              []byte("{\"seq\":1}\n"),
		"out/01-fio/rep-1/fio.json": bytes.Repeat([]byte("x"), 3000),
		"empty":                     {},
	}
	entries := []packEntry{{name: "./", typ: tar.TypeDir}, {name: "./out/", typ: tar.TypeDir}}
	for name, body := range files {
		entries = append(entries, packEntry{name: "./" + name, body: body})
	}
	entries = append(entries, packEntry{name: "./MANIFEST.sha256", body: manifestOf(files)})
	pack := makeTar(t, entries)

	t.Run("in memory and in temp files", func(t *testing.T) {
		t.Parallel()
		tmp := t.TempDir()
		coll, err := readPack(bytes.NewReader(pack), Limits{MemoryBytes: 100, TempDir: tmp}.withDefaults())
		require.NoError(t, err)
		require.NoError(t, coll.checkManifest())
		require.Len(t, coll.Files, 4)
		for name, body := range files {
			f, ok := coll.File(name)
			require.True(t, ok, name)
			require.Equal(t, sum(body), f.SHA256)
			require.Equal(t, int64(len(body)), f.Size)
			r, err := f.Open()
			require.NoError(t, err)
			got, err := io.ReadAll(r)
			require.NoError(t, err)
			require.NoError(t, r.Close())
			require.Equal(t, body, got)
		}
		big, _ := coll.File("out/01-fio/rep-1/fio.json")
		require.NotEmpty(t, big.Path, "a file over MemoryBytes goes to a temp file")
		require.NoError(t, coll.Remove())
		_, err = os.Stat(big.Path)
		require.ErrorIs(t, err, os.ErrNotExist)
	})

	t.Run("per-file limit", func(t *testing.T) {
		t.Parallel()
		_, err := readPack(bytes.NewReader(pack), Limits{MaxFileBytes: 2999}.withDefaults())
		var le *LimitError
		require.ErrorAs(t, err, &le)
		require.ErrorIs(t, err, ErrTooLarge)
		require.Equal(t, "out/01-fio/rep-1/fio.json", le.Name)
		require.EqualValues(t, 3000, le.Size)
		require.False(t, le.Total)
		require.Contains(t, err.Error(), "per-file limit of 2999 bytes")
	})

	t.Run("total limit", func(t *testing.T) {
		t.Parallel()
		_, err := readPack(bytes.NewReader(pack), Limits{MaxTotalBytes: 3005}.withDefaults())
		var le *LimitError
		require.ErrorAs(t, err, &le)
		require.True(t, le.Total)
		require.Contains(t, err.Error(), "total limit of 3005 bytes")
	})

	t.Run("manifest mismatch", func(t *testing.T) {
		t.Parallel()
		bad := map[string][]byte{"events.jsonl": []byte("other\n"), "missing": []byte("m")}
		p := makeTar(t, []packEntry{
			{name: "events.jsonl", body: files["events.jsonl"]},
			{name: "unlisted", body: []byte("u")},
			{name: "MANIFEST.sha256", body: manifestOf(bad)},
		})
		coll, err := readPack(bytes.NewReader(p), Limits{}.withDefaults())
		require.NoError(t, err)
		err = coll.checkManifest()
		require.ErrorIs(t, err, ErrManifest)
		require.Contains(t, err.Error(), "events.jsonl hashes to")
		require.Contains(t, err.Error(), "unlisted is not in the manifest")
		require.Contains(t, err.Error(), "missing is in the manifest but not in the pack")
	})

	t.Run("unsafe entries", func(t *testing.T) {
		t.Parallel()
		for _, e := range []packEntry{
			{name: "../escape", body: []byte("x")},
			{name: "/abs", body: []byte("x")},
			{name: "a/../../b", body: []byte("x")},
			{name: "fifo", typ: tar.TypeFifo},
		} {
			_, err := readPack(bytes.NewReader(makeTar(t, []packEntry{e})), Limits{}.withDefaults())
			require.Error(t, err, e.name)
		}
		_, err := readPack(bytes.NewReader(makeTar(t, []packEntry{{name: "a", body: []byte("1")}, {name: "./a", body: []byte("2")}})), Limits{}.withDefaults())
		require.ErrorIs(t, err, ErrManifest, "duplicates")
	})

	t.Run("links are listed, not collected", func(t *testing.T) {
		t.Parallel()
		coll, err := readPack(bytes.NewReader(makeTar(t, []packEntry{{name: "link", typ: tar.TypeSymlink}})), Limits{}.withDefaults())
		require.NoError(t, err)
		require.Empty(t, coll.Files)
		require.Equal(t, []string{"link"}, coll.Links)
	})

	t.Run("truncated stream", func(t *testing.T) {
		t.Parallel()
		_, err := readPack(bytes.NewReader(pack[:len(pack)/2]), Limits{}.withDefaults())
		require.Error(t, err)
	})
}

func FuzzParseManifest(f *testing.F) {
	a := sum([]byte("a"))
	f.Add([]byte(a + "  events.jsonl\n"))
	f.Add([]byte(a + " *out/x\n" + a + "  y\n"))
	f.Add([]byte(`\` + a + `  a\nb` + "\n"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			require.ErrorIs(t, err, ErrManifest)
			return
		}
		for name, s := range m {
			clean, cerr := cleanName(name)
			require.NoError(t, cerr)
			require.Equal(t, clean, name)
			require.False(t, strings.HasPrefix(name, "/") || name == ".." || strings.HasPrefix(name, "../"))
			require.Len(t, s, 64)
		}
	})
}

func FuzzReadPack(f *testing.F) {
	f.Add(makeTar(f, []packEntry{{name: "a", body: []byte("x")}, {name: "MANIFEST.sha256", body: manifestOf(map[string][]byte{"a": []byte("x")})}}))
	f.Add(makeTar(f, []packEntry{{name: "d/", typ: tar.TypeDir}, {name: "d/b", body: bytes.Repeat([]byte("y"), 700)}}))
	f.Add([]byte("not a tar"))
	tmp := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		coll, err := readPack(bytes.NewReader(data), Limits{MaxFileBytes: 1 << 20, MaxTotalBytes: 2 << 20, MemoryBytes: 512, TempDir: tmp})
		defer func() { require.NoError(t, coll.Remove()) }()
		if err != nil {
			return
		}
		var total int64
		for _, f := range coll.Files {
			clean, cerr := cleanName(f.Name)
			require.NoError(t, cerr)
			require.Equal(t, clean, f.Name)
			require.LessOrEqual(t, f.Size, int64(1<<20))
			total += f.Size
		}
		require.Equal(t, total, coll.Bytes)
		require.LessOrEqual(t, total, int64(2<<20))
		_ = coll.checkManifest()
	})
}
