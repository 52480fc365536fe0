package emulator

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"time"
)

// directAlign is the buffer, offset and length alignment used for O_DIRECT
// reads; 4 KiB covers every logical block size in use.
const directAlign = 4096

// kvStore stands for the KV-cache tier behind the GPU: an in-memory LRU of
// block hashes (what the GPU still holds) and a file on the storage under
// test holding every block. A block missing from the LRU is read from the
// file, for real, at an offset derived from its hash.
type kvStore struct {
	blockBytes int
	cacheCap   int

	mu    sync.Mutex
	lru   *list.List // front: most recently used; values are uint64 hashes
	index map[uint64]*list.Element

	f      *os.File // nil: no storage tier, misses only cost compute
	direct bool
	slots  int64 // blocks that fit in the file
	bufs   sync.Pool
	pacer  *pacer
	notes  io.Writer
	fileMu sync.Mutex // guards the switch from O_DIRECT to buffered reads
}

// openKV opens (or creates, filled with seeded random data, so that no
// layer can skip the reads) the KV file. path "" means no storage tier.
func openKV(path string, size int64, blockBytes, cacheBlocks int, mbps float64, seed int64, notes io.Writer) (*kvStore, error) {
	k := &kvStore{
		blockBytes: blockBytes,
		cacheCap:   cacheBlocks,
		lru:        list.New(),
		index:      make(map[uint64]*list.Element),
		notes:      notes,
	}
	if mbps > 0 {
		k.pacer = &pacer{bytesPerSec: mbps * 1e6}
	}
	k.bufs.New = func() any {
		b := alignedBuffer(blockBytes)
		return &b
	}
	if path == "" {
		return k, nil
	}
	if blockBytes%directAlign != 0 {
		return nil, fmt.Errorf("--block-bytes %d is not a multiple of %d (needed for O_DIRECT)", blockBytes, directAlign)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := createKVFile(path, size, seed, notes); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("kv file: %w", err)
	}
	f, direct, err := openDirect(path)
	if err != nil {
		return nil, fmt.Errorf("kv file: %w", err)
	}
	if !direct {
		fmt.Fprintf(notes, "accord emulate: %s does not support O_DIRECT; reading through the page cache\n", path)
	}
	end, err := f.Seek(0, io.SeekEnd) // works for block devices too
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("kv file: size: %w", err)
	}
	k.slots = end / int64(blockBytes)
	if k.slots < 1 {
		_ = f.Close()
		return nil, fmt.Errorf("kv file %s (%d bytes) is smaller than one block (%d bytes)", path, end, blockBytes)
	}
	k.f, k.direct = f, direct
	return k, nil
}

func (k *kvStore) close() error {
	if k.f == nil {
		return nil
	}
	return k.f.Close()
}

// createKVFile writes size bytes of seeded random data and syncs them.
func createKVFile(path string, size, seed int64, notes io.Writer) error {
	if size <= 0 {
		return fmt.Errorf("kv file %s does not exist and --kv-file-size is 0", path)
	}
	fmt.Fprintf(notes, "accord emulate: creating %s (%d MiB)\n", path, size>>20)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("kv file: %w", err)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6b7666696c65))
	buf := make([]byte, 1<<20)
	for written := int64(0); written < size; {
		for i := 0; i+8 <= len(buf); i += 8 {
			v := rng.Uint64()
			for j := range 8 {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		n := min(int64(len(buf)), size-written)
		if _, err := f.Write(buf[:n]); err != nil {
			_ = f.Close()
			return fmt.Errorf("kv file: write: %w", err)
		}
		written += n
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("kv file: sync: %w", err)
	}
	return f.Close()
}

// alignedBuffer returns n bytes starting at a directAlign boundary.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+directAlign)
	off := 0
	if r := int(addressOf(b) % directAlign); r != 0 {
		off = directAlign - r
	}
	return b[off : off+n : off+n]
}

// fetch is the outcome of loading a prompt's blocks.
type fetch struct {
	hitBlocks  int           // the cached prefix, in blocks
	missBlocks int           // blocks read from the file (or computed without one)
	readBlocks int           // blocks read from the file
	readBytes  int64         // bytes read from the file
	readTime   time.Duration // time spent reading (and paced)
}

// load looks the prompt's block hashes up. As vLLM's prefix cache does, a
// hit is the longest run of cached blocks from the start; every block after
// the first miss is loaded from the file. All blocks end up cached.
func (k *kvStore) load(ctx context.Context, hashes []uint64) (fetch, error) {
	var out fetch
	k.mu.Lock()
	for _, h := range hashes {
		e, ok := k.index[h]
		if !ok {
			break
		}
		k.lru.MoveToFront(e)
		out.hitBlocks++
	}
	k.mu.Unlock()
	missing := hashes[out.hitBlocks:]
	out.missBlocks = len(missing)
	if k.f != nil && len(missing) > 0 {
		start := time.Now()
		buf := k.bufs.Get().(*[]byte)
		err := k.readBlocks(ctx, *buf, missing, &out)
		k.bufs.Put(buf)
		out.readTime = time.Since(start)
		if err != nil {
			return out, err
		}
	}
	if k.cacheCap > 0 {
		k.mu.Lock()
		for _, h := range missing {
			if e, ok := k.index[h]; ok {
				k.lru.MoveToFront(e)
				continue
			}
			k.index[h] = k.lru.PushFront(h)
			for k.lru.Len() > k.cacheCap {
				old := k.lru.Back()
				k.lru.Remove(old)
				delete(k.index, old.Value.(uint64))
			}
		}
		k.mu.Unlock()
	}
	return out, nil
}

func (k *kvStore) readBlocks(ctx context.Context, buf []byte, missing []uint64, out *fetch) error {
	for _, h := range missing {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := k.readBlock(buf, h); err != nil {
			return err
		}
		out.readBlocks++
		out.readBytes += int64(k.blockBytes)
		if k.pacer != nil {
			if err := k.pacer.wait(ctx, k.blockBytes); err != nil {
				return err
			}
		}
	}
	return nil
}

// readBlock reads one block at the offset the hash names.
func (k *kvStore) readBlock(buf []byte, h uint64) error {
	off := int64(h%uint64(k.slots)) * int64(k.blockBytes)
	k.fileMu.Lock()
	f, direct := k.f, k.direct
	k.fileMu.Unlock()
	_, err := f.ReadAt(buf, off)
	if err != nil && direct && errors.Is(err, syscall.EINVAL) {
		// The filesystem accepted O_DIRECT at open but not for reads.
		if ferr := k.fallBackToBuffered(f); ferr != nil {
			return ferr
		}
		return k.readBlock(buf, h)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("kv read at %d: %w", off, err)
	}
	return nil
}

func (k *kvStore) fallBackToBuffered(was *os.File) error {
	k.fileMu.Lock()
	defer k.fileMu.Unlock()
	if k.f != was {
		return nil // another reader switched already
	}
	f, err := os.Open(was.Name())
	if err != nil {
		return fmt.Errorf("kv file: reopen without O_DIRECT: %w", err)
	}
	fmt.Fprintf(k.notes, "accord emulate: O_DIRECT reads fail on %s; reading through the page cache\n", was.Name())
	k.f, k.direct = f, false
	// The old descriptor may be in use by concurrent reads; it is left to
	// the garbage collector's finalizer rather than closed under them.
	return nil
}

// pacer caps the read bandwidth, to stand for a slower storage path: each
// read reserves its transfer time on a shared timeline and waits for it.
// The timeline may lag the clock by pacerSlack, so that a sleeper woken
// late (timers are coarse) does not lower the rate: a token bucket of that
// depth.
type pacer struct {
	mu          sync.Mutex
	next        time.Time
	bytesPerSec float64
}

const pacerSlack = 5 * time.Millisecond

func (p *pacer) wait(ctx context.Context, n int) error {
	d := time.Duration(float64(n) / p.bytesPerSec * 1e9)
	p.mu.Lock()
	now := time.Now()
	if floor := now.Add(-pacerSlack); p.next.Before(floor) {
		p.next = floor
	}
	p.next = p.next.Add(d)
	until := p.next
	p.mu.Unlock()
	wait := time.Until(until)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
