package acceptance

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/accordlab/accord/acceptance/stats"
)

// CombineHosts makes the measurements of a multi-host run as a whole
// from every host's own (each with Host set), series by series (metric ×
// step × level × repetition):
//
//   - throughputs, IOPS, bandwidths, counted rates, power and memory are
//     summed over the hosts;
//   - shares (error rate, cache hit ratio) are pooled: weighted by the
//     requests each was taken over where every host knows them, else the
//     mean over hosts (said in the source);
//   - percentages of the load generator's self-check take the worst host
//     (the highest), and other rates the mean;
//   - distributions are merged from the raw samples or histogram buckets
//     of every host (never an average of percentiles): a host's raw
//     samples join a histogram as buckets of one.
//
// A series that some host of its step lacks, or that a host has only as
// a tool's summary, cannot be combined: it is left out, with a warning.
// The result carries no Host and is sorted by series.
func CombineHosts(ms []Measurement) ([]Measurement, []string) {
	type key struct {
		metric, step, level string
		rep                 int
	}
	groups := map[key][]Measurement{}
	var order []key
	stepHosts := map[string]map[string]bool{} // step → hosts that measured anything in it
	for _, m := range ms {
		k := key{m.Metric, m.Step, m.Level, m.Repetition}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], m)
		if stepHosts[m.Step] == nil {
			stepHosts[m.Step] = map[string]bool{}
		}
		stepHosts[m.Step][m.Host] = true
	}
	slices.SortFunc(order, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.metric, b.metric), cmp.Compare(a.step, b.step), cmp.Compare(a.level, b.level), cmp.Compare(a.rep, b.rep))
	})
	var out []Measurement
	var warnings []string
	for _, k := range order {
		g := groups[k]
		slices.SortStableFunc(g, func(a, b Measurement) int { return cmp.Compare(a.Host, b.Host) })
		where := fmt.Sprintf("%s of step %s%s, repetition %d", k.metric, k.step, levelSuffix(k.level), k.rep)
		if missing := missingHosts(g, stepHosts[k.step]); len(missing) > 0 {
			warnings = append(warnings, fmt.Sprintf("%s is not combined over the hosts: %s did not measure it", where, strings.Join(missing, ", ")))
			continue
		}
		c, err := combineSeries(g)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s is not combined over the hosts: %v", where, err))
			continue
		}
		out = append(out, c)
	}
	return out, warnings
}

func levelSuffix(level string) string {
	if level == "" {
		return ""
	}
	return " at " + level
}

func missingHosts(g []Measurement, want map[string]bool) []string {
	have := map[string]bool{}
	for _, m := range g {
		have[m.Host] = true
	}
	var out []string
	for h := range want {
		if !have[h] {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// hostNames lists the hosts of a series, for the combined source.
func hostNames(g []Measurement) string {
	names := make([]string, len(g))
	for i, m := range g {
		names[i] = m.Host
	}
	return strings.Join(names, ", ")
}

// combineSeries combines one series' measurements, one per host.
func combineSeries(g []Measurement) (Measurement, error) {
	first := g[0]
	out := Measurement{Metric: first.Metric, Step: first.Step, Level: first.Level, Repetition: first.Repetition, Source: first.Source}
	for _, m := range g[1:] {
		if m.Source.Tool != out.Source.Tool {
			out.Source.Tool = "combined"
			out.Source.ToolVersion = ""
		}
		if m.Source.PercentileMethod != out.Source.PercentileMethod {
			out.Source.PercentileMethod = ""
		}
		if m.Source.PercentileDefinition != out.Source.PercentileDefinition {
			out.Source.PercentileDefinition = ""
		}
	}
	meta, known := LookupMetric(first.Metric)
	kind := KindDistribution
	if known {
		kind = meta.Kind
	}
	if kind == KindRate {
		how, v, trials, err := combineRates(meta, g)
		if err != nil {
			return out, err
		}
		out.Values, out.Trials = []float64{v}, trials
		out.Source.Field = fmt.Sprintf("%s over %d hosts (%s)", how, len(g), hostNames(g))
		return out, nil
	}
	histogram, segmented := false, false
	n := 0
	for _, m := range g {
		if !m.HasSamples() {
			return out, fmt.Errorf("host %s has only the tool's summary (no samples to merge)", m.Host)
		}
		histogram = histogram || m.Counts != nil
		segmented = segmented || len(m.Segments) > 0
		n += len(m.Values)
	}
	out.Source.Field = fmt.Sprintf("merged from the %s of %d hosts (%s)", map[bool]string{false: "samples", true: "samples and histogram buckets"}[histogram], len(g), hostNames(g))
	if segmented && !histogram {
		// Hosts' samples kept outside memory: the combined measurement is
		// their segments (and the other hosts' values in segments of their
		// own, kept in memory), never all of them read in.
		for _, m := range g {
			if len(m.Segments) > 0 {
				out.Segments = append(out.Segments, m.Segments...)
				continue
			}
			segs, err := stats.MemorySegments(m.Values)
			if err != nil {
				return out, fmt.Errorf("host %s: %w", m.Host, err)
			}
			out.Segments = append(out.Segments, segs...)
		}
		return out, nil
	}
	if segmented {
		return out, fmt.Errorf("a host's histogram cannot be merged with another host's samples kept outside memory (more than %s)", fmtCount(int64(stats.InMemoryLimit)))
	}
	if !histogram {
		if v, idx, ok := mergeBySecond(g, n); ok {
			out.Values, out.SentIndex = v, idx
			out.Source.Field += "; second by second of each host's send times, from its first measured request (the hosts start together at a barrier)"
			return out, nil
		}
		out.Values = make([]float64, 0, n)
		for _, m := range g {
			out.Values = append(out.Values, m.Values...)
		}
		return out, nil
	}
	out.Values, out.Counts = mergeBuckets(g)
	return out, nil
}

// mergeBuckets merges histograms (raw samples count one each) into one:
// equal values add their counts, in ascending order.
func mergeBuckets(g []Measurement) ([]float64, []int64) {
	type bucket struct {
		v float64
		c int64
	}
	var all []bucket
	for _, m := range g {
		for i, v := range m.Values {
			c := int64(1)
			if m.Counts != nil {
				c = m.Counts[i]
			}
			all = append(all, bucket{v, c})
		}
	}
	slices.SortFunc(all, func(a, b bucket) int { return cmp.Compare(a.v, b.v) })
	var values []float64
	var counts []int64
	for _, b := range all {
		if n := len(values); n > 0 && values[n-1] == b.v {
			counts[n-1] += b.c
			continue
		}
		values = append(values, b.v)
		counts = append(counts, b.c)
	}
	return values, counts
}

// combineRates combines one value per host; how says how, for the source.
func combineRates(meta Metric, g []Measurement) (how string, v float64, trials int64, err error) {
	vals := make([]float64, len(g))
	allTrials := true
	for i, m := range g {
		if len(m.Values) != 1 {
			return "", 0, 0, fmt.Errorf("host %s has %d values, a rate has one", m.Host, len(m.Values))
		}
		vals[i] = m.Values[0]
		trials += m.Trials
		allTrials = allTrials && m.Trials > 0
	}
	switch meta.Unit {
	case UnitRequestsPerSec, UnitTokensPerSec, UnitIOPS, UnitBytesPerSec, UnitPerSecond, UnitWatt, UnitBytes:
		for _, x := range vals {
			v += x
		}
		return "sum", v, trials, nil
	case UnitRatio:
		if allTrials {
			for i, x := range vals {
				v += x * float64(g[i].Trials)
			}
			return "pooled by requests", v / float64(trials), trials, nil
		}
		return "mean", mean(vals), 0, nil
	case UnitPercent:
		return "highest", slices.Max(vals), 0, nil
	}
	return "mean", mean(vals), 0, nil
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// HostFacts are one host's comparable facts in a multi-host run.
type HostFacts struct {
	Role  string
	Facts map[string]string
	// Name names the host in messages (HostFactPlaces); it is never
	// compared: another run of the profile may use other hosts.
	Name string
}

// CombineHostFacts makes the comparable facts of a multi-host run, so that
// comparability covers every host: each host's facts under
// "ROLE[i].KEY", the hosts of a role ordered by their facts (so that the
// order the hosts were named in does not matter), and "ROLE.hosts" the
// number of hosts of each role.
func CombineHostFacts(hosts []HostFacts) map[string]string {
	out := map[string]string{}
	for role, list := range hostsByRole(hosts) {
		out[role+".hosts"] = fmt.Sprint(len(list))
		for i, h := range list {
			for k, v := range h.Facts {
				out[fmt.Sprintf("%s[%d].%s", role, i, k)] = v
			}
		}
	}
	return out
}

// HostFactPlaces names the host at each place of CombineHostFacts's keys:
// "ROLE[i]" → the host's Name.
func HostFactPlaces(hosts []HostFacts) map[string]string {
	out := map[string]string{}
	for role, list := range hostsByRole(hosts) {
		for i, h := range list {
			out[fmt.Sprintf("%s[%d]", role, i)] = h.Name
		}
	}
	return out
}

// hostsByRole groups hosts by role, each role's ordered by their facts.
func hostsByRole(hosts []HostFacts) map[string][]HostFacts {
	byRole := map[string][]HostFacts{}
	for _, h := range hosts {
		byRole[h.Role] = append(byRole[h.Role], h)
	}
	for _, list := range byRole {
		slices.SortStableFunc(list, func(a, b HostFacts) int { return cmp.Compare(FactsDigest(a.Facts), FactsDigest(b.Facts)) })
	}
	return byRole
}

// factPlace is the "ROLE[i]" a combined fact key begins with ("" for a
// one-host run's key).
func factPlace(key string) string {
	if i := strings.Index(key, "]."); i > 0 && strings.Contains(key[:i], "[") {
		return key[:i+1]
	}
	return ""
}

// mergeBySecond merges raw samples that all record their send times
// (SentIndex), second by second, so that the combined samples keep them:
// second s holds every host's values of its own second s. false when a
// host has none.
func mergeBySecond(g []Measurement, n int) ([]float64, []int64, bool) {
	secs := 0
	for _, m := range g {
		if len(m.SentIndex) == 0 || checkSentIndex(m) != nil {
			return nil, nil, false
		}
		secs = max(secs, len(m.SentIndex))
	}
	values := make([]float64, 0, n)
	index := make([]int64, secs)
	for s := range secs {
		index[s] = int64(len(values))
		for _, m := range g {
			if s >= len(m.SentIndex) {
				continue
			}
			end := int64(len(m.Values))
			if s+1 < len(m.SentIndex) {
				end = m.SentIndex[s+1]
			}
			values = append(values, m.Values[m.SentIndex[s]:end]...)
		}
	}
	return values, index, true
}
