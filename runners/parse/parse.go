// Package parse turns raw tool outputs into Accord's canonical measurements:
// the probe's own request records and telemetry, fio JSON (and json+), vLLM's
// serving benchmark result, GenAI-Perf's and AIPerf's profile exports,
// the GPU data path (the probe's gpu-path result and gdsio's text).
//
// Every importer either returns measurements (in the catalog's canonical
// units: ms for request latencies, µs for I/O latencies, B/s for bandwidth)
// plus warnings the caller can show, or an error naming the input, line and
// field — and then nothing at all, so that the caller stores nothing.
//
// Accord computes its own statistics wherever the input has raw samples or
// histogram bins; a tool's own summary numbers are kept beside them in
// Measurement.ToolSummary, converted to the canonical unit.
package parse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/stats"
	"github.com/accordlab/accord/runners/probe/wire"
)

// Format names an importable output. The names of the tool formats match
// wire.StepResult.Format and acceptance.CommandStep.Format.
type Format string

const (
	FormatProbeRequests  Format = "probe-requests"  // requests.jsonl + the level's wire.StepResult
	FormatProbeTelemetry Format = "probe-telemetry" // telemetry.jsonl
	FormatFio            Format = "fio-json"        // fio --output-format=json or json+ (fio 2 and 3)
	FormatVLLMBench      Format = "vllm-bench-json" // vllm bench serve --save-result (benchmark_serving.py)
	FormatGenAIPerf      Format = "genai-perf-json" // profile_export_genai_perf.json
	FormatAIPerf         Format = "aiperf-json"     // profile_export_aiperf.json
	FormatAIPerfRecords  Format = "aiperf-records"  // AIPerf's per-request profile_export.jsonl
)

// Formats lists every format Import understands.
var Formats = []Format{FormatProbeRequests, FormatProbeTelemetry, FormatFio, FormatVLLMBench, FormatGenAIPerf, FormatAIPerf, FormatAIPerfRecords, FormatGPUPath, FormatGdsio, FormatDriveWear}

// Tool names written into acceptance.Source.Tool.
const (
	ToolProbe     = "accord-probe"
	ToolFio       = "fio"
	ToolVLLM      = "vllm-bench"
	ToolGenAIPerf = "genai-perf"
	ToolAIPerf    = "aiperf"
)

// Percentile methods written into acceptance.Source.PercentileMethod.
const (
	MethodRawSamples = "raw samples"
	// More than stats.InMemoryLimit raw samples, kept grouped by log
	// bucket: every figure is still the exact samples'.
	MethodSegmentedSamples = "raw samples (over a million: stored grouped by log bucket, figures exact)"
	MethodHistogram        = "histogram buckets (HDR, bucket value)"
	MethodFioBins          = "fio latency bins (≤ 1/64 relative error)"
	MethodToolSummary      = "tool summary only (no samples)"
)

// The percentile definition of each tool's own summary figures.
const (
	definitionVLLM      = stats.NumpyLinear // benchmark_serving.py: np.percentile, np.median
	definitionGenAIPerf = stats.NumpyLinear // genai_perf/metrics/statistics.py: np.percentile
	definitionAIPerf    = stats.NumpyLinear // aiperf/metrics/metric_dicts.py: np.percentile
	// fio's: stat.c, calc_clat_percentiles over the bins, by release (fioDefinition).
)

// Size limits, checked before anything is parsed.
const (
	MaxRecordBytes   int64 = 4 << 30  // request records and telemetry (JSON lines): ten million requests are 2.3 GB
	MaxToolJSONBytes int64 = 64 << 20 // a tool's single JSON document
	// MaxLineBytes bounds one JSON line of a records file.
	MaxLineBytes = 1 << 20
)

// maxLatencyMs is the largest latency accepted: anything above a day is a
// unit or clock error, not a measurement.
const maxLatencyMs = 24 * 3600 * 1000.0

// Options identify what the measurements belong to and carry the side data
// some formats need.
type Options struct {
	Step       string
	Level      string
	Repetition int
	// Name names the input in errors and in Source.Field (a file name);
	// the format's usual file name when empty.
	Name string
	// ToolVersion is used when the input does not say its own version (the
	// probe's build, a vLLM version known to the caller).
	ToolVersion string
	// Result is the level's StepResult: required for probe-requests (the
	// measured window, the ITL histogram, the Prometheus counter deltas).
	Result *wire.StepResult
	// ResultName names Result in errors (default result.json).
	ResultName string
	// SLO for goodput (probe-requests): requests meeting every set limit.
	SLO acceptance.SLO
	// MaxBytes overrides the format's size limit when > 0.
	MaxBytes int64
	// TempDir is where a metric's samples past stats.InMemoryLimit are
	// kept while the import's measurements live (runners/parse/spill); the
	// system's temporary directory when empty.
	TempDir string
}

func (o Options) name(def string) string {
	if o.Name != "" {
		return o.Name
	}
	return def
}

func (o Options) limit(def int64) int64 {
	if o.MaxBytes > 0 {
		return o.MaxBytes
	}
	return def
}

// measurement starts a Measurement of metric with the caller's identity.
func (o Options) measurement(metric string, src acceptance.Source) acceptance.Measurement {
	return acceptance.Measurement{
		Metric:     metric,
		Step:       o.Step,
		Level:      o.Level,
		Repetition: o.Repetition,
		Source:     src,
	}
}

// Error is an import error that names where the input went wrong.
type Error struct {
	Input string // file name or format
	Line  int    // 1-based line for JSON-lines inputs, 0 otherwise
	Field string // the field at fault, if one is
	Err   error
}

func (e *Error) Error() string {
	s := "parse " + e.Input
	if e.Line > 0 {
		s += ": line " + strconv.Itoa(e.Line)
	}
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// ErrTooLarge is wrapped by errors about inputs over the size limit.
var ErrTooLarge = errors.New("input too large")

func errf(input string, line int, field, format string, args ...any) *Error {
	return &Error{Input: input, Line: line, Field: field, Err: fmt.Errorf(format, args...)}
}

func tooLarge(input string, size, limit int64) *Error {
	return &Error{Input: input, Err: fmt.Errorf("%w: %d bytes, the limit is %d bytes (%s)", ErrTooLarge, size, limit, humanBytes(limit))}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

// Import parses data in the given format. Warnings are things the caller
// should show next to the results (fallbacks, skipped metrics); an error
// means nothing was imported. ImportWithReport also says what was read and
// what was ignored. For the JSON-lines formats, ImportFile and the
// reader-based importers avoid holding the file in memory.
func Import(format Format, data []byte, opts Options) ([]acceptance.Measurement, []string, error) {
	r, err := ImportWithReport(format, data, opts)
	if err != nil {
		return nil, nil, err
	}
	return r.Measurements, r.Report.Warnings, nil
}

// ImportWithReport parses data in the given format (detected from the
// content when empty) and reports what it read, what it ignored and why.
func ImportWithReport(format Format, data []byte, opts Options) (Result, error) {
	r, err := importWithReport(format, data, opts)
	r.Report.Step = opts.Step
	return r, err
}

func importWithReport(format Format, data []byte, opts Options) (Result, error) {
	switch format {
	case FormatProbeRequests:
		if int64(len(data)) > opts.limit(MaxRecordBytes) {
			return Result{}, tooLarge(opts.name(wire.RequestsFile), int64(len(data)), opts.limit(MaxRecordBytes))
		}
		return plainResult(format, ToolProbe, opts.name(wire.RequestsFile), opts.ToolVersion)(importProbeRecords(bytes.NewReader(data), int64(len(data)), opts))
	case FormatProbeTelemetry:
		if int64(len(data)) > opts.limit(MaxRecordBytes) {
			return Result{}, tooLarge(opts.name(wire.TelemetryFile), int64(len(data)), opts.limit(MaxRecordBytes))
		}
		return plainResult(format, ToolProbe, opts.name(wire.TelemetryFile), opts.ToolVersion)(ImportTelemetry(bytes.NewReader(data), opts))
	case FormatAIPerfRecords:
		if int64(len(data)) > opts.limit(MaxRecordBytes) {
			return Result{}, tooLarge(opts.name("profile_export.jsonl"), int64(len(data)), opts.limit(MaxRecordBytes))
		}
		return importAIPerfRecords(bytes.NewReader(data), opts)
	case FormatFio:
		return importFio(data, opts)
	case FormatVLLMBench:
		return importVLLM(data, opts)
	case FormatGenAIPerf:
		return importPerfSummary(data, opts, ToolGenAIPerf, "profile_export_genai_perf.json")
	case FormatAIPerf:
		return importPerfSummary(data, opts, ToolAIPerf, "profile_export_aiperf.json")
	case FormatGPUPath:
		return plainResult(format, ToolProbe, opts.name(wire.GPUPathFile), opts.ToolVersion)(ImportGPUPath(data, opts))
	case FormatGdsio:
		return ImportGdsio(data, opts)
	case FormatDriveWear:
		return plainResult(format, "nvme-cli", opts.name(wire.DriveWearFile), opts.ToolVersion)(ImportDriveWear(data, opts))
	case "text", "none":
		return Result{}, fmt.Errorf("parse: format %q carries no measurements: store it as an artifact only", format)
	case "":
		f, err := Detect(data)
		if err != nil {
			return Result{}, err
		}
		return importWithReport(f, data, opts)
	}
	return Result{}, fmt.Errorf("parse: unknown format %q (known: %v)", format, Formats)
}

// plainResult wraps an importer of Accord's own formats: the report lists
// the fields the measurements came from, and the format's other fields
// (ownFormatFields) with what became of them.
func plainResult(f Format, tool, in, version string) func([]acceptance.Measurement, []string, error) (Result, error) {
	return func(ms []acceptance.Measurement, warnings []string, err error) (Result, error) {
		if err != nil {
			return Result{}, err
		}
		rep := newReport(in, f, tool)
		rep.ToolVersion = version
		rep.Warnings = warnings
		for _, m := range ms {
			rep.read(m.Source.Field, m.Metric, m.Source.PercentileMethod)
		}
		for _, o := range ownFormatFields[f] {
			if o.read {
				rep.read(o.field, "", o.why)
			} else {
				rep.ignore(o.field, o.why)
			}
		}
		if err := rep.finish(ms); err != nil {
			return Result{}, err
		}
		return Result{Measurements: ms, Report: *rep}, nil
	}
}

// ownFormatFields are the fields of the probe's own records that no
// measurement is named after: used otherwise (read), or not imported
// (ignored), each with why.
var ownFormatFields = map[Format][]struct {
	field, why string
	read       bool
}{
	FormatProbeRequests: {
		{field: "warmup", read: true, why: "when set: a warm-up request, left out of every metric"},
		{field: "error_kind, error, http_status", read: true, why: "when set: a failed request, counted in error_rate and left out of the latencies"},
		{field: "usage_counted", read: true, why: "whether output_tokens came from the server's usage; counting chunks instead is said in a warning"},
		{field: "id", why: "the request's number: not a measurement"},
		{field: "t_first_chunk", why: "the first chunk whatever it carries (vLLM and SGLang send a role-only one first): TTFT is taken at t_first_token"},
		{field: "t_last_token", why: "the last token's arrival: TPOT runs to t_done, as vLLM's does"},
		{field: "chunks", why: "chunks received: the ITL comes from the level's histogram in result.json"},
	},
	FormatGPUPath: {
		{field: "target, block_size, size", why: "what the step was asked to read: the step's set-up, not a measurement"},
		{field: "modes[].measured, modes[].reason, not_measured", read: true, why: "what each figure covers and why a path has none: shown as the import's warnings and in the file"},
		{field: "modes[].bytes, modes[].seconds, modes[].cpu_seconds", why: "the parts of bandwidth_bps and cpu_seconds_per_gib: kept in the file"},
		{field: "modes[].copy_seconds, modes[].o_direct", why: "how the CPU-mediated path spent its time and whether O_DIRECT held: kept in the file"},
		{field: "modes[].output", why: "the measuring tool's own output, kept as a file of the run"},
	},
	FormatProbeTelemetry: {
		{field: "t", why: "the sample's time in the step: a step's samples are pooled (the run page charts them over time)"},
		{field: "mem_used", why: "host memory in use: not a catalog metric (kept in the file)"},
		{field: "disk_read_bps, disk_write_bps", why: "checked and charted on the run page: not catalog metrics"},
		{field: "counter_detail", why: "the per-device values behind counters: kept in the file"},
	},
}

// ImportFile imports the file at path, refusing it before reading when it
// is over the format's size limit. The JSON-lines formats are streamed.
// An empty format is detected from the file's content.
func ImportFile(format Format, path string, opts Options) ([]acceptance.Measurement, []string, error) {
	r, err := ImportFileWithReport(format, path, opts)
	if err != nil {
		return nil, nil, err
	}
	return r.Measurements, r.Report.Warnings, nil
}

// ImportFileWithReport is ImportFile with the import's report.
func ImportFileWithReport(format Format, path string, opts Options) (Result, error) {
	r, err := importFileWithReport(format, path, opts)
	r.Report.Step = opts.Step
	return r, err
}

func importFileWithReport(format Format, path string, opts Options) (Result, error) {
	if opts.Name == "" {
		opts.Name = path
	}
	f, err := os.Open(path)
	if err != nil {
		return Result{}, fmt.Errorf("parse %s: %w", opts.Name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Result{}, fmt.Errorf("parse %s: %w", opts.Name, err)
	}
	return importReaderWithReport(format, f, st.Size(), opts)
}

// ImportReaderWithReport imports what r yields (size bytes, or -1 when
// unknown) as ImportFileWithReport imports a file: the JSON-lines formats
// are streamed, the others read whole within MaxToolJSONBytes; an empty
// format is detected from the first bytes. opts.Name names the input in
// messages (the run folder's own path, say: a run's file may be read from
// the artifact store or a temporary file).
func ImportReaderWithReport(format Format, r io.Reader, size int64, opts Options) (Result, error) {
	res, err := importReaderWithReport(format, r, size, opts)
	res.Report.Step = opts.Step
	return res, err
}

func importReaderWithReport(format Format, r io.Reader, size int64, opts Options) (Result, error) {
	in := opts.name("input")
	opts.Name = in
	if format == "" {
		br := bufio.NewReaderSize(r, 64<<10)
		head, err := br.Peek(64 << 10)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return Result{}, fmt.Errorf("parse %s: %w", in, err)
		}
		whole := size
		if whole < 0 { // unknown: the head, or more when it filled up
			whole = int64(len(head))
			if err == nil || errors.Is(err, bufio.ErrBufferFull) {
				whole++
			}
		}
		format, err = detectHead(head, whole)
		if errors.Is(err, errNeedWhole) {
			// One JSON document bigger than the head (a detailed vLLM
			// result): within the tool limit it is read whole anyway.
			data, rerr := io.ReadAll(io.LimitReader(br, MaxToolJSONBytes+1))
			if rerr != nil {
				return Result{}, fmt.Errorf("parse %s: %w", in, rerr)
			}
			if format, err = Detect(data); err != nil {
				return Result{}, &Error{Input: in, Err: &DetectError{Err: err}}
			}
			return ImportWithReport(format, data, opts)
		}
		if err != nil {
			return Result{}, &Error{Input: in, Err: &DetectError{Err: err}}
		}
		r = br
	}
	switch format {
	case FormatProbeRequests:
		if size > opts.limit(MaxRecordBytes) {
			return Result{}, tooLarge(in, size, opts.limit(MaxRecordBytes))
		}
		return plainResult(format, ToolProbe, in, opts.ToolVersion)(importProbeRecords(r, size, opts))
	case FormatProbeTelemetry:
		if size > opts.limit(MaxRecordBytes) {
			return Result{}, tooLarge(in, size, opts.limit(MaxRecordBytes))
		}
		return plainResult(format, ToolProbe, in, opts.ToolVersion)(ImportTelemetry(r, opts))
	case FormatAIPerfRecords:
		if size > opts.limit(MaxRecordBytes) {
			return Result{}, tooLarge(in, size, opts.limit(MaxRecordBytes))
		}
		return importAIPerfRecords(r, opts)
	case "text", "none":
		return Result{}, fmt.Errorf("parse: format %q carries no measurements: store it as an artifact only", format)
	}
	if !slices.Contains(Formats, format) {
		return Result{}, fmt.Errorf("parse %s: unknown format %q (known: %v)", in, format, Formats)
	}
	// A single document: read whole, within the tool limit.
	limit := opts.limit(MaxToolJSONBytes)
	if size > limit {
		return Result{}, tooLarge(in, size, limit)
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return Result{}, fmt.Errorf("parse %s: %w", in, err)
	}
	if int64(len(data)) > limit {
		return Result{}, tooLarge(in, int64(len(data)), limit)
	}
	return ImportWithReport(format, data, opts)
}

// limitedReader fails once more than limit bytes were read, so that a
// stream of unknown size is refused as soon as it is too large.
type limitedReader struct {
	r     io.Reader
	n     int64
	limit int64
	input string
}

func (l *limitedReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.n > l.limit {
		return 0, tooLarge(l.input, l.n, l.limit)
	}
	return n, err
}

// checkLatency validates one latency in ms.
func checkLatency(v float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return errors.New("not a finite number")
	case v < 0:
		return fmt.Errorf("negative latency %g ms", v)
	case v > maxLatencyMs:
		return fmt.Errorf("latency %g ms is over a day: a unit or clock error", v)
	}
	return nil
}

// checkRate validates a rate or count (finite, ≥ 0, below an absurd bound).
func checkRate(v, max float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return errors.New("not a finite number")
	case v < 0:
		return fmt.Errorf("negative value %g", v)
	case v > max:
		return fmt.Errorf("value %g is absurd (over %g)", v, max)
	}
	return nil
}

// Bounds on rates, far above anything real, to catch unit errors.
const (
	maxRequestRate = 1e7  // requests per second
	maxTokenRate   = 1e10 // tokens per second
	maxIOPS        = 1e10
	maxBandwidth   = 1e14 // bytes per second
)

// percentileKey names a percentile in ToolSummary: 99 → "p99", 99.9 → "p99.9".
func percentileKey(p float64) string {
	return "p" + strconv.FormatFloat(p, 'f', -1, 64)
}
