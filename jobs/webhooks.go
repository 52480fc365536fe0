package jobs

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/store"
)

// Webhooks: a decision that approves or halts a stage, or a stop-loss,
// becomes one delivery per subscribed webhook, recorded in the decision's
// transaction with its River job. The body is JSON, signed with
// HMAC-SHA256 under the webhook's secret; a failed attempt is retried by
// River with a doubling delay, and every attempt is in the delivery log.

// Webhook request headers.
const (
	HeaderWebhookEvent     = "X-Accord-Event"
	HeaderWebhookDelivery  = "X-Accord-Delivery"
	HeaderWebhookSignature = "X-Accord-Signature-256"
)

// WebhookSealLabel binds a webhook's sealed secret to its row.
func WebhookSealLabel(webhookID int64) string { return fmt.Sprintf("webhook:%d", webhookID) }

// NewWebhookSecret returns a fresh secret, shown once to the owner who
// registers the webhook.
func NewWebhookSecret() (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	return "whsec_" + hex.EncodeToString(raw), nil
}

// WebhookSignature is the signature header's value for a body: "sha256="
// and the hex HMAC-SHA256 of the body under the secret.
func WebhookSignature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// VerifyWebhookSignature checks a signature header in constant time (for
// receivers written in Go, and the tests).
func VerifyWebhookSignature(secret string, body []byte, header string) bool {
	return hmac.Equal([]byte(WebhookSignature(secret, body)), []byte(header))
}

// WebhookBody is what a webhook receives.
type WebhookBody struct {
	Event string `json:"event"`
	// Events lists every event the decision raised (a stop-loss also halts).
	Events  []string       `json:"events"`
	Program WebhookProgram `json:"program"`
	Stage   string         `json:"stage"`
	// StagePosition counts from 1.
	StagePosition int    `json:"stage_position"`
	StageState    string `json:"stage_state"`
	// NextStage is the stage that now awaits approval, after an approval.
	NextStage     string `json:"next_stage,omitempty"`
	RolloutStatus string `json:"rollout_status"`
	// Approvals are the stage's sign-offs so far (both sides' approvals or
	// waivers, each waiver with its reason), not only this decision's.
	Approvals []acceptance.Signoff `json:"approvals,omitempty"`
	Decision  WebhookDecision      `json:"decision"`
}

// WebhookProgram names the program.
type WebhookProgram struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// WebhookDecision is the signed record behind the event and its hash.
type WebhookDecision struct {
	Record attest.Decision `json:"record"`
	Hash   string          `json:"hash"`
}

// enqueueWebhooks records one delivery per enabled webhook subscribed to
// one of the decision's events, with its job, in tx.
func enqueueWebhooks(ctx context.Context, tx *store.Store, ins Inserter, programID int64, ro Rollout, out DecisionOutcome) (int, error) {
	hooks, err := tx.ActiveWebhooks(ctx, programID, out.Events)
	if err != nil || len(hooks) == 0 {
		return 0, err
	}
	if ins == nil {
		return 0, errors.New("webhooks: no job inserter")
	}
	program, err := tx.ProgramByID(ctx, programID)
	if err != nil {
		return 0, err
	}
	body := WebhookBody{Events: out.Events, Program: WebhookProgram{ID: program.ID, Name: program.Name},
		RolloutStatus: string(out.After.Status()), Decision: WebhookDecision{Record: out.Record.Record, Hash: out.Record.Hash}}
	idx := out.Before.Current
	if idx < len(out.After.Stages) {
		st := out.After.Stages[idx]
		body.Stage, body.StagePosition, body.StageState = st.Name, idx+1, string(st.State)
		body.Approvals = st.Approvals
	}
	if next, ok := out.After.CurrentStage(); ok && out.After.Current != idx {
		body.NextStage = next.Name
	}
	seq := out.Record.Record.Seq
	n := 0
	for _, h := range hooks {
		i := slices.IndexFunc(out.Events, func(e string) bool { return slices.Contains(h.Events, e) })
		if i < 0 {
			continue
		}
		body.Event = out.Events[i]
		raw, err := json.Marshal(body)
		if err != nil {
			return n, fmt.Errorf("webhook body: %w", err)
		}
		id, err := tx.CreateDelivery(ctx, h.ID, programID, body.Event, &seq, raw)
		if err != nil {
			return n, err
		}
		if _, err := ins.InsertTx(ctx, tx.Tx(), DeliverWebhookArgs{DeliveryID: id}, nil); err != nil {
			return n, fmt.Errorf("webhook delivery %d: enqueue: %w", id, err)
		}
		n++
	}
	return n, nil
}

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
	// Redirects are not followed: a webhook answers where it was registered.
	return &http.Client{Timeout: webhookTimeout, Transport: outboundTransport(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Work sends the delivery once; an answer other than 2xx is an error, so
// that River tries again, until the last attempt marks it failed.
func (w *DeliverWebhookWorker) Work(ctx context.Context, job *river.Job[DeliverWebhookArgs]) error {
	st := w.deps.Store
	d, err := st.GetDelivery(ctx, job.Args.DeliveryID)
	if errors.Is(err, store.ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	if d.State != store.DeliveryPending {
		return nil
	}
	hook, err := st.GetWebhook(ctx, d.ProgramID, d.WebhookID)
	if errors.Is(err, store.ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	if !hook.Active {
		return st.RecordDeliveryAttempt(ctx, d.ID, time.Now(), nil, "the webhook was disabled", store.DeliveryFailed)
	}
	secret, err := w.deps.Sealer.Open(hook.SealedSecret, WebhookSealLabel(hook.ID))
	if err != nil {
		if rerr := st.RecordDeliveryAttempt(ctx, d.ID, time.Now(), nil, "the webhook's secret does not open with this server's secret", store.DeliveryFailed); rerr != nil {
			return rerr
		}
		return river.JobCancel(err)
	}
	status, sendErr := w.send(ctx, hook.URL, d, string(secret))
	state := store.DeliveryPending
	errText := ""
	switch {
	case sendErr == nil:
		state = store.DeliveryDelivered
	case job.Attempt >= job.MaxAttempts:
		state, errText = store.DeliveryFailed, sendErr.Error()
	default:
		errText = sendErr.Error()
	}
	// The attempt is recorded whatever happens to the job.
	if err := st.RecordDeliveryAttempt(context.WithoutCancel(ctx), d.ID, time.Now(), status, errText, state); err != nil {
		return err
	}
	if sendErr != nil {
		return fmt.Errorf("webhook %d delivery %d: %w", hook.ID, d.ID, sendErr)
	}
	return nil
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
	req.Header.Set(HeaderWebhookEvent, d.Event)
	req.Header.Set(HeaderWebhookDelivery, strconv.FormatInt(d.ID, 10))
	req.Header.Set(HeaderWebhookSignature, WebhookSignature(secret, d.Body))
	res, err := w.httpClient().Do(req)
	if err != nil {
		return nil, errors.New(redactURLError(err))
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
