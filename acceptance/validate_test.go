package acceptance

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// validProfile has one step of every kind, so that each bad case below
// changes exactly one thing and expects exactly one error.
func validProfile() ProfileSpec {
	return ProfileSpec{
		Name:        "Every step kind",
		Purpose:     PurposeCustom,
		Storage:     Storage{Transport: TransportNVMeoFTCP, ArrayModel: "AF-9000"},
		Repetitions: 3,
		Warmup:      Duration(10 * time.Second),
		Steps: []StepSpec{
			{Name: "prep", Kind: StepDropCaches},
			{Name: "slow-net", Kind: StepFault, Fault: &FaultStep{
				Action: FaultNetem, Interface: "eth0", Delay: Duration(5 * time.Millisecond),
				Duration: Duration(30 * time.Second), During: "load", After: Duration(10 * time.Second),
			}},
			{Name: "fio-read", Kind: StepFio, Fio: &FioStep{
				RW: RWRandRead, BlockSize: 4 << 10, IODepth: 32, NumJobs: 4, Size: 1 << 30,
				Runtime: Duration(time.Minute), IOEngine: IOEngineIOURing, Direct: true, Target: "/mnt/nvme/accord.dat",
			}},
			{Name: "settle", Kind: StepPause, Pause: &PauseStep{Duration: Duration(5 * time.Second)}},
			{Name: "load", Kind: StepInference, Inference: &InferenceStep{
				Endpoint: "http://10.0.0.5:8000/v1", Model: "llama", API: APIChat,
				PromptTokens: TokenDist{Dist: DistFixed, Mean: 512},
				OutputTokens: TokenDist{Dist: DistUniform, Min: 64, Max: 256},
				Load:         Load{Mode: LoadConcurrency, Concurrency: 8},
				Duration:     Duration(time.Minute),
			}},
			{Name: "tool", Kind: StepCommand, Command: &CommandStep{
				Program: "/usr/local/bin/vllm", Args: []string{"bench", "serve", "--save-result"},
				Format: FormatVLLMBenchJSON, OutputFile: "out/result.json",
			}},
		},
	}
}

func validGateSet() GateSetSpec {
	return GateSetSpec{
		Name: "Latency and uplift",
		Criteria: []Criterion{
			{Name: "ttft-p99", Metric: MetricTTFT, Statistic: StatP99, Comparator: LessOrEqual, Threshold: 2, Unit: "s", StopLoss: tmplPtr(4.0)},
			{Name: "tput", Metric: MetricOutputTokenThroughput, Statistic: StatRate, Mode: Relative, Comparator: GreaterOrEqual, Threshold: 25, StopLoss: tmplPtr(-10.0)},
		},
	}
}

func TestValidateProfileGood(t *testing.T) {
	t.Parallel()
	cases := map[string]func(p *ProfileSpec){
		"as built": func(p *ProfileSpec) {},
		"defaults filled": func(p *ProfileSpec) {
			p.Repetitions = 0
			p.Steps[2].Fio.IOEngine, p.Steps[2].Fio.IODepth, p.Steps[2].Fio.NumJobs = "", 0, 0
			p.Steps[4].Inference.API = ""
			p.Steps[4].Inference.Load.Mode = ""
		},
		"block device read needs no size and no destructive flag": func(p *ProfileSpec) {
			p.Steps[2].Fio.Target, p.Steps[2].Fio.Size = "/dev/nvme1n1", 0
		},
		"block device write marked destructive": func(p *ProfileSpec) {
			p.Steps[2].Fio.Target, p.Steps[2].Fio.RW, p.Steps[2].Fio.Destructive = "/dev/nvme1n1", RWRandWrite, true
		},
		"mixed with default read share": func(p *ProfileSpec) { p.Steps[2].Fio.RW = RWRandMixed },
		"biggest block":                 func(p *ProfileSpec) { p.Steps[2].Fio.BlockSize = 64 << 20 },
		"smallest block":                func(p *ProfileSpec) { p.Steps[2].Fio.BlockSize = 512 },
		"limits": func(p *ProfileSpec) {
			p.Repetitions = 100
			p.Steps[2].Fio.IODepth, p.Steps[2].Fio.NumJobs = 4096, 1024
			p.Steps[2].Fio.Runtime = MaxSpecDuration
		},
		"dataset instead of token counts": func(p *ProfileSpec) {
			p.Steps[4].Inference.Dataset = "/data/sharegpt.jsonl"
			p.Steps[4].Inference.PromptTokens, p.Steps[4].Inference.OutputTokens = TokenDist{}, TokenDist{}
		},
		"rate sweep with poisson arrivals": func(p *ProfileSpec) {
			p.Steps[4].Inference.Load = Load{Mode: LoadRate, Arrival: ArrivalPoisson, Sweep: []float64{0.5, 1, 2, 4}, MaxConcurrency: 256}
		},
		"rate mode inferred": func(p *ProfileSpec) {
			p.Steps[4].Inference.Load = Load{Rate: 2.5}
		},
		"concurrency sweep of 64 levels": func(p *ProfileSpec) {
			l := &p.Steps[4].Inference.Load
			l.Concurrency = 0
			for i := 1; i <= MaxSweepLevels; i++ {
				l.Sweep = append(l.Sweep, float64(i))
			}
		},
		"requests only": func(p *ProfileSpec) {
			p.Steps[4].Inference.Duration, p.Steps[4].Inference.Requests = 0, 1000
		},
		"bare program name": func(p *ProfileSpec) { p.Steps[5].Command.Program = "genai-perf" },
		"fault in sequence": func(p *ProfileSpec) { p.Steps[1].Fault.During, p.Steps[1].Fault.After = "", 0 },
		"rate-limit fault": func(p *ProfileSpec) {
			*p.Steps[1].Fault = FaultStep{Action: FaultRateLimit, Interface: "ens1f0", RateMbit: 1000, Duration: Duration(time.Minute)}
		},
		"path-down fault": func(p *ProfileSpec) {
			*p.Steps[1].Fault = FaultStep{Action: FaultPathDown, Controller: "nvme1", Duration: Duration(time.Minute), During: "fio-read"}
		},
		"netem loss only":         func(p *ProfileSpec) { p.Steps[1].Fault.Delay, p.Steps[1].Fault.LossPercent = 0, 0.5 },
		"multi-line description":  func(p *ProfileSpec) { p.Description = "line one\n\tline two" },
		"https endpoint and port": func(p *ProfileSpec) { p.Steps[4].Inference.Endpoint = "https://infer.lab:443/v1" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := validProfile()
			mutate(&p)
			require.Nil(t, ValidateProfile(p))
			require.NoError(t, p.Validate())
		})
	}
}

func exporters(es ...ExporterSpec) *TelemetrySpec { return &TelemetrySpec{Exporters: es} }

// A profile with the three built-in exporters and a custom one is valid.
func TestValidateProfileExporters(t *testing.T) {
	t.Parallel()
	p := validProfile()
	p.Telemetry = exporters(
		ExporterSpec{URL: "http://127.0.0.1:9400/metrics", Kind: ExporterDCGM},
		ExporterSpec{URL: "http://127.0.0.1:8082/metrics", Kind: ExporterAscendNPU},
		ExporterSpec{URL: "http://127.0.0.1:5000/metrics", Kind: ExporterAMD},
		ExporterSpec{URL: "http://127.0.0.1:9445/metrics", Kind: ExporterCustom, Name: "rbln", Mapping: &ExporterMapping{DeviceLabel: "uuid",
			Util: []ExporterSeries{{Metric: "RBLN_DEVICE_STATUS:UTILIZATION"}}, MemUsed: []ExporterSeries{{Metric: "RBLN_DEVICE_STATUS:DRAM_USED", Scale: 1 << 30}}}},
	)
	require.Nil(t, ValidateProfile(p))
}

func TestValidateProfileBad(t *testing.T) {
	t.Parallel()
	fio := func(p *ProfileSpec) *FioStep { return p.Steps[2].Fio }
	inf := func(p *ProfileSpec) *InferenceStep { return p.Steps[4].Inference }
	cmd := func(p *ProfileSpec) *CommandStep { return p.Steps[5].Command }
	fault := func(p *ProfileSpec) *FaultStep { return p.Steps[1].Fault }
	cases := []struct {
		name    string
		mutate  func(p *ProfileSpec)
		path    string
		message string
	}{
		{"schema too new", func(p *ProfileSpec) { p.SchemaVersion = 2 }, "schema_version", "must be between 1 and 1"},
		{"exporter url", func(p *ProfileSpec) {
			p.Telemetry = exporters(ExporterSpec{URL: "file:///etc/passwd", Kind: ExporterDCGM})
		}, "telemetry.exporters[0].url", "must be an http:// or https:// URL, like http://10.0.0.5:8000/v1"},
		{"exporter kind", func(p *ProfileSpec) {
			p.Telemetry = exporters(ExporterSpec{URL: "http://127.0.0.1:9400/metrics", Kind: "nvml"})
		}, "telemetry.exporters[0].kind", `"nvml" is not allowed: use one of dcgm, ascend-npu, amd-device-metrics, custom`},
		{"custom without mapping", func(p *ProfileSpec) {
			p.Telemetry = exporters(ExporterSpec{URL: "http://127.0.0.1:9400/metrics", Kind: ExporterCustom})
		}, "telemetry.exporters[0].mapping", "is required for kind custom: say which series give the readings"},
		{"mapping on a built-in", func(p *ProfileSpec) {
			p.Telemetry = exporters(ExporterSpec{URL: "http://127.0.0.1:9400/metrics", Kind: ExporterDCGM, Mapping: &ExporterMapping{Util: []ExporterSeries{{Metric: "x"}}}})
		}, "telemetry.exporters[0].mapping", "is only for kind custom; dcgm has a built-in mapping"},
		{"empty mapping", func(p *ProfileSpec) {
			p.Telemetry = exporters(ExporterSpec{URL: "http://127.0.0.1:9400/metrics", Kind: ExporterCustom, Mapping: &ExporterMapping{DeviceLabel: "gpu"}})
		}, "telemetry.exporters[0].mapping", "must map at least one of util, mem_used, mem_bw and power"},
		{"bad metric name", func(p *ProfileSpec) {
			p.Telemetry = exporters(ExporterSpec{URL: "http://127.0.0.1:9400/metrics", Kind: ExporterCustom, Mapping: &ExporterMapping{Power: []ExporterSeries{{Metric: "power draw"}}}})
		}, "telemetry.exporters[0].mapping.power[0].metric", "must be a Prometheus metric name, like DCGM_FI_DEV_GPU_UTIL"},
		{"bad device label", func(p *ProfileSpec) {
			p.Telemetry = exporters(ExporterSpec{URL: "http://127.0.0.1:9400/metrics", Kind: ExporterCustom, Mapping: &ExporterMapping{DeviceLabel: "1gpu", Power: []ExporterSeries{{Metric: "p"}}}})
		}, "telemetry.exporters[0].mapping.device_label", "must be a Prometheus label name, like gpu"},
		{"negative scale", func(p *ProfileSpec) {
			p.Telemetry = exporters(ExporterSpec{URL: "http://127.0.0.1:9400/metrics", Kind: ExporterCustom, Mapping: &ExporterMapping{Power: []ExporterSeries{{Metric: "p", Scale: -1}}}})
		}, "telemetry.exporters[0].mapping.power[0].scale", "must not be negative"},
		{"two exporters one name", func(p *ProfileSpec) {
			p.Telemetry = exporters(ExporterSpec{URL: "http://127.0.0.1:9400/metrics", Kind: ExporterDCGM}, ExporterSpec{URL: "http://127.0.0.1:9401/metrics", Kind: ExporterDCGM})
		}, "telemetry.exporters[1]", `is named "dcgm" like exporters[0]; give one of them a name`},
		{"no name", func(p *ProfileSpec) { p.Name = "" }, "name", "is required"},
		{"blank name", func(p *ProfileSpec) { p.Name = "   " }, "name", "is required"},
		{"padded name", func(p *ProfileSpec) { p.Name = " x" }, "name", "must not start or end with spaces"},
		{"two-line name", func(p *ProfileSpec) { p.Name = "a\nb" }, "name", "must be one line"},
		{"long name", func(p *ProfileSpec) { p.Name = strings.Repeat("n", 201) }, "name", "must be at most 200 characters"},
		{"long description", func(p *ProfileSpec) { p.Description = strings.Repeat("d", 10001) }, "description", "must be at most 10000 characters"},
		{"no purpose", func(p *ProfileSpec) { p.Purpose = "" }, "purpose", "is required: one of inference-serving, storage-microbenchmark, checkpoint-restore, training-io, custom"},
		{"bad purpose", func(p *ProfileSpec) { p.Purpose = "fun" }, "purpose", `"fun" is not allowed: use one of inference-serving, storage-microbenchmark, checkpoint-restore, training-io, custom`},
		{"bad transport", func(p *ProfileSpec) { p.Storage.Transport = "iscsi" }, "storage.transport", `"iscsi" is not allowed: use one of local-nvme, nvmeof-rdma, nvmeof-tcp, emulated`},
		{"repetitions over", func(p *ProfileSpec) { p.Repetitions = 101 }, "repetitions", "must be between 1 and 100"},
		{"repetitions negative", func(p *ProfileSpec) { p.Repetitions = -1 }, "repetitions", "must be between 1 and 100"},
		{"negative warmup", func(p *ProfileSpec) { p.Warmup = -1 }, "warmup", "must not be negative"},
		{"run timeout over a week", func(p *ProfileSpec) { p.RunTimeout = MaxSpecDuration + 1 }, "run_timeout", "must be at most 7 days (168h)"},
		{"no steps", func(p *ProfileSpec) { p.Steps = nil }, "steps", "a profile needs at least one step"},
		{"duplicate step", func(p *ProfileSpec) { p.Steps[3].Name = "prep" }, "steps[3].name", `"prep" is already the name of steps[0]; step names must be unique`},
		{"step name with space", func(p *ProfileSpec) { p.Steps[0].Name = "drop caches" }, "steps[0].name", "step names may use only letters, digits, - and _"},
		{"step name too long", func(p *ProfileSpec) { p.Steps[0].Name = strings.Repeat("s", 65) }, "steps[0].name", "must be at most 64 characters"},
		{"step name missing", func(p *ProfileSpec) { p.Steps[0].Name = "" }, "steps[0].name", "is required"},
		{"unknown kind", func(p *ProfileSpec) { p.Steps[0].Kind = "sleep" }, "steps[0].kind", `"sleep" is not allowed: use one of fio, inference, command, drop-caches, pause, fault, gpu-path`},
		{"step timeout over a week", func(p *ProfileSpec) { p.Steps[0].Timeout = MaxSpecDuration + 1 }, "steps[0].timeout", "must be at most 7 days (168h)"},
		{"fio block missing", func(p *ProfileSpec) { p.Steps[2].Fio = nil }, "steps[2].fio", "is required for a fio step"},
		{"second block", func(p *ProfileSpec) { p.Steps[2].Pause = &PauseStep{Duration: Duration(time.Second)} }, "steps[2].pause", "must not be set on a fio step"},
		{"block on drop-caches", func(p *ProfileSpec) { p.Steps[0].Fio = &FioStep{} }, "steps[0].fio", "must not be set on a drop-caches step"},

		{"bad rw", func(p *ProfileSpec) { fio(p).RW = "trim" }, "steps[2].fio.rw", `"trim" is not allowed: use one of read, write, randread, randwrite, rw, randrw`},
		{"no block size", func(p *ProfileSpec) { fio(p).BlockSize = 0 }, "steps[2].fio.block_size", "is required (a size like 4KiB or 1MiB)"},
		{"block size not a power of two", func(p *ProfileSpec) { fio(p).BlockSize = 3000 }, "steps[2].fio.block_size", "must be a power of two between 512 B and 64 MiB (4KiB, 128KiB, 1MiB, ...)"},
		{"block size too small", func(p *ProfileSpec) { fio(p).BlockSize = 256 }, "steps[2].fio.block_size", "must be a power of two between 512 B and 64 MiB (4KiB, 128KiB, 1MiB, ...)"},
		{"block size too big", func(p *ProfileSpec) { fio(p).BlockSize = 128 << 20 }, "steps[2].fio.block_size", "must be a power of two between 512 B and 64 MiB (4KiB, 128KiB, 1MiB, ...)"},
		{"iodepth absurd", func(p *ProfileSpec) { fio(p).IODepth = 4097 }, "steps[2].fio.iodepth", "must be between 1 and 4096"},
		{"iodepth negative", func(p *ProfileSpec) { fio(p).IODepth = -2 }, "steps[2].fio.iodepth", "must be between 1 and 4096"},
		{"numjobs absurd", func(p *ProfileSpec) { fio(p).NumJobs = 1025 }, "steps[2].fio.numjobs", "must be between 1 and 1024"},
		{"bad ioengine", func(p *ProfileSpec) { fio(p).IOEngine = "spdk" }, "steps[2].fio.ioengine", `"spdk" is not allowed: use one of libaio, io_uring, psync, sync, posixaio`},
		{"no runtime", func(p *ProfileSpec) { fio(p).Runtime = 0 }, "steps[2].fio.runtime", "is required (a duration like 30s, 5m or 1h)"},
		{"runtime over a week", func(p *ProfileSpec) { fio(p).Runtime = Duration(8 * 24 * time.Hour) }, "steps[2].fio.runtime", "must be at most 7 days (168h)"},
		{"runtime under a second", func(p *ProfileSpec) { fio(p).Runtime = Duration(300 * time.Millisecond) }, "steps[2].fio.runtime", "must be at least 1s"},
		{"timeout under runtime", func(p *ProfileSpec) { p.Steps[2].Timeout = Duration(time.Minute) }, "steps[2].timeout", "must be longer than the fio runtime plus the warmup (1m10s)"},
		{"rwmixread on pure read", func(p *ProfileSpec) { fio(p).RWMixRead = 70 }, "steps[2].fio.rwmixread", "only applies to rw and randrw"},
		{"rwmixread over 100", func(p *ProfileSpec) { fio(p).RW, fio(p).RWMixRead = RWMixed, 101 }, "steps[2].fio.rwmixread", "must be between 0 and 100"},
		{"no target", func(p *ProfileSpec) { fio(p).Target = "" }, "steps[2].fio.target", "is required: a file (/mnt/nvme/accord.dat) or a block device (/dev/nvme1n1)"},
		{"relative target", func(p *ProfileSpec) { fio(p).Target = "data/file" }, "steps[2].fio.target", "must be an absolute path, like /mnt/nvme/testfile"},
		{"unclean target hiding a device", func(p *ProfileSpec) { fio(p).Target = "/mnt/../dev/sda" }, "steps[2].fio.target", "must be a clean path (no .., //, trailing / or ./); did you mean /dev/sda?"},
		{"target list", func(p *ProfileSpec) { fio(p).Target = "/mnt/a:/mnt/b" }, "steps[2].fio.target", "must not contain ':' (fio reads it as a list of files)"},
		{"file without size", func(p *ProfileSpec) { fio(p).Size = 0 }, "steps[2].fio.size", "is required for a file target (a size like 10GiB)"},
		{"size under block", func(p *ProfileSpec) { fio(p).Size = 1024 }, "steps[2].fio.size", "must be at least the block size (4KiB)"},
		{"size absurd", func(p *ProfileSpec) { fio(p).Size = 2 << 50 }, "steps[2].fio.size", "must be at most 1 PiB"},
		{"device write not destructive", func(p *ProfileSpec) { fio(p).Target, fio(p).RW = "/dev/nvme1n1", RWWrite }, "steps[2].fio.destructive", "must be true: this step writes to the block device /dev/nvme1n1 and destroys its data"},
		{"device mixed not destructive", func(p *ProfileSpec) { fio(p).Target, fio(p).RW = "/dev/nvme1n1", RWRandMixed }, "steps[2].fio.destructive", "must be true: this step writes to the block device /dev/nvme1n1 and destroys its data"},

		{"no endpoint", func(p *ProfileSpec) { inf(p).Endpoint = "" }, "steps[4].inference.endpoint", "is required: the server's base URL, like http://10.0.0.5:8000/v1"},
		{"ftp endpoint", func(p *ProfileSpec) { inf(p).Endpoint = "ftp://10.0.0.5/v1" }, "steps[4].inference.endpoint", "must be an http:// or https:// URL, like http://10.0.0.5:8000/v1"},
		{"endpoint without host", func(p *ProfileSpec) { inf(p).Endpoint = "http:///v1" }, "steps[4].inference.endpoint", "must be an http:// or https:// URL, like http://10.0.0.5:8000/v1"},
		{"endpoint with password", func(p *ProfileSpec) { inf(p).Endpoint = "http://u:secret@10.0.0.5/v1" }, "steps[4].inference.endpoint", "must not contain a user name or password"},
		{"endpoint with bad port", func(p *ProfileSpec) { inf(p).Endpoint = "http://10.0.0.5:99999/v1" }, "steps[4].inference.endpoint", `has an invalid port "99999"`},
		{"endpoint with space", func(p *ProfileSpec) { inf(p).Endpoint = "http://10.0.0.5/v1 x" }, "steps[4].inference.endpoint", "must be an http:// or https:// URL, like http://10.0.0.5:8000/v1 (no spaces)"},
		{"endpoint with fragment", func(p *ProfileSpec) { inf(p).Endpoint = "http://10.0.0.5/v1#x" }, "steps[4].inference.endpoint", "must not contain a #fragment"},
		{"no model", func(p *ProfileSpec) { inf(p).Model = "" }, "steps[4].inference.model", "is required: the model name the server serves"},
		{"bad api", func(p *ProfileSpec) { inf(p).API = "grpc" }, "steps[4].inference.api", `"grpc" is not allowed: use one of chat, completions`},
		{"no prompt length", func(p *ProfileSpec) { inf(p).PromptTokens = TokenDist{} }, "steps[4].inference.prompt_tokens.mean", "is required (a token count like 1024), unless the step uses a dataset"},
		{"relative dataset", func(p *ProfileSpec) { inf(p).Dataset = "sharegpt.jsonl" }, "steps[4].inference.dataset", "must be an absolute path, like /mnt/nvme/testfile"},
		{"absurd prompt", func(p *ProfileSpec) { inf(p).PromptTokens.Mean = 1000001 }, "steps[4].inference.prompt_tokens.mean", "must be between 1 and 1000000"},
		{"bad dist", func(p *ProfileSpec) { inf(p).PromptTokens.Dist = "zipf" }, "steps[4].inference.prompt_tokens.dist", `"zipf" is not allowed: use one of fixed, uniform, normal`},
		{"fixed with min", func(p *ProfileSpec) { inf(p).PromptTokens.Min = 3 }, "steps[4].inference.prompt_tokens.min", "only applies to uniform and normal distributions"},
		{"fixed with stddev", func(p *ProfileSpec) { inf(p).PromptTokens.StdDev = 3 }, "steps[4].inference.prompt_tokens.stddev", "only applies to the normal distribution"},
		{"uniform upside down", func(p *ProfileSpec) { inf(p).OutputTokens = TokenDist{Dist: DistUniform, Min: 256, Max: 64} }, "steps[4].inference.output_tokens.max", "must be at least min (256)"},
		{"uniform mean outside", func(p *ProfileSpec) { inf(p).OutputTokens.Mean = 1000 }, "steps[4].inference.output_tokens.mean", "must be between min and max"},
		{"normal without stddev", func(p *ProfileSpec) { inf(p).OutputTokens = TokenDist{Dist: DistNormal, Mean: 100} }, "steps[4].inference.output_tokens.stddev", "must be more than 0 and at most 1000000"},
		{"normal NaN stddev", func(p *ProfileSpec) {
			inf(p).OutputTokens = TokenDist{Dist: DistNormal, Mean: 100, StdDev: math.NaN()}
		}, "steps[4].inference.output_tokens.stddev", "must be a finite number"},
		{"normal mean under clip", func(p *ProfileSpec) {
			inf(p).OutputTokens = TokenDist{Dist: DistNormal, Mean: 10, StdDev: 5, Min: 20}
		}, "steps[4].inference.output_tokens.mean", "must be at least min (20)"},
		{"prefix empty", func(p *ProfileSpec) { inf(p).Prefix = &PrefixReuse{Distinct: 4} }, "steps[4].inference.prefix.tokens", "must be between 1 and 1000000"},
		{"prefix too many", func(p *ProfileSpec) { inf(p).Prefix = &PrefixReuse{Tokens: 100, Distinct: 100001} }, "steps[4].inference.prefix.distinct", "must be between 1 and 100000"},
		{"prefix two ways", func(p *ProfileSpec) { inf(p).Prefix = &PrefixReuse{Tokens: 100, Share: 0.5, Distinct: 4} }, "steps[4].inference.prefix", "set one of tokens (a prefix before each prompt), share (a share of each prompt) and sweep (shares run in turn)"},
		{"prefix share above 1", func(p *ProfileSpec) { inf(p).Prefix = &PrefixReuse{Share: 1.5, Distinct: 4} }, "steps[4].inference.prefix.share", "must be more than 0 and at most 1 (the share of each prompt that is a shared prefix)"},
		{"reuse level negative", func(p *ProfileSpec) {
			inf(p).MetricsURL = "http://127.0.0.1:8000/metrics"
			inf(p).Prefix = &PrefixReuse{Sweep: []float64{0, -0.5}, Distinct: 4}
		}, "steps[4].inference.prefix.sweep[1]", "shares must be between 0 and 1 (0: no shared prefix, 1: all of each prompt)"},
		{"reuse level repeated", func(p *ProfileSpec) {
			inf(p).MetricsURL = "http://127.0.0.1:8000/metrics"
			inf(p).Prefix = &PrefixReuse{Sweep: []float64{0.5, 0.5}, Distinct: 4}
		}, "steps[4].inference.prefix.sweep[1]", "repeats the share 0.5; levels must be unique"},
		{"reuse sweep without counters", func(p *ProfileSpec) { inf(p).Prefix = &PrefixReuse{Sweep: []float64{0, 0.5}, Distinct: 4} }, "steps[4].inference.prefix.sweep", "needs metrics_url: the hit ratio each share gives is read from the server's own counters (vLLM's prefix_cache_hits and queries, SGLang's cached and prompt tokens)"},
		{"reuse sweep beside a load sweep", func(p *ProfileSpec) {
			inf(p).MetricsURL = "http://127.0.0.1:8000/metrics"
			inf(p).Load = Load{Mode: LoadConcurrency, Sweep: []float64{1, 2}}
			inf(p).Prefix = &PrefixReuse{Sweep: []float64{0, 0.5}, Distinct: 4}
		}, "steps[4].inference.prefix.sweep", "a step sweeps one thing at a time: leave load.sweep empty (the load's single level runs at every share), or sweep the load in a step of its own"},
		{"reuse sweep of a dataset", func(p *ProfileSpec) {
			inf(p).MetricsURL = "http://127.0.0.1:8000/metrics"
			inf(p).Dataset = "/data/prompts.jsonl"
			inf(p).Prefix = &PrefixReuse{Sweep: []float64{0, 0.5}, Distinct: 4}
		}, "steps[4].inference.prefix", "share and sweep shape synthetic prompts; a dataset's prompts are sent as they are"},
		{"ambiguous mode", func(p *ProfileSpec) { inf(p).Load = Load{Concurrency: 4, Rate: 2} }, "steps[4].inference.load.mode", "is required: one of concurrency, rate"},
		{"bad mode", func(p *ProfileSpec) { inf(p).Load.Mode = "burst" }, "steps[4].inference.load.mode", `"burst" is not allowed: use one of concurrency, rate`},
		{"concurrency absurd", func(p *ProfileSpec) { inf(p).Load.Concurrency = 100001 }, "steps[4].inference.load.concurrency", "must be between 1 and 100000"},
		{"concurrency and sweep", func(p *ProfileSpec) { inf(p).Load.Sweep = []float64{1, 2} }, "steps[4].inference.load.concurrency", "leave empty when a sweep is set: the sweep gives the levels"},
		{"fractional concurrency level", func(p *ProfileSpec) { inf(p).Load = Load{Mode: LoadConcurrency, Sweep: []float64{1, 2.5}} }, "steps[4].inference.load.sweep[1]", "concurrency levels must be whole numbers between 1 and 100000"},
		{"repeated level", func(p *ProfileSpec) { inf(p).Load = Load{Mode: LoadConcurrency, Sweep: []float64{1, 2, 1}} }, "steps[4].inference.load.sweep[2]", "repeats the level 1; levels must be unique"},
		{"sweep too long", func(p *ProfileSpec) {
			inf(p).Load = Load{Mode: LoadConcurrency}
			for i := 1; i <= 65; i++ {
				inf(p).Load.Sweep = append(inf(p).Load.Sweep, float64(i))
			}
		}, "steps[4].inference.load.sweep", "must have at most 64 levels"},
		{"arrival in concurrency mode", func(p *ProfileSpec) { inf(p).Load.Arrival = ArrivalPoisson }, "steps[4].inference.load.arrival", "only applies in rate mode"},
		{"rate in concurrency mode", func(p *ProfileSpec) { inf(p).Load.Rate = 3 }, "steps[4].inference.load.rate", "only applies in rate mode"},
		{"rate zero", func(p *ProfileSpec) { inf(p).Load = Load{Mode: LoadRate} }, "steps[4].inference.load.rate", "must be more than 0 and at most 1e+06 requests per second"},
		{"rate infinite", func(p *ProfileSpec) { inf(p).Load = Load{Mode: LoadRate, Rate: math.Inf(1)} }, "steps[4].inference.load.rate", "must be a finite number"},
		{"bad arrival", func(p *ProfileSpec) { inf(p).Load = Load{Mode: LoadRate, Rate: 1, Arrival: "bursty"} }, "steps[4].inference.load.arrival", `"bursty" is not allowed: use one of constant, poisson`},
		{"concurrency in rate mode", func(p *ProfileSpec) { inf(p).Load = Load{Mode: LoadRate, Rate: 1, Concurrency: 4} }, "steps[4].inference.load.concurrency", "only applies in concurrency mode (use max_concurrency to cap rate mode)"},
		{"negative rate level", func(p *ProfileSpec) { inf(p).Load = Load{Mode: LoadRate, Sweep: []float64{1, -1}} }, "steps[4].inference.load.sweep[1]", "rates must be more than 0 and at most 1e+06 requests per second"},
		{"no end", func(p *ProfileSpec) { inf(p).Duration = 0 }, "steps[4].inference.duration", "set a duration, a number of requests, or both, to end each load level"},
		{"duration inside warmup", func(p *ProfileSpec) { inf(p).Duration = Duration(5 * time.Second) }, "steps[4].inference.duration", "must be longer than the profile's warmup (10s), or nothing is measured"},
		{"requests absurd", func(p *ProfileSpec) { inf(p).Requests = MaxRequests + 1 }, "steps[4].inference.requests", "must be between 1 and 10000000"},
		{"request timeout over a week", func(p *ProfileSpec) { inf(p).RequestTimeout = MaxSpecDuration + 1 }, "steps[4].inference.request_timeout", "must be at most 7 days (168h)"},
		{"negative slo", func(p *ProfileSpec) { inf(p).SLO.TTFTMs = -1 }, "steps[4].inference.slo.ttft_ms", "must be between 0 and 86400000 ms (one day)"},
		{"NaN slo", func(p *ProfileSpec) { inf(p).SLO.E2ELMs = math.NaN() }, "steps[4].inference.slo.e2el_ms", "must be a finite number"},
		{"bad metrics url", func(p *ProfileSpec) { inf(p).MetricsURL = "10.0.0.5:8000/metrics" }, "steps[4].inference.metrics_url", "must be an http:// or https:// URL, like http://10.0.0.5:8000/v1"},

		{"no program", func(p *ProfileSpec) { cmd(p).Program = "" }, "steps[5].command.program", "is required: an absolute path (/usr/bin/tool) or a program name (tool)"},
		{"relative program path", func(p *ProfileSpec) { cmd(p).Program = "bin/tool" }, "steps[5].command.program", "must be an absolute path (/usr/bin/tool) or a bare program name (tool); it runs without a shell"},
		{"shell string as program", func(p *ProfileSpec) { cmd(p).Program = "vllm bench; rm -rf /" }, "steps[5].command.program", "must be an absolute path (/usr/bin/tool) or a bare program name (tool); it runs without a shell"},
		{"unclean program", func(p *ProfileSpec) { cmd(p).Program = "/usr/bin/../bin/sh" }, "steps[5].command.program", "must be a clean path (no .., //, trailing / or ./); did you mean /usr/bin/sh?"},
		{"too many args", func(p *ProfileSpec) { cmd(p).Args = make([]string, 257) }, "steps[5].command.args", "must have at most 256 arguments"},
		{"huge arg", func(p *ProfileSpec) { cmd(p).Args[1] = strings.Repeat("a", 4097) }, "steps[5].command.args[1]", "must be at most 4096 bytes"},
		{"bad format", func(p *ProfileSpec) { cmd(p).Format = "csv" }, "steps[5].command.format", `"csv" is not allowed: use one of fio-json, vllm-bench-json, genai-perf-json, gdsio-text, gpu-path-json, text`},
		{"escaping output", func(p *ProfileSpec) { cmd(p).OutputFile = "../../etc/passwd" }, "steps[5].command.output_file", "must be a path inside the step's folder, like result.json (no leading /, no ..)"},
		{"absolute output", func(p *ProfileSpec) { cmd(p).OutputFile = "/tmp/x.json" }, "steps[5].command.output_file", "must be a path inside the step's folder, like result.json (no leading /, no ..)"},

		{"pause without duration", func(p *ProfileSpec) { p.Steps[3].Pause.Duration = 0 }, "steps[3].pause.duration", "is required (a duration like 30s, 5m or 1h)"},
		{"pause timeout too short", func(p *ProfileSpec) { p.Steps[3].Timeout = Duration(5 * time.Second) }, "steps[3].timeout", "must be longer than the pause (5s)"},

		{"bad fault action", func(p *ProfileSpec) { fault(p).Action = "unplug" }, "steps[1].fault.action", `"unplug" is not allowed: use one of netem, rate-limit, path-down`},
		{"netem without interface", func(p *ProfileSpec) { fault(p).Interface = "" }, "steps[1].fault.interface", "is required: the network interface, like eth0"},
		{"injected interface", func(p *ProfileSpec) { fault(p).Interface = "eth0 root" }, "steps[1].fault.interface", "must be a network interface name (up to 15 letters, digits, ., - or _)"},
		{"netem delay absurd", func(p *ProfileSpec) { fault(p).Delay = Duration(2 * time.Minute) }, "steps[1].fault.delay", "must be between 0 and 1m"},
		{"netem loss over 100", func(p *ProfileSpec) { fault(p).LossPercent = 101 }, "steps[1].fault.loss_percent", "must be between 0 and 100"},
		{"netem doing nothing", func(p *ProfileSpec) { fault(p).Delay = 0 }, "steps[1].fault.delay", "set a delay, a loss_percent, or both"},
		{"netem with rate", func(p *ProfileSpec) { fault(p).RateMbit = 10 }, "steps[1].fault.rate_mbit", "does not apply to a netem fault"},
		{"rate-limit without rate", func(p *ProfileSpec) { fault(p).Action, fault(p).Delay = FaultRateLimit, 0 }, "steps[1].fault.rate_mbit", "must be more than 0 and at most 1e+06 megabits per second"},
		{"rate-limit with delay", func(p *ProfileSpec) { fault(p).Action, fault(p).RateMbit = FaultRateLimit, 100 }, "steps[1].fault.delay", "does not apply to a rate-limit fault"},
		{"path-down bad controller", func(p *ProfileSpec) {
			*fault(p) = FaultStep{Action: FaultPathDown, Controller: "sda", Duration: Duration(time.Second)}
		}, "steps[1].fault.controller", "must be an NVMe controller name, like nvme1"},
		{"path-down with interface", func(p *ProfileSpec) {
			*fault(p) = FaultStep{Action: FaultPathDown, Controller: "nvme0", Interface: "eth0", Duration: Duration(time.Second)}
		}, "steps[1].fault.interface", "does not apply to a path-down fault"},
		{"fault without duration", func(p *ProfileSpec) { fault(p).Duration = 0 }, "steps[1].fault.duration", "is required (a duration like 30s, 5m or 1h)"},
		{"fault during unknown step", func(p *ProfileSpec) { fault(p).During = "nope" }, "steps[1].fault.during", `names no step of this profile ("nope")`},
		{"fault during earlier step", func(p *ProfileSpec) { fault(p).During = "prep" }, "steps[1].fault.during", `must name a later step: "prep" comes before this fault`},
		{"fault during itself", func(p *ProfileSpec) { fault(p).During = "slow-net" }, "steps[1].fault.during", `must name a later step: "slow-net" comes before this fault`},
		{"fault during a pause", func(p *ProfileSpec) { fault(p).During = "settle" }, "steps[1].fault.during", "must name a load step (fio, inference or command), not a pause step"},
		{"after without during", func(p *ProfileSpec) { fault(p).During = "" }, "steps[1].fault.after", "only applies with during"},

		{"NUL in description", func(p *ProfileSpec) { p.Description = "a\x00b" }, "description", "must not contain NUL bytes"},
		{"NUL in an argument", func(p *ProfileSpec) { cmd(p).Args[0] = "bench\x00" }, "steps[5].command.args[0]", "must not contain NUL bytes"},
		{"invalid UTF-8", func(p *ProfileSpec) { inf(p).Model = "ll\xffama" }, "steps[4].inference.model", "must be valid UTF-8 text"},
		{"control character", func(p *ProfileSpec) { p.Storage.ArrayModel = "AF\x1b[31m" }, "storage.array_model", "must not contain control characters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := validProfile()
			tc.mutate(&p)
			errs := ValidateProfile(p)
			require.Equal(t, ValidationErrors{{Path: tc.path, Message: tc.message}}, errs)
			require.ErrorAs(t, p.Validate(), new(ValidationErrors))
		})
	}
}

func TestValidateGateSetGood(t *testing.T) {
	t.Parallel()
	cases := map[string]func(g *GateSetSpec){
		"as built":                    func(g *GateSetSpec) {},
		"highest confidence":          func(g *GateSetSpec) { g.Criteria[0].Confidence = 0.9999 },
		"advisory without correction": func(g *GateSetSpec) { g.Correction, g.Criteria[0].Severity = CorrectionNone, Advisory },
		"unit defaults to canonical": func(g *GateSetSpec) {
			g.Criteria[0].Unit, g.Criteria[0].Threshold, g.Criteria[0].StopLoss = "", 2000, nil
		},
		"micro sign and greek mu": func(g *GateSetSpec) {
			g.Criteria = append(g.Criteria,
				Criterion{Name: "clat-a", Metric: MetricReadCLat, Statistic: StatP99, Comparator: LessOrEqual, Threshold: 500, Unit: "µs"},
				Criterion{Name: "clat-b", Metric: MetricReadCLat, Statistic: StatP999, Comparator: LessOrEqual, Threshold: 900, Unit: "μs"})
		},
		"bandwidth in MiB/s": func(g *GateSetSpec) {
			g.Criteria = append(g.Criteria, Criterion{Name: "bw", Metric: MetricReadBW, Statistic: StatRate, Comparator: GreaterOrEqual, Threshold: 3000, Unit: "MiB/s"})
		},
		"error rate in percent": func(g *GateSetSpec) {
			g.Criteria = append(g.Criteria, Criterion{Name: "errors", Metric: MetricErrorRate, Statistic: StatRate, Comparator: LessOrEqual, Threshold: 0.5, Unit: "%", StopLoss: tmplPtr(100.0)})
		},
		"cpu as a ratio": func(g *GateSetSpec) {
			g.Criteria = append(g.Criteria, Criterion{Name: "cpu", Metric: MetricCPUUtil, Statistic: StatMean, Comparator: LessOrEqual, Threshold: 0.8, Unit: "ratio"})
		},
		"restricted to a step": func(g *GateSetSpec) { g.Criteria[0].Step = "load" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := validGateSet()
			mutate(&g)
			require.Nil(t, ValidateGateSet(g))
			require.NoError(t, g.Validate())
		})
	}
}

func TestValidateGateSetBad(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		mutate  func(g *GateSetSpec)
		path    string
		message string
	}{
		{"no name", func(g *GateSetSpec) { g.Name = "" }, "name", "is required"},
		{"schema too new", func(g *GateSetSpec) { g.SchemaVersion = 5 }, "schema_version", "must be between 1 and 1"},
		{"bad correction", func(g *GateSetSpec) { g.Correction = "bonferroni" }, "correction", `"bonferroni" is not allowed: use one of holm, none`},
		{"stop-loss k absurd", func(g *GateSetSpec) { g.StopLossConsecutive = 101 }, "stop_loss_consecutive", "must be between 1 and 100"},
		{"no criteria", func(g *GateSetSpec) { g.Criteria = nil }, "criteria", "a gate set needs at least one criterion"},
		{"duplicate criterion", func(g *GateSetSpec) { g.Criteria[1].Name = "ttft-p99" }, "criteria[1].name", `"ttft-p99" is already the name of criteria[0]; criterion names must be unique`},
		{"criterion name unsafe", func(g *GateSetSpec) { g.Criteria[0].Name = "ttft p99" }, "criteria[0].name", "criterion names may use only letters, digits, - and _"},
		{"no metric", func(g *GateSetSpec) { g.Criteria[0].Metric, g.Criteria[0].Unit = "", "ms" }, "criteria[0].metric", "is required: a metric id such as ttft or read_iops"},
		{"unknown metric", func(g *GateSetSpec) { g.Criteria[0].Metric = "ttfb" }, "criteria[0].metric", `"ttfb" is not a metric Accord knows (see the metric catalog)`},
		{"no statistic", func(g *GateSetSpec) { g.Criteria[0].Statistic = "" }, "criteria[0].statistic", "is required: one of p50, p90, p95, p99, p99.9, mean, max, rate"},
		{"unknown statistic", func(g *GateSetSpec) { g.Criteria[0].Statistic = "p42" }, "criteria[0].statistic", `"p42" is not allowed: use one of p50, p90, p95, p99, p99.9, mean, max, rate`},
		{"percentile of a rate", func(g *GateSetSpec) { g.Criteria[1].Statistic = StatP99 }, "criteria[1].statistic", "output_token_throughput has one value per repetition, so only rate applies, not p99"},
		{"rate of a distribution", func(g *GateSetSpec) { g.Criteria[0].Statistic = StatRate }, "criteria[0].statistic", "rate applies only to throughput and ratio metrics; ttft is a distribution: use a percentile, mean or max"},
		{"bad mode", func(g *GateSetSpec) { g.Criteria[0].Mode = "delta" }, "criteria[0].mode", `"delta" is not allowed: use one of absolute, relative, isolation, drift`},
		{"bad step name", func(g *GateSetSpec) { g.Criteria[0].Step = "a/b" }, "criteria[0].step", "step names may use only letters, digits, - and _"},
		{"bad comparator", func(g *GateSetSpec) { g.Criteria[0].Comparator = "<" }, "criteria[0].comparator", `"<" is not allowed: use one of <=, >=`},
		{"confidence one half", func(g *GateSetSpec) { g.Criteria[0].Confidence = 0.5 }, "criteria[0].confidence", "must be more than 0.5 and at most 0.9999 (0.95 is usual)"},
		{"confidence certain", func(g *GateSetSpec) { g.Criteria[0].Confidence = 1 }, "criteria[0].confidence", "must be more than 0.5 and at most 0.9999 (0.95 is usual)"},
		{"confidence NaN", func(g *GateSetSpec) { g.Criteria[0].Confidence = math.NaN() }, "criteria[0].confidence", "must be more than 0.5 and at most 0.9999 (0.95 is usual)"},
		{"negative min samples", func(g *GateSetSpec) { g.Criteria[0].MinSamples = -1 }, "criteria[0].min_samples", "must be between 0 and 1000000000"},
		{"bad severity", func(g *GateSetSpec) { g.Criteria[0].Severity = "fatal" }, "criteria[0].severity", `"fatal" is not allowed: use one of blocking, advisory`},
		{"NaN threshold", func(g *GateSetSpec) { g.Criteria[0].Threshold = math.NaN() }, "criteria[0].threshold", "must be a finite number"},
		{"negative latency", func(g *GateSetSpec) { g.Criteria[0].Threshold, g.Criteria[0].StopLoss = -1, nil }, "criteria[0].threshold", "must not be negative"},
		{"bandwidth unit for latency", func(g *GateSetSpec) { g.Criteria[0].Unit = "MB/s" }, "criteria[0].unit", `"MB/s" cannot express ttft (ms): use one of ms, ns, us, µs, μs, s`},
		{"unknown unit", func(g *GateSetSpec) { g.Criteria[0].Unit = "minutes" }, "criteria[0].unit", `"minutes" cannot express ttft (ms): use one of ms, ns, us, µs, μs, s`},
		{"relative in ms", func(g *GateSetSpec) { g.Criteria[1].Unit = "tok/s" }, "criteria[1].unit", "a relative threshold is a change in percent: use %"},
		{"ratio above one", func(g *GateSetSpec) {
			g.Criteria = append(g.Criteria, Criterion{Name: "e", Metric: MetricErrorRate, Statistic: StatRate, Comparator: LessOrEqual, Threshold: 150, Unit: "%"})
		}, "criteria[2].threshold", "error_rate is a share: at most 1 (or 100 %)"},
		{"percent above 100", func(g *GateSetSpec) {
			g.Criteria = append(g.Criteria, Criterion{Name: "c", Metric: MetricCPUUtil, Statistic: StatP99, Comparator: LessOrEqual, Threshold: 2, Unit: "ratio"})
		}, "criteria[2].threshold", "cpu_util is a percentage: at most 100 %"},
		{"relative at minus 100", func(g *GateSetSpec) { g.Criteria[1].Threshold, g.Criteria[1].StopLoss = -100, nil }, "criteria[1].threshold", "a relative change must be more than -100 % and at most +10000 %"},
		{"relative absurd", func(g *GateSetSpec) { g.Criteria[1].Threshold = 10001 }, "criteria[1].threshold", "a relative change must be more than -100 % and at most +10000 %"},
		{"stop-loss on the passing side of <=", func(g *GateSetSpec) { g.Criteria[0].StopLoss = tmplPtr(1.0) }, "criteria[0].stop_loss",
			"must be above the threshold (2): the criterion fails above it, and the stop-loss line is further on that side"},
		{"stop-loss at the threshold", func(g *GateSetSpec) { g.Criteria[0].StopLoss = tmplPtr(2.0) }, "criteria[0].stop_loss",
			"must be above the threshold (2): the criterion fails above it, and the stop-loss line is further on that side"},
		{"stop-loss on the passing side of >=", func(g *GateSetSpec) { g.Criteria[1].StopLoss = tmplPtr(30.0) }, "criteria[1].stop_loss",
			"must be below the threshold (25): the criterion fails below it, and the stop-loss line is further on that side"},
		{"stop-loss NaN", func(g *GateSetSpec) { g.Criteria[0].StopLoss = tmplPtr(math.NaN()) }, "criteria[0].stop_loss", "must be a finite number"},
		{"stop-loss relative below -100", func(g *GateSetSpec) { g.Criteria[1].StopLoss = tmplPtr(-150.0) }, "criteria[1].stop_loss", "a relative change must be more than -100 % and at most +10000 %"},
		{"long help", func(g *GateSetSpec) { g.Criteria[0].Help = strings.Repeat("h", 2001) }, "criteria[0].help", "must be at most 2000 characters"},
		{"NUL in help", func(g *GateSetSpec) { g.Criteria[0].Help = "\x00" }, "criteria[0].help", "must not contain NUL bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := validGateSet()
			tc.mutate(&g)
			require.Equal(t, ValidationErrors{{Path: tc.path, Message: tc.message}}, ValidateGateSet(g))
			require.ErrorAs(t, g.Validate(), new(ValidationErrors))
		})
	}
}

func TestValidateGateSetForProfile(t *testing.T) {
	t.Parallel()
	p := validProfile()
	good := validGateSet()
	good.Criteria = append(good.Criteria,
		Criterion{Name: "clat", Metric: MetricReadCLat, Statistic: StatP99, Step: "fio-read", Comparator: LessOrEqual, Threshold: 1, Unit: "ms"},
		Criterion{Name: "vllm-ttft", Metric: MetricTTFT, Statistic: StatP99, Step: "tool", Comparator: LessOrEqual, Threshold: 1, Unit: "s"},
		Criterion{Name: "cpu", Metric: MetricCPUUtil, Statistic: StatMean, Step: "fio-read", Comparator: LessOrEqual, Threshold: 90, Unit: "%"})
	require.Nil(t, ValidateGateSetForProfile(good, p))

	cases := []struct {
		name      string
		criterion Criterion
		path      string
		message   string
	}{
		{"unknown step", Criterion{Metric: MetricTTFT, Step: "warm"}, "criteria[0].step", `the profile "Every step kind" has no step named "warm"`},
		{"step without the metric", Criterion{Metric: MetricTTFT, Step: "fio-read"}, "criteria[0].step", `step "fio-read" (fio) does not produce ttft`},
		{"pause produces nothing", Criterion{Metric: MetricCPUUtil, Step: "settle"}, "criteria[0].step", `step "settle" (pause) does not produce cpu_util`},
		{"writes of a read job", Criterion{Metric: MetricWriteIOPS, Step: "fio-read"}, "criteria[0].step", `step "fio-read" (fio) does not produce write_iops`},
		{"no step produces it", Criterion{Metric: MetricWriteCLat}, "criteria[0].metric", `no step of the profile "Every step kind" produces write_clat`},
		{"cache hits need the metrics url", Criterion{Metric: MetricCacheHitRatio}, "criteria[0].metric", `no step of the profile "Every step kind" produces cache_hit_ratio`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := GateSetSpec{Criteria: []Criterion{tc.criterion}}
			require.Equal(t, ValidationErrors{{Path: tc.path, Message: tc.message}}, ValidateGateSetForProfile(g, p))
		})
	}
}

func TestValidationErrorsText(t *testing.T) {
	t.Parallel()
	errs := ValidationErrors{
		{Path: "steps[0].name", Message: "is required", Line: 4},
		{Message: "the document is empty"},
		{Path: "name", Message: "is required"},
	}
	require.Equal(t, "line 4: steps[0].name: is required; the document is empty; name: is required", errs.Error())
	require.Equal(t, []string{"is required"}, errs.Messages("name"))
	require.Nil(t, errs.Messages("purpose"))

	many := make(ValidationErrors, 8)
	for i := range many {
		many[i] = FieldError{Path: "x", Message: "bad"}
	}
	require.Equal(t, "x: bad; x: bad; x: bad; x: bad; x: bad; and 3 more", many.Error())
}
