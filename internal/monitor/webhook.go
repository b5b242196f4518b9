package monitor

// The wallet lane's webhooks: the monitor role delivers each wallet's task
// events to the endpoints registered for it.
//
// Task transitions write their events to an outbox (store.WebhookEmit) in the
// transaction that changes the task, so an event exists exactly when its
// change committed. The WebhookDeliverer claims due outbox rows in one statement
// (FOR UPDATE SKIP LOCKED, leasing each row until now + Lease), commits,
// and only then POSTs them, signed with the Standard Webhooks scheme
// (webhook-id, webhook-timestamp, webhook-signature). A 2xx answer delivers
// the row; anything else schedules another attempt with exponential backoff
// and jitter, up to a give-up limit. A deliverer that dies mid-send leaves
// its rows leased: they are claimed again after the lease, with the same
// webhook-id, so receivers deduplicate by it. Delivery is at least once.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/ledgerq/ledgerq/internal/egress"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// WebhookConfig configures a WebhookDeliverer. Its tags declare the
// settings an operator sets (internal/config): in the wallet lane's
// section, flags --wallet-webhook-*.
type WebhookConfig struct {
	// AllowPrivate lets deliveries connect to non-public addresses
	// (egress.CheckAddr): loopback receivers in tests and ledgerq dev.
	AllowPrivate bool `flag:"allow-private" help:"let webhook endpoints be at loopback, private, link-local and other non-public addresses (receivers on this machine, in tests and development); off, such a URL is refused at registration and never connected to at delivery"`
	// Interval is the poll interval: the longest a due delivery waits.
	Interval time.Duration `flag:"interval" help:"how often due webhook deliveries are looked for"`
	// BatchSize is the most deliveries one round claims.
	BatchSize int
	// Concurrency is how many POSTs a round makes at once.
	Concurrency int
	// RequestTimeout bounds one POST, answer included.
	RequestTimeout time.Duration `flag:"timeout" help:"timeout of one webhook POST; --wallet-webhook-lease must exceed it"`
	// Lease is how long a claimed delivery is held before another deliverer
	// may claim it again (its deliverer died). It must exceed
	// RequestTimeout + DBTimeout, so a live deliverer records its outcome
	// before its lease runs out and no delivery is sent by two at once.
	Lease time.Duration `flag:"lease" help:"a claimed webhook delivery is held this long before another process may send it again (its sender died)"`
	// DBTimeout bounds each database statement.
	DBTimeout time.Duration
	// BackoffBase is the wait after the first failed attempt; it doubles
	// with each further failure, up to BackoffMax.
	BackoffBase time.Duration `flag:"backoff" help:"wait after a failed webhook delivery; doubles with each failure"`
	BackoffMax  time.Duration `flag:"backoff-max" help:"the longest wait between two attempts of a webhook delivery"`
	// MaxAttempts is the give-up limit: after this many failed attempts the
	// delivery is given up, with its last error kept.
	MaxAttempts int `flag:"max-attempts" help:"attempts to deliver one webhook event to one endpoint before it is given up (kept in ledgerq.webhook_deliveries with its last error)"`
	// RetentionAge is how long a delivery is kept after it was delivered
	// or given up (0: forever); deleted by the monitor role
	// (NewWebhookRetention), in rounds of the wallet lane's retention
	// batch size and interval.
	RetentionAge time.Duration `flag:"retention-age" help:"delete webhook deliveries delivered or given up longer ago than this (0: keep them forever); one still due or being retried is kept; run by the monitor role, --wallet-retention-batch-size at a time"`
}

// Defaults returns the default configuration: 12 attempts over about five
// hours (5 s doubling, capped at one hour).
func WebhookDefaults() WebhookConfig {
	return WebhookConfig{
		Interval: time.Second, BatchSize: 100, Concurrency: 8,
		RequestTimeout: 10 * time.Second, Lease: time.Minute, DBTimeout: 5 * time.Second,
		BackoffBase: 5 * time.Second, BackoffMax: time.Hour, MaxAttempts: 12,
		RetentionAge: 7 * 24 * time.Hour,
	}
}

// Validate reports the first setting that cannot work.
func (c WebhookConfig) Validate() error {
	switch {
	case c.Interval <= 0:
		return errors.New("webhook: interval must be positive")
	case c.BatchSize < 1 || c.Concurrency < 1:
		return errors.New("webhook: batch size and concurrency must be at least 1")
	case c.RequestTimeout <= 0 || c.DBTimeout <= 0:
		return errors.New("webhook: request and database timeouts must be positive")
	case c.Lease <= c.RequestTimeout+c.DBTimeout:
		return fmt.Errorf("webhook: lease %s must exceed request timeout + database timeout (%s)", c.Lease, c.RequestTimeout+c.DBTimeout)
	case c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase:
		return errors.New("webhook: backoff base must be positive and at most the backoff max")
	case c.MaxAttempts < 1:
		return errors.New("webhook: max attempts must be at least 1")
	case c.RetentionAge < 0:
		return errors.New("--wallet-webhook-retention-age must not be negative (0 keeps deliveries forever)")
	}
	return nil
}

// WebhookBackoff is the wait after failed attempt number attempt (from 1):
// min(ceiling, base × 2^(attempt-1)), less a jitter of up to a quarter of it, so
// deliveries that failed together do not come back together. jitter(n)
// returns a duration in [0, n).
func WebhookBackoff(base, ceiling time.Duration, attempt int, jitter func(time.Duration) time.Duration) time.Duration {
	d := base
	for n := 1; n < attempt && d < ceiling; n++ {
		d *= 2
	}
	d = min(d, ceiling)
	if q := d / 4; q > 0 && jitter != nil {
		d -= jitter(q)
	}
	return d
}

// WebhookOption changes a WebhookDeliverer.
type WebhookOption func(*WebhookDeliverer)

// WithWebhookClient sends with client (default: egress.NewClient's, which connects
// to public addresses only unless AllowPrivate, uses no proxy and follows
// no redirects: a 3xx is a failed attempt).
func WithWebhookClient(client *http.Client) WebhookOption {
	return func(d *WebhookDeliverer) { d.client = client }
}

// WithWebhookJitter sets the backoff jitter: jitter(n) returns a duration in
// [0, n) (default: uniform random). Tests make it deterministic.
func WithWebhookJitter(jitter func(time.Duration) time.Duration) WebhookOption {
	return func(d *WebhookDeliverer) { d.jitter = jitter }
}

// WebhookDeliverer is the delivery loop service.
type WebhookDeliverer struct {
	*loop.Loop
	st     *store.Store
	cfg    WebhookConfig
	deps   loop.Deps
	client *http.Client
	jitter func(time.Duration) time.Duration
	log    *slog.Logger
}

// NewWebhookDeliverer returns a WebhookDeliverer. Several may run, in one process or many: each
// claims disjoint deliveries.
func NewWebhookDeliverer(st *store.Store, deps loop.Deps, cfg WebhookConfig, opts ...WebhookOption) (*WebhookDeliverer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &WebhookDeliverer{
		st: st, cfg: cfg, deps: deps, log: deps.Logger,
		client: egress.NewClient(cfg.AllowPrivate),
		jitter: func(n time.Duration) time.Duration { return rand.N(n) },
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	for _, o := range opts {
		o(d)
	}
	d.Loop = loop.NewService("webhook_delivery", cfg.Interval, deps, cfg.BatchSize, d.RunOnce)
	return d, nil
}

// WebhookBody is what a delivery POSTs: the Standard Webhooks payload shape.
type WebhookBody struct {
	// Type is "task." and the event type (task.submitted, task.confirmed,
	// task.failed, task.replaced).
	Type string `json:"type"`
	// Timestamp is when the event happened.
	Timestamp time.Time `json:"timestamp"`
	// Data is the event's payload (store.WebhookTaskData for task events).
	Data json.RawMessage `json:"data"`
}

// body is the same bytes on every attempt of a delivery.
func webhookBody(d store.WebhookDelivery) ([]byte, error) {
	return json.Marshal(WebhookBody{Type: "task." + string(d.Type), Timestamp: d.CreatedAt, Data: d.Payload})
}

// RunOnce claims up to BatchSize due deliveries, POSTs them (Concurrency at
// a time) and records each outcome. It returns how many it claimed.
func (d *WebhookDeliverer) RunOnce(ctx context.Context) (int, error) {
	now := d.deps.Clock.Now()
	cctx, cancel := context.WithTimeout(ctx, d.cfg.DBTimeout)
	claimed, err := d.st.WebhookDeliveryClaim(cctx, store.WebhookDeliveryClaimParams{
		Now: now, LeaseUntil: now.Add(d.cfg.Lease), Max: d.cfg.BatchSize,
	})
	cancel()
	if err != nil {
		return 0, err
	}
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, d.cfg.Concurrency)
		mu   sync.Mutex
		errs []error
	)
	for _, dv := range claimed {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := d.deliver(ctx, dv); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return len(claimed), errors.Join(errs...)
}

// deliver sends one claimed delivery and records the outcome.
func (d *WebhookDeliverer) deliver(ctx context.Context, dv store.WebhookDelivery) error {
	status, sendErr := d.send(ctx, dv)
	if ctx.Err() != nil {
		// Shutting down: the attempt was cut short by us, not the
		// endpoint. The lease brings it back, with the same id.
		return nil
	}
	now := d.deps.Clock.Now()
	rctx, cancel := context.WithTimeout(ctx, d.cfg.DBTimeout)
	defer cancel()
	if sendErr == nil {
		if _, err := d.st.WebhookDeliveryMarkDelivered(rctx, store.WebhookDeliveryMarkDeliveredParams{Now: now, ID: dv.ID, Status: status}); err != nil {
			return err
		}
		d.deps.Metrics.Transition("webhook", "delivered", 1)
		return nil
	}
	p := store.WebhookDeliveryMarkFailedParams{Now: now, ID: dv.ID, Attempt: dv.Attempt, Status: status, Error: sendErr.Error()}
	if dv.Attempt >= d.cfg.MaxAttempts {
		p.GiveUp = true
	} else {
		p.NextAttemptAt = now.Add(WebhookBackoff(d.cfg.BackoffBase, d.cfg.BackoffMax, dv.Attempt, d.jitter))
	}
	recorded, err := d.st.WebhookDeliveryMarkFailed(rctx, p)
	if err != nil {
		return err
	}
	switch {
	case !recorded:
	case p.GiveUp:
		d.deps.Metrics.Transition("webhook", "gave_up", 1)
		d.log.Warn("webhook: delivery given up", "delivery", dv.ID, "endpoint", dv.EndpointID, "task", dv.TaskID,
			"event", dv.Type, "attempts", dv.Attempt, "error", sendErr)
	default:
		d.deps.Metrics.Transition("webhook", "retry", 1)
		d.log.Debug("webhook: delivery failed, will retry", "delivery", dv.ID, "endpoint", dv.EndpointID,
			"attempt", dv.Attempt, "next_attempt_at", p.NextAttemptAt, "error", sendErr)
	}
	return nil
}

// errorBodyBytes is how much of a failed answer's body is kept in
// last_error; drainBytes how much is read so the connection can be reused.
const (
	errorBodyBytes = 256
	drainBytes     = 64 << 10
)

// send POSTs the delivery once and returns the answer's status (0 when
// there was none) and an error unless the endpoint answered 2xx.
func (d *WebhookDeliverer) send(ctx context.Context, dv store.WebhookDelivery) (int, error) {
	payload, err := webhookBody(dv)
	if err != nil {
		return 0, fmt.Errorf("encoding the body: %w", err)
	}
	signer, err := standardwebhooks.NewWebhook(dv.Secret)
	if err != nil {
		return 0, fmt.Errorf("reading the endpoint's secret: %w", err)
	}
	ts := d.deps.Clock.Now()
	sig, err := signer.Sign(dv.ID, ts, payload)
	if err != nil {
		return 0, fmt.Errorf("signing: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, dv.URL, strings.NewReader(string(payload)))
	if err != nil {
		return 0, fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ledgerq-webhooks")
	req.Header.Set(standardwebhooks.HeaderWebhookID, dv.ID)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("posting to the endpoint: %w", err)
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes))
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, fmt.Errorf("HTTP %d: %s", resp.StatusCode, printableAnswer(head))
}

// printableAnswer keeps an answer's body readable in last_error.
func printableAnswer(b []byte) string {
	s := strings.ToValidUTF8(string(b), string(utf8.RuneError))
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 && r != ' ' {
			return ' '
		}
		return r
	}, s))
}
