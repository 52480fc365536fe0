package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/loadgen"
	"github.com/accordlab/accord/runners/probe/wire"
)

// cmdEndpoint sends one small streaming request to an inference endpoint
// with the run's own load generator and prints what came back
// (wire.EndpointCheck): the run form's "test endpoint", before a profile
// points a run at it.
func cmdEndpoint(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("endpoint", stderr)
	endpoint := fl.String("url", "", "the endpoint's base URL, e.g. http://10.0.0.5:8000/v1")
	model := fl.String("model", "", "the model to ask")
	api := fl.String("api", "chat", "chat or completions")
	timeout := fl.Duration("timeout", 15*time.Second, "time limit of the request")
	if err := parseFlags(fl, args); err != nil {
		return usageError(stderr, err)
	}
	if err := acceptance.CheckEndpointURL(*endpoint); err != nil {
		return fail(stderr, ExitUsage, "endpoint: --url %v", err)
	}
	if *model == "" || *timeout <= 0 || *timeout > time.Minute {
		return fail(stderr, ExitUsage, "endpoint: --model is needed and --timeout must be above 0 and at most 1m")
	}
	check, err := checkEndpoint(ctx, *endpoint, *model, *api, *timeout)
	if err != nil {
		return fail(stderr, ExitError, "endpoint: %v", err)
	}
	if err := printJSON(stdout, check); err != nil {
		return fail(stderr, ExitError, "endpoint: %v", err)
	}
	return ExitOK
}

// checkEndpoint runs the load generator for exactly one short request.
func checkEndpoint(ctx context.Context, endpoint, model, api string, timeout time.Duration) (wire.EndpointCheck, error) {
	out := wire.EndpointCheck{URL: endpoint, Model: model, API: api}
	var records bytes.Buffer
	step := acceptance.InferenceStep{Endpoint: endpoint, Model: model, API: api,
		PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 16}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 8},
		Load: acceptance.Load{Mode: "concurrency", Concurrency: 1}, Requests: 1, RequestTimeout: acceptance.Duration(timeout), Seed: 1}
	if _, err := loadgen.Run(ctx, loadgen.Config{Step: step, Level: loadgen.Level{Concurrency: 1, Label: acceptance.ConcurrencyLevel(1)}, Records: &records}); err != nil {
		return out, err
	}
	var rec wire.RequestRecord
	line, _, _ := bytes.Cut(records.Bytes(), []byte("\n"))
	if err := json.Unmarshal(line, &rec); err != nil {
		return out, fmt.Errorf("the load generator wrote no request record: %w", err)
	}
	ms := func(t int64) float64 {
		if t == 0 || t < rec.Sent {
			return 0
		}
		return float64(t-rec.Sent) / 1e6
	}
	out.HTTPStatus, out.ErrorKind, out.Error = rec.HTTPStatus, rec.ErrorKind, rec.Error
	out.TTFTMs, out.E2EMs = ms(rec.FirstToken), ms(rec.Done)
	out.OutputTokens, out.PromptTokens, out.Chunks, out.UsageCounted = rec.OutputTokens, rec.PromptTokens, rec.Chunks, rec.UsageCounted
	out.OK = rec.ErrorKind == "" && rec.FirstToken != 0
	return out, nil
}
