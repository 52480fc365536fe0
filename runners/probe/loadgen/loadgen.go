// Package loadgen is the probe's load generator for OpenAI-compatible
// streaming APIs: closed-loop (fixed concurrency) and open-loop (constant or
// Poisson request rate) load, timing every chunk before decoding it.
package loadgen

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// Level is one load level of a step: a concurrency or a request rate.
type Level struct {
	Concurrency int     // closed loop when > 0
	Rate        float64 // open loop (requests per second) when > 0
	Label       string  // "c=16" or "r=8", used as the Measurement level
}

// Config is one level of one inference step.
type Config struct {
	Step   acceptance.InferenceStep
	Level  Level
	Warmup time.Duration
	// Records receives one JSON line (wire.RequestRecord) per request.
	Records io.Writer
	// Interim, when set, is called about every InterimEvery with the
	// statistics of the window since the previous call.
	Interim      func(wire.Interim)
	InterimEvery time.Duration
}

// Run drives one level until its duration or request count is reached or ctx
// ends, and returns the summary. Failed requests are records, not errors;
// an error means the level could not be run at all.
func Run(ctx context.Context, cfg Config) (*wire.InferenceSummary, error) {
	return nil, errors.New("loadgen: not implemented yet")
}
