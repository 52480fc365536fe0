package jobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/accordlab/accord/service"
	"github.com/accordlab/accord/store"
)

// Inserter inserts a job in the caller's transaction: the handlers' River
// client, or a worker's (river.ClientFromContext).
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// Queue is the service layer's follow-up jobs (service.Queue) as River
// jobs, inserted in the caller's transaction.
type Queue struct{ ins Inserter }

var _ service.Queue = Queue{}

// NewQueue enqueues with a River client (the handlers').
func NewQueue(ins Inserter) Queue { return Queue{ins: ins} }

// workerQueue enqueues with the River client of the worker's context.
func workerQueue(ctx context.Context) (Queue, error) {
	ins, err := workerInserter(ctx)
	if err != nil {
		return Queue{}, err
	}
	return NewQueue(ins), nil
}

// workerInserter is the River client of the worker's context.
func workerInserter(ctx context.Context) (Inserter, error) {
	c, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: no River client in context: %w", err)
	}
	return c, nil
}

func (q Queue) insert(ctx context.Context, tx *store.Store, args river.JobArgs) error {
	if q.ins == nil {
		return fmt.Errorf("jobs: no River client to enqueue %s", args.Kind())
	}
	if _, err := q.ins.InsertTx(ctx, tx.Tx(), args, nil); err != nil {
		return fmt.Errorf("jobs: enqueue %s: %w", args.Kind(), err)
	}
	return nil
}

// EvaluateRun enqueues evaluate_run.
func (q Queue) EvaluateRun(ctx context.Context, tx *store.Store, runID int64) error {
	return q.insert(ctx, tx, EvaluateRunArgs{RunID: runID})
}

// SignRun enqueues sign_run.
func (q Queue) SignRun(ctx context.Context, tx *store.Store, runID int64) error {
	return q.insert(ctx, tx, SignRunArgs{RunID: runID})
}

// DeliverWebhook enqueues deliver_webhook.
func (q Queue) DeliverWebhook(ctx context.Context, tx *store.Store, deliveryID int64) error {
	return q.insert(ctx, tx, DeliverWebhookArgs{DeliveryID: deliveryID})
}
