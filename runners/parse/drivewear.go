package parse

import (
	"encoding/json"
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

// ImportDriveWear reads the drives' smart-log before and after the run into
// drive_bytes_written (the rise of data_units_written, in bytes) and
// drive_writes_per_day (those bytes over the drive's capacity, at the
// run's rate: bytes / capacity / seconds between the readings × one day),
// one pair per drive with the controller as the level and no step (the
// whole run). A drive whose readings cannot give them is a warning that
// says why; so is a fabric controller, whose log is the array's, shared
// with whatever else uses it.
func ImportDriveWear(data []byte, opts Options) ([]acceptance.Measurement, []string, error) {
	in := opts.name(wire.DriveWearFile)
	if int64(len(data)) > opts.limit(MaxToolJSONBytes) {
		return nil, nil, tooLarge(in, int64(len(data)), opts.limit(MaxToolJSONBytes))
	}
	var w wire.DriveWear
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, nil, &Error{Input: in, Err: jsonErr(err)}
	}
	var out []acceptance.Measurement
	var warnings []string
	for i, d := range w.Drives {
		field := fmt.Sprintf("drives[%d]", i)
		if d.Controller == "" {
			return nil, nil, errf(in, 0, field+".controller", "missing")
		}
		why := driveWearGap(d)
		if why != "" {
			warnings = append(warnings, fmt.Sprintf("drive wear of %s not measured: %s", d.Controller, why))
			continue
		}
		before, _ := time.Parse(time.RFC3339Nano, d.Before.At)
		after, _ := time.Parse(time.RFC3339Nano, d.After.At)
		seconds := after.Sub(before).Seconds()
		units := *d.After.DataUnitsWritten - *d.Before.DataUnitsWritten
		written := float64(units) * facts.DataUnitBytes
		text := fmt.Sprintf("%s: %s data_units_written %d → %d over %.0f s", in, d.Controller, *d.Before.DataUnitsWritten, *d.After.DataUnitsWritten, seconds)
		if d.Before.PercentUsed != nil && d.After.PercentUsed != nil {
			text += fmt.Sprintf(", percent_used %d%% → %d%%", *d.Before.PercentUsed, *d.After.PercentUsed)
		}
		src := acceptance.Source{Tool: "nvme-cli", ToolVersion: opts.ToolVersion, Field: text}
		bytesM := opts.measurement(acceptance.MetricDriveBytesWritten, src)
		bytesM.Step, bytesM.Level = "", d.Controller
		bytesM.Values = []float64{written}
		out = append(out, bytesM)
		if d.CapacityBytes <= 0 {
			warnings = append(warnings, fmt.Sprintf("drive %s: no namespace size in sysfs: no drive writes per day", d.Controller))
		} else {
			dwpd := opts.measurement(acceptance.MetricDriveWritesPerDay, src)
			dwpd.Step, dwpd.Level = "", d.Controller
			dwpd.Values = []float64{written / float64(d.CapacityBytes) / seconds * secondsPerDay}
			dwpd.Source.Field += fmt.Sprintf(", capacity %d B", d.CapacityBytes)
			out = append(out, dwpd)
		}
		if d.Transport != "" && d.Transport != "pcie" {
			warnings = append(warnings, fmt.Sprintf("drive %s is an NVMe-oF (%s) controller: its smart-log is the target's, which other hosts may be writing too", d.Controller, d.Transport))
		}
	}
	return out, warnings, nil
}

// driveWearGap says why a drive's readings give no wear, "" when they do.
func driveWearGap(d wire.DriveWearDrive) string {
	switch {
	case d.Before == nil || d.After == nil:
		return "a reading is missing"
	case d.Before.Error != "":
		return "before the run: " + d.Before.Error
	case d.After.Error != "":
		return "after the run: " + d.After.Error
	case d.Before.DataUnitsWritten == nil || d.After.DataUnitsWritten == nil:
		return "smart-log gave no data_units_written"
	case *d.After.DataUnitsWritten < *d.Before.DataUnitsWritten:
		return fmt.Sprintf("data_units_written went down (%d → %d): another drive, or its log was reset", *d.Before.DataUnitsWritten, *d.After.DataUnitsWritten)
	}
	before, err1 := time.Parse(time.RFC3339Nano, d.Before.At)
	after, err2 := time.Parse(time.RFC3339Nano, d.After.At)
	switch {
	case err1 != nil || err2 != nil:
		return "a reading has no valid time"
	case !after.After(before):
		return "the readings are not in time order"
	}
	return ""
}
