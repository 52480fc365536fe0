package rollout_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/service/servicetest"
	"github.com/accordlab/accord/store"
)

// deliveryBundle is a program with one webhook, its secret sealed, and a
// sender that records what it was asked to send.
type deliveryBundle struct {
	st      *store.Store
	sealer  *runners.Sealer
	program servicetest.Program
	hook    int64
	secret  string
	sent    []string // the secrets the sender signed with
	answer  int
	fail    error
}

func setupDelivery(t *testing.T) *deliveryBundle {
	t.Helper()
	ctx := context.Background()
	st := servicetest.Store(t)
	sealer, err := runners.NewSealer([]byte("0123456789abcdef0123456789abcdef-deliver"))
	require.NoError(t, err)
	b := &deliveryBundle{st: st, sealer: sealer, program: servicetest.NewProgram(t, st), answer: 200}
	b.hook, err = st.CreateWebhook(ctx, b.program.ID, "https://hooks.example/accord", []string{store.EventStageApproved}, 0)
	require.NoError(t, err)
	b.secret, err = rollout.NewWebhookSecret()
	require.NoError(t, err)
	sealed, err := sealer.Seal([]byte(b.secret), rollout.WebhookSealLabel(b.hook))
	require.NoError(t, err)
	require.NoError(t, st.SetWebhookSecret(ctx, b.hook, sealed))
	return b
}

func (b *deliveryBundle) send(_ context.Context, _ string, _ store.WebhookDelivery, secret string) (*int, error) {
	b.sent = append(b.sent, secret)
	if b.fail != nil {
		return nil, b.fail
	}
	status := b.answer
	return &status, nil
}

func (b *deliveryBundle) newDelivery(t *testing.T) int64 {
	t.Helper()
	id, err := b.st.CreateDelivery(context.Background(), b.hook, b.program.ID, store.EventStageApproved, nil, []byte(`{"event":"stage_approved"}`))
	require.NoError(t, err)
	return id
}

func (b *deliveryBundle) deliver(id int64, last bool) error {
	return rollout.Deliver(context.Background(), b.st, b.sealer, rollout.DeliveryAttempt{DeliveryID: id, Last: last}, b.send)
}

func (b *deliveryBundle) delivery(t *testing.T, id int64) store.WebhookDelivery {
	t.Helper()
	d, err := b.st.DeliveryByID(context.Background(), id)
	require.NoError(t, err)
	return d
}

// A send is signed with the webhook's own secret; a failure leaves the
// delivery pending for a retry until the last attempt fails it; every
// attempt is in the delivery log; a settled delivery is not sent again.
func TestDeliverRecordsEachAttempt(t *testing.T) {
	t.Parallel()
	b := setupDelivery(t)
	id := b.newDelivery(t)

	b.fail = errors.New("HTTP 502")
	err := b.deliver(id, false)
	require.ErrorContains(t, err, "HTTP 502")
	require.NotErrorIs(t, err, rollout.ErrUndeliverable, "a failed send is retried")
	d := b.delivery(t, id)
	require.Equal(t, store.DeliveryPending, d.State)
	require.Equal(t, 1, d.Attempts)
	require.Equal(t, "HTTP 502", d.LastError)

	b.fail = nil
	require.NoError(t, b.deliver(id, false))
	d = b.delivery(t, id)
	require.Equal(t, store.DeliveryDelivered, d.State)
	require.Equal(t, 2, d.Attempts)
	require.Equal(t, 200, *d.LastStatus)
	require.Equal(t, []string{b.secret, b.secret}, b.sent)

	require.NoError(t, b.deliver(id, false))
	require.Len(t, b.sent, 2, "a delivered delivery is not sent again")

	last := b.newDelivery(t)
	b.fail = errors.New("could not connect")
	require.Error(t, b.deliver(last, true))
	d = b.delivery(t, last)
	require.Equal(t, store.DeliveryFailed, d.State)
	require.Equal(t, "could not connect", d.LastError)
}

// What no retry can send is marked undeliverable (the job is cancelled)
// or failed at once, without a send: a delivery that does not exist, a
// webhook disabled since, a secret sealed for another webhook.
func TestDeliverGivesUpWhatNoRetryCanSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupDelivery(t)

	err := b.deliver(1<<40, false)
	require.ErrorIs(t, err, rollout.ErrUndeliverable)
	require.ErrorIs(t, err, store.ErrNotFound)

	disabled := b.newDelivery(t)
	require.NoError(t, b.st.SetWebhookActive(ctx, b.program.ID, b.hook, false))
	require.NoError(t, b.deliver(disabled, false))
	d := b.delivery(t, disabled)
	require.Equal(t, store.DeliveryFailed, d.State)
	require.Equal(t, "the webhook was disabled", d.LastError)

	require.NoError(t, b.st.SetWebhookActive(ctx, b.program.ID, b.hook, true))
	foreign, err := b.sealer.Seal([]byte(b.secret), rollout.WebhookSealLabel(b.hook+1))
	require.NoError(t, err)
	require.NoError(t, b.st.SetWebhookSecret(ctx, b.hook, foreign))
	unopened := b.newDelivery(t)
	require.ErrorIs(t, b.deliver(unopened, false), rollout.ErrUndeliverable)
	d = b.delivery(t, unopened)
	require.Equal(t, store.DeliveryFailed, d.State)
	require.Contains(t, d.LastError, "does not open")
	require.Empty(t, b.sent, "nothing was sent")
}
