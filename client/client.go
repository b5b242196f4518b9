package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// Client is ledgerq's HTTP API for an application: SendTx and WaitTask for
// the wallet lane, and API for every route.
type Client struct {
	api *ClientWithResponses
}

// New returns a client of the ledgerq server at baseURL
// ("https://ledgerq.example"), sending apiKey as `Authorization: Bearer …`
// (an empty key sends none, for `serve --api-insecure-open`). opts are the
// generated client's: WithHTTPClient for timeouts or TLS, WithRequestEditorFn
// for headers of one's own.
func New(baseURL, apiKey string, opts ...ClientOption) (*Client, error) {
	if apiKey != "" {
		auth := WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+apiKey)
			return nil
		})
		opts = append([]ClientOption{auth}, opts...)
	}
	api, err := NewClientWithResponses(baseURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("ledgerq client for %s: %w", baseURL, err)
	}
	return &Client{api: api}, nil
}

// API is the generated client, one method per route of api/openapi.yaml
// (GetWalletWithResponse, PutWalletPolicyWithResponse, ListBatchesWithResponse,
// …), sending the Client's key.
func (c *Client) API() *ClientWithResponses { return c.api }

// NewIdempotencyKey returns a fresh Idempotency-Key, a random UUID. Keep it
// with the record the payment is for, before the first attempt, and send
// every attempt of that payment with it (WithIdempotencyKey).
func NewIdempotencyKey() string { return uuid.NewString() }

// SendOption sets how SendTx sends.
type SendOption func(*sendOptions)

type sendOptions struct {
	key     string
	wait    bool
	retries int
}

// WithIdempotencyKey sends the task under key instead of a fresh random one.
// A caller that retries a send must use this with the key of its first
// attempt: the same key and body answer the task already stored, where a new
// key stores a second task and sends the payment twice.
func WithIdempotencyKey(key string) SendOption {
	return func(o *sendOptions) { o.key = key }
}

// WithWait makes SendTx return only once the task has ended (done or error),
// or ctx ends. It uses the server's long-poll (send-tx without task=true,
// which answers when the task ends or after --wallet-send-tx-max-wait) and
// sends the request again with the same key while the task runs on; each
// resend is a replay and stores nothing.
//
// The server cancels a task still waiting (not yet signed) when the request
// that stored it goes away: a ctx that ends while the first request waits
// cancels a task that has not started.
func WithWait() SendOption { return func(o *sendOptions) { o.wait = true } }

// WithRetries makes SendTx send again, up to n more times and with the same
// Idempotency-Key, after an answer that says to (429, 502, 503, 504, after
// Retry-After when the server gives one) or no answer at all (a connection
// refused or cut). Retrying with the key is safe: a request that did store
// its task before its answer was lost answers that task on the retry.
func WithRetries(n int) SendOption { return func(o *sendOptions) { o.retries = n } }

// SendResult is SendTx's answer.
type SendResult struct {
	// Task is the task as the last answer had it.
	Task WalletTask
	// Created: the request stored the task. False on a replay.
	Created bool
	// Replayed: the key was already used with this body (Idempotent-Replayed),
	// so nothing was stored and Task is the task stored then.
	Replayed bool
	// IdempotencyKey is the key the task was sent under.
	IdempotencyKey string
}

// Ended says whether the task has ended (done or error).
func (r *SendResult) Ended() bool { return ended(r.Task.Status) }

// SendTx stores a send-tx task for wallet (POST /v1/wallets/{wallet}/send-tx)
// under an Idempotency-Key, a fresh random one unless WithIdempotencyKey gives
// it, and returns at once with the task (waiting, as a rule) unless WithWait
// says to wait for its end. A refusal is an *APIError: ErrBadRequest naming
// the field, ErrPolicyRefused with the rule, ErrIdempotencyConflict for a key
// already used with another body, ….
func (c *Client) SendTx(ctx context.Context, wallet string, tx SendTxRequest, opts ...SendOption) (*SendResult, error) {
	var o sendOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.key == "" {
		o.key = NewIdempotencyKey()
	}
	params := &SendTxParams{IdempotencyKey: &o.key}
	if !o.wait {
		fireAndForget := "true"
		params.Task = &fireAndForget
	}
	var (
		replayed bool
		created  bool
		retries  int
		pace     = newBackoff()
	)
	for {
		sent := time.Now()
		res, err := c.sendOnce(ctx, wallet, params, tx)
		if err != nil {
			delay, retry := retryable(ctx, err)
			if !retry || retries >= o.retries {
				return nil, fmt.Errorf("sending a task for wallet %s (Idempotency-Key %s): %w", wallet, o.key, err)
			}
			retries++
			if err := sleep(ctx, max(delay, pace.next())); err != nil {
				return nil, fmt.Errorf("sending a task for wallet %s (Idempotency-Key %s): %w", wallet, o.key, err)
			}
			continue
		}
		// Only the first answer that stores says so; a resend of a waiting
		// send is a replay of the request that did.
		created = created || res.Created
		replayed = replayed || (res.Replayed && !created)
		res.Created, res.Replayed, res.IdempotencyKey = created, replayed, o.key
		if !o.wait || res.Ended() {
			return res, nil
		}
		// The server's wait is over and the task runs on: wait again. A
		// server that does not wait (--wallet-send-tx-max-wait 0) answers at
		// once, and is then asked again at a growing interval, not in a spin.
		if time.Since(sent) < time.Second {
			if err := sleep(ctx, pace.next()); err != nil {
				return res, fmt.Errorf("waiting for task %s of wallet %s: %w", res.Task.ID, wallet, err)
			}
		}
	}
}

func (c *Client) sendOnce(ctx context.Context, wallet string, params *SendTxParams, tx SendTxRequest) (*SendResult, error) {
	resp, err := c.api.SendTxWithResponse(ctx, wallet, params, tx)
	if err != nil {
		return nil, err
	}
	result := resp.JSON200
	if result == nil {
		result = resp.JSON202
	}
	if result == nil {
		return nil, errorOf(resp.HTTPResponse, resp.Body)
	}
	return &SendResult{
		Task:     result.Task,
		Created:  result.Created != nil && *result.Created,
		Replayed: resp.HTTPResponse.Header.Get("Idempotent-Replayed") == "true",
	}, nil
}

// GetTask reads one task of wallet (GET /v1/wallets/{wallet}/tasks/{id}).
func (c *Client) GetTask(ctx context.Context, wallet, id string) (*WalletTask, error) {
	return c.getTask(ctx, wallet, id, nil)
}

// getTask reads one task, waiting up to wait seconds for it to end when
// wait is set (the route's long-poll).
func (c *Client) getTask(ctx context.Context, wallet, id string, wait *int) (*WalletTask, error) {
	resp, err := c.api.GetWalletTaskWithResponse(ctx, wallet, id, &GetWalletTaskParams{Wait: wait})
	if err != nil {
		return nil, fmt.Errorf("reading task %s of wallet %s: %w", id, wallet, err)
	}
	if resp.JSON200 == nil {
		return nil, fmt.Errorf("reading task %s of wallet %s: %w", id, wallet, errorOf(resp.HTTPResponse, resp.Body))
	}
	return &resp.JSON200.Task, nil
}

// The pace of WaitTask's reads when the server answers at once (an error,
// or a server whose wait is off): the first after waitFirst, each later one
// twice as late, up to waitMax, each with up to a fifth more at random so
// that many waiting clients do not read in step.
const (
	waitFirst = 100 * time.Millisecond
	waitMax   = 2 * time.Second
)

// longPoll is the most seconds one read of WaitTask asks the server to
// wait (the server cuts it to its --send-tx-max-wait).
const longPoll = 30

// WaitTask waits until the task id of wallet has ended (done or error) and
// returns it, or returns ctx's error when ctx ends first. A done task is
// --wallet-confirmations blocks deep; Status, TxHash, Error and Reverted say
// how it ended.
//
// Each read is the task route's long-poll (GET …/tasks/{id}?wait=N): the
// server answers when the task ends, or after N seconds, and WaitTask asks
// again at once. Answers that say to retry (429, 502, 503, 504) and lost
// connections are waited out, at a growing interval (from 100 ms up to
// 2 s), as are reads the server answered at once without the task's end.
func (c *Client) WaitTask(ctx context.Context, wallet, id string) (*WalletTask, error) {
	pace := newBackoff()
	for {
		wait := longPoll
		if deadline, ok := ctx.Deadline(); ok {
			wait = max(0, min(wait, int(time.Until(deadline)/time.Second)-1))
		}
		asked := time.Now()
		task, err := c.getTask(ctx, wallet, id, &wait)
		delay := pace.next()
		if err != nil {
			after, retry := retryable(ctx, err)
			if !retry {
				return nil, err
			}
			delay = max(delay, after)
		} else if ended(task.Status) {
			return task, nil
		} else if time.Since(asked) >= time.Second {
			// The server waited: ask again at once.
			pace = newBackoff()
			continue
		}
		if err := sleep(ctx, delay); err != nil {
			return task, fmt.Errorf("waiting for task %s of wallet %s: %w", id, wallet, err)
		}
	}
}

func ended(s WalletTaskStatus) bool {
	return s == WalletTaskStatusDone || s == WalletTaskStatusError
}

// errorOf is the *APIError of an answer that is not the one expected.
func errorOf(resp *http.Response, body []byte) error {
	e := apiError(resp.StatusCode, body)
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		e.retryAfter = time.Duration(s) * time.Second
	}
	return e
}

// retryable says whether err is worth sending again, and after how long at
// least: a status that says so, or no answer (but not ctx's own end).
func retryable(ctx context.Context, err error) (time.Duration, bool) {
	if ctx.Err() != nil {
		return 0, false
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		switch apiErr.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return apiErr.retryAfter, true
		}
		return 0, false
	}
	return 0, true
}

// backoff is a doubling delay from waitFirst up to waitMax, with jitter.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: waitFirst} }

func (b *backoff) next() time.Duration {
	d := b.d
	b.d = min(2*b.d, waitMax)
	return d + rand.N(d/5+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
