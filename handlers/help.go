package handlers

import (
	"net/http"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/web"
)

// methodHelp explains how Accord's numbers are made, beside the
// statistics and verdicts the acceptance package describes.
var methodHelp = []web.HelpEntry{
	{Term: "percentiles", Text: "Computed by Accord from raw samples (nearest rank) or, where a tool kept only histogram bins, from the bins. A tool's own summary numbers are shown beside Accord's, labelled."},
	{Term: "absolute limits", Text: "A percentile passes only if its distribution-free upper confidence bound is under the limit (for p99 at 95 % that needs at least 299 samples); it fails if the lower bound is over it. With several repetitions, each repetition's own percentile must clear the limit as well (see repetitions): the gate speaks of a typical run, not only of all requests pooled."},
	{Term: "relative criteria", Text: "The candidate against its baseline: (candidate − baseline) / baseline in percent, with a seeded bootstrap confidence interval (10,000 resamples over repetitions and samples), so that re-evaluation gives the same answer."},
	{Term: "repetitions", Text: "Whole runs differ from each other (a busier array, a warmer cache). With two or more repetitions, a percentile or mean is also tested on each repetition's own value (Student's t on their logs), and a verdict needs both tests to agree: few repetitions give wide bounds, which is the honest answer. From one repetition the interval covers sampling within that run only, and the method says so."},
	{Term: "rates", Text: "Throughputs and ratios are measured once per repetition; their interval comes from the repetitions, so a relative rate criterion needs at least three per side. An error rate also counts its requests: its bound comes from the exact binomial test on the failed of all requests as well, so no errors at all still has an honest upper bound (about 3/n)."},
	{Term: "Holm", Text: "With several blocking criteria, Holm's correction keeps the chance of any wrong PASS at the stated level; a pass that does not survive it is INCONCLUSIVE."},
	{Term: "stop-loss", Text: "A hard line on a criterion: interim windows of a running step are checked against it, and k consecutive breaches abort the run and halt the rollout stage."},
}

func (s *Server) showHelp(w http.ResponseWriter, r *http.Request) {
	var verdicts, statistics []web.HelpEntry
	for _, v := range []acceptance.Verdict{acceptance.Pass, acceptance.Fail, acceptance.Inconclusive, acceptance.Incomparable} {
		verdicts = append(verdicts, web.HelpEntry{Term: string(v), Text: acceptance.VerdictHelp(string(v))})
	}
	for _, st := range acceptance.Statistics {
		statistics = append(statistics, web.HelpEntry{Term: string(st), Text: acceptance.StatisticHelp(st)})
	}
	for _, m := range acceptance.CriterionModes {
		statistics = append(statistics, web.HelpEntry{Term: "mode " + string(m), Text: acceptance.ModeHelp(m)})
	}
	statistics = append(statistics, methodHelp...)
	p := s.page(r, "Help", "help")
	s.render(w, r, http.StatusOK, web.HelpPage(p, acceptance.Metrics(), statistics, verdicts))
}
