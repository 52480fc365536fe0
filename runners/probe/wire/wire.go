// Package wire is the contract between the server's runner and the probe
// (`accord probe ...` on the lab host): the run folder's layout, the plan the
// runner writes, the events the probe appends, the per-request records and
// the exit status. Both sides import it; it imports only acceptance's types.
//
// The probe's command line, as the runner calls it over SSH (DIR is the run
// folder; every command prints one JSON object on stdout unless noted, and
// exits non-zero with one clear line on stderr on error):
//
//	accord probe facts [--out FILE]          host facts as JSON (facts.Facts)
//	accord probe launch --dir DIR            start `probe run` detached (own session and process
//	                                         group, stdin /dev/null, output to DIR/probe.log),
//	                                         write PIDFile and LaunchFile, print {"pid":N}, return at
//	                                         once; refuses (exit 4) if LaunchFile already exists, so a
//	                                         measurement is never started twice for one attempt
//	accord probe run --dir DIR               the run itself, in the foreground (what launch starts)
//	accord probe tail --dir DIR --offset N   copy EventsFile from byte N to stdout (raw bytes, not
//	                                         JSON-wrapped) and keep following; exit 0 once StatusFile
//	                                         exists and everything was copied; exit 5 if the probe's
//	                                         process group is gone without a StatusFile (crashed)
//	accord probe status --dir DIR            {"launched":bool,"running":bool,"pid":N,
//	                                         "events_bytes":N,"status":Status|null}
//	accord probe stop --dir DIR [--grace 5s] SIGTERM the process group, SIGKILL after the grace,
//	                                         confirm no process of the run is left:
//	                                         {"signalled":bool,"killed":bool,"remaining":0}
//	accord probe release --dir DIR --barrier N  release barrier N (write ReleaseFile(N)); harmless
//	                                         when repeated or when the probe is not waiting yet
//	accord probe pack --dir DIR              write ManifestFile (sha256sum -c format) over every
//	                                         file of DIR, then stream DIR as a tar to stdout
//	accord probe endpoint --url URL --model M [--api chat|completions] [--timeout 15s]
//	                                         one small streaming request to an inference endpoint
//	                                         by the load generator: EndpointCheck
package wire

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/accordlab/accord/acceptance"
)

// Files in a run folder on the lab host. The runner creates the folder and
// writes PlanFile; the probe writes everything else.
const (
	PlanFile   = "plan.json"    // Plan, written by the runner before launch
	EventsFile = "events.jsonl" // Event per line, append-only; the runner follows it by byte offset
	StatusFile = "status.json"  // Status, written atomically (temp file + rename) at the end
	PIDFile    = "probe.pid"    // process group id of the detached probe
	LaunchFile = "launch.json"  // written once at launch: pid, start time, attempt (guards against a second start)
	FactsFile  = "facts.json"   // host facts taken at the start of the run
	// NeighboursFile lists the other Accord runs the probe saw active on
	// the host during the run (Neighbours), rewritten at each new sighting
	// and at the end.
	NeighboursFile = "neighbours.json"
	LogFile        = "probe.log"       // the probe's own standard output and error
	OutputDir      = "out"             // raw outputs: out/<NN>-<step>/rep-<r>[/<level>]/...
	ManifestFile   = "MANIFEST.sha256" // written by `probe pack`, sha256sum format
)

// Files inside a step's output folder.
const (
	RequestsFile   = "requests.jsonl"  // RequestRecord per line (inference steps)
	StepResultFile = "result.json"     // StepResult of that step and repetition
	TelemetryFile  = "telemetry.jsonl" // TelemetrySample per line
	FioJobFile     = "fio.job"         // the generated fio job file
	FioOutputFile  = "fio.json"        // fio --output-format=json+ output
	PromBefore     = "metrics-before.txt"
	PromAfter      = "metrics-after.txt"
)

// DefaultRecordSegmentBytes bounds one segment of a records file: a soak's
// requests and telemetry are written to a run of files of at most this
// size (and one line), never to one file that grows with the run.
const DefaultRecordSegmentBytes = 256 << 20

// SegmentName is the name of segment n of a records file: the file itself
// for the first (n = 0), then requests.0001.jsonl, requests.0002.jsonl, …
func SegmentName(file string, n int) string {
	if n == 0 {
		return file
	}
	ext := path.Ext(file)
	return fmt.Sprintf("%s.%04d%s", strings.TrimSuffix(file, ext), n, ext)
}

// Segments returns the segments of the records file name (a path in a
// run folder) that exist, in order: name, then SegmentName's next ones
// until one is missing.
func Segments(name string, exists func(string) bool) []string {
	if !exists(name) {
		return nil
	}
	dir, file := path.Split(name)
	out := []string{name}
	for n := 1; ; n++ {
		next := dir + SegmentName(file, n)
		if !exists(next) {
			return out
		}
		out = append(out, next)
	}
}

// Plan is what the runner gives the probe: the profile version as data plus
// the run's identity and limits.
type Plan struct {
	SchemaVersion int                    `json:"schema_version"`
	RunID         int64                  `json:"run_id"`
	Attempt       int                    `json:"attempt"`
	Profile       acceptance.ProfileSpec `json:"profile"`
	// RunTimeout bounds the whole probe run; the probe kills its children and
	// writes a "timeout" status when it is exceeded.
	RunTimeout acceptance.Duration `json:"run_timeout"`
	// AllowDestructive is the host's own permission for destructive steps.
	AllowDestructive bool `json:"allow_destructive"`
	// WritePlaces are where the host lets tests write (acceptance.WritePlaces):
	// scratch directories, and files or devices by their own path. Anywhere
	// else fio steps only read files that exist.
	WritePlaces []string `json:"write_places"`
	// CreatedLedger records the files the probe created (absolute, or
	// relative to the run folder; empty: the run folder's own), so that
	// later runs may write them again.
	CreatedLedger string `json:"created_ledger,omitempty"`
	// Interim is how often interim metrics are emitted (default 2s).
	Interim acceptance.Duration `json:"interim,omitempty"`
	// StopLoss lists the metrics the server checks during the run, so that the
	// probe includes them in interim events.
	StopLossMetrics []string `json:"stop_loss_metrics,omitempty"`
	// Role is the part this host plays in a multi-host run (one of
	// Profile.Roles): the probe runs that role's steps only. Empty for a
	// one-host run, which runs every step.
	Role string `json:"role,omitempty"`
	// Host names this host among the run's hosts, for the probe's log.
	Host string `json:"host,omitempty"`
	// RecordSegmentBytes is the size past which the probe continues a
	// records file (RequestsFile, TelemetryFile) in its next segment
	// (SegmentName), at a line's end; 0 means DefaultRecordSegmentBytes.
	// Every segment is kept and collected, and read in order.
	RecordSegmentBytes int64 `json:"record_segment_bytes,omitempty"`
	// Sync makes the probe wait at every barrier of the run (see Barrier)
	// until the server releases it: the hosts of a multi-host run start
	// each phase together.
	Sync bool `json:"sync,omitempty"`
}

// Barriers of a multi-host run (Plan.Sync). Every host passes the same
// barriers in the same order, numbered from 0: before each phase of each
// repetition (acceptance.ProfileSpec.Phases), and, for an inference step
// alone in its phase, before each of its load levels instead; barrier 0,
// after the host facts are taken, is the start. At a barrier the probe
// writes WaitingFile (a Barrier), appends a "barrier" event with state
// waiting, and waits until ReleaseFile(index) exists (written by
// `probe release`), then appends one with state released. A host with no
// step in a phase passes its barriers all the same.
const (
	SyncDir     = "sync"
	WaitingFile = "sync/waiting.json"
)

// ReleaseFile is the file that releases barrier index.
func ReleaseFile(index int) string { return SyncDir + "/go-" + strconv.Itoa(index) }

// Barrier states.
const (
	BarrierWaiting  = "waiting"
	BarrierReleased = "released"
)

// Barrier is a barrier a probe waits at or passed.
type Barrier struct {
	Index int    `json:"index"`
	Label string `json:"label"`
	State string `json:"state"`
	// WaitedSec is how long the probe waited (released only).
	WaitedSec float64 `json:"waited_sec,omitempty"`
}

// PlanSchemaVersion is the plan format this build writes and reads.
const PlanSchemaVersion = 1

// Event types, one JSON object per line in EventsFile.
const (
	EventLog        = "log"
	EventProgress   = "progress"
	EventInterim    = "interim"
	EventStepStart  = "step_start"
	EventStepResult = "step_result"
	EventBarrier    = "barrier" // a multi-host run's barrier: waiting, then released
	EventDone       = "done"    // last event: the run ended; Status has the outcome
	// EventNeighbour: another Accord run was seen active on the host during
	// this one (once per other run folder); Neighbour says which.
	EventNeighbour = "neighbour"
)

// Event is one line of the event stream.
type Event struct {
	Seq  int64  `json:"seq"`
	Time string `json:"time"` // RFC 3339 with nanoseconds, wall clock of the host
	Type string `json:"type"`

	Level   string `json:"level,omitempty"` // log level: info, warn, error
	Message string `json:"message,omitempty"`

	Progress *Progress   `json:"progress,omitempty"`
	Interim  *Interim    `json:"interim,omitempty"`
	Result   *StepResult `json:"result,omitempty"`
	Barrier  *Barrier    `json:"barrier,omitempty"`
	Status   *Status     `json:"status,omitempty"` // with EventDone

	Neighbour *Neighbour `json:"neighbour,omitempty"` // with EventNeighbour
}

// Neighbour is another Accord run found active on the host while this one
// ran: a run folder beside this one (of this installation, or of another
// under the same parent folder) whose probe was launched, has written no
// status and has processes alive. Two probes measuring one host at once
// contaminate each other's numbers.
type Neighbour struct {
	Dir     string `json:"dir"` // absolute path of its run folder
	RunID   int64  `json:"run_id,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// SameInstallation: its folder is under this run's own base folder, so
	// RunID is a run of the same Accord installation.
	SameInstallation bool   `json:"same_installation"`
	PID              int    `json:"pid,omitempty"`
	FirstSeen        string `json:"first_seen"` // RFC 3339, the host's clock
	LastSeen         string `json:"last_seen"`
}

// Neighbours is NeighboursFile: when the probe looked, how often, where,
// and what it saw.
type Neighbours struct {
	Scope       string      `json:"scope"` // the run folders looked at (a glob)
	IntervalSec float64     `json:"interval_sec"`
	Checks      int         `json:"checks"`
	FirstCheck  string      `json:"first_check"`
	LastCheck   string      `json:"last_check"`
	Seen        []Neighbour `json:"seen"`
}

// Progress is where the run stands.
type Progress struct {
	Step        int     `json:"step"`  // 1-based
	Steps       int     `json:"steps"` // total
	StepName    string  `json:"step_name"`
	Repetition  int     `json:"repetition"` // 1-based
	Repetitions int     `json:"repetitions"`
	Level       string  `json:"level,omitempty"`
	Fraction    float64 `json:"fraction"`               // 0..1 of the whole run
	ElapsedSec  float64 `json:"elapsed_sec"`            // since the run started
	EstimateSec float64 `json:"estimate_sec,omitempty"` // estimated total duration
}

// Interim carries running statistics of the current step over the last
// window, for the server's stop-loss check.
type Interim struct {
	Step       string                  `json:"step"`
	Level      string                  `json:"level,omitempty"`
	Repetition int                     `json:"repetition"`
	WindowSec  float64                 `json:"window_sec"`
	Metrics    map[string]InterimStats `json:"metrics"` // by acceptance metric id
}

// Snapshot is the window as the server's stop-loss check and live charts
// read it; seq and at are its event's.
func (in Interim) Snapshot(seq int64, at time.Time) acceptance.InterimSnapshot {
	s := acceptance.InterimSnapshot{Step: in.Step, Level: in.Level, Repetition: in.Repetition, Seq: seq, At: at, WindowSec: in.WindowSec,
		Metrics: make(map[string]acceptance.InterimValue, len(in.Metrics))}
	for k, v := range in.Metrics {
		s.Metrics[k] = acceptance.InterimValue{N: v.N, Mean: v.Mean, P50: v.P50, P95: v.P95, P99: v.P99, Max: v.Max, Rate: v.Rate}
	}
	return s
}

// InterimStats summarises one metric over an interim window.
type InterimStats struct {
	N    int64   `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	// Rate is set for rate metrics (throughputs, error rate) over the window.
	Rate *float64 `json:"rate,omitempty"`
}

// StepResult says what one repetition (and level) of a step produced.
type StepResult struct {
	Step       string              `json:"step"`
	Kind       acceptance.StepKind `json:"kind"`
	Index      int                 `json:"index"`      // 0-based step index
	Repetition int                 `json:"repetition"` // 1-based
	Level      string              `json:"level,omitempty"`
	// Dir is the output folder relative to the run folder.
	Dir string `json:"dir"`
	// Format of the main output, for the server's importer: probe-requests,
	// fio-json, vllm-bench-json, genai-perf-json, gdsio-text,
	// gpu-path-json, text, none.
	Format string `json:"format"`
	// Files are the raw outputs relative to the run folder.
	Files     []string `json:"files,omitempty"`
	StartedAt string   `json:"started_at"`
	EndedAt   string   `json:"ended_at"`
	Error     string   `json:"error,omitempty"`
	// Summary carries what only the probe can know, for inference steps:
	// the measured window, counts and the ITL histogram.
	Inference *InferenceSummary `json:"inference,omitempty"`
	// PromDelta holds counter increases between the scrapes before and after.
	PromDelta map[string]float64 `json:"prom_delta,omitempty"`
	// Command is what the probe measured of a command step's program.
	Command *CommandSummary `json:"command,omitempty"`
}

// CommandSummary is the probe's account of a command step's program, for
// importers of tools that do not report their own CPU cost (gdsio).
type CommandSummary struct {
	// CPUSeconds is the program's user + system time as the kernel
	// accounted it when the probe waited for it: its own and that of the
	// children it waited for (a wrapper script's tool included).
	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
}

// InferenceSummary is the load generator's account of one level.
type InferenceSummary struct {
	// WindowSec is the measured window (warm-up excluded), for throughputs.
	WindowSec     float64 `json:"window_sec"`
	Requests      int64   `json:"requests"`
	Succeeded     int64   `json:"succeeded"`
	Failed        int64   `json:"failed"`
	WarmupDropped int64   `json:"warmup_dropped"`
	UsageMissing  int64   `json:"usage_missing"` // token counts fell back to counting chunks
	// ITL is recorded as an HDR histogram rather than per request, to bound
	// the record size: bucket upper value (ms) → count.
	ITL         []HistogramBucket `json:"itl,omitempty"`
	OfferedRate float64           `json:"offered_rate,omitempty"` // rate mode: intended requests per second
	Concurrency int               `json:"concurrency,omitempty"`
	// SelfCheck is the load generator's account of itself during the level:
	// whether the client, rather than the server, may have set the tail.
	SelfCheck *SelfCheck `json:"self_check,omitempty"`
}

// SelfCheck is what the probe measured of its own load generator during
// one level (see loadgen's selfCheck), and its judgement.
type SelfCheck struct {
	WallSec     float64 `json:"wall_sec"`
	AllowedCPUs int     `json:"allowed_cpus"`
	// Dispatch lateness of the open loop against the intended send times
	// (absent in a closed loop, which has no schedule).
	Sends         int64             `json:"sends,omitempty"`
	LatenessP50Ms float64           `json:"lateness_p50_ms,omitempty"`
	LatenessP99Ms float64           `json:"lateness_p99_ms,omitempty"`
	LatenessMaxMs float64           `json:"lateness_max_ms,omitempty"`
	Lateness      []HistogramBucket `json:"lateness,omitempty"`
	// Wake-up delay of a ticker goroutine.
	TickEveryMs    float64           `json:"tick_every_ms"`
	Ticks          int64             `json:"ticks"`
	TickDelayP50Ms float64           `json:"tick_delay_p50_ms"`
	TickDelayP99Ms float64           `json:"tick_delay_p99_ms"`
	TickDelayMaxMs float64           `json:"tick_delay_max_ms"`
	TickDelay      []HistogramBucket `json:"tick_delay,omitempty"`
	// The probe's CPU time, and as a share of the CPUs it may run on.
	ProbeCPUSec float64 `json:"probe_cpu_sec"`
	ProbeCPUPct float64 `json:"probe_cpu_pct"`
	// ProbeRunQueuePct is the time the probe's threads waited runnable,
	// summed over threads, over the wall time (100 = one thread always
	// waiting).
	ProbeRunQueuePct *float64 `json:"probe_run_queue_pct,omitempty"`
	// The host's CPU busy share and CPU pressure (PSI some) over the level.
	HostCPUBusyPct     *float64 `json:"host_cpu_busy_pct,omitempty"`
	HostCPUPressurePct *float64 `json:"host_cpu_pressure_pct,omitempty"`
	// The level's TTFT p50 and p99 (ms) the client's delays were held
	// against (acceptance.JudgeClient); absent where no request had a
	// first token.
	TTFTP50Ms *float64 `json:"ttft_p50_ms,omitempty"`
	TTFTP99Ms *float64 `json:"ttft_p99_ms,omitempty"`
	// Missing names the readings this host does not offer.
	Missing []string `json:"missing,omitempty"`
	// Flagged says the client was late or starved; Reasons say how.
	Flagged bool     `json:"flagged,omitempty"`
	Reasons []string `json:"reasons,omitempty"`
}

// Health is the part of the self-check the judgement reads.
func (s *SelfCheck) Health() acceptance.ClientHealth {
	return acceptance.ClientHealth{
		OpenLoop: s.Sends > 0, LatenessP99Ms: s.LatenessP99Ms, TickDelayP99Ms: s.TickDelayP99Ms, Ticks: s.Ticks,
		ProbeCPUPct: s.ProbeCPUPct, ProbeRunQueuePct: s.ProbeRunQueuePct,
		HostCPUBusyPct: s.HostCPUBusyPct, HostCPUPressurePct: s.HostCPUPressurePct,
		TTFTP50Ms: s.TTFTP50Ms, TTFTP99Ms: s.TTFTP99Ms,
	}
}

// HistogramBucket is one bucket of a recorded distribution.
type HistogramBucket struct {
	Value float64 `json:"v"`
	Count int64   `json:"c"`
}

// RequestRecord is one request of an inference step, one JSON line each.
// Times are nanoseconds on the probe's monotonic clock since the start of
// the level; zero means "did not happen".
type RequestRecord struct {
	ID           int64 `json:"id"`
	Warmup       bool  `json:"warmup,omitempty"` // intended within the warm-up: excluded from metrics
	Intended     int64 `json:"t_intended"`
	Sent         int64 `json:"t_sent"`
	FirstChunk   int64 `json:"t_first_chunk"`   // first data chunk, whatever it carries (often role-only)
	FirstToken   int64 `json:"t_first_token"`   // first chunk with content, reasoning or a tool call
	FirstContent int64 `json:"t_first_content"` // first chunk with visible content
	LastToken    int64 `json:"t_last_token"`
	Done         int64 `json:"t_done"`
	PromptTokens int   `json:"prompt_tokens"`
	OutputTokens int   `json:"output_tokens"`
	// UsageCounted is true when token counts came from counting chunks
	// because the server sent no usage.
	UsageCounted bool `json:"usage_counted,omitempty"`
	Chunks       int  `json:"chunks"`
	// Error kinds: http, stream-error, incomplete, timeout, connect.
	ErrorKind  string `json:"error_kind,omitempty"`
	Error      string `json:"error,omitempty"`
	HTTPStatus int    `json:"http_status,omitempty"`
}

// Status is the probe's final word, written atomically to StatusFile.
type Status struct {
	State      string `json:"state"` // done, failed, cancelled, timeout
	ExitCode   int    `json:"exit_code"`
	Reason     string `json:"reason,omitempty"`
	StartedAt  string `json:"started_at"`
	FinishedAt string `json:"finished_at"`
}

// Status states.
const (
	StateDone      = "done"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
	StateTimeout   = "timeout"
)

// TelemetrySample is one per-second sample, one JSON line each.
type TelemetrySample struct {
	T            int64   `json:"t"` // nanoseconds since the step started
	CPUBusyPct   float64 `json:"cpu_pct"`
	MemUsedBytes int64   `json:"mem_used"`
	// Disk and NIC rates over the last second, summed over target devices and interfaces.
	DiskReadBps  float64 `json:"disk_read_bps"`
	DiskWriteBps float64 `json:"disk_write_bps"`
	DiskBusyPct  float64 `json:"disk_busy_pct"`
	NICRxBps     float64 `json:"nic_rx_bps"`
	NICTxBps     float64 `json:"nic_tx_bps"`
	// GPUUtilPct is the mean utilisation over every accelerator sampled.
	GPUUtilPct *float64 `json:"gpu_pct,omitempty"`
	// GPUs are the accelerators' own readings, one per device and tool.
	GPUs []GPUSample `json:"gpus,omitempty"`
	// Counters are per-second rates over the last second of the fabric's
	// and drives' counters (RDMA, NIC errors and pauses, per-namespace
	// I/O), summed over devices, keyed by acceptance metric id;
	// CounterDetail has the same per device ("metric{device}").
	Counters      map[string]float64 `json:"counters,omitempty"`
	CounterDetail map[string]float64 `json:"counter_detail,omitempty"`
}

// ExporterToolPrefix starts the Tool of readings taken from a Prometheus
// exporter ("exporter:dcgm") rather than from a vendor tool.
const ExporterToolPrefix = "exporter:"

// HostGPUs returns the readings a host's GPU figures are made of: the
// vendor tools' where any tool reported, else the exporters'. An exporter
// often watches the same devices as a tool on the host (DCGM beside
// nvidia-smi); counting both would count those devices twice.
func HostGPUs(gs []GPUSample) []GPUSample {
	var tools, exporters []GPUSample
	for _, g := range gs {
		if len(g.Tool) >= len(ExporterToolPrefix) && g.Tool[:len(ExporterToolPrefix)] == ExporterToolPrefix {
			exporters = append(exporters, g)
		} else {
			tools = append(tools, g)
		}
	}
	if len(tools) > 0 {
		return tools
	}
	return exporters
}

// GPUSample is one accelerator's reading; a nil field is one the tool
// does not give.
type GPUSample struct {
	Tool         string   `json:"tool"`
	Index        int      `json:"index"`
	UtilPct      *float64 `json:"util_pct,omitempty"`
	MemUsedBytes *int64   `json:"mem_used_bytes,omitempty"`
	MemBWPct     *float64 `json:"mem_bw_pct,omitempty"`
	PowerW       *float64 `json:"power_w,omitempty"`
}

// DriveWearFile is the drives' wear over the run: every NVMe
// controller's smart-log read before the first step and after each
// repetition (so the wear is measured once per repetition, as rate
// metrics are). The raw outputs are in DriveWearDir.
const (
	DriveWearFile = "drive-wear.json"
	DriveWearDir  = "drive-wear"
)

// DriveWear is what the drives said before and after the run.
type DriveWear struct {
	Drives []DriveWearDrive `json:"drives"`
}

// DriveWearDrive is one NVMe controller's readings, in order.
type DriveWearDrive struct {
	Controller string `json:"controller"` // nvme0
	Model      string `json:"model,omitempty"`
	Serial     string `json:"serial,omitempty"`
	Transport  string `json:"transport,omitempty"` // pcie, rdma, tcp: a fabric controller reports the target's log
	// CapacityBytes is the sum of its namespaces' sizes (sysfs), the
	// drive capacity drive writes per day are counted against.
	CapacityBytes int64 `json:"capacity_bytes,omitempty"`
	// Readings are the smart-log before the run (AfterRepetition 0) and
	// after each repetition that ran.
	Readings []SmartReading `json:"readings"`
}

// SmartReading is one `nvme smart-log -o json`; a nil field is one the
// drive or nvme-cli did not give.
type SmartReading struct {
	// AfterRepetition is the repetition the reading follows, 0 before the run.
	AfterRepetition  int     `json:"after_repetition"`
	At               string  `json:"at"` // RFC 3339 with nanoseconds
	DataUnitsWritten *uint64 `json:"data_units_written,omitempty"`
	DataUnitsRead    *uint64 `json:"data_units_read,omitempty"`
	PercentUsed      *int64  `json:"percent_used,omitempty"`
	PowerOnHours     *int64  `json:"power_on_hours,omitempty"`
	// Raw is the output file relative to the run folder.
	Raw   string `json:"raw,omitempty"`
	Error string `json:"error,omitempty"`
}

// GPUPathFile is a gpu-path step's result.
const GPUPathFile = "gpu-path.json"

// GPU path modes, the levels of the step's measurements.
const (
	GPUPathCPU       = "cpu-mediated"   // the probe's own O_DIRECT read + staging copy
	GPUPathGDS       = "gds-gpu-direct" // gdsio -x 0: storage → GPU memory by DMA
	GPUPathGDSCPUGPU = "gds-cpu-gpu"    // gdsio -x 2: storage → host memory → GPU memory
)

// GPUPathResult is what a gpu-path step measured and what it could not.
type GPUPathResult struct {
	Target    string        `json:"target"`
	BlockSize int64         `json:"block_size"`
	Size      int64         `json:"size"`
	Modes     []GPUPathMode `json:"modes"`
	// NotMeasured says, in words, which part of the path had no
	// measurement and why.
	NotMeasured []string `json:"not_measured,omitempty"`
}

// GPUPathMode is one path's figures; Absent modes carry only the reason.
type GPUPathMode struct {
	Mode string `json:"mode"`
	Tool string `json:"tool"`
	// ToolVersion is the measuring tool's version where it says one (a
	// vendor tool's wrapper); the probe's own modes leave it empty.
	ToolVersion string `json:"tool_version,omitempty"`
	Absent      bool   `json:"absent,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// Measured says what the figures cover.
	Measured     string  `json:"measured,omitempty"`
	Bytes        int64   `json:"bytes,omitempty"`
	Seconds      float64 `json:"seconds,omitempty"`
	BandwidthBps float64 `json:"bandwidth_bps,omitempty"`
	CPUSeconds   float64 `json:"cpu_seconds,omitempty"`
	// CPUSecPerGiB is left out where the CPU time is unknown, and the
	// importer then gives no cpu_seconds_per_gib for the mode (a zero
	// would say the CPU paid nothing).
	CPUSecPerGiB float64 `json:"cpu_seconds_per_gib,omitempty"`
	// CopySeconds is the part of Seconds spent in the staging copy.
	CopySeconds float64 `json:"copy_seconds,omitempty"`
	ODirect     bool    `json:"o_direct,omitempty"`
	Output      string  `json:"output,omitempty"` // the tool's own output file
}

// EndpointCheck is what `accord probe endpoint` saw of one small streaming
// request to an inference endpoint, sent from the lab host by the load
// generator (so TTFT means what it means in a run). Times are
// milliseconds from the request's send; zero when it did not happen.
//
//	accord probe endpoint --url URL --model M --api chat|completions [--timeout 15s]
type EndpointCheck struct {
	URL          string  `json:"url"`
	Model        string  `json:"model"`
	API          string  `json:"api"`
	OK           bool    `json:"ok"`
	HTTPStatus   int     `json:"http_status,omitempty"`
	TTFTMs       float64 `json:"ttft_ms,omitempty"`
	E2EMs        float64 `json:"e2e_ms,omitempty"`
	OutputTokens int     `json:"output_tokens,omitempty"`
	PromptTokens int     `json:"prompt_tokens,omitempty"`
	Chunks       int     `json:"chunks,omitempty"`
	// UsageCounted: the server sent no usage; tokens were counted from chunks.
	UsageCounted bool   `json:"usage_counted,omitempty"`
	ErrorKind    string `json:"error_kind,omitempty"`
	Error        string `json:"error,omitempty"`
}
