package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"testing/iotest"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/migrations"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// randomBytes is n bytes of a seeded pseudo-random stream.
func randomBytes(seed byte, n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestArtifacts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st *store.Store
		tx pgx.Tx
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		tx := storetest.Tx(t)
		return &testBundle{st: store.New(nil).WithTx(tx), tx: tx}
	}
	chunksOf := func(t *testing.T, b *testBundle, digest string) (n int, sizes []int) {
		t.Helper()
		rows, err := b.tx.Query(ctx, `SELECT length(c.data) FROM artifact_chunks c JOIN artifacts a ON a.blob_id = c.blob_id
			WHERE a.sha256 = $1 ORDER BY c.seq`, digest)
		require.NoError(t, err)
		sizes, err = pgx.CollectRows(rows, pgx.RowTo[int])
		require.NoError(t, err)
		return len(sizes), sizes
	}
	readAll := func(t *testing.T, b *testBundle, digest string) []byte {
		t.Helper()
		rd, err := b.st.Artifacts().Open(ctx, digest)
		require.NoError(t, err)
		defer rd.Close()
		got, err := io.ReadAll(rd)
		require.NoError(t, err)
		require.EqualValues(t, len(got), rd.Size())
		return got
	}

	t.Run("AFileLargerThanAChunkReadsBackByteExact", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := randomBytes(1, 3*store.ChunkSize+store.ChunkSize/2+7)
		blob, err := b.st.Artifacts().Put(ctx, bytes.NewReader(data))
		require.NoError(t, err)
		require.Equal(t, store.Blob{SHA256: sha256Hex(data), Size: int64(len(data))}, blob, "the digest is computed while writing")
		n, sizes := chunksOf(t, b, blob.SHA256)
		require.Equal(t, 4, n)
		require.Equal(t, []int{store.ChunkSize, store.ChunkSize, store.ChunkSize, store.ChunkSize/2 + 7}, sizes)
		require.True(t, bytes.Equal(data, readAll(t, b, blob.SHA256)), "byte-exact")
	})

	t.Run("TheSameContentIsStoredOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := randomBytes(2, store.ChunkSize+1)
		first, err := b.st.Artifacts().Put(ctx, bytes.NewReader(data))
		require.NoError(t, err)
		again, err := b.st.Artifacts().Put(ctx, iotest.HalfReader(bytes.NewReader(data)))
		require.NoError(t, err)
		require.Equal(t, first, again)
		var rows, chunks int
		require.NoError(t, b.tx.QueryRow(ctx, `SELECT count(*) FROM artifacts WHERE sha256 = $1`, first.SHA256).Scan(&rows))
		require.NoError(t, b.tx.QueryRow(ctx, `SELECT count(*) FROM artifact_chunks`).Scan(&chunks))
		require.Equal(t, 1, rows)
		require.Equal(t, 2, chunks, "the second copy's chunks are gone")
	})

	t.Run("EmptyContentHasNoChunks", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		blob, err := b.st.Artifacts().Put(ctx, strings.NewReader(""))
		require.NoError(t, err)
		require.Equal(t, sha256Hex(nil), blob.SHA256)
		require.Zero(t, blob.Size)
		n, _ := chunksOf(t, b, blob.SHA256)
		require.Zero(t, n)
		require.Empty(t, readAll(t, b, blob.SHA256))
	})

	t.Run("ReadsSeekAcrossChunks", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := randomBytes(3, 2*store.ChunkSize+100)
		blob, err := b.st.Artifacts().Put(ctx, bytes.NewReader(data))
		require.NoError(t, err)
		rd, err := b.st.Artifacts().Open(ctx, blob.SHA256)
		require.NoError(t, err)
		defer rd.Close()
		for _, c := range []struct {
			offset int64
			whence int
			at     int64
			n      int
		}{
			{store.ChunkSize - 10, io.SeekStart, store.ChunkSize - 10, 20}, // across the first boundary
			{-50, io.SeekEnd, int64(len(data)) - 50, 50},                   // the last bytes
			{0, io.SeekStart, 0, 5},
			{store.ChunkSize, io.SeekCurrent, store.ChunkSize + 5, 3 * store.ChunkSize}, // more than one chunk at once
		} {
			pos, err := rd.Seek(c.offset, c.whence)
			require.NoError(t, err)
			require.Equal(t, c.at, pos)
			got := make([]byte, c.n)
			n, err := io.ReadFull(rd, got)
			if c.at+int64(c.n) > int64(len(data)) {
				require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, data[c.at:c.at+int64(n)], got[:n])
		}
		_, err = rd.Seek(-1, io.SeekStart)
		require.Error(t, err)
		pos, err := rd.Seek(10, io.SeekEnd)
		require.NoError(t, err, "past the end is allowed, and reads nothing")
		require.EqualValues(t, len(data)+10, pos)
		n, err := rd.Read(make([]byte, 1))
		require.Zero(t, n)
		require.ErrorIs(t, err, io.EOF)
		require.NoError(t, rd.Close())
		_, err = rd.Read(make([]byte, 1))
		require.Error(t, err, "a closed reader reads nothing")
	})

	t.Run("AnUnknownDigestIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.st.Artifacts().Open(ctx, sha256Hex([]byte("never stored")))
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("AFailedWriteLeavesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		errDisk := errors.New("disk on fire")
		broken := io.MultiReader(bytes.NewReader(randomBytes(4, 2*store.ChunkSize+3)), errReader{errDisk})
		_, err := b.st.Artifacts().Put(ctx, broken)
		require.ErrorIs(t, err, errDisk)
		var chunks, rows int
		require.NoError(t, b.tx.QueryRow(ctx, `SELECT count(*) FROM artifact_chunks`).Scan(&chunks))
		require.NoError(t, b.tx.QueryRow(ctx, `SELECT count(*) FROM artifacts`).Scan(&rows))
		require.Zero(t, chunks+rows, "the write's savepoint is rolled back")
		// and the caller's transaction goes on
		_, err = b.st.Artifacts().Put(ctx, strings.NewReader("after"))
		require.NoError(t, err)
	})

	t.Run("ACorruptChunkIsAnError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		blob, err := b.st.Artifacts().Put(ctx, bytes.NewReader(randomBytes(5, store.ChunkSize+10)))
		require.NoError(t, err)
		_, err = b.tx.Exec(ctx, `UPDATE artifact_chunks SET data = substring(data FROM 1 FOR 5) WHERE seq = 1
			AND blob_id = (SELECT blob_id FROM artifacts WHERE sha256 = $1)`, blob.SHA256)
		require.NoError(t, err)
		rd, err := b.st.Artifacts().Open(ctx, blob.SHA256)
		require.NoError(t, err)
		_, err = io.ReadAll(rd)
		require.ErrorContains(t, err, "chunk 1 has 5 bytes, not 10")
	})
}

// A chunk never outlives its write: one that no artifact claims cannot be
// committed.
func TestArtifactChunksBelongToAnArtifact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO artifact_chunks (blob_id, seq, data) VALUES (nextval('artifact_blob_id'), 0, '\x00')`)
	require.NoError(t, err, "checked when the transaction commits")
	require.ErrorContains(t, tx.Commit(ctx), "artifact_chunks_blob_id_fkey")
}

// Two writers of the same content at once keep one copy, and neither
// fails.
func TestArtifactsPutConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	data := randomBytes(6, 2*store.ChunkSize+5)
	var wg sync.WaitGroup
	blobs := make([]store.Blob, 4)
	errs := make([]error, 4)
	for i := range blobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			blobs[i], errs[i] = st.Artifacts().Put(ctx, bytes.NewReader(data))
		}()
	}
	wg.Wait()
	for i := range blobs {
		require.NoError(t, errs[i])
		require.Equal(t, sha256Hex(data), blobs[i].SHA256)
	}
	var rows, chunks int
	require.NoError(t, st.Pool.QueryRow(ctx, `SELECT count(*) FROM artifacts`).Scan(&rows))
	require.NoError(t, st.Pool.QueryRow(ctx, `SELECT count(*) FROM artifact_chunks`).Scan(&chunks))
	require.Equal(t, 1, rows)
	require.Equal(t, 3, chunks)
	rd, err := st.Artifacts().Open(ctx, blobs[0].SHA256)
	require.NoError(t, err)
	got, err := io.ReadAll(rd)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))
}

// Artifacts stored as one bytea before migration 0022 are moved into
// chunks and read back as they were.
func TestArtifactsStoredBeforeChunksStayReadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	before := fstest.MapFS{}
	entries, err := fs.ReadDir(migrations.FS, ".")
	require.NoError(t, err)
	for _, e := range entries {
		if e.Name() >= "0022" {
			continue
		}
		b, err := fs.ReadFile(migrations.FS, e.Name())
		require.NoError(t, err)
		before[e.Name()] = &fstest.MapFile{Data: b}
	}
	_, err = store.MigrateFS(ctx, pool, before)
	require.NoError(t, err)

	contents := [][]byte{randomBytes(7, 2*store.ChunkSize+300), []byte(`{"seq":1}` + "\n"), {}}
	for _, c := range contents {
		_, err := pool.Exec(ctx, `INSERT INTO artifacts (sha256, size, content) VALUES ($1, $2, $3)`, sha256Hex(c), len(c), c)
		require.NoError(t, err)
	}
	_, err = store.MigrateFS(ctx, pool, migrations.FS)
	require.NoError(t, err)

	st := store.New(pool)
	for _, c := range contents {
		rd, err := st.Artifacts().Open(ctx, sha256Hex(c))
		require.NoError(t, err)
		got, err := io.ReadAll(rd)
		require.NoError(t, err)
		require.True(t, bytes.Equal(c, got), "%d bytes", len(c))
		require.EqualValues(t, len(c), rd.Size())
	}
	var chunks int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM artifact_chunks`).Scan(&chunks))
	require.Equal(t, 3+1, chunks, "three 1 MiB chunks and a small one; none for empty content")
	// New content after the migration is stored beside the old.
	blob, err := st.Artifacts().Put(ctx, bytes.NewReader(contents[0]))
	require.NoError(t, err)
	require.Equal(t, sha256Hex(contents[0]), blob.SHA256)
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// Outside a transaction the next chunk is read while one is consumed: the
// bytes are the same whether read in order, a few at a time or after
// seeks, and a bad chunk fails the read that reaches it, not an earlier one.
func TestArtifactsReadAheadOutsideATransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	data := randomBytes(9, 4*store.ChunkSize+321)
	blob, err := st.Artifacts().Put(ctx, bytes.NewReader(data))
	require.NoError(t, err)

	rd, err := st.Artifacts().Open(ctx, blob.SHA256)
	require.NoError(t, err)
	got, err := io.ReadAll(iotest.HalfReader(rd))
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.NoError(t, rd.Close())

	rd, err = st.Artifacts().Open(ctx, blob.SHA256)
	require.NoError(t, err)
	for _, at := range []int64{10, 3*store.ChunkSize - 5, store.ChunkSize + 7, 4 * store.ChunkSize, 0} {
		_, err := rd.Seek(at, io.SeekStart)
		require.NoError(t, err)
		buf := make([]byte, store.ChunkSize)
		n, err := io.ReadFull(rd, buf)
		if at+int64(len(buf)) > int64(len(data)) {
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		} else {
			require.NoError(t, err)
		}
		require.Equal(t, data[at:at+int64(n)], buf[:n], "from %d", at)
	}
	require.NoError(t, rd.Close())

	_, err = pool.Exec(ctx, `UPDATE artifact_chunks SET data = substring(data FROM 1 FOR 5)
		WHERE seq = 2 AND blob_id = (SELECT blob_id FROM artifacts WHERE sha256 = $1)`, blob.SHA256)
	require.NoError(t, err)
	rd, err = st.Artifacts().Open(ctx, blob.SHA256)
	require.NoError(t, err)
	defer rd.Close()
	first := make([]byte, 2*store.ChunkSize)
	_, err = io.ReadFull(rd, first)
	require.NoError(t, err, "the first two chunks read, though the third is being read ahead")
	require.Equal(t, data[:len(first)], first)
	_, err = rd.Read(make([]byte, 1))
	require.ErrorContains(t, err, "chunk 2 has 5 bytes")
}
