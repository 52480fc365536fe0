package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
)

// The production watch (service/rollout's watch.go says what it does):
// a periodic tick enqueues a check of each watch due one, and the check
// asks the watch's Prometheus-compatible API for its value.

// WatchTickArgs looks for watches due a check (a periodic job).
type WatchTickArgs struct{}

// Kind implements river.JobArgs.
func (WatchTickArgs) Kind() string { return "rollout_watch_tick" }

// InsertOpts keeps ticks from piling up.
func (WatchTickArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDefault, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: WatchTick}}
}

// WatchTickWorker claims the due watches and enqueues a check of each one
// whose stage is current.
type WatchTickWorker struct {
	river.WorkerDefaults[WatchTickArgs]
	deps Deps
}

// Work claims due watches in one transaction.
func (w *WatchTickWorker) Work(ctx context.Context, job *river.Job[WatchTickArgs]) error {
	ins, err := workerInserter(ctx)
	if err != nil {
		return err
	}
	_, err = scheduleWatchChecks(ctx, w.deps.Store, ins, time.Now())
	return err
}

// scheduleWatchChecks claims the watches due at now and enqueues a check
// for each whose stage is current and awaits approval; the others start
// their count afresh. It returns the ids of the watches it enqueued.
func scheduleWatchChecks(ctx context.Context, st *store.Store, ins Inserter, now time.Time) ([]int64, error) {
	var enqueued []int64
	err := st.InTx(ctx, func(tx *store.Store) error {
		due, err := tx.ClaimDueWatches(ctx, now, 200)
		if err != nil {
			return err
		}
		rollouts := map[int64]rollout.Rollout{}
		for _, wt := range due {
			ro, ok := rollouts[wt.ProgramID]
			if !ok {
				if ro, err = rollout.Load(ctx, tx, wt.ProgramID); err != nil {
					return err
				}
				rollouts[wt.ProgramID] = ro
			}
			if !rollout.WatchActive(ro, wt) {
				if err := tx.ResetWatch(ctx, wt.ID); err != nil {
					return err
				}
				continue
			}
			if _, err := ins.InsertTx(ctx, tx.Tx(), WatchCheckArgs{WatchID: wt.ID}, nil); err != nil {
				return fmt.Errorf("watch %d: enqueue check: %w", wt.ID, err)
			}
			enqueued = append(enqueued, wt.ID)
		}
		return nil
	})
	return enqueued, err
}

// WatchCheckArgs checks one watch once.
type WatchCheckArgs struct {
	WatchID int64 `json:"watch_id"`
}

// Kind implements river.JobArgs.
func (WatchCheckArgs) Kind() string { return "rollout_watch_check" }

// InsertOpts: a missed check is not repeated late; the next one comes.
func (WatchCheckArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDefault, MaxAttempts: 2}
}

// WatchCheckWorker queries a watch's endpoint and counts breaches.
type WatchCheckWorker struct {
	river.WorkerDefaults[WatchCheckArgs]
	deps Deps
}

// Timeout bounds a check.
func (w *WatchCheckWorker) Timeout(*river.Job[WatchCheckArgs]) time.Duration { return time.Minute }

// Work runs one check.
func (w *WatchCheckWorker) Work(ctx context.Context, job *river.Job[WatchCheckArgs]) error {
	ins, err := workerInserter(ctx)
	if err != nil {
		return err
	}
	_, err = rollout.CheckWatch(ctx, w.deps.Store, rollout.Env{Keyring: w.deps.Keyring, Queue: NewQueue(ins)}, prometheusQuery(nil), job.Args.WatchID, time.Now())
	return err
}

// prometheusQuery asks the watch's endpoint with client (nil: a default
// client with a 10 s timeout that refuses internal addresses).
func prometheusQuery(client *http.Client) rollout.Query {
	return func(ctx context.Context, endpoint, query, comparator string) (float64, error) {
		return QueryPrometheus(ctx, client, endpoint, query, comparator)
	}
}

// ErrNoData is a query that matched no series (or only NaN).
var ErrNoData = errors.New("the query returned no data")

// promQueryLimit bounds an answer.
const promQueryLimit = 4 << 20

// QueryPrometheus asks a Prometheus-compatible API for a query's value now
// (GET endpoint/api/v1/query?query=...). Of several series it returns the
// worst for the comparator: the highest when the value must stay at or
// below the line, the lowest otherwise.
func QueryPrometheus(ctx context.Context, client *http.Client, endpoint, query, comparator string) (float64, error) {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second, Transport: outboundTransport()}
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return 0, fmt.Errorf("the endpoint %q is not an http(s) URL", rollout.RedactEndpoint(endpoint))
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/query"
	q := u.Query()
	q.Set("query", query)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, fmt.Errorf("query: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "Accord-Watch/1")
	res, err := client.Do(req)
	if err != nil {
		return 0, errors.New("query: " + redactURLError(err))
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, promQueryLimit+1))
	if err != nil {
		return 0, fmt.Errorf("query: read answer: %w", err)
	}
	if len(body) > promQueryLimit {
		return 0, fmt.Errorf("query: the answer is larger than %d bytes", promQueryLimit)
	}
	v, _, perr := ParsePromAnswer(body, comparator)
	if res.StatusCode != http.StatusOK {
		if perr != nil && !errors.Is(perr, ErrNoData) && strings.Contains(perr.Error(), "API error") {
			return 0, fmt.Errorf("query: HTTP %d: %w", res.StatusCode, perr)
		}
		return 0, fmt.Errorf("query: HTTP %d", res.StatusCode)
	}
	return v, perr
}

type promAnswer struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// ParsePromAnswer reads a Prometheus HTTP API query answer (vector, scalar
// or matrix: the last sample of each series) and returns the worst value
// for the comparator and the number of series that had one.
func ParsePromAnswer(body []byte, comparator string) (float64, int, error) {
	var a promAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return 0, 0, fmt.Errorf("the answer is not Prometheus API JSON: %w", err)
	}
	if a.Status != "success" {
		return 0, 0, fmt.Errorf("API error %s: %s", a.ErrorType, truncate(a.Error, 300))
	}
	var values []string
	switch a.Data.ResultType {
	case "vector":
		var series []struct {
			Value []json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(a.Data.Result, &series); err != nil {
			return 0, 0, fmt.Errorf("vector result: %w", err)
		}
		for _, s := range series {
			v, err := sampleValue(s.Value)
			if err != nil {
				return 0, 0, fmt.Errorf("vector result: %w", err)
			}
			values = append(values, v)
		}
	case "matrix":
		var series []struct {
			Values [][]json.RawMessage `json:"values"`
		}
		if err := json.Unmarshal(a.Data.Result, &series); err != nil {
			return 0, 0, fmt.Errorf("matrix result: %w", err)
		}
		for _, s := range series {
			if len(s.Values) == 0 {
				continue
			}
			v, err := sampleValue(s.Values[len(s.Values)-1])
			if err != nil {
				return 0, 0, fmt.Errorf("matrix result: %w", err)
			}
			values = append(values, v)
		}
	case "scalar":
		var sample []json.RawMessage
		if err := json.Unmarshal(a.Data.Result, &sample); err != nil {
			return 0, 0, fmt.Errorf("scalar result: %w", err)
		}
		v, err := sampleValue(sample)
		if err != nil {
			return 0, 0, fmt.Errorf("scalar result: %w", err)
		}
		values = append(values, v)
	default:
		return 0, 0, fmt.Errorf("result type %q has no number (use a vector, scalar or matrix query)", truncate(a.Data.ResultType, 40))
	}
	worst, n := 0.0, 0
	for _, s := range values {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("sample value %q is not a number", truncate(s, 40))
		}
		if math.IsNaN(v) {
			continue
		}
		if n == 0 || (comparator == ">=" && v < worst) || (comparator != ">=" && v > worst) {
			worst = v
		}
		n++
	}
	if n == 0 {
		return 0, 0, ErrNoData
	}
	return worst, n, nil
}

// sampleValue reads [timestamp, "value"].
func sampleValue(pair []json.RawMessage) (string, error) {
	if len(pair) != 2 {
		return "", fmt.Errorf("a sample is [time, \"value\"], got %d elements", len(pair))
	}
	var s string
	if err := json.Unmarshal(pair[1], &s); err != nil {
		return "", fmt.Errorf("a sample's value is a string: %w", err)
	}
	return s, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// outboundTransport is the HTTP transport of the calls Accord makes to
// URLs its users configure (production watches, webhooks): it refuses to
// connect to link-local, multicast and unspecified addresses, so that such
// a URL cannot reach a cloud metadata service (169.254.169.254 and the
// like), whatever name it uses.
func outboundTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: refuseInternalAddresses}
	t.DialContext = d.DialContext
	t.Proxy = nil
	return t
}

func refuseInternalAddresses(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return fmt.Errorf("connecting to %s is not allowed (link-local, multicast or unspecified address)", host)
	}
	return nil
}
