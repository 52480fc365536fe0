package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/counters"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/gpu"
	"github.com/accordlab/accord/runners/probe/wire"
)

// cpuTimes is the aggregate "cpu" line of /proc/stat, in clock ticks.
type cpuTimes struct {
	Busy, Total uint64
}

// parseCPUStat reads the aggregate cpu line of /proc/stat. Idle and iowait
// count as not busy.
func parseCPUStat(b []byte) (cpuTimes, error) {
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "cpu" {
			continue
		}
		var t cpuTimes
		for i, s := range f[1:] {
			if i >= 8 { // guest and guest_nice are already in user and nice
				break
			}
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return cpuTimes{}, fmt.Errorf("proc stat: cpu field %d: %w", i+1, err)
			}
			t.Total += n
			if i != 3 && i != 4 { // idle, iowait
				t.Busy += n
			}
		}
		return t, nil
	}
	return cpuTimes{}, fmt.Errorf("proc stat: no cpu line")
}

// diskCounters are one device's cumulative counters from /proc/diskstats.
type diskCounters struct {
	ReadSectors, WriteSectors, IOTicksMs uint64
}

// parseDiskstats parses /proc/diskstats by device name.
func parseDiskstats(b []byte) map[string]diskCounters {
	out := map[string]diskCounters{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 14 {
			continue
		}
		var n [3]uint64
		ok := true
		for i, idx := range []int{5, 9, 12} { // sectors read, sectors written, io_ticks
			v, err := strconv.ParseUint(f[idx], 10, 64)
			if err != nil {
				ok = false
				break
			}
			n[i] = v
		}
		if ok {
			out[f[2]] = diskCounters{ReadSectors: n[0], WriteSectors: n[1], IOTicksMs: n[2]}
		}
	}
	return out
}

// netCounters are one interface's cumulative byte counters.
type netCounters struct{ Rx, Tx uint64 }

// parseNetDev parses /proc/net/dev by interface name.
func parseNetDev(b []byte) map[string]netCounters {
	out := map[string]netCounters{}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			continue
		}
		rx, err1 := strconv.ParseUint(f[0], 10, 64)
		tx, err2 := strconv.ParseUint(f[8], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out[strings.TrimSpace(name)] = netCounters{Rx: rx, Tx: tx}
	}
	return out
}

// devMajorMinor splits a Linux dev_t.
func devMajorMinor(dev uint64) (uint64, uint64) {
	major := (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff)
	minor := dev&0xff | (dev>>12)&^uint64(0xff)
	return major, minor
}

// targetDevices resolves a fio target to the block devices whose counters
// /proc/diskstats has: the device itself, or the device holding the file
// (via st_dev and /sys/dev/block). A file on a file system without a block
// device (tmpfs) has none.
func targetDevices(target string) []string {
	fi, err := os.Stat(target)
	if err != nil {
		fi, err = os.Stat(filepath.Dir(target))
		if err != nil {
			return nil
		}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	dev := st.Dev
	if fi.Mode()&os.ModeDevice != 0 {
		dev = st.Rdev
	}
	major, minor := devMajorMinor(dev)
	link, err := os.Readlink(fmt.Sprintf("/sys/dev/block/%d:%d", major, minor))
	if err != nil {
		return nil
	}
	return []string{filepath.Base(link)}
}

// nvmeNamespaces lists the host's NVMe namespace block devices, the disks
// telemetry watches when a step has no target of its own.
func nvmeNamespaces() []string {
	m, _ := filepath.Glob("/sys/block/nvme*n*")
	var out []string
	for _, p := range m {
		name := filepath.Base(p)
		if !strings.Contains(name[4:], "c") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// telemetry samples the host every second into telemetry.jsonl and keeps
// the samples of the current interim window.
type telemetry struct {
	f         *segmentWriter
	dir       string
	start     time.Time
	devices   []string
	gpus      []presentTool     // the vendor tools on this host
	exporters []*exporterSource // the profile's Prometheus exporters
	counter   *counters.Reader
	warn      func(format string, args ...any)
	cancel    context.CancelFunc
	done      chan struct{}

	mu     sync.Mutex
	window []wire.TelemetrySample
	err    error
}

// startTelemetry samples the host every second into dir's telemetry.jsonl
// until stop: the block devices' and NICs' rates, the fabric's and
// drives' counters, every vendor tool installed and the profile's
// exporters.
func (r *runner) startTelemetry(ctx context.Context, dir string, devices []string) (*telemetry, error) {
	f, err := openSegments(dir, wire.TelemetryFile, r.plan.RecordSegmentBytes)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	warn := func(format string, args ...any) { r.ev.log("warn", format, args...) }
	ctx, cancel := context.WithCancel(ctx)
	t := &telemetry{f: f, dir: dir, start: time.Now(), devices: devices, cancel: cancel, done: make(chan struct{}),
		gpus: presentTools(r.lookPath), exporters: exporterSources(r.plan.Profile.Telemetry, warn),
		counter: counters.NewReader(), warn: warn}
	go t.loop(ctx)
	return t, nil
}

type telemetryState struct {
	at       time.Time
	cpu      cpuTimes
	disk     map[string]diskCounters
	net      map[string]netCounters
	counters counters.Reading
}

func (t *telemetry) readState(ctx context.Context) telemetryState {
	s := readTelemetryState()
	s.counters = t.counter.Read(ctx)
	return s
}

func readTelemetryState() telemetryState {
	s := telemetryState{at: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		s.cpu, _ = parseCPUStat(b)
	}
	if b, err := os.ReadFile("/proc/diskstats"); err == nil {
		s.disk = parseDiskstats(b)
	}
	if b, err := os.ReadFile("/proc/net/dev"); err == nil {
		s.net = parseNetDev(b)
	}
	return s
}

func (t *telemetry) loop(ctx context.Context) {
	defer close(t.done)
	prev := t.readState(ctx)
	samples := 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			// The last part of a second is sampled too, and a step shorter
			// than a second has one sample over its whole length.
			if samples == 0 || time.Since(prev.at) >= minFinalSample {
				final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				cur := t.readState(final)
				t.record(t.sample(final, prev, cur))
				cancel()
			}
			return
		case <-tick.C:
		}
		cur := t.readState(ctx)
		t.record(t.sample(ctx, prev, cur))
		prev = cur
		samples++
	}
}

// minFinalSample is the shortest last interval worth a sample of its own.
const minFinalSample = 200 * time.Millisecond

// record appends a sample to telemetry.jsonl and the interim window.
func (t *telemetry) record(s wire.TelemetrySample) {
	b, _ := json.Marshal(s)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.f.Write(append(b, '\n')); err != nil && t.err == nil {
		t.err = err
	}
	t.window = append(t.window, s)
}

func (t *telemetry) sample(ctx context.Context, prev, cur telemetryState) wire.TelemetrySample {
	s := wire.TelemetrySample{T: cur.at.Sub(t.start).Nanoseconds()}
	sec := cur.at.Sub(prev.at).Seconds()
	if sec <= 0 {
		sec = 1
	}
	if dt := cur.cpu.Total - prev.cpu.Total; cur.cpu.Total > prev.cpu.Total {
		s.CPUBusyPct = 100 * float64(cur.cpu.Busy-prev.cpu.Busy) / float64(dt)
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m := facts.ParseMeminfo(string(b))
		s.MemUsedBytes = m["MemTotal"] - m["MemAvailable"]
	}
	var busy float64
	for _, d := range t.devices {
		c, p := cur.disk[d], prev.disk[d]
		if c.ReadSectors >= p.ReadSectors && c.WriteSectors >= p.WriteSectors && c.IOTicksMs >= p.IOTicksMs {
			s.DiskReadBps += float64(c.ReadSectors-p.ReadSectors) * 512 / sec
			s.DiskWriteBps += float64(c.WriteSectors-p.WriteSectors) * 512 / sec
			busy = math.Max(busy, float64(c.IOTicksMs-p.IOTicksMs)/(sec*10))
		}
	}
	s.DiskBusyPct = math.Min(busy, 100)
	for name, c := range cur.net {
		p, ok := prev.net[name]
		if name == "lo" || !ok || c.Rx < p.Rx || c.Tx < p.Tx {
			continue
		}
		s.NICRxBps += float64(c.Rx-p.Rx) / sec
		s.NICTxBps += float64(c.Tx-p.Tx) / sec
	}
	s.Counters, s.CounterDetail = counters.Rates(prev.counters, cur.counters)
	if len(t.gpus) > 0 || len(t.exporters) > 0 {
		var fromExporters []wire.GPUSample
		var wg sync.WaitGroup
		wg.Go(func() { fromExporters = t.scrapeExporters(ctx) })
		s.GPUs = sampleGPUs(ctx, t.gpus)
		wg.Wait()
		s.GPUs = append(s.GPUs, fromExporters...)
		s.GPUUtilPct = meanUtil(wire.HostGPUs(s.GPUs))
	}
	return s
}

// presentTool is a vendor tool found on PATH.
type presentTool struct {
	adapter gpu.Adapter
	path    string
}

// presentTools finds the vendor tools installed on this host, once per
// step: a tool that is absent costs nothing after that. A tool superseded
// by another installed one (rocm-smi beside amd-smi) is left out, so no
// device is sampled twice.
func presentTools(lookPath func(string) (string, error)) []presentTool {
	superseded := gpu.Superseded(func(tool string) bool { _, err := lookPath(tool); return err == nil })
	var out []presentTool
	for _, a := range gpu.Adapters() {
		if p, err := lookPath(a.Tool); err == nil && !superseded[a.Tool] {
			out = append(out, presentTool{a, p})
		}
	}
	return out
}

// runTool runs one command of a vendor tool within a second, so a slow
// tool cannot stall the sampling.
func runTool(ctx context.Context, path string, args []string) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, path, args...)
	cmd.SysProcAttr = childAttr()
	return cmd.Output()
}

// sampleTool takes one sample of a tool: its telemetry commands in turn,
// then the commands derived from their outputs side by side (a failed one
// gives a nil output: that reading is absent).
func sampleTool(ctx context.Context, pt presentTool) ([]gpu.Sample, error) {
	var outs [][]byte
	for _, args := range pt.adapter.Telemetry {
		out, err := runTool(ctx, pt.path, args)
		if err != nil {
			return nil, err
		}
		outs = append(outs, out)
	}
	if pt.adapter.MoreTelemetry != nil {
		more := pt.adapter.MoreTelemetry(outs)
		extra := make([][]byte, len(more))
		var wg sync.WaitGroup
		for i, args := range more {
			wg.Go(func() { extra[i], _ = runTool(ctx, pt.path, args) })
		}
		wg.Wait()
		outs = append(outs, extra...)
	}
	return pt.adapter.ParseTelemetry(outs)
}

// sampleGPUs runs every present tool's telemetry commands side by side
// (each within a second, so a slow tool cannot stall the sampling) and
// returns the devices' readings; a tool that fails this second gives
// none.
func sampleGPUs(ctx context.Context, tools []presentTool) []wire.GPUSample {
	results := make([][]wire.GPUSample, len(tools))
	var wg sync.WaitGroup
	for i, pt := range tools {
		wg.Go(func() {
			samples, err := sampleTool(ctx, pt)
			if err != nil {
				return
			}
			for _, x := range samples {
				results[i] = append(results[i], wire.GPUSample{Tool: pt.adapter.Tool, Index: x.Index, UtilPct: x.UtilPct,
					MemUsedBytes: x.MemUsedBytes, MemBWPct: x.MemBWPct, PowerW: x.PowerW})
			}
		})
	}
	wg.Wait()
	var out []wire.GPUSample
	for _, r := range results {
		out = append(out, r...)
	}
	return out
}

// meanUtil is the mean utilisation over the devices that report one.
func meanUtil(gs []wire.GPUSample) *float64 {
	var sum float64
	n := 0
	for _, g := range gs {
		if g.UtilPct != nil {
			sum += *g.UtilPct
			n++
		}
	}
	if n == 0 {
		return nil
	}
	mean := sum / float64(n)
	return &mean
}

// takeWindow returns the interim statistics of the requested system metrics
// over the samples since the last call.
func (t *telemetry) takeWindow(ids []string) map[string]wire.InterimStats {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	samples := t.window
	t.window = nil
	t.mu.Unlock()
	if len(samples) == 0 {
		return nil
	}
	out := map[string]wire.InterimStats{}
	for _, id := range ids {
		var vals []float64
		for _, s := range samples {
			switch id {
			case acceptance.MetricCPUUtil:
				vals = append(vals, s.CPUBusyPct)
			case acceptance.MetricDiskUtil:
				vals = append(vals, s.DiskBusyPct)
			case acceptance.MetricNICRxBytes:
				vals = append(vals, s.NICRxBps)
			case acceptance.MetricNICTxBytes:
				vals = append(vals, s.NICTxBps)
			case acceptance.MetricGPUUtil:
				if s.GPUUtilPct != nil {
					vals = append(vals, *s.GPUUtilPct)
				}
			default:
				if v, ok := s.Counters[id]; ok {
					vals = append(vals, v)
				}
			}
		}
		if len(vals) > 0 {
			out[id] = sampleStats(vals)
		}
	}
	return out
}

// sampleStats summarises raw samples (nearest-rank percentiles).
func sampleStats(vals []float64) wire.InterimStats {
	s := append([]float64(nil), vals...)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return wire.InterimStats{N: int64(len(s)), Mean: sum / float64(len(s)), P50: q(0.5), P95: q(0.95), P99: q(0.99), Max: s[len(s)-1]}
}

func (t *telemetry) stop() error {
	if t == nil {
		return nil
	}
	t.cancel()
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.f.Close(); err != nil && t.err == nil {
		t.err = err
	}
	if t.err != nil {
		return fmt.Errorf("telemetry: %w", t.err)
	}
	return nil
}
