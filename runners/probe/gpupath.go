package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

func validateGPUPath(g *acceptance.GPUPathStep) error {
	if !filepath.IsAbs(g.Target) {
		return fmt.Errorf("target %q must be an absolute path", g.Target)
	}
	bs := int64(g.BlockSize)
	if bs < 4096 || bs > 64<<20 || bs&(bs-1) != 0 {
		return fmt.Errorf("block_size %d must be a power of two from 4 KiB to 64 MiB", bs)
	}
	if g.Size < g.BlockSize || g.Size > acceptance.MaxGPUPathSize {
		return fmt.Errorf("size %d must be at least the block size and at most 1 TiB", g.Size)
	}
	return nil
}

func (r *runner) runGPUPath(ctx context.Context, i int, s acceptance.StepSpec, rep int, rel string) error {
	res := r.newResult(i, s, rep, "", rel)
	res.Format = "gpu-path-json"
	dir := filepath.Join(r.dir, rel)
	err := stepError(ctx, s.Name, func() error {
		tel, err := r.startTelemetry(ctx, dir, targetDevices(s.GPUPath.Target))
		if err != nil {
			return err
		}
		defer tel.stop()
		out, err := measureGPUPath(ctx, s.GPUPath, dir, exec.LookPath)
		if err != nil {
			return err
		}
		for _, m := range out.Modes {
			if m.Absent {
				r.ev.log("info", "step %s: %s not measured: %s", s.Name, m.Mode, m.Reason)
			} else {
				r.ev.log("info", "step %s: %s %.2f GiB/s, %.3f CPU-s/GiB", s.Name, m.Mode, m.BandwidthBps/(1<<30), m.CPUSecPerGiB)
			}
		}
		return writeJSONAtomic(filepath.Join(dir, wire.GPUPathFile), out)
	}())
	r.emitResult(res, wire.GPUPathFile, err)
	return err
}

// measureGPUPath runs every path the host has. The CPU-mediated one always
// runs; gdsio's modes run where gdsio is installed.
func measureGPUPath(ctx context.Context, g *acceptance.GPUPathStep, dir string, lookPath func(string) (string, error)) (*wire.GPUPathResult, error) {
	out := &wire.GPUPathResult{Target: g.Target, BlockSize: int64(g.BlockSize), Size: int64(g.Size)}
	cpu, err := cpuMediatedRead(ctx, g.Target, int64(g.BlockSize), int64(g.Size))
	if err != nil {
		return nil, err
	}
	out.Modes = append(out.Modes, cpu)
	gdsio, err := lookPath("gdsio")
	if err != nil {
		reason := "gdsio (NVIDIA GPUDirect Storage tools) is not installed on this host"
		out.Modes = append(out.Modes,
			wire.GPUPathMode{Mode: wire.GPUPathGDS, Tool: "gdsio", Absent: true, Reason: reason},
			wire.GPUPathMode{Mode: wire.GPUPathGDSCPUGPU, Tool: "gdsio", Absent: true, Reason: reason})
		out.NotMeasured = append(out.NotMeasured,
			"GPU-direct (storage to accelerator memory by DMA): "+reason,
			"the host-to-accelerator copy of the CPU-mediated path: no accelerator runtime here, so the figure covers the O_DIRECT read and the copy into a staging buffer, not the transfer across PCIe into device memory")
		return out, nil
	}
	for _, m := range []struct {
		mode, xfer string
	}{{wire.GPUPathGDS, "0"}, {wire.GPUPathGDSCPUGPU, "2"}} {
		out.Modes = append(out.Modes, runGdsio(ctx, gdsio, g, m.mode, m.xfer, dir))
	}
	return out, nil
}

// cpuMediatedRead reads size bytes of target with O_DIRECT into an
// aligned buffer and copies each block into a second buffer, as a driver
// without GPU-direct stages data before the DMA to the device. It runs on
// one locked OS thread so that the thread's own CPU time (RUSAGE_THREAD)
// is what the path cost. A file system that refuses O_DIRECT (tmpfs) is
// read through the page cache, and the result says so.
func cpuMediatedRead(ctx context.Context, target string, bs, size int64) (wire.GPUPathMode, error) {
	m := wire.GPUPathMode{Mode: wire.GPUPathCPU, Tool: "accord-probe", ODirect: true}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f, err := os.OpenFile(target, os.O_RDONLY|syscall.O_DIRECT, 0)
	if errors.Is(err, syscall.EINVAL) {
		m.ODirect = false
		f, err = os.Open(target)
	}
	if err != nil {
		return m, fmt.Errorf("gpu-path: open %s: %w", target, err)
	}
	defer f.Close()
	buf, err := syscall.Mmap(-1, 0, int(bs), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return m, fmt.Errorf("gpu-path: aligned buffer: %w", err)
	}
	defer syscall.Munmap(buf)
	staging, err := syscall.Mmap(-1, 0, int(bs), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return m, fmt.Errorf("gpu-path: staging buffer: %w", err)
	}
	defer syscall.Munmap(staging)

	var ru0, ru1 syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru0); err != nil {
		return m, fmt.Errorf("gpu-path: rusage: %w", err)
	}
	start := time.Now()
	var copyTime time.Duration
	var off, done int64
	for done < size {
		if ctx.Err() != nil {
			return m, ctx.Err()
		}
		n, err := f.ReadAt(buf, off)
		if n > 0 {
			c := time.Now()
			copy(staging, buf[:n])
			copyTime += time.Since(c)
			done += int64(n)
			off += int64(n)
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			if off == 0 {
				return m, fmt.Errorf("gpu-path: %s is empty", target)
			}
			off = 0 // a target smaller than size is read again from the start
			continue
		}
		if err != nil {
			return m, fmt.Errorf("gpu-path: read %s at %d: %w", target, off, err)
		}
	}
	elapsed := time.Since(start)
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru1); err != nil {
		return m, fmt.Errorf("gpu-path: rusage: %w", err)
	}
	cpu := time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()) + time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano())
	m.Bytes, m.Seconds, m.CPUSeconds, m.CopySeconds = done, elapsed.Seconds(), cpu.Seconds(), copyTime.Seconds()
	m.BandwidthBps = float64(done) / elapsed.Seconds()
	m.CPUSecPerGiB = cpu.Seconds() / (float64(done) / (1 << 30))
	m.Measured = "O_DIRECT reads into an aligned host buffer plus the copy into a staging buffer, on one thread; CPU time is that thread's user + system time"
	if !m.ODirect {
		m.Measured = "buffered reads (the file system refused O_DIRECT, so the page cache may serve them) plus the copy into a staging buffer, on one thread"
	}
	return m, nil
}

// gdsioLine finds gdsio's summary: "... Throughput: 2.345 GiB/sec, Avg_Latency: ...".
var gdsioThroughput = regexp.MustCompile(`Throughput:\s*([0-9.]+)\s*GiB/sec`)

// runGdsio reads with gdsio in one transfer mode and takes the CPU time
// of the gdsio process from the kernel's accounting.
func runGdsio(ctx context.Context, gdsio string, g *acceptance.GPUPathStep, mode, xfer, dir string) wire.GPUPathMode {
	m := wire.GPUPathMode{Mode: mode, Tool: "gdsio", Output: "gdsio-" + mode + ".txt"}
	args := []string{"-f", g.Target, "-d", strconv.Itoa(g.GPU), "-w", "1", "-s", strconv.FormatInt(int64(g.Size), 10),
		"-i", strconv.FormatInt(int64(g.BlockSize)>>10, 10) + "K", "-x", xfer, "-I", "0"}
	cmd := exec.CommandContext(ctx, gdsio, args...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	_ = os.WriteFile(filepath.Join(dir, m.Output), out, 0o644)
	if err != nil {
		m.Absent, m.Reason = true, fmt.Sprintf("gdsio -x %s failed: %v%s", xfer, err, tailText(out))
		return m
	}
	gib, ok := ParseGdsio(string(out))
	if !ok {
		m.Absent, m.Reason = true, "gdsio's output has no Throughput line"
		return m
	}
	m.BandwidthBps = gib * (1 << 30)
	m.Bytes = int64(g.Size)
	m.Seconds = elapsed.Seconds()
	if st := cmd.ProcessState; st != nil {
		m.CPUSeconds = (st.UserTime() + st.SystemTime()).Seconds()
		m.CPUSecPerGiB = m.CPUSeconds / (float64(g.Size) / (1 << 30))
	}
	m.Measured = "gdsio's reported throughput; CPU time of the gdsio process (user + system)"
	return m
}

// ParseGdsio returns the throughput (GiB/s) gdsio reports.
func ParseGdsio(s string) (float64, bool) {
	mm := gdsioThroughput.FindStringSubmatch(s)
	if mm == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(mm[1], 64)
	return v, err == nil && v >= 0
}

func tailText(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	return ": " + truncate(s, 300)
}
