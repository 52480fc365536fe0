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

// ReadFolder turns a run folder (collected from the host, or imported)
// into canonical measurements: each step result names its output's format, and the
// importer of that format reads it (runners/parse). A failed import fails
// the whole run's results: nothing partial is stored.
func ReadFolder(c *sshrun.Collection, profile acceptance.ProfileSpec, probeVersion string) ([]acceptance.Measurement, []string, error) {
	f, err := ReadFolderReports(c, profile, probeVersion)
	return f.Measurements, f.Warnings, err
}

// ReadFolderReports is ReadFolder with each file's import report. A folder
// of an imported run (a report bundle of a run that was itself imported)
// has no step results but the imported tool outputs under imported/: each
// is read again, in the format detected from its content, as the step the
// other installation imported it as (its import report says; "imported"
// when it does not).
func ReadFolderReports(c *sshrun.Collection, profile acceptance.ProfileSpec, probeVersion string) (Folder, error) {
	steps := map[string]acceptance.StepSpec{}
	for _, s := range profile.Steps {
		steps[s.Name] = s
	}
	var out Folder
	for _, f := range c.Files {
		if path.Base(f.Name) != wire.StepResultFile || !strings.HasPrefix(f.Name, wire.OutputDir+"/") {
			continue
		}
		raw, err := readFile(f)
		if err != nil {
			return Folder{}, err
		}
		var res wire.StepResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return Folder{}, fmt.Errorf("%s: %w", f.Name, err)
		}
		if res.Error != "" {
			out.Warnings = append(out.Warnings, fmt.Sprintf("step %s (repetition %d%s) failed on the host: %s", res.Step, res.Repetition, levelText(res.Level), res.Error))
			continue
		}
		if err := importStepResult(&out, c, path.Dir(f.Name), res, steps[res.Step], probeVersion); err != nil {
			return Folder{}, err
		}
	}
	importDriveWear(&out, c)
	if err := importImportedFiles(&out, c); err != nil {
		return Folder{}, err
	}
	return out, nil
}

// importDriveWear reads the run's drive wear (smart-log before and after
// the run), when the probe took it. Like telemetry it is context the run
// measured beside its steps: a problem with it is a warning.
func importDriveWear(out *Folder, c *sshrun.Collection) {
	f, ok := c.File(wire.DriveWearFile)
	if !ok {
		return
	}
	data, err := readFile(f)
	if err != nil {
		out.Warnings = append(out.Warnings, fmt.Sprintf("drive wear not imported: %v", err))
		return
	}
	r, err := parse.ImportWithReport(parse.FormatDriveWear, data, parse.Options{Repetition: 1, Name: f.Name})
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
func importImportedFiles(out *Folder, c *sshrun.Collection) error {
	// The other installation's report says as what, and in which format
	// (which its user may have named), it imported the file.
	var theirs parse.Report
	if f, ok := c.File(ImportedDir + parse.ReportFile); ok {
		raw, err := readFile(f)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &theirs); err != nil {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s%s is not an import report (%v): the imported files are read as step \"imported\", their format detected", ImportedDir, parse.ReportFile, err))
			theirs = parse.Report{}
		}
	}
	step := cmp.Or(theirs.Step, "imported")
	for _, f := range c.Files {
		name, ok := strings.CutPrefix(f.Name, ImportedDir)
		if !ok || strings.Contains(name, "/") || name == parse.ReportFile {
			continue
		}
		data, err := readFile(f)
		if err != nil {
			return err
		}
		format := theirs.Format
		if format == "" || path.Base(theirs.Input) != name {
			if format, err = parse.Detect(data); err != nil {
				return fmt.Errorf("%s: %w", f.Name, err)
			}
		}
		r, err := parse.ImportWithReport(format, data, parse.Options{Step: step, Repetition: 1, Name: f.Name})
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

func importStepResult(out *Folder, c *sshrun.Collection, dir string, res wire.StepResult, step acceptance.StepSpec, probeVersion string) error {
	opts := parse.Options{Step: res.Step, Level: res.Level, Repetition: res.Repetition, ToolVersion: probeVersion, Result: &res}
	if step.Inference != nil {
		opts.SLO = step.Inference.SLO
	}
	importFile := func(format parse.Format, name string) (parse.Result, error) {
		f, ok := c.File(path.Join(dir, name))
		if !ok {
			return parse.Result{}, fmt.Errorf("step %s: %s is missing from the run folder", res.Step, path.Join(dir, name))
		}
		data, err := readFile(f)
		if err != nil {
			return parse.Result{}, err
		}
		opts.Name = f.Name
		return parse.ImportWithReport(format, data, opts)
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
		r, err := importFile(parse.Format(res.Format), output)
		if err != nil {
			return err
		}
		out.add(r)
	}
	// Telemetry is context, not evidence: a problem with it is a warning.
	if _, ok := c.File(path.Join(dir, wire.TelemetryFile)); ok {
		r, err := importFile(parse.FormatProbeTelemetry, wire.TelemetryFile)
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
