package parse

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// FormatGdsio is the text gdsio (NVIDIA GPUDirect Storage's benchmark)
// prints: one summary line per transfer,
//
//	IoType: READ XferType: GPUD Threads: 4 DataSetSize: 104837120/104857600(KiB) IOSize: 1024(KiB) Throughput: 6.622534 GiB/sec, Avg_Latency: 589.436984 usecs ops: 102380 total_time 15.097011 secs
//
// and, around them, lines such as "Verifying data".
const FormatGdsio Format = "gdsio-text"

// ToolGdsio names gdsio in acceptance.Source.Tool.
const ToolGdsio = "gdsio"

// GdsioSummary is one summary line of gdsio. A field the line does not
// carry is zero (Has says which were there).
type GdsioSummary struct {
	Line     int    // 1-based
	IoType   string // READ, WRITE, RANDREAD, RANDWRITE
	XferType string // GPUD, CPUONLY, CPU_GPU, CPU_ASYNC_GPU, CPU_CACHED_GPU, GPU_ASYNC, GPU_BATCH, ...
	Threads  int64
	IoDepth  int64
	// DoneKiB of TotalKiB is DataSetSize: what was moved of what was asked.
	DoneKiB, TotalKiB int64
	IOSizeKiB         int64
	// ThroughputGiBps is gdsio's own figure: DoneKiB / total_time, in GiB/s.
	ThroughputGiBps float64
	AvgLatencyUs    float64
	Ops             int64
	TotalTimeSec    float64
	Has             map[string]bool
}

// Reads reports whether the transfer read from storage.
func (g GdsioSummary) Reads() bool { return g.IoType == "READ" || g.IoType == "RANDREAD" }

// GdsioLevel is the level of a transfer type's measurements: the modes a
// gpu-path step names (wire.GPUPathGDS, wire.GPUPathGDSCPUGPU) for
// GPU-direct and the CPU bounce buffer, "gds-" and the type otherwise
// (gds-cpuonly, gds-gpu-batch).
func GdsioLevel(xfer string) string {
	switch xfer {
	case "GPUD":
		return wire.GPUPathGDS
	case "CPU_GPU":
		return wire.GPUPathGDSCPUGPU
	}
	return "gds-" + strings.ToLower(strings.ReplaceAll(xfer, "_", "-"))
}

var (
	gdsioSummaryFields = []struct {
		name string
		re   *regexp.Regexp
	}{
		{"IoType", regexp.MustCompile(`\bIoType:\s*([A-Z_]{1,32})\b`)},
		{"XferType", regexp.MustCompile(`\bXferType:\s*([A-Z_]{1,32})\b`)},
		{"Threads", regexp.MustCompile(`\bThreads:\s*([0-9]{1,9})\b`)},
		{"IoDepth", regexp.MustCompile(`\bIoDepth:\s*([0-9]{1,9})\b`)},
		{"DataSetSize", regexp.MustCompile(`\bDataSetSize:\s*([0-9]{1,18})/([0-9]{1,18})\(KiB\)`)},
		{"IOSize", regexp.MustCompile(`\bIOSize:\s*([0-9]{1,12})\(KiB\)`)},
		{"Throughput", regexp.MustCompile(`\bThroughput:\s*([0-9]+(?:\.[0-9]+)?)\s*GiB/sec`)},
		{"Avg_Latency", regexp.MustCompile(`\bAvg_Latency:\s*([0-9]+(?:\.[0-9]+)?)\s*usecs`)},
		{"ops", regexp.MustCompile(`\bops:\s*([0-9]{1,18})\b`)},
		{"total_time", regexp.MustCompile(`\btotal_time:?\s*([0-9]+(?:\.[0-9]+)?)\s*secs`)},
	}
)

// ParseGdsio reads every summary line of gdsio's output (a line with a
// Throughput figure) and returns the other non-empty lines apart.
func ParseGdsio(text string) (summaries []GdsioSummary, other []string) {
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimRight(line, "\r"))
		if line == "" {
			continue
		}
		if !strings.Contains(line, "Throughput:") {
			other = append(other, line)
			continue
		}
		g := GdsioSummary{Line: i + 1, Has: map[string]bool{}}
		for _, f := range gdsioSummaryFields {
			m := f.re.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			g.Has[f.name] = true
			switch f.name {
			case "IoType":
				g.IoType = m[1]
			case "XferType":
				g.XferType = m[1]
			case "Threads":
				g.Threads, _ = strconv.ParseInt(m[1], 10, 64)
			case "IoDepth":
				g.IoDepth, _ = strconv.ParseInt(m[1], 10, 64)
			case "DataSetSize":
				g.DoneKiB, _ = strconv.ParseInt(m[1], 10, 64)
				g.TotalKiB, _ = strconv.ParseInt(m[2], 10, 64)
			case "IOSize":
				g.IOSizeKiB, _ = strconv.ParseInt(m[1], 10, 64)
			case "Throughput":
				g.ThroughputGiBps, _ = strconv.ParseFloat(m[1], 64)
			case "Avg_Latency":
				g.AvgLatencyUs, _ = strconv.ParseFloat(m[1], 64)
			case "ops":
				g.Ops, _ = strconv.ParseInt(m[1], 10, 64)
			case "total_time":
				g.TotalTimeSec, _ = strconv.ParseFloat(m[1], 64)
			}
		}
		if !g.Has["Throughput"] {
			// "Throughput:" without a GiB/sec figure: not a summary gdsio prints.
			other = append(other, line)
			continue
		}
		summaries = append(summaries, g)
	}
	return summaries, other
}

// Bandwidth is the transfer's bytes per second: DataSetSize's done part
// over total_time where the line has both (the definition gdsio's own
// Throughput follows), its Throughput otherwise; from says which.
func (g GdsioSummary) Bandwidth() (bps float64, from string) {
	if g.Has["DataSetSize"] && g.Has["total_time"] && g.TotalTimeSec > 0 {
		return float64(g.DoneKiB) * 1024 / g.TotalTimeSec, "DataSetSize (done) / total_time"
	}
	return g.ThroughputGiBps * (1 << 30), "Throughput"
}

// ImportGdsio reads gdsio's output, as a command step kept it, into
// gpu_path_bandwidth per read transfer (the level names the transfer
// type: gds-gpu-direct for GPUD, gds-cpu-gpu for CPU_GPU) and, where the
// probe ran the command and measured its CPU time (opts.Result.Command)
// and the output holds that one transfer only, cpu_seconds_per_gib:
// the command's CPU seconds over the GiB gdsio moved. gdsio does not
// report CPU time itself, so an uploaded output has bandwidth only.
// Writes are not the GPU data path (storage into accelerator memory) and
// are left out with a warning.
func ImportGdsio(data []byte, opts Options) (Result, error) {
	in := opts.name("output.txt")
	if int64(len(data)) > opts.limit(MaxToolJSONBytes) {
		return Result{}, tooLarge(in, int64(len(data)), opts.limit(MaxToolJSONBytes))
	}
	rep := newReport(in, FormatGdsio, ToolGdsio)
	rep.ToolVersion = opts.ToolVersion
	summaries, other := ParseGdsio(string(data))
	if len(summaries) == 0 {
		return Result{}, errf(in, 0, "", "no gdsio summary line (IoType: … Throughput: N GiB/sec …): was the output cut short, or did gdsio fail?")
	}
	var reads []GdsioSummary
	seen := map[string]int{}
	for _, g := range summaries {
		field := fmt.Sprintf("line %d", g.Line)
		switch {
		case g.IoType == "":
			return Result{}, errf(in, g.Line, "IoType", "missing: the summary does not say whether it read or wrote")
		case g.XferType == "":
			return Result{}, errf(in, g.Line, "XferType", "missing: the summary does not say which path the data took")
		case !g.Reads():
			rep.warn("%s: gdsio %s (%s) not imported: a write is not the path from storage into accelerator memory", field, g.IoType, g.XferType)
			rep.ignore(field+" (IoType "+g.IoType+")", "a write: gpu_path_bandwidth is storage into accelerator memory")
			continue
		}
		if err := checkRate(g.ThroughputGiBps*(1<<30), maxBandwidth); err != nil {
			return Result{}, &Error{Input: in, Line: g.Line, Field: "Throughput", Err: err}
		}
		if g.Has["DataSetSize"] && g.DoneKiB > g.TotalKiB {
			return Result{}, errf(in, g.Line, "DataSetSize", "%d KiB done of %d KiB asked", g.DoneKiB, g.TotalKiB)
		}
		if prev, dup := seen[g.XferType]; dup {
			return Result{}, errf(in, g.Line, "XferType", "a second %s read (the first is on line %d): run one transfer per command step, or one per transfer type", g.XferType, prev)
		}
		seen[g.XferType] = g.Line
		reads = append(reads, g)
	}
	if len(reads) == 0 {
		return Result{}, errf(in, 0, "IoType", "no read transfer: gdsio only wrote (run it with -I 0 or -I 2 to read)")
	}
	var cpu *wire.CommandSummary
	if opts.Result != nil {
		cpu = opts.Result.Command
	}
	var out []acceptance.Measurement
	for _, g := range reads {
		field := fmt.Sprintf("%s: line %d", in, g.Line)
		level := GdsioLevel(g.XferType)
		bps, from := g.Bandwidth()
		if err := checkRate(bps, maxBandwidth); err != nil || bps == 0 {
			if err == nil {
				err = fmt.Errorf("no bytes moved")
			}
			return Result{}, &Error{Input: in, Line: g.Line, Field: "DataSetSize", Err: err}
		}
		src := acceptance.Source{Tool: ToolGdsio, ToolVersion: opts.ToolVersion, Field: field + ": " + from}
		bw := opts.measurement(acceptance.MetricGPUPathBandwidth, src)
		bw.Level = level
		bw.Values = []float64{bps}
		bw.ToolSummary = map[string]float64{"mean": g.ThroughputGiBps * (1 << 30)}
		out = append(out, bw)
		rep.read(field+": "+from, acceptance.MetricGPUPathBandwidth, "XferType "+g.XferType+" → level "+level+"; gdsio's own Throughput is kept beside it")
		if from == "Throughput" {
			rep.warn("line %d: no DataSetSize and total_time: gpu_path_bandwidth is gdsio's rounded Throughput", g.Line)
		}
		if g.XferType == "CPUONLY" {
			rep.warn("line %d: XferType CPUONLY ends in host memory: storage to CPU, not into accelerator memory", g.Line)
		}
		if g.Has["DataSetSize"] && g.DoneKiB < g.TotalKiB {
			rep.warn("line %d: gdsio moved %d of the %d KiB asked (a time-limited run, or the file is smaller)", g.Line, g.DoneKiB, g.TotalKiB)
		}
		switch {
		case cpu == nil:
			rep.warn("line %d: no cpu_seconds_per_gib: gdsio does not report CPU time, and no command step of the probe measured it", g.Line)
		case len(summaries) > 1:
			rep.warn("line %d: no cpu_seconds_per_gib: the command ran %d transfers and its CPU time (%.3f s) cannot be split between them; run one transfer per command step", g.Line, len(summaries), cpu.CPUSeconds)
		case !g.Has["DataSetSize"] || g.DoneKiB == 0:
			rep.warn("line %d: no cpu_seconds_per_gib: the line does not say how much was moved (DataSetSize)", g.Line)
		default:
			gib := float64(g.DoneKiB) / (1 << 20)
			v := cpu.CPUSeconds / gib
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return Result{}, errf(opts.ResultName, 0, "command.cpu_seconds", "must be a finite number ≥ 0, got %v", cpu.CPUSeconds)
			}
			csrc := acceptance.Source{Tool: ToolGdsio, ToolVersion: opts.ToolVersion,
				Field: fmt.Sprintf("%s: command.cpu_seconds %.6g (the command's user + system time) / %s: line %d: DataSetSize %d KiB", resultName(opts), cpu.CPUSeconds, in, g.Line, g.DoneKiB)}
			c := opts.measurement(acceptance.MetricCPUSecondsPerGiB, csrc)
			c.Level = level
			c.Values = []float64{v}
			out = append(out, c)
			rep.read(csrc.Field, acceptance.MetricCPUSecondsPerGiB, "CPU time of the command the probe ran, which gdsio does not print")
		}
		for _, name := range []string{"Threads", "IoDepth", "IOSize"} {
			if g.Has[name] {
				rep.ignore(name, "the run's set-up, not a measurement (kept in the file)")
			}
		}
		if g.Has["Avg_Latency"] {
			rep.ignore("Avg_Latency", "a mean over all I/Os with no distribution: no percentile can be taken from it")
		}
		if g.Has["ops"] {
			rep.ignore("ops", "the count of I/Os: bandwidth is taken from the bytes moved")
		}
	}
	if len(other) > 0 {
		rep.ignore(fmt.Sprintf("%d other lines", len(other)), "not a transfer summary (\""+truncate(other[0], 60)+"\" …)")
	}
	if err := rep.finish(out); err != nil {
		return Result{}, err
	}
	return Result{Measurements: out, Report: *rep}, nil
}

func resultName(o Options) string {
	if o.ResultName != "" {
		return o.ResultName
	}
	return "result.json"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
