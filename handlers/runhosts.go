package handlers

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/service/ingest"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// A multi-host run's page shows the hosts combined (what the gate set
// judges) and, on ?host=N, one host's own charts (its chart data under
// ingest.KeyHostCharts); a panel links the views and lays every host's
// pooled figures beside the combined ones.

// combinedView is the ordinal of the hosts combined in the page's links.
const combinedView = -1

// selectedHost reads ?host= (a host's ordinal in the run); an ordinal the
// run does not have is not found.
func selectedHost(r *http.Request, hosts []store.RunHost) (int, error) {
	raw := r.URL.Query().Get("host")
	if raw == "" {
		return combinedView, nil
	}
	n, err := strconv.Atoi(raw)
	if err == nil {
		for _, h := range hosts {
			if h.Ordinal == n {
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("host %q of the run: %w", raw, store.ErrNotFound)
}

// runHostResults fills a multi-host run's host views: the choices, every
// host's figures, and, when a host is chosen, its own charts instead of
// the combined ones.
func (s *Server) runHostResults(r *http.Request, run store.Run, hosts []store.RunHost, d *web.RunPageData) error {
	ctx := r.Context()
	pr := programFrom(ctx)
	sel, err := selectedHost(r, hosts)
	if err != nil {
		return err
	}
	h := &web.RunHostResults{RunID: run.ID, Selected: sel}
	base := web.ProgramLink(pr.ID, fmt.Sprintf("/runs/%d", run.ID))
	h.Views = append(h.Views, web.RunHostChoice{Ordinal: combinedView, Label: "All hosts combined", Current: sel == combinedView, Href: base + "#run-host-results"})
	for _, host := range hosts {
		h.Views = append(h.Views, web.RunHostChoice{Ordinal: host.Ordinal, Label: host.HostName + " (" + host.Role + ")", Current: sel == host.Ordinal,
			Href: fmt.Sprintf("%s?host=%d#run-host-results", base, host.Ordinal), HostName: host.HostName, Role: host.Role})
	}

	combined, ok, err := s.loadAggregates(ctx, run.ID, chartdata.KeyMeta, chartdata.KeySummary)
	if err != nil {
		return err
	}
	if !ok {
		return nil // no results yet: nothing to choose between
	}
	perHost := map[int]chartdata.Aggregates{}
	for _, host := range hosts {
		if sel != combinedView && host.Ordinal != sel {
			continue
		}
		a, ok, err := s.hostAggregates(ctx, run.ID, host.Ordinal, chartdata.KeyMeta, chartdata.KeySummary)
		if err != nil {
			return err
		}
		if !ok {
			h.Missing = append(h.Missing, fmt.Sprintf("Host %s (%s) has no results of its own: its folder was not read (see the run's log).", host.HostName, host.Role))
			continue
		}
		perHost[host.Ordinal] = a
	}
	h.Rows = hostFigureRows(combined, hosts, perHost)
	d.HostResults = h
	if sel == combinedView {
		return nil
	}
	d.Charts, err = s.hostRunCharts(r, run, sel)
	return err
}

// hostAggregates reads one host's chart documents of a multi-host run
// (the keys as a one-host run's).
func (s *Server) hostAggregates(ctx context.Context, runID int64, ordinal int, keys ...string) (chartdata.Aggregates, bool, error) {
	prefix := ingest.KeyHostCharts(ordinal)
	patterns := make([]string, len(keys))
	for i, k := range keys {
		patterns[i] = prefix + k
	}
	docs, err := s.store.RunCharts(ctx, runID, patterns...)
	if err != nil {
		return chartdata.Aggregates{}, false, err
	}
	for k, v := range docs {
		delete(docs, k)
		docs[strings.TrimPrefix(k, prefix)] = v
	}
	a, ok, err := chartdata.Decode(docs)
	if err != nil {
		return a, false, fmt.Errorf("charts of run %d host %d: %w", runID, ordinal, err)
	}
	return a, ok, nil
}

// hostRunCharts are the run page's charts of one host's own results,
// with the gate set's limits (which judge the hosts combined) and no
// baseline: the baseline run is compared with the hosts combined.
func (s *Server) hostRunCharts(r *http.Request, run store.Run, ordinal int) ([]web.ChartBlock, error) {
	ctx := r.Context()
	a, ok, err := s.hostAggregates(ctx, run.ID, ordinal, "meta", "summary", "cdf:%", "overrun:%", "timeseries", "pct:%")
	if err != nil || !ok {
		return nil, err
	}
	limits, err := s.gateLimits(ctx, run.ProgramID, run.GateSetVersionID)
	if err != nil {
		return nil, err
	}
	b := runChartBuilder{run: run, a: a, limits: limits}
	return b.build()
}

// hostFigureRows lays out each series the run measured (telemetry left
// to the hosts' own pages): the hosts combined, then each host that has
// it, in the hosts' order.
func hostFigureRows(combined chartdata.Aggregates, hosts []store.RunHost, perHost map[int]chartdata.Aggregates) []web.HostFigureRow {
	type key struct{ metric, step, level string }
	order := map[string]int{}
	for i, m := range acceptance.Metrics() {
		order[m.ID] = i
	}
	var keys []key
	seen := map[key]bool{}
	add := func(st chartdata.SeriesStats) {
		k := key{st.Metric, st.Step, st.Level}
		if meta, ok := acceptance.LookupMetric(st.Metric); (ok && meta.Group == acceptance.GroupSystem) || seen[k] {
			return
		}
		seen[k] = true
		keys = append(keys, k)
	}
	for _, st := range combined.Summary {
		add(st)
	}
	for _, host := range hosts {
		for _, st := range perHost[host.Ordinal].Summary {
			add(st)
		}
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.step, b.step), acceptance.CompareLevels(a.level, b.level), cmp.Compare(order[a.metric], order[b.metric]), cmp.Compare(a.metric, b.metric))
	})
	var rows []web.HostFigureRow
	for _, k := range keys {
		name, unit := k.metric, ""
		if meta, ok := acceptance.LookupMetric(k.metric); ok {
			name, unit = meta.Name, string(meta.Unit)
		}
		series := name + " · " + seriesLabelText(k.step, k.level)
		first := true
		row := func(st chartdata.SeriesStats, host, role string) {
			p50, ok50 := st.Stat("p50")
			p99, ok99 := st.Stat("p99")
			rows = append(rows, web.HostFigureRow{Series: series, Unit: unit, Host: host, Role: role, Combined: host == "", First: first,
				N: st.N, Reps: st.Repetitions, Rate: st.Rate, P50: p50, P99: p99, Mean: st.Mean, HasPercentiles: ok50 && ok99})
			first = false
		}
		if st, ok := combined.Stats(k.metric, k.step, k.level); ok {
			row(st, "", "")
		}
		for _, host := range hosts {
			if a, ok := perHost[host.Ordinal]; ok {
				if st, ok := a.Stats(k.metric, k.step, k.level); ok {
					row(st, host.HostName, host.Role)
				}
			}
		}
	}
	return rows
}
