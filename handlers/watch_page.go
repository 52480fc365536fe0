package handlers

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
	"github.com/accordlab/accord/web/charts"
)

// The watch page: a stage's production watch, every check of the last
// week charted (the values, the line, each breach, the breaches in a row
// as they were, the halts), the latest checks as a table, and every kept
// check as CSV.

// watchPageWindow is how far back the page charts.
const watchPageWindow = 7 * 24 * time.Hour

// watchPageChecks bounds the checks read for the chart (a week of checks
// every 5 s is 121k; the chart draws at most charts' budget of them).
const watchPageChecks = 150_000

// watchPageRecent is how many of the latest checks the table lists.
const watchPageRecent = 50

// loadStageWatch loads {stageID} and its watch; 404 when it has none.
func (s *Server) loadStageWatch(w http.ResponseWriter, r *http.Request) (store.RolloutStage, store.Watch, bool) {
	stage, ok := s.loadStage(w, r)
	if !ok {
		return stage, store.Watch{}, false
	}
	ws, err := s.store.ListWatches(r.Context(), stage.ProgramID)
	if err != nil {
		s.serverError(w, r, err)
		return stage, store.Watch{}, false
	}
	for _, wt := range ws {
		if wt.StageID == stage.ID {
			return stage, wt, true
		}
	}
	s.renderError(w, r, http.StatusNotFound)
	return stage, store.Watch{}, false
}

func (s *Server) showWatch(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	stage, wt, ok := s.loadStageWatch(w, r)
	if !ok {
		return
	}
	since := time.Now().Add(-watchPageWindow)
	checks, err := s.store.ListWatchChecks(r.Context(), wt.ID, since, watchPageChecks)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	d := web.WatchPageData{Stage: stage.Name, StageID: stage.ID, Watch: watchView(wt), Since: since,
		CSVHref: web.ProgramLink(pr.ID, fmt.Sprintf("/rollout/stages/%d/watch/checks.csv", stage.ID))}
	ro, err := rollout.Load(r.Context(), s.store, pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	d.Watch.Active = rollout.WatchActive(ro, wt)
	d.Watch.Href = "" // this page
	if len(checks) > 0 {
		in := make([]chartdata.WatchCheck, len(checks))
		for i, c := range checks {
			in[i] = chartdata.WatchCheck{At: c.At, Line: c.Line, PastLine: c.PastLine, Breaches: c.Breaches, Triggered: c.Triggered}
			if c.Value != nil {
				in[i].Value, in[i].HasValue = *c.Value, true
			}
		}
		option, table, err := charts.Watch(charts.WatchInput{Name: wt.Name, Unit: wt.Unit, Consecutive: wt.Consecutive, Data: chartdata.ReduceWatch(in, 0)})
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		d.Chart = &web.ChartBlock{ID: "watch-chart", Title: wt.Name + " over time",
			Help:   fmt.Sprintf("Each check's value, the stop-loss line as it was, each value past it in red, and on the right the breaches in a row after each check: %d in a row halt the stage.", wt.Consecutive),
			Option: option, CSVHref: d.CSVHref, Table: &web.ChartTable{Head: table.Head, Rows: table.Rows}}
	}
	for i := len(checks) - 1; i >= 0 && len(d.Recent) < watchPageRecent; i-- {
		d.Recent = append(d.Recent, watchCheckRow(checks[i], wt))
	}
	p := s.page(r, "Production watch · "+stage.Name, "programs", s.rolloutCrumbs(pr, "Watch of "+stage.Name)...)
	s.render(w, r, http.StatusOK, web.WatchPage(p, pr.ProgramAccess, d))
}

func watchCheckRow(c store.WatchCheck, wt store.Watch) web.WatchCheckRow {
	row := web.WatchCheckRow{At: c.At, Line: rollout.FormatWatchValue(c.Line, wt.Unit), PastLine: c.PastLine, Breaches: c.Breaches,
		Triggered: c.Triggered, Error: c.Error}
	if c.Value != nil {
		row.Value = rollout.FormatWatchValue(*c.Value, wt.Unit)
	}
	return row
}

// downloadWatchChecks writes every kept check (90 days) as CSV.
func (s *Server) downloadWatchChecks(w http.ResponseWriter, r *http.Request) {
	stage, wt, ok := s.loadStageWatch(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="watch-stage-%d-checks.csv"`, stage.ID))
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"checked_at", "value", "unit", "line", "past_line", "breaches_in_a_row", "halted_the_stage", "error"})
	err := s.store.EachWatchCheck(r.Context(), wt.ID, func(c store.WatchCheck) error {
		value := ""
		if c.Value != nil {
			value = strconv.FormatFloat(*c.Value, 'g', -1, 64)
		}
		return cw.Write([]string{c.At.UTC().Format(time.RFC3339Nano), value, wt.Unit, strconv.FormatFloat(c.Line, 'g', -1, 64),
			strconv.FormatBool(c.PastLine), strconv.Itoa(c.Breaches), strconv.FormatBool(c.Triggered), c.Error})
	})
	cw.Flush()
	if err != nil {
		// The status is sent: the download ends short, and the log says why.
		s.log.Error("watch checks CSV cut short", "request_id", requestID(r.Context()), "watch", wt.ID, "err", err)
	}
}
