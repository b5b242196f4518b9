package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"time"

	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// Wallet lane webhooks: the endpoints a wallet's owner registers, and the
// outbox (webhook_deliveries) that task transitions write in their own
// transaction and the monitor's WebhookDeliverer delivers.

// WebhookEventType is what happened to a task.
type WebhookEventType string

// The events a webhook endpoint may subscribe to.
const (
	// WebhookSubmitted: a transaction for the task was broadcast.
	WebhookSubmitted WebhookEventType = "submitted"
	// WebhookConfirmed: the task's transaction is mined and deep enough (the
	// task is done).
	WebhookConfirmed WebhookEventType = "confirmed"
	// WebhookFailed: the task ended in error.
	WebhookFailed WebhookEventType = "failed"
	// WebhookReplaced: another transaction took the task's nonce.
	WebhookReplaced WebhookEventType = "replaced"
	// WebhookReorged: the done task's transaction left the chain (a reorg,
	// or a node that lost blocks); the task is executing again and the same
	// transaction is being sent again.
	WebhookReorged WebhookEventType = "reorged"
)

// WebhookEventTypes are every event type, the default subscription.
var WebhookEventTypes = []WebhookEventType{WebhookSubmitted, WebhookConfirmed, WebhookFailed, WebhookReplaced, WebhookReorged}

// Valid reports whether t is one of WebhookEventTypes.
func (t WebhookEventType) Valid() bool { return slices.Contains(WebhookEventTypes, t) }

// WebhookEndpoint is one row of ledgerq.webhook_endpoints.
type WebhookEndpoint struct {
	ID string
	// Wallet is the name of the wallet whose events it receives.
	Wallet string
	URL    string
	// Secret is the Standard Webhooks signing secret (whsec_…), shared with
	// the receiver: an API should show it once, when it is created.
	Secret     string
	EventTypes []WebhookEventType
	Enabled    bool
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

func webhookEndpointFromRow(r dbsqlc.LedgerqWebhookEndpoint) WebhookEndpoint {
	types := make([]WebhookEventType, len(r.EventTypes))
	for i, t := range r.EventTypes {
		types[i] = WebhookEventType(t)
	}
	return WebhookEndpoint{
		ID: r.ID, Wallet: r.WalletID, URL: r.Url, Secret: r.Secret, EventTypes: types, Enabled: r.Enabled,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// WebhookSecretPrefix starts every Standard Webhooks secret.
const WebhookSecretPrefix = "whsec_"

// webhookSecretBytes is the entropy of a generated secret: 32 random bytes
// (the spec asks for 24 to 64).
const webhookSecretBytes = 32

// NewWebhookSecret returns a new random Standard Webhooks secret: whsec_
// and the standard base64 of 32 random bytes.
func NewWebhookSecret() string {
	var raw [webhookSecretBytes]byte
	// crypto/rand.Read never returns an error (Go 1.24+); it panics instead.
	_, _ = rand.Read(raw[:])
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(raw[:])
}

// webhookSecret is the form of a secret (the table's webhook_endpoints_secret_format).
var webhookSecret = regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{32,88}={0,2}$`)

// ValidWebhookSecret reports whether secret is a Standard Webhooks secret
// the table takes: whsec_ and the standard base64 of 24 to 64 bytes.
func ValidWebhookSecret(secret string) bool {
	if !webhookSecret.MatchString(secret) {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(secret[len(WebhookSecretPrefix):])
	return err == nil && len(raw) >= 24 && len(raw) <= 64
}

// WebhookEndpointCreateParams is a new endpoint.
type WebhookEndpointCreateParams struct {
	Now    time.Time
	Wallet string
	URL    string
	// Secret is a whsec_ secret; empty generates one (NewWebhookSecret).
	Secret string
	// EventTypes to subscribe to; empty is all of them.
	EventTypes []WebhookEventType
	// Disabled stores the endpoint disabled.
	Disabled bool
	// MaxEndpoints is the most endpoints the wallet may have: with that
	// many already, the create is refused (ErrWebhookEndpointLimit). 0 is
	// no limit.
	MaxEndpoints int
}

// ErrWebhookEndpointLimit is WebhookEndpointCreate's refusal: the wallet
// has MaxEndpoints endpoints already.
var ErrWebhookEndpointLimit = errors.New("webhook endpoint limit reached")

// WebhookEndpointCreate registers an endpoint for a wallet's events and
// returns it, with its secret. A wallet may have several endpoints; each
// receives every subscribed event once.
func (s *Store) WebhookEndpointCreate(ctx context.Context, p WebhookEndpointCreateParams) (WebhookEndpoint, error) {
	secret := p.Secret
	if secret == "" {
		secret = NewWebhookSecret()
	}
	if !ValidWebhookSecret(secret) {
		return WebhookEndpoint{}, fmt.Errorf("storing a webhook endpoint of wallet %q: the secret is not whsec_ and base64 of 24 to 64 bytes", p.Wallet)
	}
	types := p.EventTypes
	if len(types) == 0 {
		types = WebhookEventTypes
	}
	names := make([]string, 0, len(types))
	for _, t := range types {
		if !t.Valid() {
			return WebhookEndpoint{}, fmt.Errorf("storing a webhook endpoint of wallet %q: unknown event type %q", p.Wallet, t)
		}
		names = append(names, string(t))
	}
	slices.Sort(names)
	insert := dbsqlc.WebhookEndpointInsertParams{
		ID: newUUIDv7(p.Now), WalletID: p.Wallet, Url: p.URL, Secret: secret,
		EventTypes: slices.Compact(names), Enabled: !p.Disabled, Now: p.Now, MaxEndpoints: math.MaxInt64,
	}
	if p.MaxEndpoints > 0 {
		insert.MaxEndpoints = int64(p.MaxEndpoints)
	}
	var row dbsqlc.LedgerqWebhookEndpoint
	// The lock makes the insert's count of the wallet's endpoints exact, so
	// concurrent creates cannot pass the limit together.
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		if err := q.WebhookEndpointLockWallet(ctx, p.Wallet); err != nil {
			return err
		}
		var err error
		row, err = one(q.WebhookEndpointInsert(ctx, insert))
		return err
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return WebhookEndpoint{}, fmt.Errorf("storing a webhook endpoint of wallet %q: it has %d already: %w", p.Wallet, p.MaxEndpoints, ErrWebhookEndpointLimit)
	case err != nil:
		return WebhookEndpoint{}, fmt.Errorf("storing a webhook endpoint of wallet %q: %w", p.Wallet, err)
	}
	return webhookEndpointFromRow(row), nil
}

// WebhookEndpointList returns the wallet's endpoints, oldest first.
func (s *Store) WebhookEndpointList(ctx context.Context, wallet string) ([]WebhookEndpoint, error) {
	rows, err := s.q.WebhookEndpointList(ctx, wallet)
	if err != nil {
		return nil, fmt.Errorf("listing the webhook endpoints of wallet %q: %w", wallet, err)
	}
	return fromRows(rows, webhookEndpointFromRow), nil
}

// WebhookEndpointDelete deletes the wallet's endpoint id and its pending
// deliveries. A missing endpoint, or one of another wallet, is ErrNotFound.
func (s *Store) WebhookEndpointDelete(ctx context.Context, wallet, id string) error {
	n, err := s.q.WebhookEndpointDelete(ctx, dbsqlc.WebhookEndpointDeleteParams{ID: id, WalletID: wallet})
	if err != nil {
		return fmt.Errorf("deleting webhook endpoint %q of wallet %q: %w", id, wallet, err)
	}
	if n == 0 {
		return fmt.Errorf("deleting webhook endpoint %q of wallet %q: %w", id, wallet, ErrNotFound)
	}
	return nil
}

// WebhookEvent is one event to tell a wallet's endpoints about.
type WebhookEvent struct {
	// Wallet is the wallet's name (Task.Wallet): its endpoints receive it.
	Wallet string
	Type   WebhookEventType
	TaskID string
	// Payload is the body's data: a JSON object.
	Payload json.RawMessage
}

// WebhookTaskData is the data of a task event (the body's "data").
type WebhookTaskData struct {
	TaskID  string `json:"taskId"`
	Wallet  string `json:"wallet"`
	ChainID int64  `json:"chainId"`
	Sender  string `json:"sender"`
	// Status and Code are the task's TaskStatus after the change, by name
	// and by code.
	Status string `json:"status"`
	Code   int16  `json:"code"`
	// TxHash is the transaction the event is about: the one broadcast
	// (submitted), mined (confirmed) or passed over (replaced).
	TxHash   string `json:"txHash,omitempty"`
	Nonce    *int64 `json:"nonce,omitempty"`
	Error    string `json:"error,omitempty"`
	Reverted bool   `json:"reverted,omitempty"`
}

// TaskWebhookEvent is the event typ about task t as it is after the change;
// txHash and nonce name the transaction concerned (empty and nil when none,
// and for confirmed the task's own hash is used when txHash is empty).
func TaskWebhookEvent(typ WebhookEventType, t Task, txHash string, nonce *int64) WebhookEvent {
	if txHash == "" {
		txHash = t.TxHash
	}
	data := WebhookTaskData{
		TaskID: t.ID, Wallet: t.Wallet, ChainID: t.ChainID, Sender: t.Sender,
		Status: t.Status.String(), Code: int16(t.Status), TxHash: lowerHex(txHash), Nonce: nonce,
		Error: t.Error, Reverted: t.Reverted,
	}
	// A struct of strings and numbers always marshals.
	payload, _ := json.Marshal(data)
	return WebhookEvent{Wallet: t.Wallet, Type: typ, TaskID: t.ID, Payload: payload}
}

// WebhookEmit writes the events to the outbox: one delivery per event and
// enabled endpoint of its wallet subscribed to its type, due at now. It runs
// on the store's own connection or transaction: called on the store a
// ShardFenced callback is given, it commits or rolls back with the task
// changes made there (the outbox rule). It returns how many deliveries it
// stored.
func (s *Store) WebhookEmit(ctx context.Context, now time.Time, events ...WebhookEvent) (int64, error) {
	return emitWebhookEvents(ctx, s.q, now, events)
}

// emitWebhookEvents is WebhookEmit on q, for the store methods that change a
// task's state inside their own transaction (withTx): call it with the q
// they are given, so the events and the change commit together.
func emitWebhookEvents(ctx context.Context, q *dbsqlc.Queries, now time.Time, events []WebhookEvent) (int64, error) {
	if len(events) == 0 {
		return 0, nil
	}
	p := dbsqlc.WebhookDeliveryEmitParams{
		Now: now, WalletIds: make([]string, len(events)), EventTypes: make([]string, len(events)),
		TaskIds: make([]string, len(events)), Payloads: make([]string, len(events)),
	}
	for i, ev := range events {
		if !ev.Type.Valid() {
			return 0, fmt.Errorf("emitting webhook events: unknown event type %q", ev.Type)
		}
		payload := ev.Payload
		if len(payload) == 0 {
			payload = json.RawMessage(`{}`)
		}
		if !json.Valid(payload) {
			return 0, fmt.Errorf("emitting webhook event %s of task %q: the payload is not JSON", ev.Type, ev.TaskID)
		}
		p.WalletIds[i], p.EventTypes[i], p.TaskIds[i], p.Payloads[i] = ev.Wallet, string(ev.Type), ev.TaskID, string(payload)
	}
	n, err := q.WebhookDeliveryEmit(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("emitting %d webhook events: %w", len(events), err)
	}
	return n, wakeAll(ctx, q, wakeIf{n > 0, notify.WalletWebhooks})
}

// WebhookOutboxEvent is one event in the outbox, addressed to one endpoint.
type WebhookOutboxEvent struct {
	// ID is the webhook-id: the same on every attempt.
	ID         string
	EndpointID string
	Type       WebhookEventType
	TaskID     string
	Payload    json.RawMessage
	CreatedAt  time.Time
}

// WebhookDelivery is a claimed delivery: the event, where it goes, and the
// secret to sign it with.
type WebhookDelivery struct {
	WebhookOutboxEvent
	// Attempt is this attempt's number, from 1; record the outcome with it.
	Attempt int
	URL     string
	Secret  string
}

// WebhookDeliveryClaimParams bound one claim.
type WebhookDeliveryClaimParams struct {
	Now time.Time
	// LeaseUntil is when the claimed deliveries become due again if no
	// outcome is recorded (the deliverer died): after the request timeout.
	LeaseUntil time.Time
	Max        int
}

// WebhookDeliveryClaim claims up to Max pending deliveries due at Now,
// earliest first, counting the attempt and leasing each until LeaseUntil
// under the store's liveness lock, if it holds one. Concurrent claims take
// disjoint rows, so no delivery is sent by two deliverers at once while its
// lease runs.
func (s *Store) WebhookDeliveryClaim(ctx context.Context, p WebhookDeliveryClaimParams) ([]WebhookDelivery, error) {
	if !p.LeaseUntil.After(p.Now) {
		return nil, fmt.Errorf("claiming webhook deliveries: lease end %s is not after now %s", p.LeaseUntil, p.Now)
	}
	rows, err := s.q.WebhookDeliveryClaim(ctx, dbsqlc.WebhookDeliveryClaimParams{
		Now: p.Now, LeaseUntil: p.LeaseUntil, Max: int32(p.Max), LivenessLock: s.livenessLock(),
	})
	if err != nil {
		return nil, fmt.Errorf("claiming webhook deliveries: %w", err)
	}
	out := make([]WebhookDelivery, len(rows))
	for i, r := range rows {
		out[i] = WebhookDelivery{
			WebhookOutboxEvent: WebhookOutboxEvent{ID: r.ID, EndpointID: r.EndpointID, Type: WebhookEventType(r.EventType),
				TaskID: r.TaskID, Payload: r.Payload, CreatedAt: r.CreatedAt.UTC()},
			Attempt: int(r.Attempts), URL: r.Url, Secret: r.Secret,
		}
	}
	return out, nil
}

// WebhookDeliveryMarkDeliveredParams record a 2xx answer.
type WebhookDeliveryMarkDeliveredParams struct {
	Now    time.Time
	ID     string
	Status int
}

// WebhookDeliveryMarkDelivered records that the endpoint answered 2xx and
// reports whether the delivery was still pending (a success recorded after
// the lease ran out still counts).
func (s *Store) WebhookDeliveryMarkDelivered(ctx context.Context, p WebhookDeliveryMarkDeliveredParams) (bool, error) {
	if p.Status < 200 || p.Status > 299 {
		return false, fmt.Errorf("recording webhook delivery %s: status %d is not 2xx", p.ID, p.Status)
	}
	n, err := s.q.WebhookDeliveryMarkDelivered(ctx, dbsqlc.WebhookDeliveryMarkDeliveredParams{
		Now: p.Now, Status: ptr(int32(p.Status)), ID: p.ID,
	})
	if err != nil {
		return false, fmt.Errorf("recording webhook delivery %s: %w", p.ID, err)
	}
	return n > 0, nil
}

// WebhookDeliveryMarkFailedParams record a failed attempt.
type WebhookDeliveryMarkFailedParams struct {
	Now time.Time
	ID  string
	// Attempt is the number the claim returned.
	Attempt int
	// Status is the answer's HTTP status; 0 when there was none.
	Status int
	Error  string
	// NextAttemptAt is when to try again (ignored when GiveUp).
	NextAttemptAt time.Time
	// GiveUp ends the delivery: no more attempts.
	GiveUp bool
}

// WebhookDeliveryMarkFailed records a failed attempt: the delivery is due again
// at NextAttemptAt, or given up. It reports whether it recorded anything:
// false when the delivery was delivered, given up or claimed again since
// (attempt is no longer the current one).
func (s *Store) WebhookDeliveryMarkFailed(ctx context.Context, p WebhookDeliveryMarkFailedParams) (bool, error) {
	if p.Error == "" {
		return false, fmt.Errorf("recording the failure of webhook delivery %s: no error given", p.ID)
	}
	qp := dbsqlc.WebhookDeliveryMarkFailedParams{
		Error: p.Error, NextAttemptAt: p.NextAttemptAt, ID: p.ID, Attempts: int32(p.Attempt),
	}
	if p.Status != 0 {
		qp.Status = ptr(int32(p.Status))
	}
	if p.GiveUp {
		qp.GaveUpAt, qp.NextAttemptAt = &p.Now, p.Now
	}
	n, err := s.q.WebhookDeliveryMarkFailed(ctx, qp)
	if err != nil {
		return false, fmt.Errorf("recording the failure of webhook delivery %s: %w", p.ID, err)
	}
	return n > 0, nil
}

// WebhookDeliveryState is a delivery as stored, for operators and tests.
type WebhookDeliveryState struct {
	WebhookOutboxEvent
	Attempts      int
	NextAttemptAt time.Time
	LastAttemptAt *time.Time
	DeliveredAt   *time.Time
	GaveUpAt      *time.Time
	// LastStatus is 0 when the last attempt had no answer.
	LastStatus int
	LastError  string
	// LivenessLock is the liveness lock of the process sending it, while
	// one is; 0 otherwise (or when its claim recorded none).
	LivenessLock int32
}

// WebhookDeliveryGet returns delivery id.
func (s *Store) WebhookDeliveryGet(ctx context.Context, id string) (WebhookDeliveryState, error) {
	r, err := one(s.q.WebhookDeliveryGet(ctx, id))
	if err != nil {
		return WebhookDeliveryState{}, fmt.Errorf("reading webhook delivery %q: %w", id, err)
	}
	return webhookDeliveryStateFromRow(r), nil
}

func webhookDeliveryStateFromRow(r dbsqlc.LedgerqWebhookDelivery) WebhookDeliveryState {
	d := WebhookDeliveryState{
		WebhookOutboxEvent: WebhookOutboxEvent{ID: r.ID, EndpointID: r.EndpointID, Type: WebhookEventType(r.EventType),
			TaskID: r.TaskID, Payload: r.Payload, CreatedAt: r.CreatedAt.UTC()},
		Attempts: int(r.Attempts), NextAttemptAt: r.NextAttemptAt.UTC(),
		LastAttemptAt: utcPtr(r.LastAttemptAt), DeliveredAt: utcPtr(r.DeliveredAt), GaveUpAt: utcPtr(r.GaveUpAt),
		LastStatus: int(deref(r.LastStatus)), LastError: deref(r.LastError), LivenessLock: deref(r.LivenessLock),
	}
	return d
}

// WebhookDeliveryListParams select a page of an endpoint's deliveries.
type WebhookDeliveryListParams struct {
	EndpointID string
	// Before is the last delivery of the previous page (zero for the first).
	BeforeCreatedAt time.Time
	BeforeID        string
	Limit           int
}

// WebhookDeliveryList returns up to Limit of the endpoint's deliveries,
// newest first, older than (BeforeCreatedAt, BeforeID) when set.
func (s *Store) WebhookDeliveryList(ctx context.Context, p WebhookDeliveryListParams) ([]WebhookDeliveryState, error) {
	before, id := p.BeforeCreatedAt, p.BeforeID
	if before.IsZero() {
		// After every delivery: the first page.
		before, id = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), ""
	}
	rows, err := s.q.WebhookDeliveryListByEndpoint(ctx, dbsqlc.WebhookDeliveryListByEndpointParams{
		EndpointID: p.EndpointID, BeforeCreatedAt: before, BeforeID: id, Max: int32(p.Limit),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the deliveries of webhook endpoint %q: %w", p.EndpointID, err)
	}
	out := make([]WebhookDeliveryState, len(rows))
	for i, r := range rows {
		out[i] = webhookDeliveryStateFromRow(r)
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }

// WebhookDeliveryRetryParams name a given-up delivery to send again.
type WebhookDeliveryRetryParams struct {
	Now time.Time
	ID  string
	// Audit, when set, records the retry in the same transaction.
	Audit *AuditEntry
}

// WebhookDeliveryRetry sends a given-up delivery again: its attempts start
// over, due at once, and the deliverers are woken. It returns false for a
// delivery that is not given up (pending or delivered: nothing to do), and
// ErrNotFound for a missing one.
func (s *Store) WebhookDeliveryRetry(ctx context.Context, p WebhookDeliveryRetryParams) (bool, error) {
	var retried bool
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		row, err := one(q.WebhookDeliveryRetry(ctx, dbsqlc.WebhookDeliveryRetryParams{Now: p.Now, ID: p.ID}))
		if errors.Is(err, ErrNotFound) {
			if _, err := one(q.WebhookDeliveryGet(ctx, p.ID)); err != nil {
				return err
			}
			return nil
		} else if err != nil {
			return err
		}
		retried = true
		if p.Audit != nil {
			detail := map[string]any{"endpoint_id": row.EndpointID, "last_error": deref(row.LastError)}
			if err := auditInsert(ctx, q, p.Audit.with(p.Now, "webhook_delivery.retry", "webhook_delivery/"+p.ID, detail)); err != nil {
				return err
			}
		}
		return wake(ctx, q, notify.WalletWebhooks)
	})
	if err != nil {
		return false, fmt.Errorf("sending webhook delivery %q again: %w", p.ID, err)
	}
	return retried, nil
}

// WebhookDeliveryDeleteEnded deletes up to max webhook deliveries delivered
// or given up before before, oldest first (the webhook retention), and
// returns how many. A delivery still due or being retried is kept.
func (s *Store) WebhookDeliveryDeleteEnded(ctx context.Context, before time.Time, max int) (int64, error) {
	n, err := s.q.WebhookDeliveryDeleteEnded(ctx, dbsqlc.WebhookDeliveryDeleteEndedParams{Before: before, Max: int32(max)})
	if err != nil {
		return 0, fmt.Errorf("deleting ended webhook deliveries: %w", err)
	}
	return n, nil
}
