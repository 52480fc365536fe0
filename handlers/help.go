package handlers

import (
	"net/http"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/web"
)

var verdictHelp = []web.HelpEntry{
	{Term: "PASS", Text: "The evidence shows the criterion is met at the stated confidence: for a limit, the whole confidence interval is on the right side of it."},
	{Term: "FAIL", Text: "The evidence shows the criterion is not met: the whole confidence interval is on the wrong side of the limit."},
	{Term: "INCONCLUSIVE", Text: "The interval straddles the limit, or there are fewer samples or repetitions than the criterion needs. The explanation says how many more would decide."},
	{Term: "INCOMPARABLE", Text: "The candidate and the baseline ran on hosts whose facts differ where it matters (kernel, GPU driver or model, NVMe firmware, fabric). The difference is shown; fix it and run again."},
}

var statisticHelp = []web.HelpEntry{
	{Term: "p50 … p99.9", Text: "Percentiles computed by Accord from raw samples (or histogram bins where the tool only kept bins). Limits on a percentile use a distribution-free confidence bound: p99 passes only if its upper 95 % bound is under the limit."},
	{Term: "mean", Text: "The arithmetic mean, with a confidence interval."},
	{Term: "max", Text: "The largest sample; no interval."},
	{Term: "rate", Text: "A throughput or ratio measured once per repetition; its interval comes from the repetitions, so it needs at least three of them."},
	{Term: "relative", Text: "A relative criterion compares the candidate with its baseline run: (candidate − baseline) / baseline in percent, with a seeded bootstrap confidence interval (10,000 resamples), so that re-evaluation gives the same answer."},
	{Term: "Holm", Text: "When a gate set has several criteria, Holm's correction keeps the chance of any wrong PASS at the stated level."},
}

func (s *Server) showHelp(w http.ResponseWriter, r *http.Request) {
	p := s.page(r, "Help", "help")
	s.render(w, r, http.StatusOK, web.HelpPage(p, acceptance.Metrics(), statisticHelp, verdictHelp))
}
