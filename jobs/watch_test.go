package jobs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
)

// promServer imitates a Prometheus HTTP API on 127.0.0.1: each query
// answers the next value of its script as an instant vector ("fail": a
// 503 with Prometheus's error body; "empty": no series); a range query
// answers rangeBody (404 while it is empty).
type promServer struct {
	*httptest.Server
	mu        sync.Mutex
	script    []string
	queries   []string
	rangeBody string
	ranges    []url.Values
}

func startProm(t *testing.T) *promServer {
	t.Helper()
	p := &promServer{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if r.URL.Path == "/prom/api/v1/query_range" && p.rangeBody != "" {
			p.ranges = append(p.ranges, r.URL.Query())
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, p.rangeBody)
			return
		}
		if r.URL.Path != "/prom/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		p.queries = append(p.queries, r.URL.Query().Get("query"))
		next := "empty"
		if len(p.script) > 0 {
			next, p.script = p.script[0], p.script[1:]
		}
		w.Header().Set("Content-Type", "application/json")
		switch next {
		case "fail":
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"status":"error","errorType":"unavailable","error":"the storage is warming up"}`)
		case "empty":
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
		default:
			// Two series: the worst (highest) counts.
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[
				{"metric":{"pod":"vllm-0"},"value":[1764492000.1,"0.2"]},
				{"metric":{"pod":"vllm-1"},"value":[1764492000.1,%q]}]}}`, next)
		}
	}))
	t.Cleanup(p.Close)
	return p
}

// loopbackClient asks the test's Prometheus on loopback, which only an
// operator's allow-list opens (ACCORD_EGRESS_ALLOW_CIDRS).
func loopbackClient() *http.Client {
	return NewPrometheusAPI(egress.NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, nil), nil).Client
}

func (p *promServer) push(values ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.script = append(p.script, values...)
}

const ttftQuery = `histogram_quantile(0.99, sum(rate(vllm:time_to_first_token_seconds_bucket[1m])) by (le))`

func (b *rolloutBundle) addWatch(t *testing.T, stage, endpoint string, k int) store.Watch {
	t.Helper()
	ctx := context.Background()
	stages, err := b.store.ListRolloutStages(ctx, b.programID)
	require.NoError(t, err)
	for _, s := range stages {
		if s.Name == stage {
			_, err := b.store.SetWatch(ctx, b.programID, s.ID, store.NewWatch{Name: "p99 TTFT of the serving fleet", Endpoint: endpoint, Query: ttftQuery,
				Comparator: "<=", Line: 2, Unit: "s", Consecutive: k, IntervalSeconds: 30})
			require.NoError(t, err)
			ws, err := b.store.ListWatches(ctx, b.programID)
			require.NoError(t, err)
			for _, w := range ws {
				if w.StageID == s.ID {
					return w
				}
			}
		}
	}
	t.Fatalf("no stage %s", stage)
	return store.Watch{}
}

// The production watch halts the stage after k breaches in a row, not
// k−1: a check within the line resets the count, a check without a value
// leaves it as it is.
func TestWatchTriggersAfterKBreachesNotKMinusOne(t *testing.T) {
	t.Parallel()
	b := setupRollouts(t, "lab-acceptance", "pilot-5pct")
	ins := b.insertOnly(t)
	hooks := startHookServer(t)
	hookID, _ := b.addWebhook(t, hooks.URL, store.EventStopLoss)
	prom := startProm(t)
	ctx := context.Background()
	b.judgedRun(t, "PASS")
	w := b.addWatch(t, "pilot-5pct", prom.URL+"/prom/", 3)
	clock := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	check := func() rollout.WatchResult {
		t.Helper()
		clock = clock.Add(30 * time.Second)
		res, err := rollout.CheckWatch(ctx, b.store, b.env(ins), NewPrometheusAPI(b.deps.Egress, nil), w.ID, clock)
		require.NoError(t, err)
		return res
	}

	// Not the current stage yet: nothing is asked.
	require.True(t, check().Skipped)
	b.decide(t, ins, acceptance.DecisionApprove, "lab-acceptance", vera, "")
	b.decide(t, ins, acceptance.DecisionApprove, "lab-acceptance", chen, "")

	prom.push("2.4", "2.6", "1.5", "2.2", "fail", "empty", "2.3")
	for i, want := range []int{1, 2, 0, 1, 1, 1, 2} {
		res := check()
		require.False(t, res.Skipped)
		require.False(t, res.Triggered, "check %d", i+1)
		require.Equal(t, want, res.Breaches, "check %d", i+1)
	}
	ws, err := b.store.ListWatches(ctx, b.programID)
	require.NoError(t, err)
	require.Equal(t, 2, ws[0].Breaches, "k−1 breaches in a row do not trigger")
	require.Equal(t, 2.3, *ws[0].LastValue)
	require.Len(t, b.verifyLog(t), 2, "no decision yet")

	// Prometheus dates the crossing: the first step past the line after
	// the last within it (two series, the worst counts; NaN is no value).
	at := func(hms string) string {
		ts, err := time.Parse(time.RFC3339, "2026-11-30T"+hms+"Z")
		require.NoError(t, err)
		return strconv.FormatInt(ts.Unix(), 10)
	}
	prom.rangeBody = `{"status":"success","data":{"resultType":"matrix","result":[
		{"metric":{"pod":"vllm-0"},"values":[[` + at("09:02:00") + `,"1.5"],[` + at("09:02:10") + `,"1.8"],[` + at("09:02:20") + `,"1.9"],[` + at("09:02:25") + `,"NaN"],[` + at("09:03:00") + `,"2.4"]]},
		{"metric":{"pod":"vllm-1"},"values":[[` + at("09:02:10") + `,"1.7"],[` + at("09:02:20") + `,"2.05"],[` + at("09:02:25") + `,"2.1"]]}]}}`
	prom.push("3.1")
	res := check()
	require.True(t, res.Triggered)
	require.Equal(t, 3, res.Breaches)
	require.Equal(t, 3.1, *res.Value)

	ro := b.rollout(t)
	cur, _ := ro.State.CurrentStage()
	require.Equal(t, "pilot-5pct", cur.Name)
	require.Equal(t, acceptance.StageHalted, cur.State)
	ds := b.verifyLog(t)
	require.Len(t, ds, 3)
	rec := ds[2].Record
	require.Equal(t, "stop-loss-triggered", rec.Kind)
	require.Equal(t, "accord", rec.Actor)
	require.Equal(t, `Production watch "p99 TTFT of the serving fleet": 3 consecutive checks past the stop-loss line 2 s (the value must stay at or below it): `+
		`2.2 s, 2.3 s, 3.1 s, from 2026-11-30T09:02:30Z to 2026-11-30T09:04:30Z. `+
		`The line was crossed at 2026-11-30T09:02:20.000Z (dated by Prometheus at 1s steps); the stage was halted 130.000 s later. `+
		`Query "`+ttftQuery+`" at `+prom.URL+`/prom/.`, rec.Reason)
	key := fmt.Sprintf("watch/%d", w.ID)
	require.Equal(t, "STOP-LOSS", rec.Evidence.Verdicts[key])
	require.Equal(t, map[string]string{key + "/breach_at": "2026-11-30T09:02:20Z", key + "/halted_at": "2026-11-30T09:04:30Z",
		key + "/breach_to_halt": "130.000 s", key + "/breach_dated_by": "Prometheus at 1s steps", key + "/check_interval": "30.000 s",
		key + "/consecutive": "3"}, rec.Evidence.Figures)
	require.Equal(t, time.Date(2026, 11, 30, 9, 2, 20, 0, time.UTC), res.BreachAt.UTC())
	require.Len(t, prom.ranges, 1, "one range query, when the stage is halted")
	require.Equal(t, ttftQuery, prom.ranges[0].Get("query"))
	require.Equal(t, at("09:02:00")+".000", prom.ranges[0].Get("start"), "from the last check within the line")
	require.Equal(t, at("09:04:30")+".000", prom.ranges[0].Get("end"))
	require.Equal(t, "1", prom.ranges[0].Get("step"))

	// Every check is kept with the count of breaches as it was then.
	checks, err := b.store.ListWatchChecks(ctx, w.ID, time.Time{}, 100)
	require.NoError(t, err)
	var counts []int
	for _, c := range checks {
		counts = append(counts, c.Breaches)
	}
	require.Equal(t, []int{1, 2, 0, 1, 1, 1, 2, 3}, counts)
	require.Equal(t, "query: HTTP 503: API error unavailable: the storage is warming up", checks[4].Error)
	require.Nil(t, checks[5].Value, "no data")
	require.True(t, checks[7].Triggered)
	require.True(t, checks[7].PastLine)
	require.False(t, checks[2].PastLine)
	deliveries, err := b.store.ListDeliveries(ctx, b.programID, hookID, 10)
	require.NoError(t, err)
	require.Len(t, deliveries, 1)
	require.Equal(t, "stop_loss", deliveries[0].Event)

	// The halted stage is not watched; its count starts afresh.
	require.True(t, check().Skipped)
	ws, err = b.store.ListWatches(ctx, b.programID)
	require.NoError(t, err)
	require.Zero(t, ws[0].Breaches)
	require.Len(t, prom.queries, 8, "the skipped checks asked nothing")
	for _, q := range prom.queries {
		require.Equal(t, ttftQuery, q)
	}
}

// River's periodic tick claims the due watches of current stages and
// their checks run; a watch of a stage that is not current is not asked.
func TestWatchTickChecksDueWatches(t *testing.T) {
	t.Parallel()
	b := setupRollouts(t, "pilot-5pct", "fleet-100pct")
	b.startRiver(t, 20*time.Millisecond)
	prom := startProm(t)
	prom.push("1.2")
	ctx := context.Background()
	current := b.addWatch(t, "pilot-5pct", prom.URL+"/prom", 2)
	later := b.addWatch(t, "fleet-100pct", prom.URL+"/prom", 2)

	enqueued, err := scheduleWatchChecks(ctx, b.store, b.river, time.Now().Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, []int64{current.ID}, enqueued)
	again, err := scheduleWatchChecks(ctx, b.store, b.river, time.Now().Add(time.Second))
	require.NoError(t, err)
	require.Empty(t, again, "a claimed watch is next due an interval later")

	deadline := time.Now().Add(20 * time.Second)
	for {
		ws, err := b.store.ListWatches(ctx, b.programID)
		require.NoError(t, err)
		if ws[0].LastCheckedAt != nil {
			require.Equal(t, current.ID, ws[0].ID)
			require.Equal(t, 1.2, *ws[0].LastValue)
			require.Zero(t, ws[0].Breaches)
			require.Nil(t, ws[1].LastCheckedAt, "the later stage's watch is idle")
			require.Equal(t, later.ID, ws[1].ID)
			break
		}
		require.True(t, time.Now().Before(deadline), "the check did not run")
		time.Sleep(50 * time.Millisecond)
	}
}

func TestParsePromAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, comparator string
		want                   float64
		series                 int
		err                    string
	}{
		{name: "vector, worst is the highest", comparator: "<=", want: 2.5, series: 2,
			body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"2.5"]},{"metric":{},"value":[1,"0.3"]}]}}`},
		{name: "vector, worst is the lowest", comparator: ">=", want: 0.3, series: 2,
			body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"2.5"]},{"metric":{},"value":[1,"0.3"]}]}}`},
		{name: "scalar", comparator: "<=", want: 42, series: 1, body: `{"status":"success","data":{"resultType":"scalar","result":[1764492000.5,"42"]}}`},
		{name: "matrix takes each series' last sample", comparator: "<=", want: 7, series: 2,
			body: `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"9"],[2,"7"]]},{"metric":{},"values":[[1,"1"],[2,"2"]]},{"metric":{},"values":[]}]}}`},
		{name: "NaN is no value", comparator: "<=", want: 1, series: 1,
			body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]},{"metric":{},"value":[1,"1"]}]}}`},
		{name: "+Inf is past any line", comparator: "<=", want: inf(), series: 1,
			body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"+Inf"]}]}}`},
		{name: "no series", comparator: "<=", err: ErrNoData.Error(), body: `{"status":"success","data":{"resultType":"vector","result":[]}}`},
		{name: "only NaN", comparator: "<=", err: ErrNoData.Error(), body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}`},
		{name: "API error", comparator: "<=", err: "API error bad_data: parse error at char 3", body: `{"status":"error","errorType":"bad_data","error":"parse error at char 3"}`},
		{name: "string result", comparator: "<=", err: `result type "string" has no number`, body: `{"status":"success","data":{"resultType":"string","result":[1,"x"]}}`},
		{name: "not a number", comparator: "<=", err: `sample value "fast" is not a number`, body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"fast"]}]}}`},
		{name: "bad sample", comparator: "<=", err: "a sample is [time, \"value\"], got 1 elements", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}`},
		{name: "number instead of string", comparator: "<=", err: "a sample's value is a string", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,2]}]}}`},
		{name: "not JSON", comparator: "<=", err: "the answer is not Prometheus API JSON", body: `<html>login</html>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, n, err := ParsePromAnswer([]byte(tc.body), tc.comparator)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, v)
			require.Equal(t, tc.series, n)
		})
	}
}

func inf() float64 { return math.Inf(1) }

func TestQueryPrometheusErrors(t *testing.T) {
	t.Parallel()
	prom := startProm(t)
	ctx := context.Background()
	prom.push("fail")
	_, err := QueryPrometheus(ctx, loopbackClient(), prom.URL+"/prom", "up", "<=")
	require.EqualError(t, err, "query: HTTP 503: API error unavailable: the storage is warming up")
	_, err = QueryPrometheus(ctx, loopbackClient(), prom.URL+"/elsewhere", "up", "<=")
	require.EqualError(t, err, "query: HTTP 404")
	_, err = QueryPrometheus(ctx, loopbackClient(), "ftp://127.0.0.1/", "up", "<=")
	require.ErrorContains(t, err, "is not an http(s) URL")
	_, err = QueryPrometheus(ctx, loopbackClient(), "http://user:secret@127.0.0.1:1/prom", "up", "<=")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "secret", "credentials never reach records")
	v, err := QueryPrometheus(ctx, loopbackClient(), prom.URL+"/prom", "up", "<=")
	require.True(t, errors.Is(err, ErrNoData), "an empty script answers no series")
	require.Zero(t, v)
}

func FuzzParsePromAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"2.5"]}]}}`,
		`{"status":"success","data":{"resultType":"scalar","result":[1,"42"]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"9"],[2,"NaN"]]}]}}`,
		`{"status":"error","errorType":"bad_data","error":"x"}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"-Inf"]}]}}`,
	} {
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, below bool) {
		comparator := ">="
		if below {
			comparator = "<="
		}
		v, n, err := ParsePromAnswer(body, comparator)
		if err != nil {
			require.Zero(t, n)
			require.NotContains(t, err.Error(), "\x00")
			return
		}
		require.Positive(t, n)
		require.False(t, math.IsNaN(v), "NaN is never a value")
		// The other comparator reads the same series: the same count, and
		// a worst value on the other side.
		w, m, err := ParsePromAnswer(body, map[bool]string{true: ">=", false: "<="}[below])
		require.NoError(t, err)
		require.Equal(t, n, m)
		if below {
			require.LessOrEqual(t, w, v)
		} else {
			require.GreaterOrEqual(t, w, v)
		}
	})
}

// A watch's checks keep its interval whatever it is against the tick
// (5 s, the smallest interval, and 7 s, which the tick does not divide):
// each comes within half a tick of its time, the first check's time and
// whole intervals after it, so that k checks past the line halt the stage
// k intervals after the crossing, not k ticks. The ticks come at times
// fixed by construction, late by up to 0.8 s as River's are.
func TestWatchChecksKeepTheirInterval(t *testing.T) {
	t.Parallel()
	for _, interval := range []time.Duration{5 * time.Second, 7 * time.Second} {
		t.Run(interval.String(), func(t *testing.T) {
			t.Parallel()
			b := setupRollouts(t, "pilot-5pct")
			ins := b.insertOnly(t)
			ctx := context.Background()
			stages, err := b.store.ListRolloutStages(ctx, b.programID)
			require.NoError(t, err)
			id, err := b.store.SetWatch(ctx, b.programID, stages[0].ID, store.NewWatch{Name: "p99 TTFT", Endpoint: "http://127.0.0.1:9", Query: ttftQuery,
				Comparator: "<=", Line: 2, Unit: "s", Consecutive: 3, IntervalSeconds: int(interval / time.Second)})
			require.NoError(t, err)
			w, err := b.store.WatchByID(ctx, id)
			require.NoError(t, err)
			first := w.NextCheckAt // due at once

			const lateness = 800 * time.Millisecond
			start := first.Add(time.Second)
			var checks []time.Time
			for i := range 40 {
				tick := start.Add(time.Duration(i)*WatchTick + time.Duration(i%5)*lateness/4)
				enqueued, err := scheduleWatchChecks(ctx, b.store, ins, tick)
				require.NoError(t, err)
				if len(enqueued) > 0 {
					require.Equal(t, []int64{id}, enqueued)
					checks = append(checks, tick)
				}
			}
			span := 39*WatchTick + lateness
			require.GreaterOrEqual(t, len(checks), int(span/interval), "one check an interval")
			for n, at := range checks[1:] {
				due := first.Add(time.Duration(n+1) * interval)
				require.WithinRange(t, at, due.Add(-WatchTick/2), due.Add(WatchTick/2+lateness),
					"check %d came %s after its time (%s)", n+1, at.Sub(due), due)
			}
		})
	}
}
