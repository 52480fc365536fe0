package acceptance

// Which metrics a step can produce, so that a gate set can be checked
// against a profile before anything runs: a criterion on read_clat of a
// profile with only inference steps could never be judged.

var (
	// probeInferenceMetrics come from the probe's own load generator.
	probeInferenceMetrics = []string{
		MetricTTFT, MetricTTFTContent, MetricTPOT, MetricITL, MetricE2EL,
		MetricTTFTIntended, MetricE2ELIntended, MetricSendDelay,
		MetricRequestThroughput, MetricOutputTokenThroughput, MetricTotalTokenThroughput,
		MetricGoodput, MetricErrorRate,
		MetricClientLateness, MetricClientTickDelay, MetricClientCPU, MetricClientRunQueue, MetricHostCPUPressure,
	}
	// vllmBenchMetrics are what vLLM's benchmark JSON carries (per-request
	// arrays and totals).
	// (send delay and latency from the intended send time where the result
	// carries request start times), as runners/parse reads them.
	vllmBenchMetrics = []string{
		MetricTTFT, MetricTPOT, MetricITL, MetricE2EL, MetricE2ELIntended, MetricSendDelay,
		MetricRequestThroughput, MetricOutputTokenThroughput, MetricTotalTokenThroughput,
		MetricGoodput, MetricErrorRate,
	}
	// genAIPerfMetrics are what GenAI-Perf / AIPerf profile exports carry.
	genAIPerfMetrics = []string{
		MetricTTFT, MetricTPOT, MetricITL, MetricE2EL,
		MetricRequestThroughput, MetricOutputTokenThroughput, MetricTotalTokenThroughput,
		MetricGoodput, MetricErrorRate,
	}
	readMetrics  = []string{MetricReadIOPS, MetricReadBW, MetricReadCLat, MetricReadSLat, MetricReadLat}
	writeMetrics = []string{MetricWriteIOPS, MetricWriteBW, MetricWriteCLat, MetricWriteSLat, MetricWriteLat}
	// mixedMetrics are fio's "mixed" direction (unified_rw_reporting), which
	// a command step's own fio options may ask for.
	mixedMetrics = []string{MetricMixedIOPS, MetricMixedBW, MetricMixedCLat, MetricMixedSLat, MetricMixedLat}
	// telemetryMetrics are sampled on the host during every load step; GPU
	// utilisation only where nvidia-smi is present.
	telemetryMetrics = []string{MetricCPUUtil, MetricGPUUtil, MetricDiskUtil, MetricNICRxBytes, MetricNICTxBytes,
		MetricGPUMemUsed, MetricGPUMemBW, MetricGPUPower,
		MetricRDMARetransmits, MetricRDMASeqErrors, MetricRDMACNPSent, MetricRDMACNPHandled, MetricRDMAECNMarked, MetricRDMADiscards,
		MetricNICErrors, MetricNICDrops, MetricNICPauseFrames,
		MetricNSReadIOPS, MetricNSWriteIOPS, MetricNSReadBW, MetricNSWriteBW, MetricNSReadLatency, MetricNSWriteLatency}
)

// RunMetrics are measured over the whole run rather than by a step: the
// drives' wear, from nvme smart-log before and after the run, on a host
// with NVMe drives whatever the steps are.
var RunMetrics = []string{MetricDriveBytesWritten, MetricDriveWritesPerDay}

// RunProduces reports whether the run itself (not a step) produces the metric.
func RunProduces(metric string) bool { return inSet(metric, RunMetrics) }

// StepMetrics lists the metric ids a step can produce. Steps that apply no
// load (pause, drop-caches, fault) produce none.
func StepMetrics(s StepSpec) []string {
	var out []string
	switch s.Kind {
	case StepFio:
		if s.Fio == nil {
			return nil
		}
		if RWReads(s.Fio.RW) {
			out = append(out, readMetrics...)
		}
		if RWWrites(s.Fio.RW) {
			out = append(out, writeMetrics...)
		}
	case StepInference:
		if s.Inference == nil {
			return nil
		}
		out = append(out, probeInferenceMetrics...)
		if s.Inference.MetricsURL != "" {
			out = append(out, MetricCacheHitRatio)
		}
	case StepCommand:
		if s.Command == nil {
			return nil
		}
		switch s.Command.Format {
		case FormatFioJSON:
			out = append(out, readMetrics...)
			out = append(out, writeMetrics...)
			out = append(out, mixedMetrics...)
		case FormatVLLMBenchJSON:
			out = append(out, vllmBenchMetrics...)
		case FormatGenAIPerfJSON:
			out = append(out, genAIPerfMetrics...)
		case FormatGdsioText, FormatGPUPathJSON:
			out = append(out, MetricGPUPathBandwidth, MetricCPUSecondsPerGiB)
		}
	case StepGPUPath:
		if s.GPUPath == nil {
			return nil
		}
		out = append(out, MetricGPUPathBandwidth, MetricCPUSecondsPerGiB)
	default:
		return nil
	}
	return append(out, telemetryMetrics...)
}

// StepProduces reports whether the step can produce the metric.
func StepProduces(s StepSpec, metric string) bool {
	return inSet(metric, StepMetrics(s))
}
