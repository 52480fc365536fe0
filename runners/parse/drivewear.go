package parse

import (
	"fmt"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/wire"
)

// FormatDriveWear is the run's drive-wear.json (wire.DriveWear).
const FormatDriveWear Format = "drive-wear-json"

// secondsPerDay turns a write rate into drive writes per day.
const secondsPerDay = 86400

// ImportDriveWear reads the drives' smart-log readings (before the run and
// after each repetition) into drive_bytes_written (the rise of
// data_units_written over the repetition, in bytes) and
// drive_writes_per_day (those bytes over the drive's capacity, at the
// repetition's rate: bytes / capacity / seconds between the readings × one
// day), one pair per drive and repetition with the controller as the
// level and no step (the whole repetition). A repetition whose readings
// cannot give them is a warning that says why; so is a fabric controller,
// whose log is the array's, shared with whatever else uses it.
func ImportDriveWear(data []byte, opts Options) ([]acceptance.Measurement, []string, error) {
	in := opts.name(wire.DriveWearFile)
	var w wire.DriveWear
	if err := decodeProbeJSON(in, data, opts, &w); err != nil {
		return nil, nil, err
	}
	var out []acceptance.Measurement
	var warnings []string
	for i, d := range w.Drives {
		field := fmt.Sprintf("drives[%d]", i)
		if d.Controller == "" {
			return nil, nil, errf(in, 0, field+".controller", "missing")
		}
		for j := 1; j < len(d.Readings); j++ {
			before, after := d.Readings[j-1], d.Readings[j]
			rep := after.AfterRepetition
			if why := driveWearGap(before, after); why != "" {
				warnings = append(warnings, fmt.Sprintf("drive wear of %s in repetition %d not measured: %s", d.Controller, rep, why))
				continue
			}
			t0, _ := time.Parse(time.RFC3339Nano, before.At)
			t1, _ := time.Parse(time.RFC3339Nano, after.At)
			seconds := t1.Sub(t0).Seconds()
			written := float64(*after.DataUnitsWritten-*before.DataUnitsWritten) * facts.DataUnitBytes
			text := fmt.Sprintf("%s: %s data_units_written %d → %d over %.0f s", in, d.Controller, *before.DataUnitsWritten, *after.DataUnitsWritten, seconds)
			if before.PercentUsed != nil && after.PercentUsed != nil {
				text += fmt.Sprintf(", percent_used %d%% → %d%%", *before.PercentUsed, *after.PercentUsed)
			}
			src := acceptance.Source{Tool: "nvme-cli", ToolVersion: opts.ToolVersion, Field: text}
			bytesM := opts.measurement(acceptance.MetricDriveBytesWritten, src)
			bytesM.Step, bytesM.Level, bytesM.Repetition = "", d.Controller, rep
			bytesM.Values = []float64{written}
			out = append(out, bytesM)
			if d.CapacityBytes > 0 {
				dwpd := opts.measurement(acceptance.MetricDriveWritesPerDay, src)
				dwpd.Step, dwpd.Level, dwpd.Repetition = "", d.Controller, rep
				dwpd.Values = []float64{written / float64(d.CapacityBytes) / seconds * secondsPerDay}
				dwpd.Source.Field += fmt.Sprintf(", capacity %d B", d.CapacityBytes)
				out = append(out, dwpd)
			}
		}
		if d.CapacityBytes <= 0 {
			warnings = append(warnings, fmt.Sprintf("drive %s: no namespace size in sysfs: no drive writes per day", d.Controller))
		}
		if d.Transport != "" && d.Transport != "pcie" {
			warnings = append(warnings, fmt.Sprintf("drive %s is an NVMe-oF (%s) controller: its smart-log is the target's, which other hosts may be writing too", d.Controller, d.Transport))
		}
	}
	return out, warnings, nil
}

// driveWearGap says why two readings give no wear, "" when they do.
func driveWearGap(before, after wire.SmartReading) string {
	switch {
	case before.Error != "":
		return "the reading before it: " + before.Error
	case after.Error != "":
		return "the reading after it: " + after.Error
	case before.DataUnitsWritten == nil || after.DataUnitsWritten == nil:
		return "smart-log gave no data_units_written"
	case *after.DataUnitsWritten < *before.DataUnitsWritten:
		return fmt.Sprintf("data_units_written went down (%d → %d): another drive, or its log was reset", *before.DataUnitsWritten, *after.DataUnitsWritten)
	case after.AfterRepetition <= before.AfterRepetition || after.AfterRepetition < 1:
		return "the readings are not in repetition order"
	}
	t0, err1 := time.Parse(time.RFC3339Nano, before.At)
	t1, err2 := time.Parse(time.RFC3339Nano, after.At)
	switch {
	case err1 != nil || err2 != nil:
		return "a reading has no valid time"
	case !t1.After(t0):
		return "the readings are not in time order"
	}
	return ""
}
