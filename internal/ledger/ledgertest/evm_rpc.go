package ledgertest

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmrpc"
)

// EVMRPC is a ledger.EVMRPC held in memory: each method answers what its
// handler returns; a method without one answers geth's "method not found".
// It records every call.
type EVMRPC struct {
	mu       sync.Mutex
	handlers map[string]func(params []json.RawMessage) (json.RawMessage, error)
	calls    []EVMCall
}

// EVMCall is one recorded call.
type EVMCall struct {
	Method string
	Params []json.RawMessage
}

var _ ledger.EVMRPC = (*EVMRPC)(nil)

// NewEVMRPC returns a node that serves no method.
func NewEVMRPC() *EVMRPC {
	return &EVMRPC{handlers: map[string]func([]json.RawMessage) (json.RawMessage, error){}}
}

// Handle makes method answer with h.
func (e *EVMRPC) Handle(method string, h func(params []json.RawMessage) (json.RawMessage, error)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.handlers[method] = h
}

// Answer makes method answer result (a JSON text) whatever its parameters.
func (e *EVMRPC) Answer(method, result string) {
	e.Handle(method, func([]json.RawMessage) (json.RawMessage, error) { return json.RawMessage(result), nil })
}

// Calls returns the calls made so far, oldest first.
func (e *EVMRPC) Calls() []EVMCall {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]EVMCall(nil), e.calls...)
}

// Call answers method with its handler, or, as a client over the network
// does, with the context's error when it ends first.
func (e *EVMRPC) Call(ctx context.Context, method string, params []json.RawMessage) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.calls = append(e.calls, EVMCall{Method: method, Params: append([]json.RawMessage(nil), params...)})
	h := e.handlers[method]
	e.mu.Unlock()
	if h == nil {
		return nil, &evmrpc.Error{Code: -32601, Message: "the method " + method + " does not exist/is not available"}
	}
	type answer struct {
		out json.RawMessage
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		out, err := h(params)
		answered <- answer{out, err}
	}()
	select {
	case a := <-answered:
		return a.out, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
