package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

func TestWebhooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st             *store.Store
		program, other int64
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		p := newProgram(t, st)
		other := p.another(t, st)
		return &testBundle{st: st, program: p.ID, other: other}
	}

	t.Run("WebhooksAndTheirDeliveries", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		halts, err := b.st.CreateWebhook(ctx, b.program, "https://argo.example/hook", []string{store.EventStageHalted, store.EventStopLoss}, 0)
		require.NoError(t, err)
		approvals, err := b.st.CreateWebhook(ctx, b.program, "https://flagger.example/hook", []string{store.EventStageApproved}, 0)
		require.NoError(t, err)
		_, err = b.st.CreateWebhook(ctx, b.other, "https://elsewhere.example/hook", []string{store.EventStageHalted}, 0)
		require.NoError(t, err)
		require.NoError(t, b.st.SetWebhookSecret(ctx, halts, []byte("sealed")))

		active, err := b.st.ActiveWebhooks(ctx, b.program, []string{store.EventStopLoss, store.EventStageHalted})
		require.NoError(t, err)
		require.Len(t, active, 1)
		require.Equal(t, halts, active[0].ID)
		require.Equal(t, []byte("sealed"), active[0].SealedSecret)
		require.NoError(t, b.st.SetWebhookActive(ctx, b.program, halts, false))
		active, err = b.st.ActiveWebhooks(ctx, b.program, []string{store.EventStageHalted})
		require.NoError(t, err)
		require.Empty(t, active, "a disabled webhook is not called")
		require.ErrorIs(t, b.st.SetWebhookActive(ctx, b.other, halts, true), store.ErrNotFound)
		_, err = b.st.GetWebhook(ctx, b.other, halts)
		require.ErrorIs(t, err, store.ErrNotFound)

		seq := int64(4)
		d1, err := b.st.CreateDelivery(ctx, approvals, b.program, store.EventStageApproved, &seq, []byte(`{"event":"stage_approved"}`))
		require.NoError(t, err)
		d2, err := b.st.CreateDelivery(ctx, approvals, b.program, store.EventStageApproved, &seq, []byte(`{}`))
		require.NoError(t, err)
		status := 500
		at := time.Now()
		require.NoError(t, b.st.RecordDeliveryAttempt(ctx, d1, at, &status, "HTTP 500", store.DeliveryPending))
		status = 204
		require.NoError(t, b.st.RecordDeliveryAttempt(ctx, d1, at.Add(time.Second), &status, "", store.DeliveryDelivered))
		require.NoError(t, b.st.RecordDeliveryAttempt(ctx, d2, at, nil, "dial tcp: connection refused", store.DeliveryFailed))
		d, err := b.st.DeliveryByID(ctx, d1)
		require.NoError(t, err)
		require.Equal(t, 2, d.Attempts)
		require.Equal(t, store.DeliveryDelivered, d.State)
		require.Equal(t, 204, *d.LastStatus)
		require.NotNil(t, d.DeliveredAt)
		require.Equal(t, `{"event":"stage_approved"}`, string(d.Body))

		list, err := b.st.ListDeliveries(ctx, b.program, approvals, 10)
		require.NoError(t, err)
		require.Equal(t, []int64{d2, d1}, []int64{list[0].ID, list[1].ID}, "newest first")
		none, err := b.st.ListDeliveries(ctx, b.other, approvals, 10)
		require.NoError(t, err)
		require.Empty(t, none)
		hooks, err := b.st.ListWebhooks(ctx, b.program)
		require.NoError(t, err)
		require.Len(t, hooks, 2)
		require.Equal(t, map[string]int{"delivered": 1, "failed": 1}, hooks[1].Deliveries)
	})

	t.Run("OnlyAFailedDeliveryIsSentAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		hook, err := b.st.CreateWebhook(ctx, b.program, "https://argo.example/hook", []string{store.EventStopLoss}, 0)
		require.NoError(t, err)
		seq := int64(9)
		failed, err := b.st.CreateDelivery(ctx, hook, b.program, store.EventStopLoss, &seq, []byte(`{"event":"stop_loss"}`))
		require.NoError(t, err)
		pending, err := b.st.CreateDelivery(ctx, hook, b.program, store.EventStopLoss, &seq, []byte(`{}`))
		require.NoError(t, err)
		require.NoError(t, b.st.RecordDeliveryAttempt(ctx, failed, time.Now(), nil, "timeout", store.DeliveryFailed))

		_, err = b.st.Redeliver(ctx, b.program, hook, pending)
		require.ErrorIs(t, err, store.ErrDeliveryNotFailed)
		_, err = b.st.Redeliver(ctx, b.other, hook, failed)
		require.ErrorIs(t, err, store.ErrNotFound, "not through another program")
		_, err = b.st.Redeliver(ctx, b.program, hook, -1)
		require.ErrorIs(t, err, store.ErrNotFound)

		again, err := b.st.Redeliver(ctx, b.program, hook, failed)
		require.NoError(t, err)
		d, err := b.st.DeliveryByID(ctx, again)
		require.NoError(t, err)
		require.Equal(t, store.DeliveryPending, d.State)
		require.Zero(t, d.Attempts)
		require.Equal(t, `{"event":"stop_loss"}`, string(d.Body))
		require.Equal(t, &seq, d.DecisionSeq)
		old, err := b.st.DeliveryByID(ctx, failed)
		require.NoError(t, err)
		require.Equal(t, store.DeliveryFailed, old.State, "the failed one keeps its attempts")
		require.Equal(t, 1, old.Attempts)
	})

	t.Run("WritesToUnknownRowsAreNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.ErrorIs(t, b.st.SetWebhookSecret(ctx, -1, []byte("x")), store.ErrNotFound)
		require.ErrorIs(t, b.st.SetWebhookActive(ctx, b.program, -1, true), store.ErrNotFound)
		require.ErrorIs(t, b.st.RecordDeliveryAttempt(ctx, -1, time.Now(), nil, "", store.DeliveryFailed), store.ErrNotFound)
		_, err := b.st.DeliveryByID(ctx, -1)
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("AURLAndADeliveryStateAreChecked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		err := inSavepoint(b.st, func(tx *store.Store) error {
			_, err := tx.CreateWebhook(ctx, b.program, "x", []string{store.EventStopLoss}, 0)
			return err
		})
		require.ErrorContains(t, err, "webhooks_url_check")
		hook, err := b.st.CreateWebhook(ctx, b.program, "https://argo.example/hook", []string{store.EventStopLoss}, 0)
		require.NoError(t, err)
		d, err := b.st.CreateDelivery(ctx, hook, b.program, store.EventStopLoss, nil, []byte(`{}`))
		require.NoError(t, err)
		err = inSavepoint(b.st, func(tx *store.Store) error { return tx.RecordDeliveryAttempt(ctx, d, time.Now(), nil, "", "lost") })
		require.ErrorContains(t, err, "webhook_deliveries_state_check")
	})
}
