package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// PruneArgs removes what only served a while: expired sessions and old
// sign-in attempts. Audit entries are never pruned.
type PruneArgs struct{}

func (PruneArgs) Kind() string { return "prune" }

// PruneWorker works PruneArgs.
type PruneWorker struct {
	river.WorkerDefaults[PruneArgs]
	deps Deps
}

func (w *PruneWorker) Work(ctx context.Context, job *river.Job[PruneArgs]) error {
	sessions, attempts, err := w.deps.Store.Prune(ctx, time.Now().Add(-7*24*time.Hour), time.Now().Add(-24*time.Hour))
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	w.deps.Log.Debug("pruned", "sessions", sessions, "signin_attempts", attempts)
	return nil
}
