package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
)

// DeliverWebhookWorker sends the deliveries service/rollout records for a
// decision (webhooks.go there: the body, its signature, the secret).

// DeliverWebhookArgs sends one delivery.
type DeliverWebhookArgs struct {
	DeliveryID int64 `json:"delivery_id"`
}

// Kind implements river.JobArgs.
func (DeliverWebhookArgs) Kind() string { return "deliver_webhook" }

// WebhookAttempts is how many times a delivery is tried.
const WebhookAttempts = 8

// InsertOpts gives deliveries their attempts.
func (DeliverWebhookArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDefault, MaxAttempts: WebhookAttempts}
}

// DeliverWebhookWorker posts a delivery's body to its webhook.
type DeliverWebhookWorker struct {
	river.WorkerDefaults[DeliverWebhookArgs]
	deps Deps
	// backoff is the delay before the first retry, doubled for each
	// further one (default 10 s: about 20 minutes over all attempts).
	backoff time.Duration
	client  *http.Client
}

// webhookTimeout bounds one attempt.
const webhookTimeout = 15 * time.Second

// Timeout bounds the job.
func (w *DeliverWebhookWorker) Timeout(*river.Job[DeliverWebhookArgs]) time.Duration {
	return webhookTimeout + 10*time.Second
}

// NextRetry doubles the delay from the first one, up to an hour.
func (w *DeliverWebhookWorker) NextRetry(job *river.Job[DeliverWebhookArgs]) time.Time {
	base := w.backoff
	if base <= 0 {
		base = 10 * time.Second
	}
	d := base << min(max(job.Attempt-1, 0), 20)
	return time.Now().Add(min(d, time.Hour))
}

func (w *DeliverWebhookWorker) httpClient() *http.Client {
	if w.client != nil {
		return w.client
	}
	return webhookClient(w.deps.Egress)
}

// webhookClient delivers through the egress policy (nil: none of the
// server's own networks): every connection is checked, the address dialed
// after resolution. Redirects are not followed: a webhook answers where it
// was registered.
func webhookClient(policy *egress.Policy) *http.Client {
	if policy == nil {
		policy = egress.NewPolicy(nil, nil)
	}
	return &http.Client{Timeout: webhookTimeout, Transport: policy.Transport(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// errCouldNotConnect is all the delivery log says of a failed connection:
// the socket's own error would tell a program owner what listens where
// (refused, reset, timed out), which makes a port scanner of the log.
var errCouldNotConnect = errors.New("could not connect")

// Work sends the delivery once (rollout.Deliver); a failed send is an
// error, so that River tries again, until the last attempt marks it
// failed. An undeliverable one is cancelled: no retry can help.
func (w *DeliverWebhookWorker) Work(ctx context.Context, job *river.Job[DeliverWebhookArgs]) error {
	attempt := rollout.DeliveryAttempt{DeliveryID: job.Args.DeliveryID, Last: job.Attempt >= job.MaxAttempts}
	err := rollout.Deliver(ctx, w.deps.Store, w.deps.Sealer, attempt, w.send)
	if errors.Is(err, rollout.ErrUndeliverable) {
		return river.JobCancel(err)
	}
	return err
}

// send posts the body; it returns the HTTP status (nil when there was no
// answer) and an error unless the answer was 2xx.
func (w *DeliverWebhookWorker) send(ctx context.Context, target string, d store.WebhookDelivery, secret string) (*int, error) {
	ctx, cancel := context.WithTimeout(ctx, webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(d.Body))
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Accord-Webhook/1")
	req.Header.Set(rollout.HeaderWebhookEvent, d.Event)
	req.Header.Set(rollout.HeaderWebhookDelivery, strconv.FormatInt(d.ID, 10))
	req.Header.Set(rollout.HeaderWebhookSignature, rollout.WebhookSignature(secret, d.Body))
	res, err := w.httpClient().Do(req)
	if err != nil {
		if w.deps.Log != nil {
			w.deps.Log.Info("webhook delivery could not connect", "delivery_id", d.ID, "err", redactURLError(err))
		}
		return nil, errCouldNotConnect
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	status := res.StatusCode
	if status < 200 || status > 299 {
		return &status, fmt.Errorf("HTTP %d", status)
	}
	return &status, nil
}

// redactURLError keeps a transport error's cause without the URL, which
// may carry a token in its query.
func redactURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}
