package acceptance

import "sort"

// ComparabilityFacts are the host facts that decide whether a candidate and
// a baseline run can be compared: a different kernel, GPU driver or model,
// NVMe firmware or model, or fabric transport changes performance by itself.
// Callers pass these keys (others, when they matter to the program) in
// EvaluationInput; every key given on either side is compared.
var ComparabilityFacts = []string{
	"kernel", "gpu_driver", "gpu_model", "nvme_firmware", "nvme_model", "fabric_transport",
}

// FactDiff is one host fact that differs between candidate and baseline.
// Absent marks a fact known on one side only.
type FactDiff struct {
	Fact      string `json:"fact"`
	Candidate string `json:"candidate"`
	Baseline  string `json:"baseline"`
	// CandidateAbsent / BaselineAbsent say the fact was not known on that side.
	CandidateAbsent bool `json:"candidate_absent,omitempty"`
	BaselineAbsent  bool `json:"baseline_absent,omitempty"`
	// CandidateHost and BaselineHost name, in a multi-host run, the host
	// whose fact it is ("ROLE[i].KEY": the i-th host of the role on each
	// side); empty for a one-host run, or where the side has no such host.
	CandidateHost string `json:"candidate_host,omitempty"`
	BaselineHost  string `json:"baseline_host,omitempty"`
}

// NameHosts names, in each difference of a multi-host run's facts, the
// host each side's fact is of, from each side's HostFactPlaces.
func NameHosts(diffs []FactDiff, candidate, baseline map[string]string) {
	for i := range diffs {
		if place := factPlace(diffs[i].Fact); place != "" {
			diffs[i].CandidateHost, diffs[i].BaselineHost = candidate[place], baseline[place]
		}
	}
}

// Comparability records whether relative criteria could be judged.
type Comparability struct {
	// Checked is false when there was no baseline run.
	Checked     bool       `json:"checked"`
	Comparable  bool       `json:"comparable"`
	Differences []FactDiff `json:"differences,omitempty"`
	// NoFacts is true when neither run recorded host facts: nothing could
	// show them incomparable, and relative explanations say so.
	NoFacts bool `json:"no_facts,omitempty"`
}

// CompareFacts returns the facts that differ, sorted by name. A fact present
// on one side only counts as a difference: an unknown value cannot vouch for
// equality.
func CompareFacts(candidate, baseline map[string]string) []FactDiff {
	keys := make(map[string]struct{}, len(candidate)+len(baseline))
	for k := range candidate {
		keys[k] = struct{}{}
	}
	for k := range baseline {
		keys[k] = struct{}{}
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	var diffs []FactDiff
	for _, k := range names {
		c, okC := candidate[k]
		b, okB := baseline[k]
		if okC && okB && c == b {
			continue
		}
		diffs = append(diffs, FactDiff{Fact: k, Candidate: c, Baseline: b, CandidateAbsent: !okC, BaselineAbsent: !okB})
	}
	return diffs
}
