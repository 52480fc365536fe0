package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/parse"
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
		out, err := measureGPUPath(ctx, s.GPUPath, dir, r.lookPath)
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

// gdsioXfer is the XferType gdsio prints for each -x it is run with.
var gdsioXfer = map[string]string{"0": "GPUD", "2": "CPU_GPU"}

// runGdsio reads with gdsio in one transfer mode (-x xfer) and takes the
// CPU time of the gdsio process (and any children it waited for) from
// the kernel's accounting; gdsio's output is kept beside the result.
// The figures are gdsio's own: the bytes it says it moved (DataSetSize)
// over its total_time, the definition of its Throughput.
func runGdsio(ctx context.Context, gdsio string, g *acceptance.GPUPathStep, mode, xfer, dir string) wire.GPUPathMode {
	m := wire.GPUPathMode{Mode: mode, Tool: "gdsio", Output: "gdsio-" + mode + ".txt"}
	args := []string{"-f", g.Target, "-d", strconv.Itoa(g.GPU), "-w", "1", "-s", strconv.FormatInt(int64(g.Size), 10),
		"-i", strconv.FormatInt(int64(g.BlockSize)>>10, 10) + "K", "-x", xfer, "-I", "0"}
	cmd := exec.CommandContext(ctx, gdsio, args...)
	out, err := cmd.CombinedOutput()
	if werr := os.WriteFile(filepath.Join(dir, m.Output), out, 0o644); werr != nil {
		m.Output = ""
	}
	if err != nil {
		m.Absent, m.Reason = true, fmt.Sprintf("gdsio -x %s failed: %v%s", xfer, err, tailText(out))
		return m
	}
	summaries, _ := parse.ParseGdsio(string(out))
	var sum *parse.GdsioSummary
	for i := range summaries {
		if summaries[i].Reads() {
			sum = &summaries[i]
			break
		}
	}
	switch {
	case len(summaries) == 0:
		m.Absent, m.Reason = true, "gdsio's output has no Throughput line"+tailText(out)
		return m
	case sum == nil:
		m.Absent, m.Reason = true, "gdsio reported no read (IoType "+summaries[0].IoType+")"
		return m
	case sum.XferType != gdsioXfer[xfer]:
		m.Absent, m.Reason = true, fmt.Sprintf("gdsio -x %s reported XferType %s, not %s", xfer, sum.XferType, gdsioXfer[xfer])
		return m
	case !sum.Has["DataSetSize"] || !sum.Has["total_time"] || sum.DoneKiB == 0 || sum.TotalTimeSec <= 0:
		m.Absent, m.Reason = true, "gdsio's summary does not say how much it moved in how long (DataSetSize, total_time)"
		return m
	}
	m.Bytes = sum.DoneKiB << 10
	m.Seconds = sum.TotalTimeSec
	m.BandwidthBps, _ = sum.Bandwidth()
	if st := cmd.ProcessState; st != nil {
		m.CPUSeconds = (st.UserTime() + st.SystemTime()).Seconds()
		if m.CPUSeconds > 0 {
			m.CPUSecPerGiB = m.CPUSeconds / (float64(m.Bytes) / (1 << 30))
		}
	}
	m.Measured = "gdsio's bytes moved (DataSetSize) over its total_time; CPU time of the gdsio process (user + system), its start-up included"
	return m
}

func tailText(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	return ": " + truncate(s, 300)
}
