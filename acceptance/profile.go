package acceptance

// ProfileSchemaVersion is the newest profile schema this build understands.
const ProfileSchemaVersion = 1

// Purpose says what a profile is for; it selects the pages' layout and the
// starter gate sets offered.
type Purpose string

const (
	PurposeInferenceServing  Purpose = "inference-serving"
	PurposeStorageMicrobench Purpose = "storage-microbenchmark"
	PurposeCheckpointRestore Purpose = "checkpoint-restore"
	PurposeTrainingIO        Purpose = "training-io"
	PurposeCustom            Purpose = "custom"
)

// Transport is the storage path under test.
type Transport string

const (
	TransportLocalNVMe  Transport = "local-nvme"
	TransportNVMeoFRDMA Transport = "nvmeof-rdma"
	TransportNVMeoFTCP  Transport = "nvmeof-tcp"
	TransportEmulated   Transport = "emulated"
)

// ProfileSpec says what to run on a lab host. It is immutable once saved:
// editing creates a new version. The probe receives it as data (JSON), never
// as a shell string.
type ProfileSpec struct {
	SchemaVersion int     `json:"schema_version" yaml:"schema_version"`
	Name          string  `json:"name" yaml:"name"`
	Description   string  `json:"description,omitempty" yaml:"description,omitempty"`
	Purpose       Purpose `json:"purpose" yaml:"purpose"`
	Storage       Storage `json:"storage" yaml:"storage"`
	Repetitions   int     `json:"repetitions" yaml:"repetitions"`
	// Warmup is load applied at the start of every measuring step whose
	// samples are discarded (fio ramp_time; inference requests sent in it).
	Warmup Duration `json:"warmup,omitempty" yaml:"warmup,omitempty"`
	// RunTimeout bounds the whole run on the host; zero means the sum of the
	// steps' own limits plus a margin.
	RunTimeout Duration   `json:"run_timeout,omitempty" yaml:"run_timeout,omitempty"`
	Steps      []StepSpec `json:"steps" yaml:"steps"`
	// Telemetry adds sources to the per-second telemetry the probe takes
	// during every measuring step.
	Telemetry *TelemetrySpec `json:"telemetry,omitempty" yaml:"telemetry,omitempty"`
	// Roles make the profile a multi-host one: a run names lab hosts for
	// each role, and every host of a role runs that role's steps (see
	// roles.go). Empty: the profile runs on one host, every step on it.
	Roles []RoleSpec `json:"roles,omitempty" yaml:"roles,omitempty"`
}

// TelemetrySpec lists further telemetry sources.
type TelemetrySpec struct {
	// Exporters are Prometheus exporters the lab host reaches, scraped
	// every second for accelerator readings: the vendor-neutral path for
	// any accelerator, whether or not its tool is known.
	Exporters []ExporterSpec `json:"exporters,omitempty" yaml:"exporters,omitempty"`
}

// ExporterSpec is one Prometheus exporter and how to read it.
type ExporterSpec struct {
	// URL is the exporter's metrics endpoint as the lab host reaches it,
	// like http://127.0.0.1:9400/metrics.
	URL string `json:"url" yaml:"url"`
	// Kind names a built-in mapping (dcgm, ascend-npu, amd-device-metrics)
	// or custom, whose Mapping says which series to read.
	Kind string `json:"kind" yaml:"kind"`
	// Name labels the exporter's readings (default: the kind).
	Name    string           `json:"name,omitempty" yaml:"name,omitempty"`
	Mapping *ExporterMapping `json:"mapping,omitempty" yaml:"mapping,omitempty"`
}

// ExporterMapping says which series of an exporter give a device's
// readings. Each reading lists candidate series, the first the exporter
// has wins; a reading with none is absent.
type ExporterMapping struct {
	// DeviceLabel is the label that tells devices apart (gpu, id,
	// gpu_id); empty when the exporter reports one device.
	DeviceLabel string `json:"device_label,omitempty" yaml:"device_label,omitempty"`
	// Util is the busy share in percent, MemUsed the memory in use in
	// bytes, MemBW the memory's busy share in percent, Power in watts,
	// each after multiplying by its series' scale.
	Util    []ExporterSeries `json:"util,omitempty" yaml:"util,omitempty"`
	MemUsed []ExporterSeries `json:"mem_used,omitempty" yaml:"mem_used,omitempty"`
	MemBW   []ExporterSeries `json:"mem_bw,omitempty" yaml:"mem_bw,omitempty"`
	Power   []ExporterSeries `json:"power,omitempty" yaml:"power,omitempty"`
}

// ExporterSeries is one metric name and the factor to Accord's unit (1
// when zero): 1048576 for a MiB gauge, 100 for a 0..1 ratio.
type ExporterSeries struct {
	Metric string  `json:"metric" yaml:"metric"`
	Scale  float64 `json:"scale,omitempty" yaml:"scale,omitempty"`
}

// Storage describes the storage under test. It is descriptive: it labels
// results and feeds comparability, it does not configure anything.
type Storage struct {
	Transport  Transport `json:"transport" yaml:"transport"`
	ArrayModel string    `json:"array_model,omitempty" yaml:"array_model,omitempty"`
	Namespace  string    `json:"namespace,omitempty" yaml:"namespace,omitempty"`
}

// StepKind names what a step does.
type StepKind string

const (
	StepFio        StepKind = "fio"
	StepInference  StepKind = "inference"
	StepCommand    StepKind = "command"
	StepDropCaches StepKind = "drop-caches"
	StepPause      StepKind = "pause"
	StepFault      StepKind = "fault"
	// StepGPUPath measures how data gets from the storage under test into
	// accelerator memory: GPU-direct with NVIDIA's gdsio where it is
	// installed, and always the CPU-mediated path the probe can do itself.
	StepGPUPath StepKind = "gpu-path"
)

// StepSpec is one step of a profile. Exactly the field matching Kind is set
// (drop-caches has no parameters).
type StepSpec struct {
	Name      string         `json:"name" yaml:"name"`
	Kind      StepKind       `json:"kind" yaml:"kind"`
	Timeout   Duration       `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	Fio       *FioStep       `json:"fio,omitempty" yaml:"fio,omitempty"`
	Inference *InferenceStep `json:"inference,omitempty" yaml:"inference,omitempty"`
	Command   *CommandStep   `json:"command,omitempty" yaml:"command,omitempty"`
	Pause     *PauseStep     `json:"pause,omitempty" yaml:"pause,omitempty"`
	Fault     *FaultStep     `json:"fault,omitempty" yaml:"fault,omitempty"`
	GPUPath   *GPUPathStep   `json:"gpu_path,omitempty" yaml:"gpu_path,omitempty"`
	// Group runs the step at the same time as the steps next to it with
	// the same group name (a parallel group); the group ends when all of
	// its steps have ended. Empty: the step runs on its own, in order.
	Group string `json:"group,omitempty" yaml:"group,omitempty"`
}

// GPUPathStep reads Size bytes of Target in BlockSize I/Os along every
// path the host has: the CPU-mediated one (O_DIRECT reads into an aligned
// host buffer plus the copy into a staging buffer a driver would need),
// and, where gdsio exists, GDS's GPU-direct and CPU-GPU modes. It only
// reads.
type GPUPathStep struct {
	// Target is a file or a block device on the lab host.
	Target    string   `json:"target" yaml:"target"`
	BlockSize ByteSize `json:"block_size" yaml:"block_size"`
	// Size is how much each path reads. The CPU-mediated path reads a
	// smaller target again from its start until Size bytes are read (so
	// the page cache may serve the later passes of a file that fits in
	// it); gdsio is asked for Size bytes of the file (-s) and says in its
	// DataSetSize how much it moved.
	Size ByteSize `json:"size" yaml:"size"`
	// GPU is the accelerator index gdsio targets (0 by default).
	GPU int `json:"gpu,omitempty" yaml:"gpu,omitempty"`
}

// FioStep is one fio job, run with --output-format=json+.
type FioStep struct {
	RW        string   `json:"rw" yaml:"rw"` // read, write, randread, randwrite, rw, randrw
	BlockSize ByteSize `json:"block_size" yaml:"block_size"`
	IODepth   int      `json:"iodepth" yaml:"iodepth"`
	NumJobs   int      `json:"numjobs" yaml:"numjobs"`
	Size      ByteSize `json:"size" yaml:"size"`
	Runtime   Duration `json:"runtime" yaml:"runtime"`
	IOEngine  string   `json:"ioengine" yaml:"ioengine"` // libaio, io_uring, psync, sync, posixaio
	Direct    bool     `json:"direct" yaml:"direct"`
	// RWMixRead is the read share in percent for rw/randrw.
	RWMixRead int `json:"rwmixread,omitempty" yaml:"rwmixread,omitempty"`
	// Target is a file path or a block device on the lab host.
	Target string `json:"target" yaml:"target"`
	// Destructive must be true for any write to a block device; the host
	// must allow it too.
	Destructive bool `json:"destructive,omitempty" yaml:"destructive,omitempty"`
}

// InferenceStep drives an OpenAI-compatible streaming endpoint.
type InferenceStep struct {
	// Endpoint is the base URL as the lab host sees it, e.g. http://10.0.0.5:8000/v1.
	Endpoint string `json:"endpoint" yaml:"endpoint"`
	Model    string `json:"model" yaml:"model"`
	API      string `json:"api" yaml:"api"` // chat or completions
	// PromptTokens and OutputTokens are used unless Dataset is set.
	PromptTokens TokenDist `json:"prompt_tokens" yaml:"prompt_tokens"`
	OutputTokens TokenDist `json:"output_tokens" yaml:"output_tokens"`
	// Prefix makes prompts share prefixes, which controls the KV/prefix cache hit ratio.
	Prefix *PrefixReuse `json:"prefix,omitempty" yaml:"prefix,omitempty"`
	// Dataset is a JSON-lines file on the lab host with {"prompt": "...", "output_tokens": n}.
	Dataset string `json:"dataset,omitempty" yaml:"dataset,omitempty"`
	Load    Load   `json:"load" yaml:"load"`
	// Duration or Requests ends each load level (whichever comes first when both are set).
	Duration       Duration `json:"duration,omitempty" yaml:"duration,omitempty"`
	Requests       int      `json:"requests,omitempty" yaml:"requests,omitempty"`
	RequestTimeout Duration `json:"request_timeout,omitempty" yaml:"request_timeout,omitempty"`
	SLO            SLO      `json:"slo,omitempty" yaml:"slo,omitempty"`
	// MetricsURL is the inference server's Prometheus endpoint, scraped before
	// and after the step for counter deltas (cache hits and queries).
	MetricsURL string `json:"metrics_url,omitempty" yaml:"metrics_url,omitempty"`
	Seed       int64  `json:"seed,omitempty" yaml:"seed,omitempty"`
}

// TokenDist is a distribution of token counts.
type TokenDist struct {
	Dist   string  `json:"dist" yaml:"dist"` // fixed, uniform, normal
	Mean   int     `json:"mean" yaml:"mean"`
	Min    int     `json:"min,omitempty" yaml:"min,omitempty"`
	Max    int     `json:"max,omitempty" yaml:"max,omitempty"`
	StdDev float64 `json:"stddev,omitempty" yaml:"stddev,omitempty"`
}

// PrefixReuse makes prompts share prefixes, which sets how much of each
// prompt the server's prefix (KV) cache can serve. One of three ways:
//   - Tokens: one of Distinct shared prefixes of Tokens tokens goes before
//     each prompt's own prompt_tokens;
//   - Share: that share (0 to 1) of each prompt's prompt_tokens is one of
//     Distinct shared prefixes and the rest its own, so that a prompt is as
//     long whatever the share;
//   - Sweep: the step runs at each share in turn, one load level each
//     ("reuse=0.5", ReuseLevel), so that the server's cache hit ratio goes
//     through as many levels; the load itself is the single level of Load.
type PrefixReuse struct {
	Tokens   int       `json:"tokens" yaml:"tokens,omitempty"`
	Distinct int       `json:"distinct" yaml:"distinct"`
	Share    float64   `json:"share,omitempty" yaml:"share,omitempty"`
	Sweep    []float64 `json:"sweep,omitempty" yaml:"sweep,omitempty,flow"`
}

// ReuseSweep returns the shares a step sweeps prefix reuse through (nil:
// it does not).
func (in *InferenceStep) ReuseSweep() []float64 {
	if in == nil || in.Prefix == nil {
		return nil
	}
	return in.Prefix.Sweep
}

// Load is the offered load: a fixed number of concurrent streams, or an
// open-loop request rate (constant or Poisson arrivals), optionally swept.
type Load struct {
	Mode        string  `json:"mode" yaml:"mode"` // concurrency or rate
	Concurrency int     `json:"concurrency,omitempty" yaml:"concurrency,omitempty"`
	Rate        float64 `json:"rate,omitempty" yaml:"rate,omitempty"`       // requests per second
	Arrival     string  `json:"arrival,omitempty" yaml:"arrival,omitempty"` // constant or poisson
	// MaxConcurrency caps in-flight requests in rate mode (0: no cap).
	MaxConcurrency int `json:"max_concurrency,omitempty" yaml:"max_concurrency,omitempty"`
	// Sweep lists the levels to run in turn: concurrencies in concurrency
	// mode, rates in rate mode. Empty means the single level above.
	Sweep []float64 `json:"sweep,omitempty" yaml:"sweep,omitempty,flow"`
}

// SLO thresholds for goodput, in milliseconds; zero means not constrained.
type SLO struct {
	TTFTMs float64 `json:"ttft_ms,omitempty" yaml:"ttft_ms,omitempty"`
	TPOTMs float64 `json:"tpot_ms,omitempty" yaml:"tpot_ms,omitempty"`
	E2ELMs float64 `json:"e2el_ms,omitempty" yaml:"e2el_ms,omitempty"`
}

// CommandStep runs a team's own tool as an argument vector (never through a
// shell) and imports its output in the declared format.
type CommandStep struct {
	Program string   `json:"program" yaml:"program"`
	Args    []string `json:"args,omitempty" yaml:"args,omitempty,flow"`
	// Format is fio-json, vllm-bench-json, genai-perf-json, gdsio-text
	// (gdsio's summary lines), gpu-path-json (the gpu-path step's result
	// document, as a wrapper around a vendor's transfer tool writes it)
	// or text.
	Format string `json:"format" yaml:"format"`
	// OutputFile, when set, is where the tool writes its result (relative to
	// the step's folder); otherwise standard output is the result.
	OutputFile string `json:"output_file,omitempty" yaml:"output_file,omitempty"`
}

// PauseStep waits, to let the system settle.
type PauseStep struct {
	Duration Duration `json:"duration" yaml:"duration"`
}

// FaultStep injects a network fault for a duration and always removes it.
type FaultStep struct {
	// Action is netem (delay/loss on Interface through tc netem),
	// rate-limit (a tbf bandwidth cap on Interface), or path-down (disconnect
	// one controller of a multipath NVMe-oF subsystem, then reconnect).
	Action      string   `json:"action" yaml:"action"`
	Interface   string   `json:"interface,omitempty" yaml:"interface,omitempty"`
	Delay       Duration `json:"delay,omitempty" yaml:"delay,omitempty"`
	LossPercent float64  `json:"loss_percent,omitempty" yaml:"loss_percent,omitempty"`
	// RateMbit is the bandwidth cap for rate-limit, in megabits per second.
	RateMbit float64 `json:"rate_mbit,omitempty" yaml:"rate_mbit,omitempty"`
	// Controller is the NVMe controller (e.g. nvme1) for path-down.
	Controller string   `json:"controller,omitempty" yaml:"controller,omitempty"`
	Duration   Duration `json:"duration" yaml:"duration"`
	// During names a later load step the fault overlaps: it is applied After
	// that step starts. Empty means the fault runs on its own, in sequence.
	During string   `json:"during,omitempty" yaml:"during,omitempty"`
	After  Duration `json:"after,omitempty" yaml:"after,omitempty"`
}
