package report

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/accordlab/accord/store"
)

// A multi-host run's report covers every host: the bundle's facts.json
// holds each host's facts (HostFactsDocument), the metrics each host's own
// figures beside the hosts combined, and the human report a section per
// host (Contents.Hosts).

// HostContents is one host of a multi-host run, as its report shows it.
type HostContents struct {
	Ordinal int
	Role    string
	Name    string
	// Facts are the facts its probe took at the start of the run (nil:
	// none were kept, which the report says); FactsArtifact is the file
	// they came from among the run's artifacts.
	Facts         *store.HostFacts
	FactsArtifact string
	// Measurements are the host's own figures (the run's Measurements are
	// the hosts combined).
	Measurements []store.MeasurementRow
}

// HostFactsDocument is a multi-host run's facts.json: every host's facts,
// each with the artifact it was read from and that file's digest.
type HostFactsDocument struct {
	Hosts []HostFactsEntry `json:"hosts"`
}

// HostFactsEntry is one host's facts in HostFactsDocument.
type HostFactsEntry struct {
	Ordinal int    `json:"ordinal"`
	Role    string `json:"role"`
	Host    string `json:"host"`
	// Artifact is the facts file among the bundle's artifacts and SHA256
	// its digest (hex); both empty when the host's facts were not kept.
	Artifact string          `json:"artifact,omitempty"`
	SHA256   string          `json:"sha256,omitempty"`
	Facts    json.RawMessage `json:"facts"`
}

// hostsOfRun reads every host of a multi-host run with its facts and own
// figures, in the run's order.
func hostsOfRun(ctx context.Context, st *store.Store, run store.Run, artifacts []store.RunArtifact) ([]HostContents, error) {
	hosts, err := st.RunHosts(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	facts, err := st.RunHostFacts(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	rows, err := st.RunHostMeasurementSummaries(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	// A host's figures carry its name as the ingest knew it; its facts the
	// digest of the file they were read from.
	byName := map[string][]store.MeasurementRow{}
	for _, r := range rows {
		byName[r.Host] = append(byName[r.Host], r)
	}
	bySum := map[string]string{}
	for _, a := range artifacts {
		if strings.HasPrefix(a.Path, "hosts/") {
			bySum[a.SHA256] = a.Path
		}
	}
	out := make([]HostContents, 0, len(hosts))
	for _, h := range hosts {
		hc := HostContents{Ordinal: h.Ordinal, Role: h.Role, Name: h.HostName, Measurements: byName[h.HostName]}
		if f, ok := facts[h.HostID]; ok {
			hc.Facts = &f
			hc.FactsArtifact = bySum[strings.TrimPrefix(f.Digest, "sha256:")]
		}
		out = append(out, hc)
	}
	return out, nil
}

// hostFactsJSON is the facts.json of a multi-host run.
func hostFactsJSON(hosts []HostContents) ([]byte, error) {
	doc := HostFactsDocument{Hosts: []HostFactsEntry{}}
	for _, h := range hosts {
		e := HostFactsEntry{Ordinal: h.Ordinal, Role: h.Role, Host: h.Name, Facts: json.RawMessage("null")}
		if h.Facts != nil {
			e.Facts = h.Facts.Facts
			e.SHA256 = strings.TrimPrefix(h.Facts.Digest, "sha256:")
			e.Artifact = h.FactsArtifact
		}
		doc.Hosts = append(doc.Hosts, e)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("host facts: %w", err)
	}
	return b, nil
}

// hostNames lists a multi-host run's hosts with their roles, for titles
// and the statement's host: "lab (readers), lab-2 (readers), lab-3 (writer)".
func hostNames(hosts []HostContents) string {
	parts := make([]string, len(hosts))
	for i, h := range hosts {
		parts[i] = h.Name + " (" + h.Role + ")"
	}
	return strings.Join(parts, ", ")
}

// metricRow is one row of the signed metrics: the hosts combined (no
// host) or one host's own.
func metricRow(m store.MeasurementRow) map[string]any {
	row := map[string]any{"metric": m.Metric, "step": m.Step, "level": m.Level, "repetition": m.Repetition,
		"summary": m.Summary, "tool_summary": m.ToolSummary, "source": m.Source}
	if m.Host != "" {
		row["host"] = m.Host
	}
	return row
}
