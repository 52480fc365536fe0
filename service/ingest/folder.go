package ingest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/parse"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
)

// Folder is what ReadFolderReports read from a run folder.
type Folder struct {
	Measurements []acceptance.Measurement
	Warnings     []string
	// Reports say, for each file read, what the importer read, what it
	// ignored and why (runners/parse), in the folder's order.
	Reports []parse.Report
}

// ReadFolder turns a run folder (collected from the host, imported, or
// stored: CollectionFiles, StoredFiles) into canonical measurements: each
// step result names its output's format, and the importer of that format
// reads it (runners/parse), streaming the records files, every message
// naming the file by its path in the run folder. A failed import fails the
// whole run's results: nothing partial is stored.
func ReadFolder(files Files, profile acceptance.ProfileSpec, probeVersion string) ([]acceptance.Measurement, []string, error) {
	f, err := ReadFolderReports(files, profile, probeVersion)
	return f.Measurements, f.Warnings, err
}

// ReadFolderReports is ReadFolder with each file's import report. A folder
// of an imported run (a report bundle of a run that was itself imported)
// has no step results but the imported tool outputs under imported/: each
// is read again, in the format detected from its content, as the step the
// other installation imported it as (its import report says; "imported"
// when it does not).
func ReadFolderReports(files Files, profile acceptance.ProfileSpec, probeVersion string) (Folder, error) {
	steps := map[string]acceptance.StepSpec{}
	for _, s := range profile.Steps {
		steps[s.Name] = s
	}
	var out Folder
	for _, name := range files.Names() {
		if path.Base(name) != wire.StepResultFile || !strings.HasPrefix(name, wire.OutputDir+"/") {
			continue
		}
		raw, err := readSmall(files, name)
		if err != nil {
			return Folder{}, err
		}
		var res wire.StepResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return Folder{}, fmt.Errorf("%s: %w", name, err)
		}
		if res.Error != "" {
			out.Warnings = append(out.Warnings, fmt.Sprintf("step %s (repetition %d%s) failed on the host: %s", res.Step, res.Repetition, levelText(res.Level), res.Error))
			continue
		}
		if err := importStepResult(&out, files, path.Dir(name), res, steps[res.Step], probeVersion); err != nil {
			return Folder{}, err
		}
	}
	importDriveWear(&out, files)
	if err := importImportedFiles(&out, files); err != nil {
		return Folder{}, err
	}
	return out, nil
}

// ImportFile imports one file of a folder, name, as a tool output in
// format (detected from its content when empty), streamed: the JSON-lines
// formats line by line, a single document within parse.MaxToolJSONBytes.
// The report names the file opts.Name, its path in the folder when empty.
// An uploaded result file is read this way, as a run's outputs are.
func ImportFile(files Files, format parse.Format, name string, opts parse.Options) (parse.Result, error) {
	return importFile(files, format, name, opts)
}

// importFile imports the folder's file name in format (detected when
// empty), streamed, under its name in the folder unless opts names it.
func importFile(files Files, format parse.Format, name string, opts parse.Options) (parse.Result, error) {
	if format == parse.FormatProbeRequests || format == parse.FormatProbeTelemetry {
		return importRecords(files, format, name, opts)
	}
	size, ok := files.Size(name)
	if !ok {
		return parse.Result{}, fmt.Errorf("%s is missing from the run folder", name)
	}
	r, err := files.Open(name)
	if err != nil {
		return parse.Result{}, err
	}
	defer r.Close()
	opts.Name = cmp.Or(opts.Name, name)
	return parse.ImportReaderWithReport(format, r, size, opts)
}

// importRecords imports the probe's records file name read over all of
// its segments in order, as the one stream the probe wrote; its report
// says how many segments it read.
func importRecords(files Files, format parse.Format, name string, opts parse.Options) (parse.Result, error) {
	r, size, segments, err := openRecords(files, name)
	if err != nil {
		return parse.Result{}, err
	}
	defer r.Close()
	opts.Name = cmp.Or(opts.Name, name)
	if segments > 1 {
		opts.Name = fmt.Sprintf("%s (and its %d further segments)", opts.Name, segments-1)
		// Each segment is bounded, not their sum: the limit is the whole
		// stream's, the collection's per-file limit each segment's.
		opts.MaxBytes = max(opts.MaxBytes, size)
	}
	return parse.ImportReaderWithReport(format, r, size, opts)
}

// readSmall reads a small file of the folder whole (a step result, an
// import report): at most 64 MiB.
func readSmall(files Files, name string) ([]byte, error) {
	r, err := files.Open(name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, parse.MaxToolJSONBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(data)) > parse.MaxToolJSONBytes {
		return nil, fmt.Errorf("%s: over %d MiB", name, parse.MaxToolJSONBytes>>20)
	}
	return data, nil
}

// importDriveWear reads the run's drive wear (smart-log before and after
// the run), when the probe took it. Like telemetry it is context the run
// measured beside its steps: a problem with it is a warning.
func importDriveWear(out *Folder, files Files) {
	if _, ok := files.Size(wire.DriveWearFile); !ok {
		return
	}
	r, err := importFile(files, parse.FormatDriveWear, wire.DriveWearFile, parse.Options{Repetition: 1})
	if err != nil {
		out.Warnings = append(out.Warnings, fmt.Sprintf("drive wear not imported: %v", err))
		return
	}
	out.add(r)
}

// ImportedDir holds an imported run's tool output and its import report
// (parse.ReportFile).
const ImportedDir = "imported/"

// importImportedFiles reads again the tool outputs of an imported run's
// folder (imported/NAME beside imported/import-report.json).
func importImportedFiles(out *Folder, files Files) error {
	// The other installation's report says as what, and in which format
	// (which its user may have named), it imported the file.
	var theirs parse.Report
	if _, ok := files.Size(ImportedDir + parse.ReportFile); ok {
		raw, err := readSmall(files, ImportedDir+parse.ReportFile)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &theirs); err != nil {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s%s is not an import report (%v): the imported files are read as step \"imported\", their format detected", ImportedDir, parse.ReportFile, err))
			theirs = parse.Report{}
		}
	}
	step := cmp.Or(theirs.Step, "imported")
	for _, full := range files.Names() {
		name, ok := strings.CutPrefix(full, ImportedDir)
		if !ok || strings.Contains(name, "/") || name == parse.ReportFile {
			continue
		}
		format := theirs.Format
		if path.Base(theirs.Input) != name {
			format = "" // detected from the content
		}
		r, err := importFile(files, format, full, parse.Options{Step: step, Repetition: 1})
		if err != nil {
			return err
		}
		out.add(r)
	}
	return nil
}

func (f *Folder) add(r parse.Result) {
	f.Measurements = append(f.Measurements, r.Measurements...)
	f.Warnings = append(f.Warnings, r.Report.Warnings...)
	f.Reports = append(f.Reports, r.Report)
}

func levelText(level string) string {
	if level == "" {
		return ""
	}
	return ", level " + level
}

func importStepResult(out *Folder, files Files, dir string, res wire.StepResult, step acceptance.StepSpec, probeVersion string) error {
	opts := parse.Options{Step: res.Step, Level: res.Level, Repetition: res.Repetition, ToolVersion: probeVersion, Result: &res}
	if step.Inference != nil {
		opts.SLO = step.Inference.SLO
	}
	importOutput := func(format parse.Format, name string) (parse.Result, error) {
		r, err := importFile(files, format, path.Join(dir, name), opts)
		if err != nil {
			return parse.Result{}, fmt.Errorf("step %s: %w", res.Step, err)
		}
		return r, nil
	}
	var output string
	switch res.Format {
	case "", "none", "text":
	case string(parse.FormatProbeRequests):
		output = wire.RequestsFile
	case string(parse.FormatFio):
		output = wire.FioOutputFile
	default:
		if len(res.Files) == 0 {
			return fmt.Errorf("step %s: the result names no output file", res.Step)
		}
		output = path.Base(res.Files[0])
	}
	if output != "" {
		r, err := importOutput(parse.Format(res.Format), output)
		if err != nil {
			return err
		}
		out.add(r)
	}
	// Telemetry is context, not evidence: a problem with it is a warning.
	if _, ok := files.Size(path.Join(dir, wire.TelemetryFile)); ok {
		r, err := importOutput(parse.FormatProbeTelemetry, wire.TelemetryFile)
		if err != nil {
			out.Warnings = append(out.Warnings, fmt.Sprintf("step %s: telemetry not imported: %v", res.Step, err))
		} else {
			out.add(r)
		}
	}
	return nil
}

func readFile(f sshrun.File) ([]byte, error) {
	r, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
