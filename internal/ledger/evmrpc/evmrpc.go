// Package evmrpc calls an EVM node's JSON-RPC: the chain-side reads the
// builder lane's POST /rpc answers for its clients (balances, code, calls,
// gas estimates, fees, blocks, receipts), over HTTP or, for the simulated
// chain in the same process, through its http.Handler. The JSON-RPC is
// go-ethereum's rpc.Client; this package adds the per-call timeout, the
// answer's size bound, and the split between a node's JSON-RPC error
// (*Error, passed to the client as it is) and no answer (ErrUnavailable).
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
	"time"

	"github.com/ethereum/go-ethereum/rpc"
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

// Client calls one node with go-ethereum's rpc.Client, the client
// go-ethereum's ethclient (and so the wallet lane) uses. It is safe for
// concurrent use.
type Client struct {
	cfg Config
	rpc *rpc.Client
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = 16 << 20
	}
	if cfg.Timeout < 0 || cfg.MaxResponseBytes < 0 {
		return nil, errors.New("evmrpc: timeout and response limit must not be negative")
	}
	endpoint, tr, err := Transport(cfg.URL, cfg.Handler, cfg.MaxResponseBytes)
	if err != nil {
		return nil, err
	}
	c, err := rpc.DialOptions(context.Background(), endpoint, rpc.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		return nil, fmt.Errorf("evmrpc: %w", err)
	}
	return &Client{cfg: cfg, rpc: c}, nil
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

// Call calls method with params (each one JSON value; nil is null) and
// returns the result as the node wrote it ("null" included). A JSON-RPC
// error is *Error; no answer is ErrUnavailable.
func (c *Client) Call(ctx context.Context, method string, params []json.RawMessage) (json.RawMessage, error) {
	args := make([]any, len(params))
	for i, p := range params {
		switch {
		case p == nil:
			p = json.RawMessage("null")
		case !json.Valid(p):
			return nil, fmt.Errorf("evmrpc: %s: parameter %d is not JSON", method, i)
		}
		args[i] = p
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var out json.RawMessage
	err := c.rpc.CallContext(ctx, &out, method, args...)
	var rpcErr rpc.Error
	switch {
	case err == nil:
		return out, nil
	case errors.As(err, &rpcErr):
		e := &Error{Code: rpcErr.ErrorCode(), Message: err.Error()}
		if de, ok := err.(rpc.DataError); ok && de.ErrorData() != nil {
			// geth's client decoded the data; written again it is the
			// node's JSON (a revert's hex string byte for byte).
			e.Data, _ = json.Marshal(de.ErrorData())
		}
		return nil, e
	}
	return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, method, err)
}

// Transport returns the endpoint and the HTTP transport that reach a node:
// url over HTTP(S) with no proxy from the environment (the node is named by
// the operator), or handler in this process when it is set; either way an
// answer larger than limit bytes is an error, not read.
func Transport(rawURL string, handler http.Handler, limit int64) (string, http.RoundTripper, error) {
	endpoint := "http://in-process/"
	var tr http.RoundTripper = handlerTransport{handler}
	if handler == nil {
		u, err := url.ParseRequestURI(rawURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", nil, fmt.Errorf("evmrpc: %q is not an http or https URL", rawURL)
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		endpoint, tr = rawURL, t
	}
	return endpoint, limitTransport{next: tr, limit: limit}, nil
}

// limitTransport bounds the answers next returns to limit bytes: reading
// past it is an error, so a larger answer is not read (go-ethereum's HTTP
// client reads an answer, an error page too, to its end).
type limitTransport struct {
	next  http.RoundTripper
	limit int64
}

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, limit: t.limit, left: t.limit}
	return resp, nil
}

// limitedBody reads up to limit bytes; the byte after them is an error.
type limitedBody struct {
	io.ReadCloser
	limit, left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.tooLarge()
	}
	// One byte past the limit tells a body of exactly the limit from a
	// larger one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return n, b.tooLarge()
	}
	return n, err
}

func (b *limitedBody) tooLarge() error {
	return fmt.Errorf("the answer is larger than %d bytes", b.limit)
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
