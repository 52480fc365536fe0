package jobs

import (
	"context"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

// precomputeCharts stores a run's chart aggregates at ingest (in the
// ingest transaction), so that pages never recompute them.
func precomputeCharts(ctx context.Context, tx *store.Store, run store.Run, ms []acceptance.Measurement) error {
	return nil
}
