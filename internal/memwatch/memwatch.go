// Package memwatch measures, for benchmarks, how far a process's memory
// rises while it does something: the peak resident set (Linux VmHWM, reset
// through /proc/self/clear_refs) and the peak Go heap (sampled), above
// where they stood when the watch started.
package memwatch

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Watch is one measurement in progress.
type Watch struct {
	baseRSS, baseHeap int64
	peakHeap          int64
	stop              chan struct{}
	done              sync.WaitGroup
}

// Start collects garbage, resets the peak resident set and starts sampling
// the heap.
func Start(tb testing.TB) *Watch {
	tb.Helper()
	runtime.GC()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Fatalf("reset the peak resident set: %v", err)
	}
	w := &Watch{baseRSS: StatusKiB(tb, "VmRSS:") << 10, baseHeap: heapInUse(), stop: make(chan struct{})}
	w.peakHeap = w.baseHeap
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.peakHeap = max(w.peakHeap, heapInUse())
			}
		}
	}()
	return w
}

// Growth stops the watch and returns the peak rises, in bytes.
func (w *Watch) Growth(tb testing.TB) (rss, heap int64) {
	tb.Helper()
	close(w.stop)
	w.done.Wait()
	w.peakHeap = max(w.peakHeap, heapInUse())
	return StatusKiB(tb, "VmHWM:")<<10 - w.baseRSS, w.peakHeap - w.baseHeap
}

func heapInUse() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// StatusKiB reads a field of /proc/self/status in KiB ("VmHWM:" is the
// peak resident set).
func StatusKiB(tb testing.TB, field string) int64 {
	tb.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field) {
			v, err := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return v
		}
	}
	tb.Fatalf("no %s in /proc/self/status", field)
	return 0
}
