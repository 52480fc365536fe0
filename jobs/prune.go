package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// PruneArgs removes what only served a while: expired sessions, old
// sign-in attempts and production-watch checks past their retention. Audit
// entries and decisions are never pruned.
type PruneArgs struct{}

// WatchCheckRetention is how long a production watch's checks are kept for
// its chart (its halts stay in the decision log for good).
const WatchCheckRetention = 90 * 24 * time.Hour

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
	checks, err := w.deps.Store.PruneWatchChecks(ctx, time.Now().Add(-WatchCheckRetention))
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	w.deps.Log.Debug("pruned", "sessions", sessions, "signin_attempts", attempts, "watch_checks", checks)
	return nil
}
