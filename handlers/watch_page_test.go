package handlers

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/browsertest"
	"github.com/accordlab/accord/web/htmltest"
)

// watchedStage is a rollout whose stage has a production watch with a
// history: values within the line, a failed query, three in a row past
// it that halted the stage (the last one +Inf), and one after the line
// was moved.
func watchedStage(t *testing.T) (*rolloutBundle, int64) {
	t.Helper()
	rb := setupRollout(t)
	rb.addStages(t, "pilot-5pct")
	ctx := context.Background()
	stage := rb.stageID(t, "pilot-5pct")
	watchID, err := rb.store.SetWatch(ctx, rb.programID, stage, store.NewWatch{Name: "p99 TTFT of the fleet", Endpoint: "http://127.0.0.1:9/prom",
		Query: `histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[1m])))`, Comparator: "<=", Line: 2, Unit: "s",
		Consecutive: 3, IntervalSeconds: 30})
	require.NoError(t, err)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	v := func(x float64) *float64 { return &x }
	for i, c := range []store.WatchCheck{
		{Value: v(1.1), Line: 2},
		{Value: v(1.4), Line: 2},
		{Line: 2, Error: "query: HTTP 503: API error unavailable: the storage is warming up"},
		{Value: v(2.4), Line: 2, PastLine: true, Breaches: 1},
		{Value: v(2.9), Line: 2, PastLine: true, Breaches: 2},
		{Value: v(math.Inf(1)), Line: 2, PastLine: true, Breaches: 3, Triggered: true},
		{Value: v(1.2), Line: 1.5},
	} {
		c.WatchID, c.At = watchID, t0.Add(time.Duration(i)*30*time.Second)
		require.NoError(t, rb.store.AddWatchCheck(ctx, c))
	}
	return rb, stage
}

// The watch page charts every check (values, the line as it was, each
// breach, the breaches in a row, the halt), lists the latest checks with
// the count as it was at each, and offers them all as CSV; the board
// links to it.
func TestWatchPageChartsEveryCheck(t *testing.T) {
	t.Parallel()
	rb, stage := watchedStage(t)
	page := rb.board(t, rb.viewer)
	href := fmt.Sprintf("/programs/%d/rollout/stages/%d/watch", rb.programID, stage)
	require.Contains(t, page, `href="`+href+`"`)

	res, page := rb.get(t, rb.viewer, href)
	require.Equal(t, http.StatusOK, res.StatusCode)
	doc := htmltest.Parse(t, page)
	var option struct {
		Series []struct {
			Name string            `json:"name"`
			Data []json.RawMessage `json:"data"`
		} `json:"series"`
	}
	require.NoError(t, json.Unmarshal([]byte(htmltest.RawText(htmltest.ByID(doc, "watch-chart"))), &option))
	points := map[string]int{}
	for _, s := range option.Series {
		points[s.Name] = len(s.Data)
	}
	require.Equal(t, map[string]int{"p99 TTFT of the fleet": 6, "checks within the line": 3, "past the line": 3, "stop-loss line": 2,
		"breaches in a row": 5, "stage halted": 0}, points)

	rows := htmltest.All(htmltest.ByID(doc, "watch-checks"), func(n *html.Node) bool { return n.Data == "tr" })
	require.Len(t, rows, 8, "a head and the seven checks")
	texts := make([]string, len(rows))
	for i, r := range rows {
		var cells []string
		for _, c := range htmltest.All(r, func(n *html.Node) bool { return n.Data == "td" }) {
			if t := htmltest.Text(c); t != "" {
				cells = append(cells, t)
			}
		}
		texts[i] = strings.Join(cells, " ")
	}
	require.Contains(t, texts[1], "1.2 s 1.5 s 0 / 3", "newest first, the line as it was then")
	require.Contains(t, texts[2], "+Inf s 2 s past 3 / 3 stage halted")
	require.Contains(t, texts[3], "2.9 s 2 s past 2 / 3")
	require.Contains(t, texts[5], "none 2 s 0 / 3 query: HTTP 503")
	summary := htmltest.All(htmltest.ByID(doc, "block-watch-chart"), func(n *html.Node) bool { return n.Data == "td" })
	var cells []string
	for _, c := range summary {
		cells = append(cells, htmltest.Text(c))
	}
	require.Equal(t, []string{"7", "1", "3", "1", "6"}, cells, "checks, without a value, past the line, halts, drawn")

	res, body := rb.get(t, rb.viewer, href+"/checks.csv")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "text/csv; charset=utf-8", res.Header.Get("Content-Type"))
	records, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, 8)
	require.Equal(t, []string{"checked_at", "value", "unit", "line", "past_line", "breaches_in_a_row", "halted_the_stage", "error"}, records[0])
	require.Equal(t, []string{"+Inf", "s", "2", "true", "3", "true", ""}, records[6][1:])

	// A stage without a watch has no watch page.
	rb.addStages(t, "fleet-100pct")
	res, _ = rb.get(t, rb.viewer, fmt.Sprintf("/programs/%d/rollout/stages/%d/watch", rb.programID, rb.stageID(t, "fleet-100pct")))
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

// In the browser the watch chart is drawn under the strict CSP.
func TestBrowserWatchPageDrawsItsChart(t *testing.T) {
	t.Parallel()
	rb, stage := watchedStage(t)
	br := browsertest.New(t)
	signInBrowser(br, rb.ts.URL, "view@customer.example")
	br.Do(chromedp.Navigate(rb.ts.URL+fmt.Sprintf("/programs/%d/rollout/stages/%d/watch", rb.programID, stage)), chromedp.WaitVisible(chromedp.ID("watch-checks")))
	waitForCharts(t, br, 1)
	time.Sleep(300 * time.Millisecond) // late console events
	br.Screenshot("watch-page")
	require.Empty(t, br.Problems())
	require.Empty(t, br.ForeignRequests(rb.ts.URL))
}

// fallingPrometheus answers a value past a line of 2 s at every check, and
// dates the crossing from a range query: the last point within the line,
// then past it.
type fallingPrometheus struct{ crossed time.Time }

func (p fallingPrometheus) Value(context.Context, string, string, string) (float64, error) {
	return 3.5, nil
}

func (p fallingPrometheus) Range(_ context.Context, _, _, _ string, start, end time.Time, step time.Duration) ([]store.WatchPoint, error) {
	var pts []store.WatchPoint
	for at := start; !at.After(end); at = at.Add(step) {
		v := 1.0
		if !at.Before(p.crossed) {
			v = 3.5
		}
		pts = append(pts, store.WatchPoint{At: at, Value: v})
	}
	return pts, nil
}

// The decisions page shows a watch's stop-loss with the time from the
// breach to the halt, as its signed evidence has it.
func TestDecisionsPageShowsBreachToHalt(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	rb.addStages(t, "pilot-5pct")
	ctx := context.Background()
	watchID, err := rb.store.SetWatch(ctx, rb.programID, rb.stageID(t, "pilot-5pct"), store.NewWatch{Name: "p99 TTFT of the fleet",
		Endpoint: "http://127.0.0.1:9/prom", Query: "vllm_p99", Comparator: "<=", Line: 2, Unit: "s", Consecutive: 2, IntervalSeconds: 30})
	require.NoError(t, err)
	env := rollout.Env{Keyring: rb.keyring, Queue: jobs.NewQueue(rb.river)}
	t0 := time.Now().Truncate(time.Second)
	prom := fallingPrometheus{crossed: t0.Add(-12 * time.Second)}
	for i := range 2 {
		res, err := rollout.CheckWatch(ctx, rb.store, env, prom, watchID, t0.Add(time.Duration(i)*30*time.Second))
		require.NoError(t, err)
		require.Equal(t, i == 1, res.Triggered)
	}
	res, page := rb.get(t, rb.viewer, rb.url("/decisions"))
	require.Equal(t, http.StatusOK, res.StatusCode)
	text := htmltest.Text(htmltest.Parse(t, page))
	require.Contains(t, text, "stop-loss")
	require.Contains(t, text, fmt.Sprintf("watch %d breach to halt", watchID))
	require.Contains(t, text, "42.000 s", "halted at the second check, 30 s after the first, 12 s after the crossing")
}
