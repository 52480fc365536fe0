package jobs

import (
	"context"
	"fmt"

	"github.com/accordlab/accord/service/runsubmit"
	"github.com/accordlab/accord/store"
)

var _ runsubmit.Queue = Queue{}

// ExecuteRun enqueues execute_run and returns the job's id, which the run
// keeps (store.SetRunJob).
func (q Queue) ExecuteRun(ctx context.Context, tx *store.Store, runID int64) (int64, error) {
	if q.ins == nil {
		return 0, fmt.Errorf("jobs: no River client to enqueue %s", ExecuteRunArgs{}.Kind())
	}
	res, err := q.ins.InsertTx(ctx, tx.Tx(), ExecuteRunArgs{RunID: runID}, nil)
	if err != nil {
		return 0, fmt.Errorf("jobs: enqueue %s: %w", ExecuteRunArgs{}.Kind(), err)
	}
	return res.Job.ID, nil
}
