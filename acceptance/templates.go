package acceptance

import "time"

// Starter templates: profiles and gate sets drawn from how NVMe-oF storage is
// qualified for inference serving. A user picks one, edits it, and saves it
// as the first version of their own spec. Inference templates point at the
// demo emulator (`accord emulate`, http://127.0.0.1:8000/v1, model
// "emulated") so that they run out of the box.

// ProfileTemplate is a starter profile.
type ProfileTemplate struct {
	ID          string
	Title       string
	Description string // one line
	Spec        ProfileSpec
}

// GateSetTemplate is a starter gate set.
type GateSetTemplate struct {
	ID          string
	Title       string
	Description string // one line
	// Profiles lists the profile templates the gate set fits.
	Profiles []string
	Spec     GateSetSpec
}

// EmulatorEndpoint and EmulatorModel are what `accord emulate` serves by default.
const (
	EmulatorEndpoint = "http://127.0.0.1:8000/v1"
	EmulatorModel    = "emulated"
	// EmulatorMetricsURL is its Prometheus endpoint, with vLLM's names.
	EmulatorMetricsURL = "http://127.0.0.1:8000/metrics"
)

func tmplDur(d time.Duration) Duration { return Duration(d) }
func tmplPtr[T any](v T) *T            { return &v }

// ProfileTemplates returns fresh, normalized copies of the starter profiles.
func ProfileTemplates() []ProfileTemplate {
	ts := []ProfileTemplate{
		{
			ID:          "kv-cache-lookup",
			Title:       "KV-cache lookup (4 KiB random read, QD 32)",
			Description: "Small random reads at queue depth 32: how an offloaded KV cache is looked up.",
			Spec: ProfileSpec{
				Purpose:     PurposeStorageMicrobench,
				Storage:     Storage{Transport: TransportNVMeoFTCP},
				Repetitions: 3,
				Warmup:      tmplDur(10 * time.Second),
				Steps: []StepSpec{{
					Name: "randread-4k-qd32",
					Kind: StepFio,
					Fio: &FioStep{
						RW: RWRandRead, BlockSize: 4 << 10, IODepth: 32, NumJobs: 4,
						Size: 16 << 30, Runtime: tmplDur(60 * time.Second), IOEngine: IOEngineIOURing, Direct: true,
						Target: "/mnt/accord/kvcache.dat",
					},
				}},
			},
		},
		{
			ID:          "checkpoint-restore",
			Title:       "Checkpoint restore (1 MiB sequential read)",
			Description: "Large sequential reads from a cold page cache, as when model weights or a checkpoint are loaded.",
			Spec: ProfileSpec{
				Purpose:     PurposeCheckpointRestore,
				Storage:     Storage{Transport: TransportNVMeoFTCP},
				Repetitions: 3,
				Warmup:      tmplDur(5 * time.Second),
				Steps: []StepSpec{
					{Name: "drop-caches", Kind: StepDropCaches},
					{
						Name: "seqread-1m",
						Kind: StepFio,
						Fio: &FioStep{
							RW: RWRead, BlockSize: 1 << 20, IODepth: 16, NumJobs: 8,
							Size: 32 << 30, Runtime: tmplDur(120 * time.Second), IOEngine: IOEngineLibaio, Direct: true,
							Target: "/mnt/accord/checkpoint.dat",
						},
					},
				},
			},
		},
		{
			ID:          "inference-ttft-sweep",
			Title:       "Online inference TTFT, concurrency sweep 1..64",
			Description: "Streaming chat requests at 1, 2, 4 … 64 concurrent streams, one minute per level, to find where TTFT bends.",
			Spec: ProfileSpec{
				Purpose:     PurposeInferenceServing,
				Storage:     Storage{Transport: TransportEmulated},
				Repetitions: 3,
				Warmup:      tmplDur(10 * time.Second),
				Steps: []StepSpec{{
					Name: "ttft-sweep",
					Kind: StepInference,
					Inference: &InferenceStep{
						Endpoint: EmulatorEndpoint, Model: EmulatorModel, API: APIChat,
						PromptTokens:   TokenDist{Dist: DistNormal, Mean: 1024, StdDev: 256, Min: 256, Max: 2048},
						OutputTokens:   TokenDist{Dist: DistFixed, Mean: 256},
						Load:           Load{Mode: LoadConcurrency, Sweep: []float64{1, 2, 4, 8, 16, 32, 64}},
						Duration:       tmplDur(60 * time.Second),
						RequestTimeout: tmplDur(5 * time.Minute),
						SLO:            SLO{TTFTMs: 2000, TPOTMs: 200},
						Seed:           42,
					},
				}},
			},
		},
		{
			ID:          "cold-warm-ttft",
			Title:       "Cold versus warm cache TTFT",
			Description: "Drop the page cache, measure TTFT cold, pause, then measure the same shared-prefix prompts warm.",
			Spec: ProfileSpec{
				Purpose: PurposeInferenceServing,
				Storage: Storage{Transport: TransportEmulated},
				// One repetition and no warmup: the first requests after
				// dropping the caches are the measurement.
				Repetitions: 1,
				Steps: []StepSpec{
					{Name: "drop-caches", Kind: StepDropCaches},
					{Name: "cold", Kind: StepInference, Inference: coldWarmStep()},
					{Name: "settle", Kind: StepPause, Pause: &PauseStep{Duration: tmplDur(10 * time.Second)}},
					{Name: "warm", Kind: StepInference, Inference: coldWarmStep()},
				},
			},
		},
		{
			ID:          "soak-2h",
			Title:       "Two-hour soak",
			Description: "Inference at a fixed 16 concurrent streams for two hours, to catch slow drift, leaks and tail spikes.",
			Spec: ProfileSpec{
				Purpose:     PurposeInferenceServing,
				Storage:     Storage{Transport: TransportEmulated},
				Repetitions: 1,
				Warmup:      tmplDur(time.Minute),
				RunTimeout:  tmplDur(2*time.Hour + 30*time.Minute),
				Steps: []StepSpec{{
					Name:    "soak",
					Kind:    StepInference,
					Timeout: tmplDur(2*time.Hour + 15*time.Minute),
					Inference: &InferenceStep{
						Endpoint: EmulatorEndpoint, Model: EmulatorModel, API: APIChat,
						PromptTokens:   TokenDist{Dist: DistNormal, Mean: 1024, StdDev: 256, Min: 256, Max: 2048},
						OutputTokens:   TokenDist{Dist: DistNormal, Mean: 256, StdDev: 64, Min: 32, Max: 512},
						Load:           Load{Mode: LoadConcurrency, Concurrency: 16},
						Duration:       tmplDur(2 * time.Hour),
						RequestTimeout: tmplDur(5 * time.Minute),
						SLO:            SLO{TTFTMs: 2000, TPOTMs: 200},
						Seed:           7,
					},
				}},
			},
		},
		{
			ID:          "noisy-neighbour",
			Title:       "Noisy neighbour isolation",
			Description: "The same inference victim measured alone, then beside an aggressor reading the shared storage hard, to see how much the neighbour costs it.",
			Spec: ProfileSpec{
				Purpose:     PurposeInferenceServing,
				Storage:     Storage{Transport: TransportNVMeoFTCP},
				Repetitions: 3,
				Warmup:      tmplDur(10 * time.Second),
				Steps: []StepSpec{
					{Name: "victim-alone", Kind: StepInference, Inference: noisyVictimStep()},
					{Name: "settle", Kind: StepPause, Pause: &PauseStep{Duration: tmplDur(10 * time.Second)}},
					{Name: "victim-noisy", Kind: StepInference, Group: "noisy-neighbour", Inference: noisyVictimStep()},
					{
						// Outlasts the victim (warm-up included), so that every
						// measured request meets it.
						Name: "aggressor", Kind: StepFio, Group: "noisy-neighbour",
						Fio: &FioStep{
							RW: RWRandRead, BlockSize: 1 << 20, IODepth: 32, NumJobs: 4,
							Size: 16 << 30, Runtime: tmplDur(2*time.Minute + 30*time.Second), IOEngine: IOEngineLibaio, Direct: true,
							Target: "/mnt/accord/kvcache.dat",
						},
					},
				},
			},
		},
		{
			ID:          "soak-8h",
			Title:       "Eight-hour soak",
			Description: "Inference at a steady 4 requests a second for eight hours, to catch drift between the first and the last hour, leaks and tail spikes.",
			Spec: ProfileSpec{
				Purpose:     PurposeInferenceServing,
				Storage:     Storage{Transport: TransportEmulated},
				Repetitions: 1,
				Warmup:      tmplDur(time.Minute),
				RunTimeout:  tmplDur(8*time.Hour + 30*time.Minute),
				Steps: []StepSpec{{
					Name:    "soak",
					Kind:    StepInference,
					Timeout: tmplDur(8*time.Hour + 15*time.Minute),
					Inference: &InferenceStep{
						Endpoint: EmulatorEndpoint, Model: EmulatorModel, API: APIChat,
						PromptTokens:   TokenDist{Dist: DistNormal, Mean: 1024, StdDev: 256, Min: 256, Max: 2048},
						OutputTokens:   TokenDist{Dist: DistNormal, Mean: 256, StdDev: 64, Min: 32, Max: 512},
						Load:           Load{Mode: LoadRate, Rate: 4, Arrival: ArrivalPoisson, MaxConcurrency: 256},
						Duration:       tmplDur(8 * time.Hour),
						RequestTimeout: tmplDur(5 * time.Minute),
						SLO:            SLO{TTFTMs: 2000, TPOTMs: 200},
						Seed:           8,
					},
				}},
			},
		},
		{
			ID:          "hit-ratio-sensitivity",
			Title:       "Prefix cache hit-ratio sensitivity",
			Description: "The same chat load with 0 to 90 % of each prompt a shared prefix, so that the server's prefix cache hit ratio goes through five levels: TTFT against the hit ratio the server measured shows how sharply a small drop hurts.",
			Spec: ProfileSpec{
				Purpose:     PurposeInferenceServing,
				Storage:     Storage{Transport: TransportEmulated},
				Repetitions: 3,
				// The warm-up fills the prefix cache with the level's prefixes.
				Warmup: tmplDur(15 * time.Second),
				Steps: []StepSpec{{
					Name: "reuse-sweep",
					Kind: StepInference,
					Inference: &InferenceStep{
						Endpoint: EmulatorEndpoint, Model: EmulatorModel, API: APIChat,
						PromptTokens: TokenDist{Dist: DistFixed, Mean: 2048},
						OutputTokens: TokenDist{Dist: DistFixed, Mean: 128},
						// A few long shared prefixes (system prompts, documents
						// in a RAG corpus) that the cache can keep.
						Prefix:         &PrefixReuse{Distinct: 8, Sweep: []float64{0, 0.25, 0.5, 0.75, 0.9}},
						Load:           Load{Mode: LoadRate, Rate: 4, Arrival: ArrivalPoisson, MaxConcurrency: 64},
						Duration:       tmplDur(90 * time.Second),
						RequestTimeout: tmplDur(5 * time.Minute),
						SLO:            SLO{TTFTMs: 2000, TPOTMs: 200},
						MetricsURL:     EmulatorMetricsURL,
						Seed:           23,
					},
				}},
			},
		},
		{
			ID:          "four-host-ramp",
			Title:       "Four-host concurrency ramp",
			Description: "Four client hosts load the same storage-backed inference path at once, each stepping from 1 to 16 streams together: where the shared storage bends under many hosts, judged on every host's requests combined.",
			Spec: ProfileSpec{
				Purpose:     PurposeInferenceServing,
				Storage:     Storage{Transport: TransportNVMeoFTCP},
				Repetitions: 3,
				Warmup:      tmplDur(10 * time.Second),
				Steps: []StepSpec{{
					Name: "ramp",
					Kind: StepInference,
					Inference: &InferenceStep{
						Endpoint: EmulatorEndpoint, Model: EmulatorModel, API: APIChat,
						PromptTokens: TokenDist{Dist: DistNormal, Mean: 1024, StdDev: 256, Min: 256, Max: 2048},
						OutputTokens: TokenDist{Dist: DistFixed, Mean: 128},
						// Every host's streams at each level: 4 to 64 in all.
						Load: Load{Mode: LoadConcurrency, Sweep: []float64{1, 2, 4, 8, 16}},
						// 250 requests a host and level, or two minutes.
						Requests:       250,
						Duration:       tmplDur(2 * time.Minute),
						RequestTimeout: tmplDur(5 * time.Minute),
						SLO:            SLO{TTFTMs: 2000, TPOTMs: 200},
						Seed:           29,
					},
				}},
				// The step runs alone in its phase: every level starts on the
				// four hosts together, released at a barrier.
				Roles: []RoleSpec{{Name: "clients", Description: "Client hosts sending the same load to the shared inference path.",
					Steps: []string{"ramp"}, MinHosts: 4, MaxHosts: 4}},
			},
		},
	}
	for i := range ts {
		ts[i].Spec.Name = ts[i].Title
		ts[i].Spec.Description = ts[i].Description
		ts[i].Spec.Normalize()
	}
	return ts
}

// noisyVictimStep is the noisy-neighbour profile's victim, alone and
// beside the aggressor alike: 2 minutes at 8 requests a second, 960
// requests a repetition, enough for a bound on p99 in each.
func noisyVictimStep() *InferenceStep {
	return &InferenceStep{
		Endpoint: EmulatorEndpoint, Model: EmulatorModel, API: APIChat,
		PromptTokens:   TokenDist{Dist: DistFixed, Mean: 1024},
		OutputTokens:   TokenDist{Dist: DistFixed, Mean: 64},
		Load:           Load{Mode: LoadRate, Rate: 8, Arrival: ArrivalPoisson, MaxConcurrency: 64},
		Duration:       tmplDur(2 * time.Minute),
		RequestTimeout: tmplDur(2 * time.Minute),
		Seed:           19,
	}
}

func coldWarmStep() *InferenceStep {
	return &InferenceStep{
		Endpoint: EmulatorEndpoint, Model: EmulatorModel, API: APIChat,
		PromptTokens: TokenDist{Dist: DistFixed, Mean: 2048},
		OutputTokens: TokenDist{Dist: DistFixed, Mean: 64},
		// Long shared prefixes, one per request of a pass: the cold pass
		// fills the prefix cache, the warm pass (same seed, same prompts)
		// can hit it.
		Prefix:         &PrefixReuse{Tokens: 1536, Distinct: 64},
		Load:           Load{Mode: LoadConcurrency, Concurrency: 1},
		Requests:       64,
		RequestTimeout: tmplDur(5 * time.Minute),
		Seed:           11,
	}
}

// Help texts of template criteria say why a criterion is there, never its
// numbers: the rule (Criterion.Rule) says those, so a threshold changed in
// the form leaves no stale figure behind.

// GateSetTemplates returns fresh, normalized copies of the starter gate sets.
func GateSetTemplates() []GateSetTemplate {
	// The MLPerf limits need at least 100 requests per level; the cold and
	// warm passes have 64 each, so they fit only the relative gate set.
	latency := []string{"inference-ttft-sweep", "soak-2h"}
	inference := []string{"inference-ttft-sweep", "cold-warm-ttft", "soak-2h"}
	ts := []GateSetTemplate{
		{
			ID:          "mlperf-llama2-70b-server",
			Title:       "MLPerf Inference Llama-2-70B server latency",
			Description: "The latency limits of MLPerf Inference's Llama-2-70B server scenario, on p99 TTFT and p99 TPOT, with few failed requests.",
			Profiles:    latency,
			Spec: GateSetSpec{
				Criteria: []Criterion{
					{
						Name: "ttft-p99", Metric: MetricTTFT, Statistic: StatP99, Mode: Absolute,
						Comparator: LessOrEqual, Threshold: 2000, Unit: "ms", MinSamples: 100, Severity: Blocking,
						StopLoss: tmplPtr(4000.0),
						Help:     "MLPerf's server-scenario limit on the time to the first token, judged on the 99th percentile; crossing the stop-loss line stops the run.",
					},
					{
						Name: "tpot-p99", Metric: MetricTPOT, Statistic: StatP99, Mode: Absolute,
						Comparator: LessOrEqual, Threshold: 200, Unit: "ms", MinSamples: 100, Severity: Blocking,
						StopLoss: tmplPtr(400.0),
						Help:     "MLPerf's server-scenario limit on the time per output token, judged on the 99th percentile.",
					},
					{
						Name: "error-rate", Metric: MetricErrorRate, Statistic: StatRate, Mode: Absolute,
						Comparator: LessOrEqual, Threshold: 1, Unit: "%", Severity: Blocking,
						StopLoss: tmplPtr(5.0),
						Help:     "Latency limits mean little if requests fail.",
					},
				},
			},
		},
		{
			ID:          "nvmeof-uplift",
			Title:       "NVMe-oF uplift over local NVMe",
			Description: "The candidate on NVMe-oF must beat the local-NVMe baseline in output tokens per second and in p99 TTFT, by the margins its criteria set.",
			Profiles:    inference,
			Spec: GateSetSpec{
				Criteria: []Criterion{
					{
						Name: "throughput-uplift", Metric: MetricOutputTokenThroughput, Statistic: StatRate, Mode: Relative,
						Comparator: GreaterOrEqual, Threshold: 25, Unit: "%", Severity: Blocking,
						StopLoss: tmplPtr(-10.0),
						Help:     "Superiority: the lower confidence bound of the throughput change must clear the threshold; a drop past the stop-loss line stops the run.",
					},
					{
						Name: "ttft-p99-reduction", Metric: MetricTTFT, Statistic: StatP99, Mode: Relative,
						Comparator: LessOrEqual, Threshold: -20, Unit: "%", MinSamples: 100, Severity: Blocking,
						StopLoss: tmplPtr(25.0),
						Help:     "A reduction: the upper confidence bound of the p99 TTFT change must stay below the threshold.",
					},
				},
			},
		},
		{
			ID:          "kv-cache-io",
			Title:       "KV-cache lookup I/O",
			Description: "4 KiB random reads: a limit on the p99 completion latency, and IOPS no worse than the baseline by more than a margin.",
			Profiles:    []string{"kv-cache-lookup"},
			Spec: GateSetSpec{
				Criteria: []Criterion{
					{
						Name: "read-clat-p99", Metric: MetricReadCLat, Statistic: StatP99, Mode: Absolute,
						Comparator: LessOrEqual, Threshold: 500, Unit: "µs", MinSamples: 1000, Severity: Blocking,
						StopLoss: tmplPtr(2000.0),
						Help:     "A KV-cache lookup that waits on storage stalls token generation.",
					},
					{
						Name: "read-clat-p999", Metric: MetricReadCLat, Statistic: StatP999, Mode: Absolute,
						Comparator: LessOrEqual, Threshold: 2, Unit: "ms", MinSamples: 10000, Severity: Advisory,
						Help: "The far tail, reported but not blocking.",
					},
					{
						Name: "read-iops-noninferior", Metric: MetricReadIOPS, Statistic: StatRate, Mode: Relative,
						Comparator: GreaterOrEqual, Threshold: -5, Unit: "%", Severity: Blocking,
						StopLoss: tmplPtr(-25.0),
						Help:     "Non-inferiority: the lower confidence bound of the IOPS change must stay above the threshold.",
					},
				},
			},
		},
		{
			ID:          "noisy-neighbour-isolation",
			Title:       "Noisy neighbour isolation",
			Description: "The victim's TTFT and TPOT beside the aggressor may rise only a little over the same victim alone in the same run.",
			Profiles:    []string{"noisy-neighbour"},
			Spec: GateSetSpec{
				Criteria: []Criterion{
					{
						Name: "ttft-p99-isolation", Metric: MetricTTFT, Statistic: StatP99, Mode: Isolation,
						Step: "victim-noisy", Reference: "victim-alone",
						Comparator: LessOrEqual, Threshold: 10, Unit: "%", Severity: Blocking,
						Help: "The array's QoS should keep one tenant's reads from stretching another's time to the first token: judged on the tail, where a neighbour shows first.",
					},
					{
						Name: "tpot-p99-isolation", Metric: MetricTPOT, Statistic: StatP99, Mode: Isolation,
						Step: "victim-noisy", Reference: "victim-alone",
						Comparator: LessOrEqual, Threshold: 10, Unit: "%", Severity: Advisory,
						Help: "Decoding reads little from storage; a rise here points at the host (CPU, network) rather than the array.",
					},
					{
						Name: "victim-errors", Metric: MetricErrorRate, Statistic: StatRate, Mode: Absolute, Step: "victim-noisy",
						Comparator: LessOrEqual, Threshold: 1, Unit: "%", Severity: Blocking,
						Help: "Isolation means little if the victim's requests fail beside the neighbour.",
					},
				},
			},
		},
		{
			ID:          "soak-drift",
			Title:       "Soak without drift",
			Description: "p99 TTFT and TPOT in the last hour of a soak within a few percent of its first hour, and few failed requests.",
			Profiles:    []string{"soak-8h"},
			Spec: GateSetSpec{
				Criteria: []Criterion{
					{
						Name: "ttft-p99-drift", Metric: MetricTTFT, Statistic: StatP99, Mode: Drift, Window: tmplDur(time.Hour),
						Comparator: LessOrEqual, Threshold: 5, Unit: "%", Severity: Blocking,
						Help: "A cache that fills, a log that grows or a leak shows as a tail that creeps up over the hours.",
					},
					{
						Name: "tpot-p99-drift", Metric: MetricTPOT, Statistic: StatP99, Mode: Drift, Window: tmplDur(time.Hour),
						Comparator: LessOrEqual, Threshold: 5, Unit: "%", Severity: Blocking,
						Help: "Decoding speed should hold over the whole soak.",
					},
					{
						Name: "error-rate", Metric: MetricErrorRate, Statistic: StatRate, Mode: Absolute,
						Comparator: LessOrEqual, Threshold: 1, Unit: "%", Severity: Blocking,
						Help: "A soak that drops requests does not pass, however steady the rest.",
					},
				},
			},
		},
		{
			ID:          "hit-ratio-sensitivity",
			Title:       "TTFT at every hit ratio",
			Description: "p99 TTFT and TPOT within the serving limits at every prefix-reuse level, down to the lowest hit ratio, and few failed requests.",
			Profiles:    []string{"hit-ratio-sensitivity"},
			Spec: GateSetSpec{
				Criteria: []Criterion{
					{
						Name: "ttft-p99", Metric: MetricTTFT, Statistic: StatP99, Mode: Absolute,
						Comparator: LessOrEqual, Threshold: 2000, Unit: "ms", MinSamples: 100, Severity: Blocking,
						Help: "Judged at every level of the sweep: a workload whose hit ratio drops (a longer context, a cache that is shared by more tenants) still gets its first token in time.",
					},
					{
						Name: "tpot-p99", Metric: MetricTPOT, Statistic: StatP99, Mode: Absolute,
						Comparator: LessOrEqual, Threshold: 200, Unit: "ms", MinSamples: 100, Severity: Advisory,
						Help: "Decoding hardly depends on the prefix cache; a rise at low hit ratios shows prefills crowding out decodes.",
					},
					{
						Name: "error-rate", Metric: MetricErrorRate, Statistic: StatRate, Mode: Absolute,
						Comparator: LessOrEqual, Threshold: 1, Unit: "%", Severity: Blocking,
						Help: "Latencies mean little if requests fail.",
					},
				},
			},
		},
		{
			ID:          "four-host-ramp",
			Title:       "Four hosts within the serving limits",
			Description: "Every host's requests combined: p99 TTFT and TPOT within the serving limits at each level of the ramp, and few failed requests.",
			Profiles:    []string{"four-host-ramp"},
			Spec: GateSetSpec{
				Criteria: []Criterion{
					{
						Name: "ttft-p99", Metric: MetricTTFT, Statistic: StatP99, Mode: Absolute,
						Comparator: LessOrEqual, Threshold: 2000, Unit: "ms", MinSamples: 100, Severity: Blocking,
						StopLoss: tmplPtr(4000.0),
						Help:     "Judged on the four hosts' requests merged at each level: the tail a tenant sees when the others load the same storage.",
					},
					{
						Name: "tpot-p99", Metric: MetricTPOT, Statistic: StatP99, Mode: Absolute,
						Comparator: LessOrEqual, Threshold: 200, Unit: "ms", MinSamples: 100, Severity: Blocking,
						Help: "Decoding speed under the combined load.",
					},
					{
						Name: "error-rate", Metric: MetricErrorRate, Statistic: StatRate, Mode: Absolute,
						Comparator: LessOrEqual, Threshold: 1, Unit: "%", Severity: Blocking,
						StopLoss: tmplPtr(5.0),
						Help:     "A ramp that drops requests at its top levels does not pass, however fast the rest.",
					},
				},
			},
		},
	}
	for i := range ts {
		ts[i].Spec.Name = ts[i].Title
		ts[i].Spec.Description = ts[i].Description
		ts[i].Spec.Normalize()
	}
	return ts
}

// LookupProfileTemplate returns the starter profile with the id.
func LookupProfileTemplate(id string) (ProfileTemplate, bool) {
	for _, t := range ProfileTemplates() {
		if t.ID == id {
			return t, true
		}
	}
	return ProfileTemplate{}, false
}

// LookupGateSetTemplate returns the starter gate set with the id.
func LookupGateSetTemplate(id string) (GateSetTemplate, bool) {
	for _, t := range GateSetTemplates() {
		if t.ID == id {
			return t, true
		}
	}
	return GateSetTemplate{}, false
}
