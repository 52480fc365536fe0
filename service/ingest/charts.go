package ingest

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
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/store"
)

// Charts computes the chart data of a run's results (acceptance/chartdata)
// from their measurements, the run folder's step results and raw request
// and telemetry records, the folder's host facts and the baseline's
// measurements. It runs the gate engine's bootstrap for the comparison
// with the baseline, so it is called before Save's transaction, never in
// it. What cannot be computed from the data is noted in the chart data's
// meta, never an error: a chart must not cost a run its results. Errors
// are the database's.
func Charts(ctx context.Context, st *store.Store, profile acceptance.ProfileSpec, baselineRunID *int64, res Results) (map[string]json.RawMessage, error) {
	in := chartdata.Input{Profile: profile, Measurements: res.Measurements, BaselineRunID: baselineRunID}
	files := CollectionFiles(res.Files)
	var notes []string
	in.Steps, notes = readStepResults(files)
	in.Notes = append(in.Notes, notes...)
	in.Records = readRecords(ctx, files, in.Steps)
	if baselineRunID != nil {
		var err error
		if in.Baseline, err = st.RunMeasurements(ctx, *baselineRunID); err != nil {
			return nil, fmt.Errorf("charts: baseline run %d: %w", *baselineRunID, err)
		}
	}
	if f, ok := res.Files.File(wire.FactsFile); ok {
		raw, err := readFile(f)
		if err != nil {
			return nil, fmt.Errorf("charts: %w", err)
		}
		if in.Facts, err = facts.ComparableJSON(raw); err != nil {
			in.Notes = append(in.Notes, err.Error())
		}
	}
	return chartdata.Compute(in).Documents()
}

// readStepResults reads every step result of the run folder, ordered by
// start, with offsets from the first start.
func readStepResults(files Files) ([]chartdata.StepRun, []string) {
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

func readJSON(files Files, name string, v any) error {
	r, err := files.Open(name)
	if err != nil {
		return err
	}
	defer r.Close()
	return json.NewDecoder(io.LimitReader(r, 64<<20)).Decode(v)
}

// readRecords reads requests.jsonl and telemetry.jsonl of every step
// result; problems become notes.
func readRecords(ctx context.Context, files Files, steps []chartdata.StepRun) *chartdata.Records {
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

func readRequests(rec *chartdata.Records, files Files, name string, r chartdata.StepRun) error {
	f, _, _, err := openRecords(files, name)
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

// telemetryField is one charted quantity and how a sample gives it.
type telemetryField struct {
	chartdata.Quantity
	get func(s *wire.TelemetrySample) (float64, bool)
}

// telemetryFields are the charted telemetry quantities, in order.
var telemetryFields = []telemetryField{
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
	counterField(chartdata.GroupStorage, acceptance.MetricNSReadLatency, "Namespace read latency", "µs"),
	counterField(chartdata.GroupStorage, acceptance.MetricNSWriteLatency, "Namespace write latency", "µs"),
	counterField(chartdata.GroupFabric, acceptance.MetricRDMARetransmits, "RDMA retransmits", "/s"),
	counterField(chartdata.GroupFabric, acceptance.MetricRDMASeqErrors, "RDMA sequence errors", "/s"),
	counterField(chartdata.GroupFabric, acceptance.MetricRDMACNPSent, "CNPs sent", "/s"),
	counterField(chartdata.GroupFabric, acceptance.MetricRDMACNPHandled, "CNPs handled", "/s"),
	counterField(chartdata.GroupFabric, acceptance.MetricRDMAECNMarked, "ECN-marked packets", "/s"),
	counterField(chartdata.GroupFabric, acceptance.MetricRDMADiscards, "RDMA discards", "/s"),
	counterField(chartdata.GroupFabric, acceptance.MetricNICErrors, "NIC errors", "/s"),
	counterField(chartdata.GroupFabric, acceptance.MetricNICDrops, "NIC drops", "/s"),
	counterField(chartdata.GroupFabric, acceptance.MetricNICPauseFrames, "Pause frames", "/s"),
}

// counterField charts one of the fabric's or drives' counter rates (the
// sample's Counters, by metric id): present only in the seconds the host
// had the counter, so a host without RDMA ports draws no RDMA line.
func counterField(group, metric, name, unit string) telemetryField {
	return telemetryField{chartdata.Quantity{Key: metric, Name: name, Unit: unit, Group: group}, func(s *wire.TelemetrySample) (float64, bool) {
		v, ok := s.Counters[metric]
		return v, ok
	}}
}

var telemetryQuantities = func() []chartdata.Quantity {
	out := make([]chartdata.Quantity, len(telemetryFields))
	for i, f := range telemetryFields {
		out[i] = f.Quantity
	}
	return out
}()

func readTelemetry(rec *chartdata.Records, files Files, name string, r chartdata.StepRun) error {
	f, _, _, err := openRecords(files, name)
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
