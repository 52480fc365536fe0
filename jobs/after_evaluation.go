package jobs

import (
	"context"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

// afterEvaluation runs in the evaluation's transaction: it enqueues the
// signing of the run's results (step 8 of a run).
func afterEvaluation(ctx context.Context, tx *store.Store, run store.Run, ev acceptance.Evaluation) error {
	return insertTx(ctx, tx, SignRunArgs{RunID: run.ID})
}
