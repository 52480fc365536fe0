package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
)

// Artifacts is the content-addressed blob store behind run artifacts and
// report bundles. Content streams in and out, so that memory does not grow
// with a file's size. PostgreSQL is the implementation (chunked rows); an
// object store can implement the same two methods.
type Artifacts interface {
	// Put stores what r yields under its SHA-256, computed while writing,
	// and returns it with the size. Content stored before is kept once.
	Put(ctx context.Context, r io.Reader) (Blob, error)
	// Open reads the blob with that digest (ErrNotFound when there is
	// none). The reader seeks, for ranges; ctx bounds every read.
	Open(ctx context.Context, sha256hex string) (BlobReader, error)
}

// Blob names stored content.
type Blob struct {
	SHA256 string // hex
	Size   int64
}

// BlobReader reads one stored blob.
type BlobReader interface {
	io.ReadSeekCloser
	Size() int64
}

// ChunkSize is the size of the chunks new content is stored in: small
// enough to hold one in memory per reader or writer, large enough that a
// GiB is a thousand queries.
const ChunkSize = 1 << 20

// pgArtifacts keeps blobs in artifacts (one row per content) and
// artifact_chunks (its bytes in order).
type pgArtifacts struct {
	s         *Store
	chunkSize int
}

// Artifacts returns the blob store, inside the Store's transaction when it
// has one.
func (s *Store) Artifacts() Artifacts { return &pgArtifacts{s: s, chunkSize: ChunkSize} }

// Put writes the chunks as they are read, then the artifact's row; content
// already stored has its new chunks removed again. It runs in a
// transaction of its own, or a savepoint of the caller's, so that a
// failed write leaves nothing behind.
func (a *pgArtifacts) Put(ctx context.Context, r io.Reader) (Blob, error) {
	var blob Blob
	err := a.s.InTx(ctx, func(tx *Store) error {
		var id int64
		if err := tx.db.QueryRow(ctx, `SELECT nextval('artifact_blob_id')`).Scan(&id); err != nil {
			return fmt.Errorf("store: put artifact: %w", err)
		}
		h := sha256.New()
		buf := make([]byte, a.chunkSize)
		for seq := 0; ; seq++ {
			n, rerr := io.ReadFull(r, buf)
			if n > 0 {
				h.Write(buf[:n])
				blob.Size += int64(n)
				if _, err := tx.db.Exec(ctx, `INSERT INTO artifact_chunks (blob_id, seq, data) VALUES ($1, $2, $3)`, id, seq, buf[:n]); err != nil {
					return fmt.Errorf("store: put artifact: chunk %d: %w", seq, err)
				}
			}
			if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
				break
			}
			if rerr != nil {
				return fmt.Errorf("store: put artifact: read: %w", rerr)
			}
		}
		blob.SHA256 = hex.EncodeToString(h.Sum(nil))
		tag, err := tx.db.Exec(ctx, `INSERT INTO artifacts (sha256, size, blob_id, chunk_size) VALUES ($1, $2, $3, $4)
			ON CONFLICT (sha256) DO NOTHING`, blob.SHA256, blob.Size, id, a.chunkSize)
		if err != nil {
			return fmt.Errorf("store: put artifact %s: %w", blob.SHA256[:12], err)
		}
		if tag.RowsAffected() == 0 { // stored before: keep the first copy
			if _, err := tx.db.Exec(ctx, `DELETE FROM artifact_chunks WHERE blob_id = $1`, id); err != nil {
				return fmt.Errorf("store: put artifact %s: drop the copy: %w", blob.SHA256[:12], err)
			}
		}
		return nil
	})
	if err != nil {
		return Blob{}, err
	}
	return blob, nil
}

// Open finds the blob; its chunks are read as the reader reaches them, and
// outside a transaction the next one is read meanwhile.
func (a *pgArtifacts) Open(ctx context.Context, digest string) (BlobReader, error) {
	rd := &chunkReader{ctx: ctx, db: a.s.db, seq: -1, ahead: a.s.tx == nil}
	err := a.s.db.QueryRow(ctx, `SELECT blob_id, size, chunk_size FROM artifacts WHERE sha256 = $1`, digest).Scan(&rd.blobID, &rd.size, &rd.chunkSize)
	if err != nil {
		return nil, notFound(err, "artifact "+digest)
	}
	return rd, nil
}

// chunkReader reads a blob chunk by chunk, one query each, holding one
// chunk at a time, and with ahead the next one being read: a reader that
// parses what it reads (the ingest of a run's records) then keeps
// PostgreSQL busy meanwhile, on another core, instead of waiting for it
// chunk after chunk. Only outside a transaction: a pgx.Tx takes one query
// at a time.
type chunkReader struct {
	ctx       context.Context
	db        DBTX
	blobID    int64
	size      int64
	chunkSize int64
	off       int64
	seq       int64 // the chunk in buf; -1 for none
	buf       []byte
	closed    bool

	ahead bool
	next  *pendingChunk // the chunk being read ahead, if any
	spare []byte        // memory for the next one
}

// pendingChunk is a chunk read in the background; done closes when buf
// and err are set.
type pendingChunk struct {
	seq  int64
	done chan struct{}
	buf  []byte
	err  error
}

func (r *chunkReader) Size() int64 { return r.size }

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, errors.New("store: read of a closed artifact")
	}
	if r.off >= r.size {
		return 0, io.EOF
	}
	seq := r.off / r.chunkSize
	if seq != r.seq {
		if err := r.load(seq); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf[r.off-seq*r.chunkSize:])
	r.off += int64(n)
	return n, nil
}

// load makes chunk seq the one in buf: the one read ahead, or read now;
// then the following one is read ahead.
func (r *chunkReader) load(seq int64) error {
	if p := r.takeNext(); p != nil && p.seq == seq {
		r.spare, r.buf = r.buf, p.buf
		if p.err != nil {
			return p.err
		}
	} else {
		if p != nil {
			r.spare = p.buf
		}
		buf, err := r.fetch(seq, r.buf)
		r.buf = buf
		if err != nil {
			return err
		}
	}
	r.seq = seq
	if r.ahead && (seq+1)*r.chunkSize < r.size {
		p := &pendingChunk{seq: seq + 1, done: make(chan struct{})}
		spare := r.spare
		r.spare, r.next = nil, p
		go func() {
			defer close(p.done)
			p.buf, p.err = r.fetch(p.seq, spare)
		}()
	}
	return nil
}

// takeNext waits for the chunk being read ahead, if any, and hands it over.
func (r *chunkReader) takeNext() *pendingChunk {
	p := r.next
	if p != nil {
		<-p.done
		r.next = nil
	}
	return p
}

// fetch reads chunk seq into dst's memory and returns it.
func (r *chunkReader) fetch(seq int64, dst []byte) ([]byte, error) {
	// In binary format the raw value is the chunk's bytes themselves.
	rows, err := r.db.Query(r.ctx, `SELECT data FROM artifact_chunks WHERE blob_id = $1 AND seq = $2`,
		pgx.QueryResultFormats{pgx.BinaryFormatCode}, r.blobID, seq)
	if err != nil {
		return dst, fmt.Errorf("store: read artifact chunk %d: %w", seq, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return dst, fmt.Errorf("store: read artifact chunk %d: %w", seq, err)
		}
		return dst, fmt.Errorf("store: artifact chunk %d is missing", seq)
	}
	// The raw value is pgx's buffer, valid until the next row: copy it
	// into ours, which keeps its capacity from chunk to chunk.
	dst = append(dst[:0], rows.RawValues()[0]...)
	rows.Close()
	if err := rows.Err(); err != nil {
		return dst, fmt.Errorf("store: read artifact chunk %d: %w", seq, err)
	}
	want := min(r.chunkSize, r.size-seq*r.chunkSize)
	if int64(len(dst)) != want {
		return dst, fmt.Errorf("store: artifact chunk %d has %d bytes, not %d", seq, len(dst), want)
	}
	return dst, nil
}

func (r *chunkReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.size
	default:
		return 0, fmt.Errorf("store: seek: whence %d", whence)
	}
	if offset < 0 {
		return 0, errors.New("store: seek before the start of the artifact")
	}
	r.off = offset
	return offset, nil
}

func (r *chunkReader) Close() error {
	r.takeNext() // no query outlives the reader
	r.closed, r.buf, r.spare = true, nil, nil
	return nil
}

// RunArtifact is a file of a run, by its path in the run folder.
type RunArtifact struct {
	RunID  int64
	Path   string
	SHA256 string
	Size   int64
}

// AddRunArtifact links a stored blob to a run's path.
func (s *Store) AddRunArtifact(ctx context.Context, a RunArtifact) error {
	_, err := s.db.Exec(ctx, `INSERT INTO run_artifacts (run_id, path, sha256, size) VALUES ($1, $2, $3, $4)
		ON CONFLICT (run_id, path) DO UPDATE SET sha256 = EXCLUDED.sha256, size = EXCLUDED.size`, a.RunID, a.Path, a.SHA256, a.Size)
	if err != nil {
		return fmt.Errorf("store: run %d artifact %s: %w", a.RunID, a.Path, err)
	}
	return nil
}

// RunArtifacts lists a run's files by path.
func (s *Store) RunArtifacts(ctx context.Context, runID int64) ([]RunArtifact, error) {
	rows, err := s.db.Query(ctx, `SELECT run_id, path, sha256, size FROM run_artifacts WHERE run_id = $1 ORDER BY path`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: run %d artifacts: %w", runID, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[RunArtifact])
}

// RunArtifactByPath returns one file of a run.
func (s *Store) RunArtifactByPath(ctx context.Context, runID int64, path string) (RunArtifact, error) {
	rows, err := s.db.Query(ctx, `SELECT run_id, path, sha256, size FROM run_artifacts WHERE run_id = $1 AND path = $2`, runID, path)
	if err != nil {
		return RunArtifact{}, fmt.Errorf("store: run %d artifact: %w", runID, err)
	}
	a, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[RunArtifact])
	if err != nil {
		return a, notFound(err, "artifact "+path)
	}
	return a, nil
}
