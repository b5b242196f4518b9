package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The kinds of refusal, the same over HTTP (*APIError) and SQL
// (*EnqueueError): match them with errors.Is, and reach the details with
// errors.As.
var (
	// ErrBadRequest: the request was refused as bad input (HTTP 400, SQLSTATE
	// class 22); Field names the field when the server named one.
	ErrBadRequest = errors.New("ledgerq: bad request")
	// ErrUnauthorized: the API key is missing, unknown or revoked (HTTP 401).
	ErrUnauthorized = errors.New("ledgerq: unauthorized")
	// ErrForbidden: the key or database role may not do this (HTTP 403,
	// SQLSTATE 42501: over SQL, an unknown wallet or one the role may not
	// use), or the wallet's policy refused it (then ErrPolicyRefused too).
	ErrForbidden = errors.New("ledgerq: forbidden")
	// ErrPolicyRefused: the wallet's policy refused the task (HTTP 403 with a
	// rule, SQLSTATE P0001 with the refusal in its DETAIL); Refusal says which
	// rule and by how much.
	ErrPolicyRefused = errors.New("ledgerq: refused by the wallet's policy")
	// ErrNotFound: no such wallet for this key, or no such task (HTTP 404).
	ErrNotFound = errors.New("ledgerq: not found")
	// ErrConflict: the request does not fit the resource's state (HTTP 409:
	// a disabled wallet, a task that can no longer be cancelled, …; SQLSTATE
	// 55000, a disabled wallet).
	ErrConflict = errors.New("ledgerq: conflict")
	// ErrIdempotencyConflict: the wallet already has a task under this
	// Idempotency-Key, stored from another request body (HTTP 422, SQLSTATE
	// 23505). Sending the same body again with the key is not an error: it
	// answers the stored task.
	ErrIdempotencyConflict = errors.New("ledgerq: idempotency key reused with another request")
	// ErrTooManyRequests: the key is past its rate (HTTP 429); retry later.
	ErrTooManyRequests = errors.New("ledgerq: too many requests")
	// ErrUnavailable: the server cannot reach its database (HTTP 503); retry
	// with the same Idempotency-Key.
	ErrUnavailable = errors.New("ledgerq: unavailable")
)

// Refusal is a wallet policy's refusal: the rule (recipient, contract,
// selector, max_value, value_window, fee_window) and, for the amount rules,
// the bound, what the window counts and what was asked, in wei.
type Refusal struct {
	Rule          string `json:"rule"`
	Limit         string `json:"limit,omitempty"`
	Used          string `json:"used,omitempty"`
	Requested     string `json:"requested,omitempty"`
	WindowSeconds int64  `json:"window_seconds,omitempty"`
	Selector      string `json:"selector,omitempty"`
}

// APIError is a refusal by ledgerq's HTTP API: the status, and the JSON
// error body's message and, for a policy refusal, its rule.
type APIError struct {
	StatusCode int
	Message    string
	// Refusal is set (Rule not empty) when the wallet's policy refused.
	Refusal

	// retryAfter is the answer's Retry-After (429, 503).
	retryAfter time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("ledgerq: %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Field is the request field a 400 names ("field to: …" → "to"), or "".
func (e *APIError) Field() string { return fieldOf(e.Message) }

// Is matches the sentinel of the error's status (ErrBadRequest for 400, …)
// and ErrPolicyRefused for a 403 that names a rule.
func (e *APIError) Is(target error) bool {
	if target == ErrPolicyRefused {
		return e.StatusCode == http.StatusForbidden && e.Rule != ""
	}
	return target == statusSentinel(e.StatusCode)
}

func statusSentinel(status int) error {
	switch status {
	case http.StatusBadRequest:
		return ErrBadRequest
	case http.StatusUnauthorized:
		return ErrUnauthorized
	case http.StatusForbidden:
		return ErrForbidden
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusConflict:
		return ErrConflict
	case http.StatusUnprocessableEntity:
		return ErrIdempotencyConflict
	case http.StatusTooManyRequests:
		return ErrTooManyRequests
	case http.StatusServiceUnavailable:
		return ErrUnavailable
	}
	return nil
}

// apiError turns an answer that is not 2xx into an *APIError, keeping the
// JSON body's message and rule; a body that is not ledgerq's error JSON (a
// proxy's page) becomes the message as it is.
func apiError(status int, body []byte) *APIError {
	var b struct {
		Message string `json:"message"`
		Refusal
	}
	e := &APIError{StatusCode: status}
	if err := json.Unmarshal(body, &b); err == nil && b.Message != "" {
		e.Message, e.Refusal = b.Message, b.Refusal
		return e
	}
	e.Message = strings.TrimSpace(string(body))
	if len(e.Message) > 512 {
		e.Message = e.Message[:512] + "…"
	}
	return e
}

// fieldOf reads the field out of a bad-input message, which ledgerq starts
// with "field NAME: " over HTTP and SQL alike.
func fieldOf(message string) string {
	rest, ok := strings.CutPrefix(message, "field ")
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, ": ")
	if !ok || strings.ContainsAny(name, " \t\n") {
		return ""
	}
	return name
}
