package apiclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/accordlab/accord/acceptance"
)

// The calls, one a route.

func id(n int64) string { return strconv.FormatInt(n, 10) }

func runParts(programID, runID int64, rest ...string) []string {
	return append([]string{"programs", id(programID), "runs", id(runID)}, rest...)
}

// Programs lists the programs the token's user is a member of.
func (c *Client) Programs(ctx context.Context) ([]Program, error) {
	var list struct {
		Programs []Program `json:"programs"`
	}
	err := c.do(ctx, http.MethodGet, []string{"programs"}, nil, nil, &list)
	return list.Programs, err
}

// Hosts lists a program's lab hosts.
func (c *Client) Hosts(ctx context.Context, programID int64) ([]Host, error) {
	var list struct {
		Hosts []Host `json:"hosts"`
	}
	err := c.do(ctx, http.MethodGet, []string{"programs", id(programID), "hosts"}, nil, nil, &list)
	return list.Hosts, err
}

// Specs lists a program's profiles or gate sets.
func (c *Client) Specs(ctx context.Context, programID int64, kind SpecKind) ([]Spec, error) {
	var list map[string][]Spec
	err := c.do(ctx, http.MethodGet, []string{"programs", id(programID), string(kind)}, nil, nil, &list)
	return list[string(kind)], err
}

// SpecVersion reads version (1, 2, …) of a spec.
func (c *Client) SpecVersion(ctx context.Context, programID int64, kind SpecKind, specID int64, version int) (SpecVersion, error) {
	var sv SpecVersion
	err := c.do(ctx, http.MethodGet, []string{"programs", id(programID), string(kind), id(specID), "versions", strconv.Itoa(version)}, nil, nil, &sv)
	return sv, err
}

// SpecVersionByID reads a version by its id alone (as a run names it);
// a version of another kind or program is not found.
func (c *Client) SpecVersionByID(ctx context.Context, programID int64, kind SpecKind, versionID int64) (SpecVersion, error) {
	var sv SpecVersion
	err := c.do(ctx, http.MethodGet, []string{"programs", id(programID), kind.versionsPath(), id(versionID)}, nil, nil, &sv)
	return sv, err
}

// NewIdempotencyKey is a fresh key for CreateRun, with a prefix naming the
// caller ("accord-submit-" and 32 hex digits).
func NewIdempotencyKey(prefix string) (string, error) {
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("idempotency key: %w", err)
	}
	return prefix + hex.EncodeToString(key), nil
}

// CreateRun submits a run. With an idempotency key, sending the same
// request again (after a lost answer) gets the run it started, not a
// second one. A 422 is a *StatusError with the fields to fix.
func (c *Client) CreateRun(ctx context.Context, programID int64, req RunRequest, idempotencyKey string) (Run, error) {
	var header http.Header
	if idempotencyKey != "" {
		header = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	var run Run
	err := c.do(ctx, http.MethodPost, []string{"programs", id(programID), "runs"}, header, req, &run)
	return run, err
}

// Run reads a run's state and progress.
func (c *Client) Run(ctx context.Context, programID, runID int64) (Run, error) {
	var run Run
	err := c.do(ctx, http.MethodGet, runParts(programID, runID), nil, nil, &run)
	return run, err
}

// CancelRun asks the server to cancel a run, and returns it as it is then.
func (c *Client) CancelRun(ctx context.Context, programID, runID int64) (Run, error) {
	var run Run
	err := c.do(ctx, http.MethodPost, runParts(programID, runID, "cancel"), nil, nil, &run)
	return run, err
}

// Evaluation reads the run's latest evaluation (404 until it is judged).
func (c *Client) Evaluation(ctx context.Context, programID, runID int64) (acceptance.Evaluation, error) {
	var ev acceptance.Evaluation
	err := c.do(ctx, http.MethodGet, runParts(programID, runID, "evaluation"), nil, nil, &ev)
	return ev, err
}

// Report is the answer of a report download, streamed.
type Report struct {
	// Path is the API path, for messages.
	Path string
	// Body is the tar.gz bundle; the caller closes it.
	Body io.ReadCloser
	// SHA256 is the digest the server announces (X-Content-SHA256; may be
	// empty): the caller compares it with what it read.
	SHA256 string
}

// OpenReport starts downloading the run's signed report bundle (404, as
// a *StatusError, until the run is signed).
func (c *Client) OpenReport(ctx context.Context, programID, runID int64) (*Report, error) {
	parts := runParts(programID, runID, "report.tar.gz")
	p := path(parts)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint(parts), nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", p, err)
	}
	c.authorize(req)
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", p, scrubURLError(err))
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		if err != nil {
			return nil, fmt.Errorf("GET %s: HTTP %d: read the answer: %w", p, res.StatusCode, err)
		}
		return nil, statusError(http.MethodGet, p, res, raw)
	}
	return &Report{Path: p, Body: res.Body, SHA256: res.Header.Get("X-Content-SHA256")}, nil
}
