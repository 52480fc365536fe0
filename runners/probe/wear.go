package probe

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/wire"
)

// driveWear reads every NVMe controller's smart-log before the run's first
// step and after each repetition, so the run can say how much each
// repetition wrote to each drive and what share of its endurance that is. A host without NVMe
// controllers or without nvme-cli has no drive wear; that is said, never
// a failure.
type driveWear struct {
	r     *facts.Runner
	dir   string
	wear  wire.DriveWear
	byCtl map[string]int
}

var (
	controllerName = regexp.MustCompile(`^nvme[0-9]+$`)
	namespaceID    = regexp.MustCompile(`n([0-9]+)$`)
)

// startDriveWear takes the readings before the run.
func startDriveWear(ctx context.Context, r *facts.Runner, dir string) *driveWear {
	w := &driveWear{r: r, dir: dir, byCtl: map[string]int{}}
	for _, d := range r.Glob("/sys/class/nvme/nvme*") {
		name := path.Base(d)
		if !controllerName.MatchString(name) {
			continue
		}
		drive := wire.DriveWearDrive{Controller: name, Model: r.Attr(d + "/model").Value, Serial: r.Attr(d + "/serial").Value,
			Transport: r.Attr(d + "/transport").Value, CapacityBytes: capacityOf(r, d)}
		w.byCtl[name] = len(w.wear.Drives)
		w.wear.Drives = append(w.wear.Drives, drive)
	}
	w.readAll(ctx, 0)
	return w
}

// readAll takes every drive's reading after repetition rep (0: before the run).
func (w *driveWear) readAll(ctx context.Context, rep int) {
	for i := range w.wear.Drives {
		d := &w.wear.Drives[i]
		d.Readings = append(d.Readings, w.read(ctx, d.Controller, rep))
	}
}

// afterRepetition takes the readings that close repetition rep (even of a
// failed or cancelled one: what was written was written).
func (w *driveWear) afterRepetition(ctx context.Context, rep int) {
	if len(w.wear.Drives) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	w.readAll(ctx, rep)
}

// capacityOf sums the sizes (512-byte sectors) of a controller's
// namespaces: nvme0n1 and the per-path nvme0c0n1 name the same namespace,
// so each namespace id counts once.
func capacityOf(r *facts.Runner, ctrlDir string) int64 {
	seen := map[string]bool{}
	var total int64
	for _, ns := range r.Glob(ctrlDir + "/nvme*n*") {
		m := namespaceID.FindStringSubmatch(path.Base(ns))
		if m == nil || seen[m[1]] {
			continue
		}
		n, err := strconv.ParseInt(r.Attr(ns+"/size").Value, 10, 64)
		if err != nil || n <= 0 {
			continue
		}
		seen[m[1]] = true
		total += n * 512
	}
	return total
}

func (w *driveWear) read(ctx context.Context, ctrl string, rep int) wire.SmartReading {
	s := facts.ReadSmartLog(ctx, w.r, ctrl)
	rd := wire.SmartReading{AfterRepetition: rep, At: nowRFC3339(), DataUnitsWritten: s.DataUnitsWritten, DataUnitsRead: s.DataUnitsRead,
		PercentUsed: s.PercentUsed, PowerOnHours: s.PowerOnHours}
	switch {
	case s.Source.Absent:
		rd.Error = "nvme-cli is not installed"
	case s.Source.Error != "":
		rd.Error = s.Source.Error
	case len(s.Problems) > 0:
		rd.Error = strings.Join(s.Problems, "; ")
	}
	if s.Source.Raw != "" {
		rel := filepath.Join(wire.DriveWearDir, fmt.Sprintf("%s-after-rep-%d.json", ctrl, rep))
		if err := os.MkdirAll(filepath.Join(w.dir, wire.DriveWearDir), 0o755); err == nil {
			if err := os.WriteFile(filepath.Join(w.dir, rel), []byte(s.Source.Raw), 0o644); err == nil {
				rd.Raw = rel
			}
		}
	}
	return rd
}

// finish writes DriveWearFile with every reading taken. It returns a line
// for the event log.
func (w *driveWear) finish() (string, error) {
	if len(w.wear.Drives) == 0 {
		return "drive wear: no NVMe controller on this host", nil
	}
	var missing []string
	for _, d := range w.wear.Drives {
		for _, rd := range d.Readings {
			if rd.DataUnitsWritten == nil {
				missing = append(missing, d.Controller)
				break
			}
		}
	}
	if err := writeJSONAtomic(filepath.Join(w.dir, wire.DriveWearFile), w.wear); err != nil {
		return "", fmt.Errorf("drive wear: write %s: %w", wire.DriveWearFile, err)
	}
	msg := fmt.Sprintf("drive wear: smart-log of %d NVMe controllers read before the run and after each repetition", len(w.wear.Drives))
	if len(missing) > 0 {
		msg += "; no data_units_written from " + strings.Join(missing, ", ")
	}
	return msg, nil
}
