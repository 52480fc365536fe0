package acceptance

// Values of the string-typed fields of profile and gate set specs. The spec
// structs keep plain strings (they are data the probe receives); these names
// keep the rest of the code free of string literals, and the lists feed
// validation and the forms' select boxes.

// fio access patterns (FioStep.RW).
const (
	RWRead      = "read"
	RWWrite     = "write"
	RWRandRead  = "randread"
	RWRandWrite = "randwrite"
	RWMixed     = "rw"
	RWRandMixed = "randrw"
)

// fio I/O engines (FioStep.IOEngine).
const (
	IOEngineLibaio   = "libaio"
	IOEngineIOURing  = "io_uring"
	IOEnginePsync    = "psync"
	IOEngineSync     = "sync"
	IOEnginePosixAIO = "posixaio"
)

// Inference APIs (InferenceStep.API): /v1/chat/completions or /v1/completions.
const (
	APIChat        = "chat"
	APICompletions = "completions"
)

// Load modes (Load.Mode): closed loop with a fixed number of streams, or open
// loop at a request rate.
const (
	LoadConcurrency = "concurrency"
	LoadRate        = "rate"
)

// Arrival processes of rate mode (Load.Arrival).
const (
	ArrivalConstant = "constant"
	ArrivalPoisson  = "poisson"
)

// Token count distributions (TokenDist.Dist).
const (
	DistFixed   = "fixed"
	DistUniform = "uniform"
	DistNormal  = "normal"
)

// Output formats of command steps (CommandStep.Format).
const (
	FormatFioJSON       = "fio-json"
	FormatVLLMBenchJSON = "vllm-bench-json"
	FormatGenAIPerfJSON = "genai-perf-json"
	// FormatGdsioText is gdsio's summary text (NVIDIA GPUDirect Storage).
	FormatGdsioText = "gdsio-text"
	// FormatGPUPathJSON is the gpu-path step's result document, as a
	// wrapper around a vendor's own transfer tool writes it.
	FormatGPUPathJSON = "gpu-path-json"
	FormatText        = "text"
)

// Fault actions (FaultStep.Action).
const (
	FaultNetem     = "netem"
	FaultRateLimit = "rate-limit"
	FaultPathDown  = "path-down"
)

// Prometheus exporter kinds (ExporterSpec.Kind): the built-in mappings of
// vendors' exporters, or a mapping written in the profile.
const (
	ExporterDCGM      = "dcgm"               // NVIDIA DCGM exporter
	ExporterAscendNPU = "ascend-npu"         // Huawei Ascend NPU exporter
	ExporterAMD       = "amd-device-metrics" // AMD device metrics exporter
	ExporterCustom    = "custom"
)

// Multiple-testing corrections (GateSetSpec.Correction).
const (
	CorrectionHolm = "holm"
	CorrectionNone = "none"
)

var (
	purposes       = []string{string(PurposeInferenceServing), string(PurposeStorageMicrobench), string(PurposeCheckpointRestore), string(PurposeTrainingIO), string(PurposeCustom)}
	transports     = []string{string(TransportLocalNVMe), string(TransportNVMeoFRDMA), string(TransportNVMeoFTCP), string(TransportEmulated)}
	stepKinds      = []string{string(StepFio), string(StepInference), string(StepCommand), string(StepDropCaches), string(StepPause), string(StepFault), string(StepGPUPath)}
	rwPatterns     = []string{RWRead, RWWrite, RWRandRead, RWRandWrite, RWMixed, RWRandMixed}
	ioEngines      = []string{IOEngineLibaio, IOEngineIOURing, IOEnginePsync, IOEngineSync, IOEnginePosixAIO}
	apis           = []string{APIChat, APICompletions}
	exporterKinds  = []string{ExporterDCGM, ExporterAscendNPU, ExporterAMD, ExporterCustom}
	loadModes      = []string{LoadConcurrency, LoadRate}
	arrivals       = []string{ArrivalConstant, ArrivalPoisson}
	dists          = []string{DistFixed, DistUniform, DistNormal}
	commandFormats = []string{FormatFioJSON, FormatVLLMBenchJSON, FormatGenAIPerfJSON, FormatGdsioText, FormatGPUPathJSON, FormatText}
	faultActions   = []string{FaultNetem, FaultRateLimit, FaultPathDown}
	comparators    = []string{string(LessOrEqual), string(GreaterOrEqual)}
	modes          = []string{string(Absolute), string(Relative), string(Isolation), string(Drift)}
	severities     = []string{string(Blocking), string(Advisory)}
	corrections    = []string{CorrectionHolm, CorrectionNone}
)

// CommandFormats lists the output formats a command step may declare.
func CommandFormats() []string { return append([]string(nil), commandFormats...) }

// RWReads reports whether a fio access pattern reads.
func RWReads(rw string) bool {
	switch rw {
	case RWRead, RWRandRead, RWMixed, RWRandMixed:
		return true
	}
	return false
}

// RWWrites reports whether a fio access pattern writes.
func RWWrites(rw string) bool {
	switch rw {
	case RWWrite, RWRandWrite, RWMixed, RWRandMixed:
		return true
	}
	return false
}

// RWIsMixed reports whether a fio access pattern mixes reads and writes, so
// that rwmixread applies.
func RWIsMixed(rw string) bool { return rw == RWMixed || rw == RWRandMixed }

// IsLoadStep reports whether a step of this kind applies load, so that a
// fault can overlap it and it produces measurements.
func IsLoadStep(k StepKind) bool {
	return k == StepFio || k == StepInference || k == StepCommand
}

func inSet(v string, set []string) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}
