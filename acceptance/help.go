package acceptance

import (
	"regexp"
	"strings"
)

// Help texts for the forms (one sentence per field) and for the help page
// (statistics, verdicts, rollout states and decisions). Field paths are the
// paths of FieldError with list indexes written [*].

var indexRE = regexp.MustCompile(`\[[0-9]+\]`)

// HelpPattern turns a field path into its help pattern:
// "steps[2].fio.block_size" → "steps[*].fio.block_size".
func HelpPattern(path string) string { return indexRE.ReplaceAllString(path, "[*]") }

// FieldHelp returns the one-sentence help of the field at path, or "".
func FieldHelp(path string) string { return fieldHelp[HelpPattern(path)] }

// FieldChoices returns the allowed values of an enumerated field, for a
// select box, or nil when the field is free.
func FieldChoices(path string) []string {
	set, ok := fieldChoices[HelpPattern(path)]
	if !ok {
		return nil
	}
	return append([]string(nil), set...)
}

var fieldChoices = map[string][]string{
	"purpose":                               purposes,
	"storage.transport":                     transports,
	"steps[*].kind":                         stepKinds,
	"steps[*].fio.rw":                       rwPatterns,
	"steps[*].fio.ioengine":                 ioEngines,
	"steps[*].inference.api":                apis,
	"steps[*].inference.load.mode":          loadModes,
	"steps[*].inference.load.arrival":       arrivals,
	"steps[*].inference.prompt_tokens.dist": dists,
	"steps[*].inference.output_tokens.dist": dists,
	"steps[*].command.format":               commandFormats,
	"steps[*].fault.action":                 faultActions,
	"telemetry.exporters[*].kind":           exporterKinds,
	"correction":                            corrections,
	"criteria[*].statistic":                 statisticNames(),
	"criteria[*].mode":                      modes,
	"criteria[*].comparator":                comparators,
	"criteria[*].severity":                  severities,
	"criteria[*].metric":                    MetricIDs(),
}

func statisticNames() []string {
	out := make([]string, len(Statistics))
	for i, s := range Statistics {
		out[i] = string(s)
	}
	return out
}

var fieldHelp = func() map[string]string {
	m := map[string]string{
		// Both kinds of spec.
		"schema_version": "The spec format version; filled in by Accord, and an import from a newer Accord is refused rather than misread.",
		"name":           "A short name shown in lists, reports and the decision log.",
		"description":    "What this spec is for and why, in a few sentences; it is shown on the spec's page and in reports.",

		// Profiles.
		"purpose":              "What the profile measures; it chooses the page layout and the starter gate sets offered.",
		"storage":              "The storage under test; it labels results and decides which runs may be compared.",
		"storage.transport":    "The storage path: local NVMe, NVMe-oF over RDMA or TCP, or the emulator.",
		"storage.array_model":  "The array or drive model, as the vendor names it.",
		"storage.namespace":    "The NVMe namespace or volume under test, for the record.",
		"repetitions":          "How many times the steps are repeated; rate metrics get one value per repetition, so 3 or more give a confidence interval (default 3).",
		"warmup":               "Load at the start of every measuring step whose samples are discarded (fio's ramp_time; inference requests sent in it).",
		"run_timeout":          "Upper bound for the whole run on the host; empty means the steps' own limits plus a margin.",
		"steps":                "What the probe does, in order, in every repetition.",
		"steps[*]":             "One step of the profile.",
		"steps[*].name":        "A unique name for the step, used in results and gate criteria (letters, digits, - and _).",
		"steps[*].kind":        "What the step does: run fio, drive an inference server, run your own command, drop the page cache, pause, or inject a network fault.",
		"steps[*].timeout":     "The step is stopped and the run fails if it takes longer than this.",
		"steps[*].group":       "Steps next to each other with the same group name run at the same time (a parallel group, on one host or across roles: a noisy neighbour beside a measured victim); the next step starts when all of them have ended. Empty: the step runs on its own, in order.",
		"roles":                "Make the profile run across several lab hosts: each role names the steps its hosts run, and a run names the hosts of each role. Every host starts each phase (a step, or a parallel group) together, released at a barrier by the server; the results are kept per host and combined (throughputs summed, latency distributions merged from every host's samples). Empty: one host runs every step.",
		"roles[*]":             "One part of a multi-host run, played by one or more hosts.",
		"roles[*].name":        "The role's name, used in run requests and on the run page (letters, digits, - and _).",
		"roles[*].description": "What the hosts of this role stand for (the clients, the noisy neighbour), in a sentence.",
		"roles[*].steps":       "The names of the steps every host of this role runs; every step belongs to at least one role, and a step may belong to several. A host with nothing to do in a phase waits for the others.",
		"roles[*].min_hosts":   "The fewest hosts a run may give this role (default 1).",
		"roles[*].max_hosts":   "The most hosts a run may give this role (empty: up to 64, a run's limit).",

		"steps[*].fio":             "Parameters of the fio job, run with --output-format=json+.",
		"steps[*].fio.rw":          "The access pattern: sequential or random reads, writes, or a mix (fio's rw).",
		"steps[*].fio.block_size":  "Size of each I/O, a power of two from 512 B to 64 MiB (fio's bs), like 4KiB or 1MiB.",
		"steps[*].fio.iodepth":     "I/Os kept in flight per job (fio's iodepth); queue depth 32 is typical for NVMe random reads.",
		"steps[*].fio.numjobs":     "Parallel fio jobs, each with its own queue (fio's numjobs).",
		"steps[*].fio.size":        "How much of the target each job covers (fio's size); required for a file, the whole device when empty.",
		"steps[*].fio.runtime":     "How long each repetition measures, after the warmup (fio's runtime, time based).",
		"steps[*].fio.ioengine":    "How fio submits I/O: io_uring or libaio for asynchronous queues, psync or sync for one at a time.",
		"steps[*].fio.direct":      "Bypass the page cache (O_DIRECT), so the storage and not memory is measured.",
		"steps[*].fio.rwmixread":   "For rw and randrw: the share of reads in percent (default 50).",
		"steps[*].fio.target":      "The file or block device on the lab host, as an absolute path.",
		"steps[*].fio.destructive": "Must be set to write to a block device: its data is destroyed; the host must allow it too.",

		"steps[*].inference":                      "Streaming requests to an OpenAI-compatible server, timed chunk by chunk.",
		"steps[*].inference.endpoint":             "The server's base URL as the lab host reaches it, like http://10.0.0.5:8000/v1.",
		"steps[*].inference.model":                "The model name the server serves, as sent in each request.",
		"steps[*].inference.api":                  "chat sends /chat/completions requests, completions sends /completions requests.",
		"steps[*].inference.prefix":               "Make prompts share prefixes, to set how much of each prompt the server's prefix/KV cache can serve: a prefix of tokens before each prompt, a share of each prompt, or a sweep of shares.",
		"steps[*].inference.prefix.tokens":        "Length of each shared prefix in tokens, put before the prompt's own prompt_tokens (leave 0 with share or sweep).",
		"steps[*].inference.prefix.distinct":      "How many different prefixes are used; fewer means more cache hits.",
		"steps[*].inference.prefix.share":         "Share of each prompt (0 to 1) that is a shared prefix, the rest the request's own: prompts keep their length whatever the share.",
		"steps[*].inference.prefix.sweep":         "Shares to run in turn, one level each (reuse=0.5), at the load's single level: the server's cache hit ratio goes through as many levels, and the run page charts TTFT against the hit ratio measured from the server's counters (set metrics_url).",
		"steps[*].inference.dataset":              "A JSON-lines file on the lab host with a prompt and output_tokens per line, used instead of synthetic prompts.",
		"steps[*].inference.load":                 "The offered load: concurrent streams (closed loop) or a request rate (open loop), optionally swept.",
		"steps[*].inference.load.mode":            "concurrency keeps a fixed number of requests in flight; rate sends requests on a schedule whatever the server does.",
		"steps[*].inference.load.concurrency":     "Requests kept in flight at once (concurrency mode).",
		"steps[*].inference.load.rate":            "Requests sent per second (rate mode); latencies are also measured from the intended send time.",
		"steps[*].inference.load.arrival":         "constant spaces requests evenly; poisson spaces them randomly, like independent users.",
		"steps[*].inference.load.max_concurrency": "In rate mode, a cap on requests in flight (empty: no cap).",
		"steps[*].inference.load.sweep":           "Levels run in turn (concurrencies or rates), one measurement per level; empty means the single level above.",
		"steps[*].inference.duration":             "How long each load level runs; with requests set too, whichever comes first ends it.",
		"steps[*].inference.requests":             "How many requests each load level sends; with a duration set too, whichever comes first ends it.",
		"steps[*].inference.request_timeout":      "A request taking longer than this counts as failed (default 10m).",
		"steps[*].inference.slo":                  "Per-request limits in milliseconds that define goodput; empty limits do not count.",
		"steps[*].inference.slo.ttft_ms":          "A request meets the SLO only if its time to first token is at most this many milliseconds.",
		"steps[*].inference.slo.tpot_ms":          "A request meets the SLO only if its time per output token is at most this many milliseconds.",
		"steps[*].inference.slo.e2el_ms":          "A request meets the SLO only if it completes within this many milliseconds.",
		"steps[*].inference.metrics_url":          "The server's Prometheus endpoint, scraped before and after the step for cache hit counters.",
		"steps[*].inference.seed":                 "Seed of the prompt and arrival generators, so a run can be repeated exactly.",

		"steps[*].command":             "Run your own benchmark tool as a program with arguments (never through a shell) and import its output.",
		"steps[*].command.program":     "An absolute path or a program name found on the host's PATH.",
		"steps[*].command.args":        "Arguments passed as they are, one per item; nothing is expanded by a shell.",
		"steps[*].command.format":      "How the output is read: fio JSON, vLLM benchmark JSON, GenAI-Perf JSON, gdsio's text (each read transfer's bandwidth as gpu_path_bandwidth; with one transfer per step, the command's CPU time per GiB as cpu_seconds_per_gib, since gdsio does not report it), the gpu-path result JSON (what a wrapper around a vendor's own transfer tool prints: modes with bandwidth_bps and cpu_seconds_per_gib), or kept as text only.",
		"steps[*].command.output_file": "Where the tool writes its result, relative to the step's folder; empty means standard output.",

		"steps[*].gpu_path":            "Measure how data gets from the storage under test into accelerator memory: GPU-direct with gdsio where GDS is installed, and always the CPU-mediated path (O_DIRECT reads into host memory plus the staging copy), with the CPU time it costs.",
		"steps[*].gpu_path.target":     "The file or block device to read, like /mnt/nvme/accord.dat or /dev/nvme1n1; it is only read.",
		"steps[*].gpu_path.block_size": "The size of each read, a power of two from 4KiB to 64MiB, like 1MiB.",
		"steps[*].gpu_path.size":       "How much each path reads, like 4GiB. The CPU-mediated path reads a smaller file again from its start (later passes may come from the page cache); gdsio reads this much of the file and says how much it moved.",
		"steps[*].gpu_path.gpu":        "The accelerator gdsio reads into (its index, 0 by default).",

		"telemetry":                                   "Further sources of the per-second telemetry every measuring step takes.",
		"telemetry.exporters":                         "Prometheus exporters the lab host reaches, scraped every second for accelerator utilisation, memory, memory bandwidth and power: the path for any accelerator, known to Accord or not.",
		"telemetry.exporters[*]":                      "One exporter.",
		"telemetry.exporters[*].url":                  "The exporter's metrics endpoint as the lab host reaches it, like http://127.0.0.1:9400/metrics.",
		"telemetry.exporters[*].kind":                 "dcgm (NVIDIA's DCGM exporter), ascend-npu (Huawei's NPU exporter) and amd-device-metrics (AMD's device metrics exporter) are read with built-in mappings; custom reads the mapping below.",
		"telemetry.exporters[*].name":                 "A name for this exporter's readings (default: its kind).",
		"telemetry.exporters[*].mapping":              "For kind custom: which series give each device's readings.",
		"telemetry.exporters[*].mapping.device_label": "The label that tells devices apart, like gpu or id; empty when the exporter reports one device.",
		"telemetry.exporters[*].mapping.util":         "Series of the busy share in percent; the first the exporter has is read.",
		"telemetry.exporters[*].mapping.mem_used":     "Series of the memory in use, in bytes after scaling (scale 1048576 for a MiB gauge).",
		"telemetry.exporters[*].mapping.mem_bw":       "Series of the memory's busy share in percent (scale 100 for a 0 to 1 ratio).",
		"telemetry.exporters[*].mapping.power":        "Series of the power draw in watts.",

		"steps[*].pause":          "Wait, to let caches, queues and temperatures settle.",
		"steps[*].pause.duration": "How long to wait.",

		"steps[*].fault":              "Inject a network or path fault for a while, then always remove it.",
		"steps[*].fault.action":       "netem adds delay or loss, rate-limit caps bandwidth, path-down disconnects one NVMe-oF controller of a multipath subsystem.",
		"steps[*].fault.interface":    "The network interface the fault is applied to, like eth0.",
		"steps[*].fault.delay":        "Extra delay added to every packet (netem).",
		"steps[*].fault.loss_percent": "Share of packets dropped, in percent (netem).",
		"steps[*].fault.rate_mbit":    "Bandwidth cap in megabits per second (rate-limit).",
		"steps[*].fault.controller":   "The NVMe controller to disconnect, like nvme1 (path-down).",
		"steps[*].fault.duration":     "How long the fault lasts before it is removed.",
		"steps[*].fault.during":       "A later load step the fault overlaps; empty runs the fault on its own, in sequence.",
		"steps[*].fault.after":        "With during: how long after that step starts the fault is applied.",

		// Gate sets.
		"correction":                 "How the confidence of many criteria is kept together: holm adjusts for testing several at once, none judges each alone.",
		"stop_loss_consecutive":      "How many interim checks in a row must cross a stop-loss line before the run is stopped (default 3).",
		"accept_client_limited":      "Judge criteria on load levels where the probe's load generator was late or starved (its self-check flags them). Off by default: such a level's criteria are INCONCLUSIVE, since the client rather than the server may have set the tail. Every verdict and report shows the flag either way.",
		"criteria":                   "The gates a run must pass.",
		"criteria[*]":                "One gate: a statistic of a metric compared with a threshold.",
		"criteria[*].name":           "A unique name for the criterion, shown in verdicts (letters, digits, - and _).",
		"criteria[*].metric":         "The canonical metric judged, as both sides measure it.",
		"criteria[*].statistic":      "What is computed from the samples: a percentile, the mean or max of a distribution, or the value of a rate metric.",
		"criteria[*].mode":           "absolute compares with a limit; relative compares the change against a baseline run, in percent; isolation compares the victim beside an aggressor with the victim alone in the same run; drift compares a step's last window with its first.",
		"criteria[*].reference":      "isolation only: the victim step measured alone (a step on its own, of the same kind and load as step); step is then the victim in the parallel group beside the aggressor.",
		"criteria[*].window":         "drift only: how long the first and the last window are (like 1h); requests are placed in them by the time they were sent, and each repetition must last at least two windows.",
		"criteria[*].step":           "Judge only this step of the profile; empty means every step and sweep level that produces the metric.",
		"criteria[*].comparator":     "<= for limits the statistic must stay under, >= for ones it must reach.",
		"criteria[*].threshold":      "The limit, in the unit below; for relative criteria the change in percent (+25 means 25 % more than the baseline).",
		"criteria[*].unit":           "The unit of the threshold, converted to the metric's canonical unit; % for relative criteria.",
		"criteria[*].confidence":     "Confidence level of the interval the verdict rests on (default 0.95).",
		"criteria[*].min_samples":    "Below this many samples the verdict is INCONCLUSIVE rather than a guess.",
		"criteria[*].point_estimate": "Judge this percentile or mean criterion on a tool's own summary figure where a side has no per-request samples or histogram: a point estimate, without any interval. Off by default: such a criterion is then INCONCLUSIVE, saying what data would decide it. Every verdict and report shows when it is on.",
		"criteria[*].severity":       "blocking criteria decide the overall verdict; advisory ones are reported only.",
		"criteria[*].stop_loss":      "A hard line beyond the threshold, in the same unit: crossing it stops the run and halts the rollout stage.",
		"criteria[*].help":           "Why this gate matters, shown beside its verdict.",
	}
	// The two token distributions share their help.
	for _, which := range []string{"prompt_tokens", "output_tokens"} {
		p := "steps[*].inference." + which
		what := map[string]string{"prompt_tokens": "prompt", "output_tokens": "output"}[which]
		m[p] = "The " + what + " length in tokens: fixed, uniform between min and max, or normal around mean."
		m[p+".dist"] = "fixed uses mean for every request; uniform draws between min and max; normal draws around mean with stddev."
		m[p+".mean"] = "The " + what + " length in tokens (the centre of the distribution)."
		m[p+".min"] = "The shortest " + what + " length drawn (uniform), or a lower clip (normal)."
		m[p+".max"] = "The longest " + what + " length drawn (uniform), or an upper clip (normal)."
		m[p+".stddev"] = "Standard deviation in tokens (normal)."
	}
	// The readings of an exporter mapping share the help of their series.
	for _, reading := range []string{"util", "mem_used", "mem_bw", "power"} {
		p := "telemetry.exporters[*].mapping." + reading + "[*]"
		m[p] = "One candidate series of this reading."
		m[p+".metric"] = "The metric name, as the exporter prints it."
		m[p+".scale"] = "The factor to Accord's unit (1 when empty)."
	}
	return m
}()

// ModeHelp describes a criterion mode for the help page.
func ModeHelp(m CriterionMode) string { return modeHelp[m] }

var modeHelp = map[CriterionMode]string{
	Absolute:  "The statistic against a limit in the metric's unit (p99 TTFT ≤ 2000 ms): it passes when the whole confidence interval is on the passing side.",
	Relative:  "The change against a baseline run, in percent ((candidate − baseline) / baseline): a seeded bootstrap interval, and Student's t on each repetition's own value where both runs have two or more. Needs a comparable baseline.",
	Isolation: "The noisy-neighbour test, within one run: the victim step measured beside an aggressor (step, in a parallel group) against the same victim measured alone (reference, a step on its own, same kind and load), in percent — \"p99 TTFT rises by at most 10 % under the noisy neighbour\". Judged as a relative criterion is, with the quiet phase as the baseline; no baseline run is needed.",
	Drift:     "The soak test, within one run: a step's requests sent in the last window (window, like 1h) against those sent in its first, in percent — \"p99 TTFT in the last hour within 5 % of the first hour\". Judged as a relative criterion is, by a bootstrap of the two windows' samples; INCONCLUSIVE when a window has too few requests for the percentile or the run is shorter than two windows.",
}

// StatisticHelp describes a statistic for the help page.
func StatisticHelp(s Statistic) string { return statisticHelp[s] }

var statisticHelp = map[Statistic]string{
	StatP50:  "The median: half of the samples are at or below it.",
	StatP90:  "90 % of the samples are at or below it.",
	StatP95:  "95 % of the samples are at or below it.",
	StatP99:  "99 % of the samples are at or below it: the tail that users of a busy service feel; needs a few hundred samples to mean much.",
	StatP999: "99.9 % of the samples are at or below it: the far tail; needs thousands of samples.",
	StatMean: "The arithmetic mean of the samples; hides the tail, so pair it with a percentile.",
	StatMax:  "The largest sample: one outlier decides it, so it is reported without a confidence interval.",
	StatRate: "The value of a throughput or ratio metric, one per repetition, averaged over repetitions.",
}

// VerdictHelp describes a verdict (PASS, FAIL, INCONCLUSIVE, INCOMPARABLE)
// for the help page.
func VerdictHelp(verdict string) string { return verdictHelp[strings.ToUpper(verdict)] }

var verdictHelp = map[string]string{
	"PASS":         "The whole confidence interval of the statistic is on the passing side of the threshold.",
	"FAIL":         "The whole confidence interval of the statistic is on the failing side of the threshold.",
	"INCONCLUSIVE": "The interval straddles the threshold, or there are too few samples: the data cannot tell yet; run more repetitions. A run that another run measured beside on its host (contaminated) is INCONCLUSIVE too, whatever its criteria say: run it again on a quiet host.",
	"INCOMPARABLE": "The candidate and the baseline ran on hosts whose facts differ where it matters, so a relative verdict would mislead; the differences are shown.",
}
