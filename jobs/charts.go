package jobs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/runners/parse"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/store"
)

// RunFiles are a run folder's files by path (relative to the folder),
// for the aggregates that need raw records: the send time of every
// request, the telemetry samples.
type RunFiles interface {
	Names() []string
	Open(name string) (io.ReadCloser, error)
}

type collectionFiles struct{ c *sshrun.Collection }

// CollectionFiles reads a collected run folder: files stay where the
// collection keeps them (in memory or in a temporary file) and are
// streamed.
func CollectionFiles(c *sshrun.Collection) RunFiles { return collectionFiles{c} }

func (f collectionFiles) Names() []string {
	names := make([]string, len(f.c.Files))
	for i, x := range f.c.Files {
		names[i] = x.Name
	}
	return names
}

func (f collectionFiles) Open(name string) (io.ReadCloser, error) {
	x, ok := f.c.File(name)
	if !ok {
		return nil, fmt.Errorf("%s is not in the run folder", name)
	}
	return x.Open()
}

// precomputeCharts stores a run's chart aggregates at ingest (in the
// ingest transaction), so that pages never recompute them.
func precomputeCharts(ctx context.Context, tx *store.Store, run store.Run, ms []acceptance.Measurement, c *sshrun.Collection) error {
	return PrecomputeCharts(ctx, tx, run, ms, CollectionFiles(c))
}

// PrecomputeCharts computes every chart aggregate of a run
// (acceptance/chartdata) from its measurements, its raw request and
// telemetry records, its baseline's measurements and its host facts, and
// replaces the run's stored aggregates with them. What cannot be computed
// from the data is noted in the aggregates' meta, never an error: a chart
// must not cost a run its results. Errors are the database's.
func PrecomputeCharts(ctx context.Context, tx *store.Store, run store.Run, ms []acceptance.Measurement, files RunFiles) error {
	in, err := chartInput(ctx, tx, run, ms, files)
	if err != nil {
		return fmt.Errorf("charts of run %d: %w", run.ID, err)
	}
	docs, err := chartdata.Compute(in).Documents()
	if err != nil {
		return fmt.Errorf("charts of run %d: %w", run.ID, err)
	}
	return tx.SaveRunCharts(ctx, run.ID, docs)
}

// chartInput reads what a run's chart data are made of: its profile, its
// baseline's measurements, its comparable host facts and the step results
// and records of its run folder.
func chartInput(ctx context.Context, st *store.Store, run store.Run, ms []acceptance.Measurement, files RunFiles) (chartdata.Input, error) {
	in := chartdata.Input{Measurements: ms, BaselineRunID: run.BaselineRunID}
	if run.ProfileVersionID != nil {
		pv, err := st.GetSpecVersionByID(ctx, store.KindProfile, run.ProgramID, *run.ProfileVersionID)
		if err != nil {
			return in, err
		}
		if err := json.Unmarshal(pv.Spec, &in.Profile); err != nil {
			in.Notes = append(in.Notes, "the profile could not be read: "+err.Error())
		}
	}
	var notes []string
	in.Steps, notes = readStepResults(files)
	in.Notes = append(in.Notes, notes...)
	in.Records = readRecords(ctx, files, in.Steps)
	if run.BaselineRunID != nil {
		var err error
		if in.Baseline, err = st.LoadMeasurements(ctx, *run.BaselineRunID); err != nil {
			return in, err
		}
	}
	f, ok, err := comparableFacts(ctx, st, run.ID)
	switch {
	case errors.Is(err, errUnreadableFacts):
		in.Notes = append(in.Notes, err.Error())
	case err != nil:
		return in, err
	case ok:
		in.Facts = f
	}
	return in, nil
}

// readStepResults reads every step result of the run folder, ordered by
// start, with offsets from the first start.
func readStepResults(files RunFiles) ([]chartdata.StepRun, []string) {
	var out []chartdata.StepRun
	var notes []string
	for _, name := range files.Names() {
		if path.Base(name) != wire.StepResultFile || !strings.HasPrefix(name, wire.OutputDir+"/") {
			continue
		}
		var res wire.StepResult
		if err := readJSON(files, name, &res); err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		sr := chartdata.StepRun{Step: res.Step, Level: res.Level, Repetition: res.Repetition, Index: res.Index,
			Failed: res.Error != "", Dir: path.Dir(name), Format: res.Format}
		if t, err := time.Parse(time.RFC3339Nano, res.StartedAt); err == nil {
			sr.Start = t
		}
		out = append(out, sr)
	}
	chartdata.OrderSteps(out)
	return out, notes
}

func readJSON(files RunFiles, name string, v any) error {
	r, err := files.Open(name)
	if err != nil {
		return err
	}
	defer r.Close()
	return json.NewDecoder(io.LimitReader(r, 64<<20)).Decode(v)
}

// readRecords reads requests.jsonl and telemetry.jsonl of every step
// result; problems become notes.
func readRecords(ctx context.Context, files RunFiles, steps []chartdata.StepRun) *chartdata.Records {
	rec := chartdata.NewRecords(telemetryQuantities)
	names := map[string]bool{}
	for _, n := range files.Names() {
		names[n] = true
	}
	for _, r := range steps {
		if ctx.Err() != nil {
			rec.Note(ctx.Err().Error())
			return rec
		}
		if name := path.Join(r.Dir, wire.RequestsFile); r.Format == "probe-requests" && names[name] {
			if err := readRequests(rec, files, name, r); err != nil {
				rec.Note(fmt.Sprintf("%s: %v", name, err))
			}
		}
		if name := path.Join(r.Dir, wire.TelemetryFile); names[name] {
			if err := readTelemetry(rec, files, name, r); err != nil {
				rec.Note(fmt.Sprintf("%s: %v", name, err))
			}
		}
	}
	return rec
}

func readRequests(rec *chartdata.Records, files RunFiles, name string, r chartdata.StepRun) error {
	f, err := files.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	lineNo := 0
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return fmt.Errorf("line %d is longer than %d bytes", lineNo+1, br.Size())
		}
		if len(line) > 0 {
			lineNo++
			if len(bytes.TrimSpace(line)) > 0 {
				var w wire.RequestRecord
				failed, derr := parse.DecodeRequestRecord(line, &w)
				if derr != nil {
					return fmt.Errorf("line %d: %w", lineNo, derr)
				}
				rec.AddRequest(r.Step, r.Offset, chartdata.Request{Sent: w.Sent, FirstToken: w.FirstToken, Done: w.Done,
					OutputTokens: int64(w.OutputTokens), Warmup: w.Warmup, Failed: failed})
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// telemetryFields are the charted telemetry quantities, in order.
var telemetryFields = []struct {
	chartdata.Quantity
	get func(s *wire.TelemetrySample) (float64, bool)
}{
	{chartdata.Quantity{Key: "cpu", Name: "CPU busy", Unit: "%"}, func(s *wire.TelemetrySample) (float64, bool) { return s.CPUBusyPct, true }},
	{chartdata.Quantity{Key: "gpu", Name: "GPU", Unit: "%"}, func(s *wire.TelemetrySample) (float64, bool) {
		if s.GPUUtilPct == nil {
			return 0, false
		}
		return *s.GPUUtilPct, true
	}},
	{chartdata.Quantity{Key: "disk", Name: "Disk busy", Unit: "%"}, func(s *wire.TelemetrySample) (float64, bool) { return s.DiskBusyPct, true }},
	{chartdata.Quantity{Key: "disk_read", Name: "Disk read", Unit: "MB/s"}, func(s *wire.TelemetrySample) (float64, bool) { return s.DiskReadBps / 1e6, true }},
	{chartdata.Quantity{Key: "disk_write", Name: "Disk write", Unit: "MB/s"}, func(s *wire.TelemetrySample) (float64, bool) { return s.DiskWriteBps / 1e6, true }},
	{chartdata.Quantity{Key: "nic_rx", Name: "NIC receive", Unit: "MB/s"}, func(s *wire.TelemetrySample) (float64, bool) { return s.NICRxBps / 1e6, true }},
	{chartdata.Quantity{Key: "nic_tx", Name: "NIC send", Unit: "MB/s"}, func(s *wire.TelemetrySample) (float64, bool) { return s.NICTxBps / 1e6, true }},
}

var telemetryQuantities = func() []chartdata.Quantity {
	out := make([]chartdata.Quantity, len(telemetryFields))
	for i, f := range telemetryFields {
		out[i] = f.Quantity
	}
	return out
}()

func readTelemetry(rec *chartdata.Records, files RunFiles, name string, r chartdata.StepRun) error {
	f, err := files.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReader(f))
	for {
		var s wire.TelemetrySample
		if err := dec.Decode(&s); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		x := r.Offset + float64(s.T)/1e9
		for q, fld := range telemetryFields {
			if v, ok := fld.get(&s); ok {
				rec.AddTelemetry(q, x, v)
			}
		}
	}
}
