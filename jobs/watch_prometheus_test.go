package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/jobs/promtest"
	"github.com/accordlab/accord/runners/probe/emulator"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
)

// The queries a vLLM user has on their dashboards, asked of a real
// Prometheus scraping the emulator.
const (
	vllmP99TTFT = `histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[1m])))`
	vllmP99E2E  = `histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[1m])))`
	// Each finished request of 4 tokens had 3 gaps; one in flight has fewer.
	vllmITLGapsPastFinished = `sum(vllm:inter_token_latency_seconds_count) - 3 * sum(vllm:request_success_total)`
	vllmRunning             = `sum(vllm:num_requests_running)`
	vllmWaiting             = `sum(vllm:num_requests_waiting)`
	vllmPrefixHitPct        = `100 * sum(rate(vllm:prefix_cache_hits_total[1m])) / sum(rate(vllm:prefix_cache_queries_total[1m]))`
)

// servedModel is an emulator standing for a vLLM deployment, with a
// steady stream of requests: every prompt's tokens cost prefill compute
// (nothing stays cached), so each TTFT is at least promptTokens ×
// PrefillPerToken, by construction.
type servedModel struct {
	server *emulator.Server
	addr   string // host:port on 127.0.0.1
}

const (
	servedPromptTokens = 100
	servedPrefill      = time.Millisecond // per token: TTFT ≥ 100 ms
	servedITL          = 5 * time.Millisecond
)

func startServedModel(t *testing.T, clients int) *servedModel {
	t.Helper()
	srv, err := emulator.New(emulator.Config{Model: "llama-3.1-8b", ITL: servedITL, PrefillPerToken: servedPrefill, BlockTokens: 16,
		BlockBytes: 4 << 10, CacheBlocks: 0, DefaultMaxTokens: 4, Seed: 1}, io.Discard)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = srv.Serve(ctx, ln)
	}()
	m := &servedModel{server: srv, addr: ln.Addr().String()}
	prompt := strings.Repeat("tok ", servedPromptTokens)
	body := fmt.Sprintf(`{"model":"llama-3.1-8b","prompt":%q,"max_tokens":4,"stream":true}`, prompt)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+m.addr+"/v1/completions", bytes.NewReader([]byte(body)))
				if err != nil {
					return
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = srv.Close()
	})
	return m
}

// The production watch's query reads vLLM's metrics through Prometheus:
// the p99 TTFT it answers is at least the TTFT every request has by
// construction, and the degradation switch carries it past a line of 1 s.
func TestWatchQueryReadsVLLMMetricsThroughPrometheus(t *testing.T) {
	t.Parallel()
	model := startServedModel(t, 3)
	prom := promtest.Start(t, promtest.Options{Targets: []string{model.addr}, ScrapeInterval: time.Second})
	prom.WaitUp(t, 1)
	ctx := context.Background()

	client := loopbackClient()
	value := func(query string) (float64, error) { return QueryPrometheus(ctx, client, prom.URL, query, "<=") }
	waitFor := func(what, query string, ok func(float64) bool) float64 {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			v, err := value(query)
			if err == nil && ok(v) {
				return v
			}
			if err != nil && !errors.Is(err, ErrNoData) {
				require.NoError(t, err, query)
			}
			require.True(t, time.Now().Before(deadline), "%s: %s was %v (%v) after 60 s", what, query, v, err)
			time.Sleep(prom.ScrapeInterval / 2)
		}
	}
	floor := (servedPromptTokens * servedPrefill).Seconds()
	// Before the switch the value is within a line of 1 s (the scenario
	// needs it; the floor is what holds by construction).
	p99 := waitFor("served", vllmP99TTFT, func(v float64) bool { return v < 1.0 })
	require.GreaterOrEqual(t, p99, floor, "every TTFT is at least 100 prompt tokens × 1 ms")
	e2e := waitFor("e2e", vllmP99E2E, func(float64) bool { return true })
	require.GreaterOrEqual(t, e2e, floor, "the end-to-end time includes the TTFT")
	gaps := waitFor("itl", vllmITLGapsPastFinished, func(float64) bool { return true })
	require.GreaterOrEqual(t, gaps, 0.0, "the ITL histogram counts every gap of every finished request")
	running := waitFor("running", vllmRunning, func(float64) bool { return true })
	require.LessOrEqual(t, running, 3.0, "three clients")
	waiting := waitFor("waiting", vllmWaiting, func(float64) bool { return true })
	require.Zero(t, waiting, "no --max-num-seqs: nothing waits")
	hit := waitFor("prefix cache", vllmPrefixHitPct, func(float64) bool { return true })
	require.Zero(t, hit, "nothing stays cached")

	// The switch: every TTFT becomes at least 100 × 1 ms × 20 = 2 s.
	require.NoError(t, model.server.Degrade(20))
	p99 = waitFor("degraded", vllmP99TTFT, func(v float64) bool { return v > 1.0 })
	require.Greater(t, p99, 1.0)
}

// The whole way of a stop-loss in production: the emulator's degradation
// switch carries the served TTFT past the line, a real Prometheus scrapes
// it, the watch's checks see it k times in a row and halt the stage, and
// the decision's evidence carries the time from the breach to the halt.
// The bounds asserted hold by construction: the crossing cannot precede
// the switch (no request was slow before it) nor follow the first check
// that saw it, and k checks an interval apart take (k−1) intervals.
func TestWatchHaltsTheStageOnABreachSeenThroughPrometheus(t *testing.T) {
	t.Parallel()
	const (
		k        = 2
		interval = 5 * time.Second // the smallest a watch may have
		line     = 1.0             // seconds of p99 TTFT
	)
	b := setupRollouts(t, "lab-acceptance", "pilot-5pct")
	ins := b.insertOnly(t)
	ctx := context.Background()
	b.judgedRun(t, "PASS")
	b.decide(t, ins, acceptance.DecisionApprove, "lab-acceptance", vera, "")
	b.decide(t, ins, acceptance.DecisionApprove, "lab-acceptance", chen, "")

	model := startServedModel(t, 3)
	prom := promtest.Start(t, promtest.Options{Targets: []string{model.addr}, ScrapeInterval: time.Second})
	prom.WaitUp(t, 1)
	stage, ok := b.rollout(t).Stage("pilot-5pct")
	require.True(t, ok)
	watchID, err := b.store.SetWatch(ctx, b.programID, stage.ID, store.NewWatch{Name: "p99 TTFT of the serving fleet", Endpoint: prom.URL,
		Query: vllmP99TTFT, Comparator: "<=", Line: line, Unit: "s", Consecutive: k, IntervalSeconds: int(interval / time.Second)})
	require.NoError(t, err)

	// Checks an interval apart, as the watch's schedule has them.
	next := time.Now()
	check := func() (rollout.WatchResult, time.Time) {
		t.Helper()
		time.Sleep(time.Until(next))
		at := time.Now()
		next = at.Add(interval)
		res, err := rollout.CheckWatch(ctx, b.store, b.env(ins), NewPrometheusAPI(b.deps.Egress, nil), watchID, at)
		require.NoError(t, err)
		require.False(t, res.Skipped)
		return res, at
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		res, _ := check()
		require.Zero(t, res.Breaches, "nothing is slow before the switch: %+v", res)
		if res.Value != nil {
			break // a value within the line
		}
		require.True(t, time.Now().Before(deadline), "no value from Prometheus: %s", res.Err)
	}

	switched := time.Now()
	require.NoError(t, model.server.Degrade(20)) // every TTFT ≥ 100 × 1 ms × 20 = 2 s
	var firstPast time.Time
	var res rollout.WatchResult
	var checkedAt time.Time
	for !res.Triggered {
		require.True(t, time.Now().Before(deadline), "the stage was not halted within 90 s: %+v", res)
		res, checkedAt = check()
		if res.Breaches == 1 {
			firstPast = checkedAt
		}
	}
	require.Greater(t, *res.Value, line)

	ro := b.rollout(t)
	cur, _ := ro.State.CurrentStage()
	require.Equal(t, "pilot-5pct", cur.Name)
	require.Equal(t, acceptance.StageHalted, cur.State)
	ds := b.verifyLog(t)
	rec := ds[len(ds)-1].Record
	require.Equal(t, "stop-loss-triggered", rec.Kind)
	key := fmt.Sprintf("watch/%d", watchID)
	figures := rec.Evidence.Figures
	breachAt, err := time.Parse(time.RFC3339Nano, figures[key+"/breach_at"])
	require.NoError(t, err)
	haltedAt, err := time.Parse(time.RFC3339Nano, figures[key+"/halted_at"])
	require.NoError(t, err)
	require.True(t, haltedAt.Equal(rec.Time), "the halt is the decision's own time")
	require.Equal(t, rollout.FormatSeconds(haltedAt.Sub(breachAt)), figures[key+"/breach_to_halt"])
	require.Equal(t, "Prometheus at 1s steps", figures[key+"/breach_dated_by"], "the crossing is dated by Prometheus, not by a check")
	require.Equal(t, "5.000 s", figures[key+"/check_interval"])
	require.Equal(t, "2", figures[key+"/consecutive"])
	require.Contains(t, rec.Reason, "the stage was halted "+figures[key+"/breach_to_halt"]+" later")

	require.False(t, breachAt.Before(switched.Truncate(time.Millisecond)), "the crossing (%s) cannot precede the switch (%s)", breachAt, switched)
	require.False(t, breachAt.After(firstPast), "nor follow the first check past the line")
	require.GreaterOrEqual(t, haltedAt.Sub(firstPast), time.Duration(k-1)*interval, "k checks an interval apart")
	t.Logf("switch→crossing %s, crossing→first check past %s, breach→halt %s (scrape 1 s, checks every %s, k = %d)",
		breachAt.Sub(switched).Round(time.Millisecond), firstPast.Sub(breachAt).Round(time.Millisecond), figures[key+"/breach_to_halt"], interval, k)
}

// The same stop-loss, carried by River as the server carries it: the
// periodic tick finds the watch due, its check asks the real Prometheus
// scraping the degraded emulator, and the k-th breach in a row halts the
// stage with the breach-to-halt time in the signed decision. Nothing here
// calls the check directly; the only bound asserted is the one that holds
// by construction (k checks an interval apart take (k−1) intervals).
func TestWatchHaltsTheStageThroughRiversScheduleAndPrometheus(t *testing.T) {
	t.Parallel()
	const k, interval = 2, 5 * time.Second
	b := setupRollouts(t, "lab-acceptance", "pilot-5pct")
	ins := b.insertOnly(t)
	ctx := context.Background()
	b.judgedRun(t, "PASS")
	b.decide(t, ins, acceptance.DecisionApprove, "lab-acceptance", vera, "")
	b.decide(t, ins, acceptance.DecisionApprove, "lab-acceptance", chen, "")

	model := startServedModel(t, 3)
	prom := promtest.Start(t, promtest.Options{Targets: []string{model.addr}, ScrapeInterval: time.Second})
	prom.WaitUp(t, 1)
	stage, ok := b.rollout(t).Stage("pilot-5pct")
	require.True(t, ok)
	require.NoError(t, model.server.Degrade(20)) // every TTFT ≥ 2 s, past the 1 s line
	watchID, err := b.store.SetWatch(ctx, b.programID, stage.ID, store.NewWatch{Name: "p99 TTFT of the serving fleet", Endpoint: prom.URL,
		Query: vllmP99TTFT, Comparator: "<=", Line: 1.0, Unit: "s", Consecutive: k, IntervalSeconds: int(interval / time.Second)})
	require.NoError(t, err)
	b.periodic = []*river.PeriodicJob{watchTickPeriodic()}
	b.startRiver(t, 20*time.Millisecond)

	deadline := time.Now().Add(2 * time.Minute)
	for {
		cur, _ := b.rollout(t).State.CurrentStage()
		if cur.State == acceptance.StageHalted {
			break
		}
		require.True(t, time.Now().Before(deadline), "River's watch did not halt the stage within 2 minutes")
		time.Sleep(200 * time.Millisecond)
	}
	ds := b.verifyLog(t)
	rec := ds[len(ds)-1].Record
	require.Equal(t, "stop-loss-triggered", rec.Kind)
	key := fmt.Sprintf("watch/%d", watchID)
	breachAt, err := time.Parse(time.RFC3339Nano, rec.Evidence.Figures[key+"/breach_at"])
	require.NoError(t, err)
	haltedAt, err := time.Parse(time.RFC3339Nano, rec.Evidence.Figures[key+"/halted_at"])
	require.NoError(t, err)
	require.GreaterOrEqual(t, haltedAt.Sub(breachAt), time.Duration(k-1)*interval, "k checks an interval apart")
	require.Equal(t, rollout.FormatSeconds(haltedAt.Sub(breachAt)), rec.Evidence.Figures[key+"/breach_to_halt"])
	checks, err := b.store.ListWatchChecks(ctx, watchID, time.Time{}, 100)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(checks), k, "every check River made is kept")
	require.True(t, checks[len(checks)-1].Triggered)
	t.Logf("breach→halt %s through River's schedule (k = %d, checks every %s, scrape 1 s)", rec.Evidence.Figures[key+"/breach_to_halt"], k, interval)
}
