// Package evmrpc calls an EVM node's JSON-RPC: the chain-side reads the
// builder lane's POST /rpc answers for its clients (balances, code, calls,
// gas estimates, fees, blocks, receipts), over HTTP or, for the simulated
// chain in the same process, through its http.Handler.
package evmrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// Config configures a Client.
type Config struct {
	// URL is the node's JSON-RPC endpoint (http or https).
	URL string
	// Handler, when set, serves the calls in this process instead of URL.
	Handler http.Handler
	// Timeout bounds one call (5 s when 0).
	Timeout time.Duration
	// MaxResponseBytes bounds one answer (16 MiB when 0); a larger one is an
	// error, not read.
	MaxResponseBytes int64
}

// Client calls one node. It is safe for concurrent use.
type Client struct {
	cfg  Config
	url  string
	http *http.Client
	id   atomic.Uint64
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = 16 << 20
	}
	switch {
	case cfg.Timeout < 0 || cfg.MaxResponseBytes < 0:
		return nil, errors.New("evmrpc: timeout and response limit must not be negative")
	case cfg.Handler != nil:
		return &Client{cfg: cfg, url: "http://in-process/", http: &http.Client{Transport: handlerTransport{cfg.Handler}}}, nil
	}
	u, err := url.ParseRequestURI(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("evmrpc: %q is not an http or https URL", cfg.URL)
	}
	// No proxy from the environment: the node is named by the operator.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	return &Client{cfg: cfg, url: cfg.URL, http: &http.Client{Transport: tr}}, nil
}

// Error is a JSON-RPC error the node answered: its code, message and data
// pass to the client unchanged (a revert's data, say).
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// ErrorCode is the JSON-RPC code (go-ethereum's rpc.Error).
func (e *Error) ErrorCode() int { return e.Code }

// ErrorData is the error's data, or nil (go-ethereum's rpc.DataError).
func (e *Error) ErrorData() any {
	if len(e.Data) == 0 {
		return nil
	}
	return e.Data
}

// ErrUnavailable wraps a failed call that got no JSON-RPC answer: the node
// did not answer in time, refused the connection, or answered something
// that is not a JSON-RPC response.
var ErrUnavailable = errors.New("the chain's EVM JSON-RPC is unavailable")

type request struct {
	JSONRPC string            `json:"jsonrpc"`
	ID      uint64            `json:"id"`
	Method  string            `json:"method"`
	Params  []json.RawMessage `json:"params"`
}

type response struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *Error          `json:"error"`
}

// Call calls method with params (each one JSON value; nil is null) and
// returns the result as the node wrote it ("null" included). A JSON-RPC
// error is *Error; no answer is ErrUnavailable.
func (c *Client) Call(ctx context.Context, method string, params []json.RawMessage) (json.RawMessage, error) {
	ps := make([]json.RawMessage, len(params))
	for i, p := range params {
		if p == nil {
			p = json.RawMessage("null")
		}
		ps[i] = p
	}
	id := c.id.Add(1)
	body, err := json.Marshal(request{JSONRPC: "2.0", ID: id, Method: method, Params: ps})
	if err != nil {
		return nil, fmt.Errorf("evmrpc: %s: %w", method, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("evmrpc: %s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, method, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %s: reading the answer: %v", ErrUnavailable, method, err)
	case int64(len(data)) > c.cfg.MaxResponseBytes:
		return nil, fmt.Errorf("%w: %s: the answer is larger than %d bytes", ErrUnavailable, method, c.cfg.MaxResponseBytes)
	}
	var out response
	if err := json.Unmarshal(data, &out); err != nil || (out.Error == nil && out.Result == nil) {
		return nil, fmt.Errorf("%w: %s: HTTP %d without a JSON-RPC response", ErrUnavailable, method, resp.StatusCode)
	}
	if string(out.ID) != fmt.Sprint(id) {
		return nil, fmt.Errorf("%w: %s: the answer's id %s is not the call's %d", ErrUnavailable, method, out.ID, id)
	}
	if out.Error != nil {
		return nil, out.Error
	}
	return out.Result, nil
}

// handlerTransport serves requests with an http.Handler in this process.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	w := &bufferedResponse{header: http.Header{}, status: http.StatusOK}
	t.h.ServeHTTP(w, req)
	return &http.Response{
		StatusCode: w.status, Status: http.StatusText(w.status), Header: w.header,
		Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: req,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}, nil
}

// bufferedResponse is an http.ResponseWriter that keeps the answer.
type bufferedResponse struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (w *bufferedResponse) Header() http.Header { return w.header }

func (w *bufferedResponse) WriteHeader(status int) {
	if !w.wrote {
		w.status, w.wrote = status, true
	}
}

func (w *bufferedResponse) Write(b []byte) (int, error) {
	w.wrote = true
	return w.body.Write(b)
}
