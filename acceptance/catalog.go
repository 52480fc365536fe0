// Package acceptance is Accord's domain without I/O: the metric catalog,
// profile and gate specs, statistics, gate evaluation, stop-loss rules and
// the rollout state machine. Both the server and the probe use it, so that
// the vendor and the customer read every number the same way.
package acceptance

import "sort"

// Unit is a canonical unit. Every stored value is in the canonical unit of
// its metric; thresholds in other units of the same dimension are converted.
type Unit string

const (
	UnitMillisecond    Unit = "ms"    // request latencies
	UnitMicrosecond    Unit = "us"    // I/O latencies
	UnitRequestsPerSec Unit = "req/s" // request throughput
	UnitTokensPerSec   Unit = "tok/s" // token throughput
	UnitIOPS           Unit = "IOPS"  // I/O operations per second
	UnitBytesPerSec    Unit = "B/s"   // bandwidth
	UnitRatio          Unit = "ratio" // 0..1
	UnitPercent        Unit = "%"     // 0..100, utilisation
	UnitPerSecond      Unit = "/s"    // counted events per second (retransmits, pause frames)
	UnitWatt           Unit = "W"     // power
	UnitBytes          Unit = "B"     // an amount of memory
	UnitCPUSecPerGiB   Unit = "s/GiB" // CPU time spent per GiB moved
	UnitDWPD           Unit = "DWPD"  // drive writes per day: the drive's capacity written per day
)

// Kind says what a metric's samples are.
type Kind string

const (
	// KindDistribution metrics have one sample per request, I/O or telemetry
	// tick, so percentiles are meaningful.
	KindDistribution Kind = "distribution"
	// KindRate metrics have one value per repetition (a throughput, a ratio).
	KindRate Kind = "rate"
)

// Direction says which way is better, for explanations and relative gates.
type Direction string

const (
	LowerIsBetter  Direction = "lower"
	HigherIsBetter Direction = "higher"
)

// Group is used to lay metrics out on pages.
type Group string

const (
	GroupInference Group = "inference"
	GroupIO        Group = "io"
	GroupSystem    Group = "system"
)

// Metric describes one canonical metric.
type Metric struct {
	ID        string
	Name      string
	Unit      Unit
	Kind      Kind
	Direction Direction
	Group     Group
	Help      string
}

// Metric ids. Request latencies are in milliseconds, I/O latencies in
// microseconds, bandwidth in bytes per second.
const (
	MetricTTFT         = "ttft"          // send → first chunk with content, reasoning or a tool call
	MetricTTFTContent  = "ttft_content"  // send → first chunk with visible content (reasoning excluded)
	MetricTPOT         = "tpot"          // (e2el − ttft) / (output tokens − 1), per request
	MetricITL          = "itl"           // gap between consecutive token-carrying chunks
	MetricE2EL         = "e2el"          // send → last byte of the response
	MetricTTFTIntended = "ttft_intended" // intended send time → first token (open-loop, no coordinated omission)
	MetricE2ELIntended = "e2el_intended" // intended send time → done
	MetricSendDelay    = "send_delay"    // intended send time → actual send (client queueing)

	MetricRequestThroughput     = "request_throughput"      // completed requests per second
	MetricOutputTokenThroughput = "output_token_throughput" // output tokens per second
	MetricTotalTokenThroughput  = "total_token_throughput"  // prompt + output tokens per second
	MetricGoodput               = "goodput"                 // requests per second meeting every SLO
	MetricErrorRate             = "error_rate"              // failed / all requests
	MetricCacheHitRatio         = "cache_hit_ratio"         // prefix/KV cache hits / queries (server counters)

	MetricReadIOPS  = "read_iops"
	MetricWriteIOPS = "write_iops"
	MetricReadBW    = "read_bw"
	MetricWriteBW   = "write_bw"
	MetricReadCLat  = "read_clat"
	MetricWriteCLat = "write_clat"
	MetricReadSLat  = "read_slat"
	MetricWriteSLat = "write_slat"
	MetricReadLat   = "read_lat"
	MetricWriteLat  = "write_lat"
	// fio with unified_rw_reporting: reads and writes reported as one.
	MetricMixedIOPS = "mixed_iops"
	MetricMixedBW   = "mixed_bw"
	MetricMixedCLat = "mixed_clat"
	MetricMixedSLat = "mixed_slat"
	MetricMixedLat  = "mixed_lat"
	// The load generator's self-check, one per level (see ClientHealth).
	MetricClientLateness  = "client_send_lateness"
	MetricClientTickDelay = "client_tick_delay"
	MetricClientCPU       = "client_cpu"
	MetricClientRunQueue  = "client_run_queue"
	MetricHostCPUPressure = "host_cpu_pressure"
	MetricCPUUtil         = "cpu_util"
	MetricGPUUtil         = "gpu_util"
	MetricDiskUtil        = "disk_util"
	MetricNICRxBytes      = "nic_rx_bw"
	MetricNICTxBytes      = "nic_tx_bw"

	// Accelerators, from the vendor tools (runners/probe/gpu).
	MetricGPUMemUsed = "gpu_mem_used"    // memory in use, summed over devices
	MetricGPUMemBW   = "gpu_mem_bw_util" // share of time the memory was busy, mean over devices
	MetricGPUPower   = "gpu_power"       // power draw, summed over devices

	// The fabric and the drives, per-second rates (runners/probe/counters).
	MetricRDMARetransmits = "rdma_retransmits"
	MetricRDMASeqErrors   = "rdma_seq_errors"
	MetricRDMACNPSent     = "rdma_cnp_sent"
	MetricRDMACNPHandled  = "rdma_cnp_handled"
	MetricRDMAECNMarked   = "rdma_ecn_marked"
	MetricRDMADiscards    = "rdma_discards"
	MetricNICErrors       = "nic_errors"
	MetricNICDrops        = "nic_drops"
	MetricNICPauseFrames  = "nic_pause_frames"
	MetricNSReadIOPS      = "ns_read_iops"
	MetricNSWriteIOPS     = "ns_write_iops"
	MetricNSReadBW        = "ns_read_bw"
	MetricNSWriteBW       = "ns_write_bw"
	MetricNSReadLatency   = "ns_read_latency"
	MetricNSWriteLatency  = "ns_write_latency"

	// The storage-to-accelerator data path (gpu-path steps).
	MetricGPUPathBandwidth = "gpu_path_bandwidth"  // bytes per second from storage into (or towards) accelerator memory
	MetricCPUSecondsPerGiB = "cpu_seconds_per_gib" // CPU seconds the host spent per GiB moved

	// Drive wear over the whole run, from nvme smart-log before and after
	// (one value per drive, the drive as the level).
	MetricDriveBytesWritten = "drive_bytes_written"  // bytes the drive counted as written during the run
	MetricDriveWritesPerDay = "drive_writes_per_day" // those bytes as drive writes per day at the run's rate
)

var catalog = []Metric{
	{MetricTTFT, "Time to first token", UnitMillisecond, KindDistribution, LowerIsBetter, GroupInference,
		"From sending the request to the first streamed chunk that carries content, reasoning or a tool call. The role-only first chunk does not count."},
	{MetricTTFTContent, "Time to first content token", UnitMillisecond, KindDistribution, LowerIsBetter, GroupInference,
		"From sending the request to the first chunk with visible content; reasoning tokens do not count."},
	{MetricTPOT, "Time per output token", UnitMillisecond, KindDistribution, LowerIsBetter, GroupInference,
		"(end-to-end latency − TTFT) / (output tokens − 1), per request."},
	{MetricITL, "Inter-token latency", UnitMillisecond, KindDistribution, LowerIsBetter, GroupInference,
		"Gap between consecutive chunks that carry tokens, as vLLM's benchmark defines it."},
	{MetricE2EL, "End-to-end latency", UnitMillisecond, KindDistribution, LowerIsBetter, GroupInference,
		"From sending the request to the end of the response stream."},
	{MetricTTFTIntended, "TTFT from intended send time", UnitMillisecond, KindDistribution, LowerIsBetter, GroupInference,
		"TTFT measured from the time the schedule meant to send the request, so that client-side queueing is counted (no coordinated omission)."},
	{MetricE2ELIntended, "End-to-end latency from intended send time", UnitMillisecond, KindDistribution, LowerIsBetter, GroupInference,
		"End-to-end latency measured from the intended send time."},
	{MetricSendDelay, "Send delay", UnitMillisecond, KindDistribution, LowerIsBetter, GroupInference,
		"How late each request left the client compared with its schedule; large values mean the client, not the server, was the bottleneck."},
	{MetricRequestThroughput, "Request throughput", UnitRequestsPerSec, KindRate, HigherIsBetter, GroupInference,
		"Successful requests per second over the measured window."},
	{MetricOutputTokenThroughput, "Output token throughput", UnitTokensPerSec, KindRate, HigherIsBetter, GroupInference,
		"Output tokens per second over the measured window."},
	{MetricTotalTokenThroughput, "Total token throughput", UnitTokensPerSec, KindRate, HigherIsBetter, GroupInference,
		"Prompt and output tokens per second over the measured window."},
	{MetricGoodput, "Goodput", UnitRequestsPerSec, KindRate, HigherIsBetter, GroupInference,
		"Requests per second that met every SLO of the step (TTFT, TPOT, E2E)."},
	{MetricErrorRate, "Error rate", UnitRatio, KindRate, LowerIsBetter, GroupInference,
		"Failed requests divided by all requests: HTTP errors, errors inside the stream, streams ending without [DONE], timeouts."},
	{MetricCacheHitRatio, "Cache hit ratio", UnitRatio, KindRate, HigherIsBetter, GroupInference,
		"Prefix/KV cache hits divided by queries, in tokens, from the inference server's own counters before and after the step (vLLM's prefix_cache_hits / prefix_cache_queries, SGLang's cached_tokens / prompt_tokens)."},
	{MetricReadIOPS, "Read IOPS", UnitIOPS, KindRate, HigherIsBetter, GroupIO, "Read operations per second."},
	{MetricWriteIOPS, "Write IOPS", UnitIOPS, KindRate, HigherIsBetter, GroupIO, "Write operations per second."},
	{MetricReadBW, "Read bandwidth", UnitBytesPerSec, KindRate, HigherIsBetter, GroupIO, "Bytes read per second."},
	{MetricWriteBW, "Write bandwidth", UnitBytesPerSec, KindRate, HigherIsBetter, GroupIO, "Bytes written per second."},
	{MetricReadCLat, "Read completion latency", UnitMicrosecond, KindDistribution, LowerIsBetter, GroupIO,
		"From submission to completion of a read, as fio's clat."},
	{MetricWriteCLat, "Write completion latency", UnitMicrosecond, KindDistribution, LowerIsBetter, GroupIO,
		"From submission to completion of a write, as fio's clat."},
	{MetricReadSLat, "Read submission latency", UnitMicrosecond, KindDistribution, LowerIsBetter, GroupIO, "Time to submit a read, as fio's slat."},
	{MetricWriteSLat, "Write submission latency", UnitMicrosecond, KindDistribution, LowerIsBetter, GroupIO, "Time to submit a write, as fio's slat."},
	{MetricReadLat, "Read total latency", UnitMicrosecond, KindDistribution, LowerIsBetter, GroupIO, "slat + clat of a read, as fio's lat."},
	{MetricWriteLat, "Write total latency", UnitMicrosecond, KindDistribution, LowerIsBetter, GroupIO, "slat + clat of a write, as fio's lat."},
	{MetricMixedIOPS, "Mixed IOPS", UnitIOPS, KindRate, HigherIsBetter, GroupIO,
		"Reads and writes per second together, as fio reports them with unified_rw_reporting (its \"mixed\" direction)."},
	{MetricMixedBW, "Mixed bandwidth", UnitBytesPerSec, KindRate, HigherIsBetter, GroupIO,
		"Bytes read and written per second together, as fio's \"mixed\" direction."},
	{MetricMixedCLat, "Mixed completion latency", UnitMicrosecond, KindDistribution, LowerIsBetter, GroupIO,
		"Completion latency of reads and writes together, as fio's \"mixed\" clat."},
	{MetricMixedSLat, "Mixed submission latency", UnitMicrosecond, KindDistribution, LowerIsBetter, GroupIO,
		"Submission latency of reads and writes together, as fio's \"mixed\" slat."},
	{MetricMixedLat, "Mixed total latency", UnitMicrosecond, KindDistribution, LowerIsBetter, GroupIO,
		"slat + clat of reads and writes together, as fio's \"mixed\" lat."},
	{MetricClientLateness, "Load generator lateness", UnitMillisecond, KindDistribution, LowerIsBetter, GroupSystem,
		"How late the probe's open loop dispatched each request against its intended send time, before any max_concurrency wait: the load generator's own lateness (self-check)."},
	{MetricClientTickDelay, "Load generator scheduling delay", UnitMillisecond, KindDistribution, LowerIsBetter, GroupSystem,
		"How late a 10 ms ticker in the probe woke during the level: the probe's own scheduling delay (self-check)."},
	{MetricClientCPU, "Load generator CPU share", UnitPercent, KindRate, LowerIsBetter, GroupSystem,
		"The probe's CPU time during the level over the wall time and the CPUs it may run on (self-check)."},
	{MetricClientRunQueue, "Load generator run-queue wait", UnitPercent, KindRate, LowerIsBetter, GroupSystem,
		"Time the probe's threads waited runnable for a CPU during the level, summed over threads, over the wall time (self-check; 100 % is one thread always waiting)."},
	{MetricHostCPUPressure, "Host CPU pressure", UnitPercent, KindRate, LowerIsBetter, GroupSystem,
		"Share of the level during which some task on the host waited for a CPU (Linux PSI, /proc/pressure/cpu): how saturated the host was."},
	{MetricCPUUtil, "CPU utilisation", UnitPercent, KindDistribution, LowerIsBetter, GroupSystem,
		"Busy share of all CPUs, sampled every second from /proc/stat."},
	{MetricGPUUtil, "GPU utilisation", UnitPercent, KindDistribution, HigherIsBetter, GroupSystem,
		"Mean utilisation over the accelerators, sampled every second from their vendor tools (or, where no tool reports, the profile's Prometheus exporters)."},
	{MetricDiskUtil, "Disk utilisation", UnitPercent, KindDistribution, LowerIsBetter, GroupSystem,
		"Share of time the target devices were busy, from /proc/diskstats."},
	{MetricNICRxBytes, "NIC receive bandwidth", UnitBytesPerSec, KindDistribution, HigherIsBetter, GroupSystem, "Bytes received per second on the host's interfaces."},
	{MetricNICTxBytes, "NIC transmit bandwidth", UnitBytesPerSec, KindDistribution, HigherIsBetter, GroupSystem, "Bytes sent per second on the host's interfaces."},
	{MetricGPUMemUsed, "Accelerator memory used", UnitBytes, KindDistribution, LowerIsBetter, GroupSystem,
		"Accelerator memory in use, summed over the devices, sampled every second from the vendor tool (or exporter)."},
	{MetricGPUMemBW, "Accelerator memory busy", UnitPercent, KindDistribution, HigherIsBetter, GroupSystem,
		"Share of time the accelerators' memory was read or written (the vendor tools' memory bandwidth measure), mean over the devices."},
	{MetricGPUPower, "Accelerator power", UnitWatt, KindDistribution, LowerIsBetter, GroupSystem,
		"Power drawn by the accelerators, summed over the devices, where the vendor tool reports it."},
	{MetricRDMARetransmits, "RDMA retransmits", UnitPerSecond, KindDistribution, LowerIsBetter, GroupSystem,
		"Retransmissions and their timeouts per second over the RDMA ports (mlx5 roce_adp_retrans, local_ack_timeout_err, rnr_nak_retry_err; bnxt_re to_retransmits)."},
	{MetricRDMASeqErrors, "RDMA sequence errors", UnitPerSecond, KindDistribution, LowerIsBetter, GroupSystem,
		"Out-of-sequence packets and sequence-error NAKs per second over the RDMA ports."},
	{MetricRDMACNPSent, "RDMA CNPs sent", UnitPerSecond, KindDistribution, LowerIsBetter, GroupSystem,
		"Congestion notification packets sent per second (the host saw ECN-marked traffic)."},
	{MetricRDMACNPHandled, "RDMA CNPs handled", UnitPerSecond, KindDistribution, LowerIsBetter, GroupSystem,
		"Congestion notification packets received and acted on per second (the host slowed down)."},
	{MetricRDMAECNMarked, "RDMA ECN-marked packets", UnitPerSecond, KindDistribution, LowerIsBetter, GroupSystem,
		"ECN-marked RoCE packets received per second."},
	{MetricRDMADiscards, "RDMA discards", UnitPerSecond, KindDistribution, LowerIsBetter, GroupSystem,
		"Packets discarded per second (port_xmit_discards, port_rcv_errors, out_of_buffer)."},
	{MetricNICErrors, "NIC errors", UnitPerSecond, KindDistribution, LowerIsBetter, GroupSystem,
		"Receive and transmit errors per second on the physical interfaces."},
	{MetricNICDrops, "NIC drops", UnitPerSecond, KindDistribution, LowerIsBetter, GroupSystem,
		"Dropped packets per second on the physical interfaces."},
	{MetricNICPauseFrames, "NIC pause frames", UnitPerSecond, KindDistribution, LowerIsBetter, GroupSystem,
		"Pause (PFC and global) frames sent and received per second, from ethtool -S."},
	{MetricNSReadIOPS, "Namespace read IOPS", UnitIOPS, KindDistribution, HigherIsBetter, GroupSystem,
		"Reads completed per second on the NVMe namespaces, from /sys/block/*/stat."},
	{MetricNSWriteIOPS, "Namespace write IOPS", UnitIOPS, KindDistribution, HigherIsBetter, GroupSystem,
		"Writes completed per second on the NVMe namespaces."},
	{MetricNSReadBW, "Namespace read bandwidth", UnitBytesPerSec, KindDistribution, HigherIsBetter, GroupSystem,
		"Bytes read per second on the NVMe namespaces."},
	{MetricNSWriteBW, "Namespace write bandwidth", UnitBytesPerSec, KindDistribution, HigherIsBetter, GroupSystem,
		"Bytes written per second on the NVMe namespaces."},
	{MetricNSReadLatency, "Namespace read latency", UnitMicrosecond, KindDistribution, LowerIsBetter, GroupSystem,
		"Mean time per read completed in each second (read ticks / reads), over the NVMe namespaces."},
	{MetricNSWriteLatency, "Namespace write latency", UnitMicrosecond, KindDistribution, LowerIsBetter, GroupSystem,
		"Mean time per write completed in each second."},
	{MetricGPUPathBandwidth, "GPU data path bandwidth", UnitBytesPerSec, KindRate, HigherIsBetter, GroupIO,
		"Bytes per second moved from the storage under test towards accelerator memory by a gpu-path step (GPU-direct, or CPU-mediated: O_DIRECT read plus the staging copy)."},
	{MetricCPUSecondsPerGiB, "CPU seconds per GiB", UnitCPUSecPerGiB, KindRate, LowerIsBetter, GroupIO,
		"CPU time (user + system) the host spent per GiB a gpu-path step moved: what the CPU pays without GPU-direct."},
	{MetricDriveBytesWritten, "Drive data written", UnitBytes, KindRate, LowerIsBetter, GroupSystem,
		"Bytes each NVMe drive counted as written during the run: the rise of its smart-log data_units_written (units of 512,000 bytes) from before the run to after it."},
	{MetricDriveWritesPerDay, "Drive writes per day", UnitDWPD, KindRate, LowerIsBetter, GroupSystem,
		"The endurance the run consumed, as drive writes per day at the run's write rate: bytes written / the drive's capacity (its namespaces) / the run's duration × one day. Compare with the drive's rated DWPD."},
}

var catalogByID = func() map[string]Metric {
	m := make(map[string]Metric, len(catalog))
	for _, metric := range catalog {
		m[metric.ID] = metric
	}
	return m
}()

// LookupMetric returns the catalog entry for id.
func LookupMetric(id string) (Metric, bool) {
	m, ok := catalogByID[id]
	return m, ok
}

// Metrics returns the whole catalog in its display order.
func Metrics() []Metric {
	out := make([]Metric, len(catalog))
	copy(out, catalog)
	return out
}

// MetricIDs returns the catalog's ids, sorted.
func MetricIDs() []string {
	ids := make([]string, 0, len(catalog))
	for _, m := range catalog {
		ids = append(ids, m.ID)
	}
	sort.Strings(ids)
	return ids
}

// Statistic is what a gate criterion computes from a metric's samples.
type Statistic string

const (
	StatP50  Statistic = "p50"
	StatP90  Statistic = "p90"
	StatP95  Statistic = "p95"
	StatP99  Statistic = "p99"
	StatP999 Statistic = "p99.9"
	StatMean Statistic = "mean"
	StatMax  Statistic = "max"
	// StatRate is the value of a rate metric (one per repetition, averaged
	// over repetitions).
	StatRate Statistic = "rate"
)

// Statistics lists every statistic in display order.
var Statistics = []Statistic{StatP50, StatP90, StatP95, StatP99, StatP999, StatMean, StatMax, StatRate}

// Quantile returns the quantile of a percentile statistic (0.99 for p99),
// and false for mean, max and rate.
func (s Statistic) Quantile() (float64, bool) {
	switch s {
	case StatP50:
		return 0.50, true
	case StatP90:
		return 0.90, true
	case StatP95:
		return 0.95, true
	case StatP99:
		return 0.99, true
	case StatP999:
		return 0.999, true
	}
	return 0, false
}

// Percent is a percentile statistic as the tools write it (99.9 for
// p99.9), exactly; false for mean, max and rate.
func (s Statistic) Percent() (float64, bool) {
	switch s {
	case StatP50:
		return 50, true
	case StatP90:
		return 90, true
	case StatP95:
		return 95, true
	case StatP99:
		return 99, true
	case StatP999:
		return 99.9, true
	}
	return 0, false
}

// Valid reports whether s is a known statistic.
func (s Statistic) Valid() bool {
	for _, k := range Statistics {
		if s == k {
			return true
		}
	}
	return false
}

// AppliesTo reports whether the statistic can be computed for the metric:
// percentiles, mean and max need a distribution; rate needs a rate metric.
func (s Statistic) AppliesTo(m Metric) bool {
	if s == StatRate {
		return m.Kind == KindRate
	}
	return m.Kind == KindDistribution
}
