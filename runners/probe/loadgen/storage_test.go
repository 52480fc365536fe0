package loadgen

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/emulator"
)

// storageRun measures TTFT through the emulator with its KV file in dir:
// a cold cache (nothing stays cached, prompts share no prefix), no compute,
// so TTFT is the reads of 16 blocks of 128 KiB (2 MiB) a request.
func storageRun(t testing.TB, dir string, mbps float64, requests int) (ttfts []float64, readMs []float64) {
	t.Helper()
	cfg := emulator.Config{
		Model:            "m",
		KVFile:           filepath.Join(dir, "kv.bin"),
		KVFileSize:       128 << 20,
		BlockTokens:      16,
		BlockBytes:       128 << 10,
		CacheBlocks:      0,
		PrefillPerToken:  0,
		ITL:              time.Millisecond,
		DefaultMaxTokens: 2,
		Seed:             11,
		KVReadMBps:       mbps,
		Timings:          filepath.Join(t.TempDir(), "timings.jsonl"),
	}
	e := startEmulator(t, cfg)
	step := baseStep(e)
	step.PromptTokens = acceptance.TokenDist{Mean: 256}
	step.OutputTokens = acceptance.TokenDist{Mean: 2}
	step.Requests = requests
	_, recs := run(t, Config{Step: step, Level: Level{Concurrency: 1}, Warmup: 0})
	for _, r := range recs {
		require.Empty(t, r.ErrorKind, r.Error)
		ttfts = append(ttfts, ms(r.FirstToken-r.Sent))
	}
	for _, tm := range e.readTimings(t) {
		require.Equal(t, 16, tm.MissBlocks, "cold: every block is read")
		readMs = append(readMs, ms(tm.ReadNs))
	}
	sort.Float64s(ttfts)
	sort.Float64s(readMs)
	return ttfts, readMs
}

// shmDir is a temporary directory on tmpfs.
func shmDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		t.Skip("no /dev/shm tmpfs on this host")
	}
	dir, err := os.MkdirTemp("/dev/shm", "accord-loadgen-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// TestStorageShowsInTTFT runs the same read path with the KV file on tmpfs
// and on the root filesystem's disk (O_DIRECT: no page cache), and once more
// on tmpfs behind a 100 MB/s cap standing for a slow path. On this host a
// 128 KiB O_DIRECT read from the virtual disk takes about 0.2 ms against
// a few tens of µs from tmpfs, so 16 of them make a difference of
// milliseconds; the cap adds up to 21 ms (2 MiB at 100 MB/s, less what
// the pacer's 5 ms burst allowance lets through at once).
func TestStorageShowsInTTFT(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 3 × 128 MiB KV files")
	}
	shm := shmDir(t)
	tmpfs, tmpfsRead := storageRun(t, shm, 0, 30)
	disk, diskRead := storageRun(t, t.TempDir(), 0, 30)
	slow, _ := storageRun(t, shmDir(t), 100, 10)
	t.Logf("median TTFT: tmpfs %.2f ms (reads %.2f ms), disk %.2f ms (reads %.2f ms), tmpfs capped at 100 MB/s %.2f ms",
		median(tmpfs), median(tmpfsRead), median(disk), median(diskRead), median(slow))

	require.Greater(t, median(diskRead), 1.5*median(tmpfsRead), "disk reads are slower than tmpfs reads")
	require.Greater(t, median(disk), median(tmpfs)+0.5, "and it shows in TTFT (ms)")
	require.Greater(t, median(slow), median(tmpfs)+10, "the capped path: 2 MiB at 100 MB/s is 21 ms (less a 5 ms burst)")
}
