package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Webhook events.
const (
	EventStageApproved = "stage_approved"
	EventStageHalted   = "stage_halted"
	EventStopLoss      = "stop_loss"
)

// WebhookEvents lists the events a webhook can subscribe to.
var WebhookEvents = []string{EventStageApproved, EventStageHalted, EventStopLoss}

// Webhook is a URL a program calls on rollout events.
type Webhook struct {
	ID            int64
	ProgramID     int64
	URL           string
	Events        []string
	SealedSecret  []byte
	Active        bool
	CreatedBy     *int64
	CreatedByName string
	CreatedAt     time.Time
	// Deliveries counts deliveries by state (pending, delivered, failed).
	Deliveries map[string]int
}

const webhookColumns = `w.id, w.program_id, w.url, w.events, w.sealed_secret, w.active, w.created_by, coalesce(u.display_name, ''), w.created_at`
const webhookJoins = ` FROM webhooks w LEFT JOIN users u ON u.id = w.created_by`

func scanWebhook(row pgx.Row) (Webhook, error) {
	var w Webhook
	err := row.Scan(&w.ID, &w.ProgramID, &w.URL, &w.Events, &w.SealedSecret, &w.Active, &w.CreatedBy, &w.CreatedByName, &w.CreatedAt)
	return w, err
}

func collectWebhooks(rows pgx.Rows, err error, what string) ([]Webhook, error) {
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Webhook, error) { return scanWebhook(r) })
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return list, nil
}

// CreateWebhook inserts a webhook without its secret (SetWebhookSecret
// seals it bound to the new id).
func (s *Store) CreateWebhook(ctx context.Context, programID int64, url string, events []string, createdBy int64) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO webhooks (program_id, url, events, created_by) VALUES ($1, $2, $3, $4) RETURNING id`,
		programID, url, events, nullID(createdBy)).Scan(&id)
	if err != nil {
		return 0, notFound(err, "create webhook")
	}
	return id, nil
}

// SetWebhookSecret stores a webhook's sealed secret.
func (s *Store) SetWebhookSecret(ctx context.Context, webhookID int64, sealed []byte) error {
	tag, err := s.db.Exec(ctx, `UPDATE webhooks SET sealed_secret = $2 WHERE id = $1`, webhookID, sealed)
	return oneRow(tag, err, fmt.Sprintf("webhook %d secret", webhookID))
}

// SetWebhookActive enables or disables a webhook.
func (s *Store) SetWebhookActive(ctx context.Context, programID, webhookID int64, active bool) error {
	tag, err := s.db.Exec(ctx, `UPDATE webhooks SET active = $3 WHERE program_id = $1 AND id = $2`, programID, webhookID, active)
	if err != nil {
		return fmt.Errorf("store: webhook %d: %w", webhookID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: webhook %d: %w", webhookID, ErrNotFound)
	}
	return nil
}

// ListWebhooks returns a program's webhooks with their delivery counts.
func (s *Store) ListWebhooks(ctx context.Context, programID int64) ([]Webhook, error) {
	rows, err := s.db.Query(ctx, `SELECT `+webhookColumns+webhookJoins+` WHERE w.program_id = $1 ORDER BY w.id`, programID)
	list, err := collectWebhooks(rows, err, fmt.Sprintf("webhooks of program %d", programID))
	if err != nil {
		return nil, err
	}
	counts, err := s.db.Query(ctx, `SELECT d.webhook_id, d.state, count(*) FROM webhook_deliveries d WHERE d.program_id = $1 GROUP BY 1, 2`, programID)
	if err != nil {
		return nil, fmt.Errorf("store: webhook deliveries of program %d: %w", programID, err)
	}
	byHook := map[int64]map[string]int{}
	var id int64
	var state string
	var n int
	_, err = pgx.ForEachRow(counts, []any{&id, &state, &n}, func() error {
		if byHook[id] == nil {
			byHook[id] = map[string]int{}
		}
		byHook[id][state] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: webhook deliveries of program %d: %w", programID, err)
	}
	for i := range list {
		list[i].Deliveries = byHook[list[i].ID]
	}
	return list, nil
}

// GetWebhook returns one webhook of a program.
func (s *Store) GetWebhook(ctx context.Context, programID, webhookID int64) (Webhook, error) {
	w, err := scanWebhook(s.db.QueryRow(ctx, `SELECT `+webhookColumns+webhookJoins+` WHERE w.program_id = $1 AND w.id = $2`, programID, webhookID))
	if err != nil {
		return w, notFound(err, fmt.Sprintf("webhook %d", webhookID))
	}
	return w, nil
}

// ActiveWebhooks returns a program's enabled webhooks subscribed to any of
// the events.
func (s *Store) ActiveWebhooks(ctx context.Context, programID int64, events []string) ([]Webhook, error) {
	rows, err := s.db.Query(ctx, `SELECT `+webhookColumns+webhookJoins+` WHERE w.program_id = $1 AND w.active AND w.events && $2 ORDER BY w.id`,
		programID, events)
	return collectWebhooks(rows, err, fmt.Sprintf("active webhooks of program %d", programID))
}

// WebhookDelivery is one event sent (or to be sent) to one webhook.
type WebhookDelivery struct {
	ID            int64
	WebhookID     int64
	ProgramID     int64
	Event         string
	DecisionSeq   *int64
	Body          []byte
	State         string // pending, delivered, failed
	Attempts      int
	LastStatus    *int
	LastError     string
	CreatedAt     time.Time
	LastAttemptAt *time.Time
	DeliveredAt   *time.Time
}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

const deliveryColumns = `id, webhook_id, program_id, event, decision_seq, body, state, attempts, last_status, last_error, created_at, last_attempt_at, delivered_at`

// CreateDelivery records a delivery to be sent.
func (s *Store) CreateDelivery(ctx context.Context, webhookID, programID int64, event string, decisionSeq *int64, body []byte) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO webhook_deliveries (webhook_id, program_id, event, decision_seq, body) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
		webhookID, programID, event, decisionSeq, body).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("store: create delivery to webhook %d: %w", webhookID, err)
	}
	return id, nil
}

// DeliveryByID returns a delivery by id (for its worker).
func (s *Store) DeliveryByID(ctx context.Context, deliveryID int64) (WebhookDelivery, error) {
	rows, err := s.db.Query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = $1`, deliveryID)
	if err != nil {
		return WebhookDelivery{}, fmt.Errorf("store: delivery %d: %w", deliveryID, err)
	}
	d, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[WebhookDelivery])
	if err != nil {
		return d, notFound(err, fmt.Sprintf("delivery %d", deliveryID))
	}
	return d, nil
}

// ListDeliveries returns a webhook's deliveries, newest first.
func (s *Store) ListDeliveries(ctx context.Context, programID, webhookID int64, limit int) ([]WebhookDelivery, error) {
	rows, err := s.db.Query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE program_id = $1 AND webhook_id = $2 ORDER BY id DESC LIMIT $3`,
		programID, webhookID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: deliveries of webhook %d: %w", webhookID, err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[WebhookDelivery])
	if err != nil {
		return nil, fmt.Errorf("store: deliveries of webhook %d: %w", webhookID, err)
	}
	return list, nil
}

// RecordDeliveryAttempt stores the outcome of one attempt: state delivered
// on a 2xx answer, failed after the last attempt, pending otherwise.
func (s *Store) RecordDeliveryAttempt(ctx context.Context, deliveryID int64, at time.Time, status *int, errText, state string) error {
	tag, err := s.db.Exec(ctx, `UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = $2, last_status = $3, last_error = $4, state = $5,
		delivered_at = CASE WHEN $5 = 'delivered' THEN $2 ELSE delivered_at END WHERE id = $1`, deliveryID, at, status, errText, state)
	return oneRow(tag, err, fmt.Sprintf("delivery %d attempt", deliveryID))
}

// ErrDeliveryNotFailed: only a delivery that gave up can be sent again.
var ErrDeliveryNotFailed = errors.New("only a failed delivery can be sent again")

// Redeliver records a new delivery with the same event, decision and body
// as a failed one of the webhook (the failed one keeps its attempts in the
// log) and returns the new delivery's id.
func (s *Store) Redeliver(ctx context.Context, programID, webhookID, deliveryID int64) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO webhook_deliveries (webhook_id, program_id, event, decision_seq, body)
		SELECT webhook_id, program_id, event, decision_seq, body FROM webhook_deliveries
		WHERE id = $3 AND program_id = $1 AND webhook_id = $2 AND state = 'failed' RETURNING id`, programID, webhookID, deliveryID).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("store: redeliver %d: %w", deliveryID, err)
	}
	var exists bool
	if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $3 AND program_id = $1 AND webhook_id = $2)`,
		programID, webhookID, deliveryID).Scan(&exists); err != nil {
		return 0, fmt.Errorf("store: redeliver %d: %w", deliveryID, err)
	}
	if exists {
		return 0, fmt.Errorf("store: redeliver %d: %w", deliveryID, ErrDeliveryNotFailed)
	}
	return 0, fmt.Errorf("store: redeliver %d: %w", deliveryID, ErrNotFound)
}
