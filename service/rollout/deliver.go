package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/store"
)

// Sender posts a delivery's body, signed with secret, to target: the HTTP
// status (nil when nothing answered) and an error unless the answer was
// 2xx (jobs sends through the egress policy).
type Sender func(ctx context.Context, target string, d store.WebhookDelivery, secret string) (*int, error)

// ErrUndeliverable marks a delivery that no further attempt can send: it
// or its webhook is gone, or the webhook's secret does not open.
var ErrUndeliverable = errors.New("undeliverable")

// DeliveryAttempt is one try at sending a delivery.
type DeliveryAttempt struct {
	DeliveryID int64
	// Last is set on the last attempt: a failure then fails the delivery
	// instead of leaving it pending for a retry.
	Last bool
}

// secretUnopened is the delivery log's word for a secret sealed under
// another server secret.
const secretUnopened = "the webhook's secret does not open with this server's secret"

// Deliver sends a pending delivery once and records the attempt in the
// delivery log. A failed send is returned as an error (so that the caller
// tries again); ErrUndeliverable says no retry can help.
func Deliver(ctx context.Context, st *store.Store, sealer *runners.Sealer, a DeliveryAttempt, send Sender) error {
	d, err := st.DeliveryByID(ctx, a.DeliveryID)
	if err != nil {
		return undeliverableIfGone(err)
	}
	if d.State != store.DeliveryPending {
		return nil // settled by an earlier attempt
	}
	hook, err := st.GetWebhook(ctx, d.ProgramID, d.WebhookID)
	if err != nil {
		return undeliverableIfGone(err)
	}
	if !hook.Active {
		return st.RecordDeliveryAttempt(ctx, d.ID, time.Now(), nil, "the webhook was disabled", store.DeliveryFailed)
	}
	secret, err := sealer.Open(hook.SealedSecret, WebhookSealLabel(hook.ID))
	if err != nil {
		if rerr := st.RecordDeliveryAttempt(ctx, d.ID, time.Now(), nil, secretUnopened, store.DeliveryFailed); rerr != nil {
			return rerr
		}
		return fmt.Errorf("%w: %w", ErrUndeliverable, err)
	}
	status, sendErr := send(ctx, hook.URL, d, string(secret))
	state, errText := attemptOutcome(sendErr, a.Last)
	// The attempt is recorded even when the caller's context ended with it
	// (a job's timeout).
	if err := st.RecordDeliveryAttempt(context.WithoutCancel(ctx), d.ID, time.Now(), status, errText, state); err != nil {
		return err
	}
	if sendErr != nil {
		return fmt.Errorf("webhook %d delivery %d: %w", hook.ID, d.ID, sendErr)
	}
	return nil
}

// attemptOutcome is the delivery's state after an attempt and the error
// the log keeps: delivered, pending a retry, or failed on the last attempt.
func attemptOutcome(sendErr error, last bool) (state, errText string) {
	switch {
	case sendErr == nil:
		return store.DeliveryDelivered, ""
	case last:
		return store.DeliveryFailed, sendErr.Error()
	default:
		return store.DeliveryPending, sendErr.Error()
	}
}

// undeliverableIfGone marks a delivery or webhook that no longer exists.
func undeliverableIfGone(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrUndeliverable, err)
	}
	return err
}
