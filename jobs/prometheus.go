package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
)

// The production watch's Prometheus client: instant and range queries of a
// Prometheus-compatible HTTP API, their answers read strictly and bounded.

// ErrNoData is a query that matched no series (or only NaN).
var ErrNoData = errors.New("the query returned no data")

// promQueryLimit bounds an answer.
const promQueryLimit = 4 << 20

// PrometheusAPI is the production watch's source: a Prometheus-compatible
// HTTP API, asked with Client (NewPrometheusAPI: through the egress
// policy). Log (nil: none) hears why a connection failed, which the
// watch's own record does not say.
type PrometheusAPI struct {
	Client *http.Client
	Log    *slog.Logger
}

// promTimeout bounds one query.
const promTimeout = 10 * time.Second

// NewPrometheusAPI asks through the egress policy (nil: none of the
// server's own networks), which checks the address dialed at every
// connection, redirects included.
func NewPrometheusAPI(policy *egress.Policy, log *slog.Logger) PrometheusAPI {
	if policy == nil {
		policy = egress.NewPolicy(nil, nil)
	}
	return PrometheusAPI{Client: &http.Client{Timeout: promTimeout, Transport: policy.Transport()}, Log: log}
}

// Value implements rollout.Prometheus with QueryPrometheus.
func (p PrometheusAPI) Value(ctx context.Context, endpoint, query, comparator string) (float64, error) {
	v, err := QueryPrometheus(ctx, p.Client, endpoint, query, comparator)
	p.logConnectError(err, endpoint)
	return v, err
}

// Range implements rollout.Prometheus with QueryPrometheusRange.
func (p PrometheusAPI) Range(ctx context.Context, endpoint, query, comparator string, start, end time.Time, step time.Duration) ([]store.WatchPoint, error) {
	points, err := QueryPrometheusRange(ctx, p.Client, endpoint, query, comparator, start, end, step)
	p.logConnectError(err, endpoint)
	return points, err
}

func (p PrometheusAPI) logConnectError(err error, endpoint string) {
	var ce *connectError
	if p.Log != nil && errors.As(err, &ce) {
		p.Log.Info("production watch could not connect", "endpoint", rollout.RedactEndpoint(endpoint), "err", ce.detail)
	}
}

// connectError is a query that found no answer: its record says only
// "could not connect", as a webhook delivery's does (the socket's own
// error would make a port scanner of the watch page); the detail goes to
// the server's log.
type connectError struct{ detail string }

func (e *connectError) Error() string { return "could not connect" }

// QueryPrometheus asks a Prometheus-compatible API for a query's value now
// (GET endpoint/api/v1/query?query=...). Of several series it returns the
// worst for the comparator: the highest when the value must stay at or
// below the line, the lowest otherwise.
func QueryPrometheus(ctx context.Context, client *http.Client, endpoint, query, comparator string) (float64, error) {
	body, status, err := promGet(ctx, client, endpoint, "query", url.Values{"query": {query}})
	if err != nil {
		return 0, fmt.Errorf("query: %w", err)
	}
	v, _, perr := ParsePromAnswer(body, comparator)
	if status != http.StatusOK {
		return 0, fmt.Errorf("query: %w", statusError(status, perr))
	}
	return v, perr
}

// QueryPrometheusRange asks for a query's values from start to end at
// each step (GET endpoint/api/v1/query_range) and returns, at each step,
// the worst of the series for the comparator, in time order.
func QueryPrometheusRange(ctx context.Context, client *http.Client, endpoint, query, comparator string, start, end time.Time, step time.Duration) ([]store.WatchPoint, error) {
	if step <= 0 || !end.After(start) || end.Sub(start)/step > maxRangePoints {
		return nil, fmt.Errorf("range query: from %s to %s at %s steps is not a range of 1 to %d steps", start.Format(time.RFC3339), end.Format(time.RFC3339), step, maxRangePoints)
	}
	body, status, err := promGet(ctx, client, endpoint, "query_range", url.Values{"query": {query},
		"start": {promTime(start)}, "end": {promTime(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}})
	if err != nil {
		return nil, fmt.Errorf("range query: %w", err)
	}
	points, perr := ParsePromRange(body, comparator)
	if status != http.StatusOK {
		return nil, fmt.Errorf("range query: %w", statusError(status, perr))
	}
	return points, perr
}

// maxRangePoints is Prometheus's own limit of points a series.
const maxRangePoints = 11000

func promTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

// promGet calls endpoint/api/v1/NAME?params and returns the answer, at
// most promQueryLimit bytes, with its status.
func promGet(ctx context.Context, client *http.Client, endpoint, name string, params url.Values) ([]byte, int, error) {
	if client == nil {
		// A client of one call: the strict policy, no idle connection kept.
		t := egress.NewPolicy(nil, nil).Transport()
		t.DisableKeepAlives = true
		client = &http.Client{Timeout: promTimeout, Transport: t}
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, 0, fmt.Errorf("the endpoint %q is not an http(s) URL", rollout.RedactEndpoint(endpoint))
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/" + name
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "Accord-Watch/1")
	res, err := client.Do(req)
	if err != nil {
		if errors.Is(err, egress.ErrRefused) {
			// The policy's reason: it names the address and its range,
			// which the owner needs to ask the operator for an opening.
			why := strings.TrimPrefix(redactURLError(err), "Get: "+egress.ErrRefused.Error()+": ")
			if errors.Is(err, egress.ErrMetadata) {
				return nil, 0, fmt.Errorf("refused: %s", why)
			}
			return nil, 0, fmt.Errorf("refused: %s (the operator can allow a network with ACCORD_EGRESS_ALLOW_CIDRS)", why)
		}
		if ctx.Err() != nil {
			return nil, 0, fmt.Errorf("no answer: %w", ctx.Err())
		}
		return nil, 0, &connectError{detail: redactURLError(err)}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, promQueryLimit+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read answer: %w", err)
	}
	if len(body) > promQueryLimit {
		return nil, 0, fmt.Errorf("the answer is larger than %d bytes", promQueryLimit)
	}
	return body, res.StatusCode, nil
}

// statusError is a non-200 answer: its status, and Prometheus's own error
// when the body carries one.
func statusError(status int, perr error) error {
	if perr != nil && !errors.Is(perr, ErrNoData) && strings.Contains(perr.Error(), "API error") {
		return fmt.Errorf("HTTP %d: %w", status, perr)
	}
	return fmt.Errorf("HTTP %d", status)
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

// ParsePromRange reads a Prometheus HTTP API range query answer (a
// matrix) and returns the worst value for the comparator at each
// timestamp any series has a number at, in time order. NaN is no value.
func ParsePromRange(body []byte, comparator string) ([]store.WatchPoint, error) {
	var a promAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("the answer is not Prometheus API JSON: %w", err)
	}
	if a.Status != "success" {
		return nil, fmt.Errorf("API error %s: %s", a.ErrorType, truncate(a.Error, 300))
	}
	if a.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("a range query answers a matrix, not %q", truncate(a.Data.ResultType, 40))
	}
	var series []struct {
		Values [][]json.RawMessage `json:"values"`
	}
	if err := json.Unmarshal(a.Data.Result, &series); err != nil {
		return nil, fmt.Errorf("matrix result: %w", err)
	}
	worst := map[int64]float64{} // by timestamp in milliseconds
	for _, s := range series {
		for _, pair := range s.Values {
			ts, err := sampleTime(pair)
			if err != nil {
				return nil, fmt.Errorf("matrix result: %w", err)
			}
			text, err := sampleValue(pair)
			if err != nil {
				return nil, fmt.Errorf("matrix result: %w", err)
			}
			v, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return nil, fmt.Errorf("sample value %q is not a number", truncate(text, 40))
			}
			if math.IsNaN(v) {
				continue
			}
			if w, seen := worst[ts]; !seen || (comparator == ">=" && v < w) || (comparator != ">=" && v > w) {
				worst[ts] = v
			}
		}
	}
	out := make([]store.WatchPoint, 0, len(worst))
	for ts, v := range worst {
		out = append(out, store.WatchPoint{At: time.UnixMilli(ts).UTC(), Value: v})
	}
	slices.SortFunc(out, func(x, y store.WatchPoint) int { return x.At.Compare(y.At) })
	return out, nil
}

// sampleTime reads the timestamp of [timestamp, "value"]: seconds since
// the epoch, to the millisecond.
func sampleTime(pair []json.RawMessage) (int64, error) {
	if len(pair) != 2 {
		return 0, fmt.Errorf("a sample is [time, \"value\"], got %d elements", len(pair))
	}
	var ts float64
	if err := json.Unmarshal(pair[0], &ts); err != nil {
		return 0, fmt.Errorf("a sample's time is a number: %w", err)
	}
	if math.IsNaN(ts) || math.Abs(ts) > 1e11 {
		return 0, fmt.Errorf("a sample's time %g is out of range", ts)
	}
	return int64(math.Round(ts * 1000)), nil
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
