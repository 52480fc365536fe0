package loadgen

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// selfCheck watches the load generator itself during one level, so that a
// level where the client rather than the server set the tail is known:
//
//   - dispatch lateness: how long after its intended send time the open
//     loop got to send a request (before any max_concurrency wait, which
//     is the profile's own queueing and shows in send_delay);
//   - tick delay: how late a ticker goroutine wakes, every 10 ms, which is
//     the probe's own scheduling delay whatever the load shape;
//   - the probe's CPU time over the level against the CPUs it may run on,
//     and how long its threads waited runnable on a run queue (Linux
//     schedstat);
//   - the host's CPU saturation: busy share from /proc/stat and, where the
//     kernel has it, CPU pressure (PSI "some").
//
// Each reading is best effort: what the host does not offer is left out
// and said so, never guessed.
type selfCheck struct {
	start time.Time

	mu       sync.Mutex
	lateness *hdrhistogram.Histogram
	tick     *hdrhistogram.Histogram

	stop chan struct{}
	done chan struct{}

	cpu0              time.Duration
	runDelay0         int64
	runDelayOK        bool
	host0             hostCPU
	psi0              int64
	psiOK, hostOK     bool
	allowedCPUs       int
	lateMax, tickMax  int64 // ns
	lateSent, tickSet int64
}

// tickEvery is the ticker's period: short enough to see a starved probe
// within a level, long enough to cost nothing.
const tickEvery = 10 * time.Millisecond

func startSelfCheck() *selfCheck {
	c := &selfCheck{start: time.Now(), lateness: newHist(), tick: newHist(),
		stop: make(chan struct{}), done: make(chan struct{}), allowedCPUs: runtime.GOMAXPROCS(0)}
	c.cpu0 = processCPU()
	c.runDelay0, c.runDelayOK = runQueueWait()
	c.host0, c.hostOK = readHostCPU()
	c.psi0, c.psiOK = readCPUPressure()
	go c.ticker()
	return c
}

func (c *selfCheck) ticker() {
	defer close(c.done)
	t := time.NewTicker(tickEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case at := <-t.C:
			d := time.Since(at).Nanoseconds()
			c.mu.Lock()
			recordNanos(c.tick, d)
			c.tickMax = max(c.tickMax, d)
			c.tickSet++
			c.mu.Unlock()
		}
	}
}

// late records that a request was dispatched ns after its intended time.
func (c *selfCheck) late(ns int64) {
	c.mu.Lock()
	recordNanos(c.lateness, max(ns, 0))
	c.lateMax = max(c.lateMax, ns)
	c.lateSent++
	c.mu.Unlock()
}

// finish stops the ticker and sums the level up, holding the client's
// delays against the level's own TTFT (acceptance.JudgeClient).
func (c *selfCheck) finish(openLoop bool, level *stats) *wire.SelfCheck {
	close(c.stop)
	<-c.done
	wall := time.Since(c.start)
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := &wire.SelfCheck{WallSec: wall.Seconds(), AllowedCPUs: c.allowedCPUs, TickEveryMs: float64(tickEvery) / 1e6}
	if openLoop && c.lateSent > 0 {
		sc.Sends = c.lateSent
		sc.LatenessP50Ms = usToMs(c.lateness.ValueAtQuantile(50))
		sc.LatenessP99Ms = usToMs(c.lateness.ValueAtQuantile(99))
		sc.LatenessMaxMs = float64(c.lateMax) / 1e6
		sc.Lateness = buckets(c.lateness)
	}
	if c.tickSet > 0 {
		sc.Ticks = c.tickSet
		sc.TickDelayP50Ms = usToMs(c.tick.ValueAtQuantile(50))
		sc.TickDelayP99Ms = usToMs(c.tick.ValueAtQuantile(99))
		sc.TickDelayMaxMs = float64(c.tickMax) / 1e6
		sc.TickDelay = buckets(c.tick)
	}
	if wall > 0 {
		cpu := processCPU() - c.cpu0
		sc.ProbeCPUSec = cpu.Seconds()
		sc.ProbeCPUPct = 100 * cpu.Seconds() / (wall.Seconds() * float64(c.allowedCPUs))
		if rd, ok := runQueueWait(); ok && c.runDelayOK {
			v := 100 * float64(rd-c.runDelay0) / float64(wall.Nanoseconds())
			sc.ProbeRunQueuePct = &v
		} else {
			sc.Missing = append(sc.Missing, "the probe's run-queue wait (/proc/self/task/*/schedstat)")
		}
		if h, ok := readHostCPU(); ok && c.hostOK && h.total > c.host0.total {
			v := 100 * float64(h.busy-c.host0.busy) / float64(h.total-c.host0.total)
			sc.HostCPUBusyPct = &v
		} else {
			sc.Missing = append(sc.Missing, "the host's CPU use (/proc/stat)")
		}
		if p, ok := readCPUPressure(); ok && c.psiOK {
			v := min(100, 100*float64(p-c.psi0)/float64(wall.Microseconds()))
			sc.HostCPUPressurePct = &v
		} else {
			sc.Missing = append(sc.Missing, "CPU pressure (/proc/pressure/cpu)")
		}
	}
	if p50, p99, ok := level.ttftPercentiles(); ok {
		sc.TTFTP50Ms, sc.TTFTP99Ms = &p50, &p99
	}
	sc.Flagged, sc.Reasons = acceptance.JudgeClient(sc.Health())
	return sc
}

func usToMs(us int64) float64 { return float64(us) / 1000 }

// processCPU is the probe's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runQueueWait sums the time the probe's threads have waited runnable
// (the second field of each thread's /proc/…/schedstat), in ns.
func runQueueWait() (int64, bool) {
	dirs, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, false
	}
	var total int64
	n := 0
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", d.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		total += v
		n++
	}
	return total, n > 0
}

// hostCPU is the aggregate "cpu" line of /proc/stat, in clock ticks.
type hostCPU struct{ busy, total int64 }

func readHostCPU() (hostCPU, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return hostCPU{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || fields[0] != "cpu" {
			continue
		}
		var h hostCPU
		for i, s := range fields[1:] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return hostCPU{}, false
			}
			if i >= 8 { // guest and guest_nice are already in user and nice
				break
			}
			h.total += v
			if i != 3 && i != 4 { // idle and iowait are not busy
				h.busy += v
			}
		}
		return h, true
	}
	return hostCPU{}, false
}

// readCPUPressure reads PSI's total stall time of "some" tasks waiting
// for CPU, in µs.
func readCPUPressure() (int64, bool) {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, false
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("some ")) {
			continue
		}
		for _, f := range strings.Fields(string(line)) {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}
