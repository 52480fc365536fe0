package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/store"
)

// HostFolder is one host's part of a multi-host run's results.
type HostFolder struct {
	Ordinal int
	Role    string
	Name    string
	HostID  int64
	Files   *sshrun.Collection
	// Measurements are the host's own (Host set), read by ReadHostFolders.
	Measurements []acceptance.Measurement
}

// HostPrefix is the folder of a host's files among a multi-host run's
// artifacts: hosts/NN-NAME/, the host's place in the run first.
func HostPrefix(ordinal int, name string) string {
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, name)
	return fmt.Sprintf("hosts/%02d-%s/", ordinal, strings.Trim(safe, "."))
}

// ReadHostFolders reads every host's folder (ReadFolder), marks each
// measurement with its host, and combines the hosts
// (acceptance.CombineHosts): the hosts' own measurements and the combined
// ones are returned together. A folder that cannot be read fails the
// results, as for a one-host run.
func ReadHostFolders(folders []HostFolder, profile acceptance.ProfileSpec, probeVersion string) ([]acceptance.Measurement, []string, error) {
	var warnings []string
	var all []acceptance.Measurement
	for i := range folders {
		f := &folders[i]
		ms, warns, err := ReadFolder(CollectionFiles(f.Files), profile, probeVersion)
		if err != nil {
			return nil, nil, fmt.Errorf("host %s: %w", f.Name, err)
		}
		for j := range ms {
			ms[j].Host = f.Name
		}
		f.Measurements = ms
		all = append(all, ms...)
		for _, w := range warns {
			warnings = append(warnings, "host "+f.Name+": "+w)
		}
	}
	combined, cw := acceptance.CombineHosts(all)
	warnings = append(warnings, cw...)
	return append(combined, all...), warnings, nil
}

// MergeFolders makes one collection of every host's folder, each under
// its HostPrefix, for the run's artifacts. The files stay where each
// collection keeps them (Remove the hosts' collections, not this one).
func MergeFolders(folders []HostFolder) *sshrun.Collection {
	out := &sshrun.Collection{}
	for _, f := range folders {
		if f.Files == nil {
			continue
		}
		prefix := HostPrefix(f.Ordinal, f.Name)
		for _, file := range f.Files.Files {
			file.Name = prefix + file.Name
			out.Files = append(out.Files, file)
		}
		for _, l := range f.Files.Links {
			out.Links = append(out.Links, prefix+l)
		}
		out.Bytes += f.Files.Bytes
	}
	slices.SortFunc(out.Files, func(a, b sshrun.File) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// KeyHostCharts prefixes the keys of one host's chart documents in a
// multi-host run; the run's own keys are the hosts combined.
func KeyHostCharts(ordinal int) string { return fmt.Sprintf("host/%d/", ordinal) }

// MultiHostCharts computes a multi-host run's chart data: each host's own
// (its measurements, step results, records, telemetry and facts), under
// KeyHostCharts, and the hosts combined (the combined measurements,
// compared with the baseline; latency over the run and throughput per
// second from every host's requests, each host's records on its own clock
// from its first step, so the hosts' clocks never have to agree).
func MultiHostCharts(ctx context.Context, st *store.Store, profile acceptance.ProfileSpec, baselineRunID *int64, folders []HostFolder, combined []acceptance.Measurement) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	in := chartdata.Input{Profile: profile, Measurements: combined, BaselineRunID: baselineRunID}
	if baselineRunID != nil {
		var err error
		if in.Baseline, err = st.RunMeasurements(ctx, *baselineRunID); err != nil {
			return nil, fmt.Errorf("charts: baseline run %d: %w", *baselineRunID, err)
		}
	}
	requests := chartdata.NewRecords(nil)
	for _, f := range folders {
		if f.Files == nil {
			continue
		}
		files := CollectionFiles(f.Files)
		steps, notes := readStepResults(files)
		hin := chartdata.Input{Profile: profile, Measurements: f.Measurements, Steps: steps, Notes: notes}
		hin.Records = readRecords(ctx, files, steps)
		if file, ok := f.Files.File(wire.FactsFile); ok {
			raw, err := readFile(file)
			if err != nil {
				return nil, fmt.Errorf("charts: host %s: %w", f.Name, err)
			}
			if hin.Facts, err = facts.ComparableJSON(raw); err != nil {
				hin.Notes = append(hin.Notes, err.Error())
			}
		}
		docs, err := chartdata.Compute(hin).Documents()
		if err != nil {
			return nil, fmt.Errorf("charts: host %s: %w", f.Name, err)
		}
		for k, v := range docs {
			out[KeyHostCharts(f.Ordinal)+k] = v
		}
		in.Steps = append(in.Steps, steps...)
		for _, r := range steps {
			if name := path.Join(r.Dir, wire.RequestsFile); r.Format == "probe-requests" {
				if _, ok := f.Files.File(name); ok {
					if err := readRequests(requests, files, name, r); err != nil {
						requests.Note(fmt.Sprintf("host %s: %s: %v", f.Name, name, err))
					}
				}
			}
		}
	}
	in.Records = requests
	docs, err := chartdata.Compute(in).Documents()
	if err != nil {
		return nil, err
	}
	for k, v := range docs {
		out[k] = v
	}
	return out, nil
}

// SaveHostFacts keeps every host's facts of a multi-host run, in tx.
func SaveHostFacts(ctx context.Context, tx *store.Store, runID int64, folders []HostFolder) error {
	for _, f := range folders {
		if f.Files == nil {
			continue
		}
		file, ok := f.Files.File(wire.FactsFile)
		if !ok {
			continue
		}
		raw, err := readFile(file)
		if err != nil {
			return err
		}
		if !json.Valid(raw) {
			if err := tx.AddRunNote(ctx, runID, "warn", "host "+f.Name+": the host facts ("+wire.FactsFile+") are not valid JSON: comparability with other runs cannot be judged"); err != nil {
				return err
			}
			continue
		}
		if _, err := tx.AddHostFacts(ctx, f.HostID, &runID, raw, "sha256:"+file.SHA256); err != nil {
			return err
		}
	}
	return nil
}
