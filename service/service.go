// Package service is Accord's program operations, the ones both pages
// (handlers) and River workers (jobs) perform, one sub-package a job:
//
//	service/ingest      a run's results kept, one way for a lab run's folder and an imported file or bundle
//	service/evaluation  a run judged by its gate set against its baseline
//	service/stoploss    a run's stop-loss lines: the interim check, the final check, the record of a crossing
//	service/report      a judged run signed: statements, report bundle
//	service/rollout     rollout state from the plan and the signed decision log; decisions, webhooks (and their delivery), production watches
//	service/labhost     a lab host's row → an SSH target; a host check (its facts taken)
//	service/runplan     before a run: whether its gate set can judge it (the pre-run check), and the run form's proposal
//	service/runsubmit   a run started: the request checked, the run and its River job inserted in one transaction
//
// The service layer calls store, acceptance, attest and runners; it never
// imports handlers, jobs or web. Follow-up jobs go through Queue, which
// jobs implements with River, in the caller's transaction.
package service

import (
	"context"

	"github.com/accordlab/accord/store"
)

// Queue inserts the follow-up jobs of program operations in the caller's
// transaction (jobs.Queue: River's InsertTx).
type Queue interface {
	// EvaluateRun enqueues the judging of a run (step 7 of a run).
	EvaluateRun(ctx context.Context, tx *store.Store, runID int64) error
	// SignRun enqueues the signing of a judged run (step 8).
	SignRun(ctx context.Context, tx *store.Store, runID int64) error
	// DeliverWebhook enqueues the sending of a recorded delivery.
	DeliverWebhook(ctx context.Context, tx *store.Store, deliveryID int64) error
}
