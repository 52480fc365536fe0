package rollout

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/service"
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
func enqueueWebhooks(ctx context.Context, tx *store.Store, queue service.Queue, programID int64, out DecisionOutcome) (int, error) {
	hooks, err := tx.ActiveWebhooks(ctx, programID, out.Events)
	if err != nil || len(hooks) == 0 {
		return 0, err
	}
	if queue == nil {
		return 0, errors.New("webhooks: no job queue")
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
		if err := queue.DeliverWebhook(ctx, tx, id); err != nil {
			return n, fmt.Errorf("webhook delivery %d: enqueue: %w", id, err)
		}
		n++
	}
	return n, nil
}
