package ingest

import (
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

// ReadFolder turns a run folder (collected from the host, or imported)
// into canonical measurements: each step result names its output's format, and the
// importer of that format reads it (runners/parse). A failed import fails
// the whole run's results: nothing partial is stored.
func ReadFolder(c *sshrun.Collection, profile acceptance.ProfileSpec, probeVersion string) ([]acceptance.Measurement, []string, error) {
	steps := map[string]acceptance.StepSpec{}
	for _, s := range profile.Steps {
		steps[s.Name] = s
	}
	var all []acceptance.Measurement
	var warnings []string
	for _, f := range c.Files {
		if path.Base(f.Name) != wire.StepResultFile || !strings.HasPrefix(f.Name, wire.OutputDir+"/") {
			continue
		}
		raw, err := readFile(f)
		if err != nil {
			return nil, nil, err
		}
		var res wire.StepResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		if res.Error != "" {
			warnings = append(warnings, fmt.Sprintf("step %s (repetition %d%s) failed on the host: %s", res.Step, res.Repetition, levelText(res.Level), res.Error))
			continue
		}
		ms, warns, err := importStepResult(c, path.Dir(f.Name), res, steps[res.Step], probeVersion)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, ms...)
		warnings = append(warnings, warns...)
	}
	ms, warns := importDriveWear(c)
	return append(all, ms...), append(warnings, warns...), nil
}

// importDriveWear reads the run's drive wear (smart-log before and after
// the run), when the probe took it. Like telemetry it is context the run
// measured beside its steps: a problem with it is a warning.
func importDriveWear(c *sshrun.Collection) ([]acceptance.Measurement, []string) {
	f, ok := c.File(wire.DriveWearFile)
	if !ok {
		return nil, nil
	}
	data, err := readFile(f)
	if err != nil {
		return nil, []string{fmt.Sprintf("drive wear not imported: %v", err)}
	}
	ms, warns, err := parse.Import(parse.FormatDriveWear, data, parse.Options{Repetition: 1, Name: f.Name})
	if err != nil {
		return nil, []string{fmt.Sprintf("drive wear not imported: %v", err)}
	}
	return ms, warns
}

func levelText(level string) string {
	if level == "" {
		return ""
	}
	return ", level " + level
}

func importStepResult(c *sshrun.Collection, dir string, res wire.StepResult, step acceptance.StepSpec, probeVersion string) ([]acceptance.Measurement, []string, error) {
	opts := parse.Options{Step: res.Step, Level: res.Level, Repetition: res.Repetition, ToolVersion: probeVersion, Result: &res}
	if step.Inference != nil {
		opts.SLO = step.Inference.SLO
	}
	var all []acceptance.Measurement
	var warnings []string
	importFile := func(format parse.Format, name string) error {
		f, ok := c.File(path.Join(dir, name))
		if !ok {
			return fmt.Errorf("step %s: %s is missing from the run folder", res.Step, path.Join(dir, name))
		}
		data, err := readFile(f)
		if err != nil {
			return err
		}
		opts.Name = f.Name
		ms, warns, err := parse.Import(format, data, opts)
		if err != nil {
			return err
		}
		all = append(all, ms...)
		warnings = append(warnings, warns...)
		return nil
	}
	switch res.Format {
	case "", "none", "text":
	case string(parse.FormatProbeRequests):
		if err := importFile(parse.FormatProbeRequests, wire.RequestsFile); err != nil {
			return nil, nil, err
		}
	case string(parse.FormatFio):
		if err := importFile(parse.FormatFio, wire.FioOutputFile); err != nil {
			return nil, nil, err
		}
	default:
		if len(res.Files) == 0 {
			return nil, nil, fmt.Errorf("step %s: the result names no output file", res.Step)
		}
		if err := importFile(parse.Format(res.Format), path.Base(res.Files[0])); err != nil {
			return nil, nil, err
		}
	}
	// Telemetry is context, not evidence: a problem with it is a warning.
	if _, ok := c.File(path.Join(dir, wire.TelemetryFile)); ok {
		if err := importFile(parse.FormatProbeTelemetry, wire.TelemetryFile); err != nil {
			warnings = append(warnings, fmt.Sprintf("step %s: telemetry not imported: %v", res.Step, err))
		}
	}
	return all, warnings, nil
}

func readFile(f sshrun.File) ([]byte, error) {
	r, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
