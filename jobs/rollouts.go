package jobs

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

// registerRollouts adds the rollout workers (production watch, webhooks).
func registerRollouts(workers *river.Workers, d Deps) {}

// rolloutPeriodic lists the rollout's periodic jobs (the production watch).
func rolloutPeriodic() []*river.PeriodicJob { return nil }

// onRunStopLoss runs in the transaction that ends a run stopped by a
// stop-loss line: it halts the rollout stage the run is evidence for and
// records the system's decision.
func onRunStopLoss(ctx context.Context, tx *store.Store, d Deps, run store.Run, breach *acceptance.StopLossBreach) error {
	return nil
}
