package jam

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Limits of the EVM JSON-RPC, geth's defaults.
const (
	// MaxEVMRequestBytes bounds a request body.
	MaxEVMRequestBytes = 5 << 20
	// MaxEVMBatch bounds a batch's requests.
	MaxEVMBatch = 1000
)

// JSON-RPC 2.0 error codes.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	// codeServer is geth's code for a call that failed.
	codeServer = -32000
	// codeReverted is geth's code for execution reverted, with the revert
	// data as the error's data.
	codeReverted = 3
)

// rpcError is an error answered with its own code (and data).
type rpcError struct {
	code    int
	message string
	data    any
}

func (e *rpcError) Error() string { return e.message }

func invalidParams(format string, args ...any) error {
	return &rpcError{code: codeInvalidParams, message: fmt.Sprintf(format, args...)}
}

// rpcMethod is one served method: at most maxArgs positional arguments.
type rpcMethod struct {
	maxArgs int
	call    func(ctx context.Context, args rpcArgs) (any, error)
}

// rpcArgs are a request's positional arguments.
type rpcArgs []json.RawMessage

// get decodes argument i into v. An absent or null argument leaves v as it
// is and reports false.
func (a rpcArgs) get(i int, v any) (bool, error) {
	if i >= len(a) || bytes.Equal(bytes.TrimSpace(a[i]), []byte("null")) {
		return false, nil
	}
	if err := json.Unmarshal(a[i], v); err != nil {
		return false, invalidParams("invalid argument %d: %v", i, err)
	}
	return true, nil
}

// need is get for a required argument.
func (a rpcArgs) need(i int, v any) error {
	ok, err := a.get(i, v)
	if err == nil && !ok {
		err = invalidParams("missing value for required argument %d", i)
	}
	return err
}

type rpcRequest struct {
	Version string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type rpcErrorJSON struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

type rpcResponse struct {
	Version string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcErrorJSON   `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// jsonRPC serves JSON-RPC 2.0 over HTTP POST, single requests and batches,
// with the given methods. before runs once per HTTP request, before any
// method.
type jsonRPC struct {
	methods map[string]rpcMethod
	before  func()
}

func (s *jsonRPC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "JSON-RPC takes POST", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxEVMRequestBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeRPC(w, http.StatusRequestEntityTooLarge, errorResponse(nullID, &rpcError{
				code: codeInvalidRequest, message: fmt.Sprintf("request body too large: more than %d bytes", tooBig.Limit)}))
			return
		}
		writeRPC(w, http.StatusBadRequest, errorResponse(nullID, &rpcError{code: codeParseError, message: "reading the request: " + err.Error()}))
		return
	}
	if s.before != nil {
		s.before()
	}
	out := s.serve(r.Context(), body)
	if out == nil {
		// Notifications only: nothing to answer.
		w.WriteHeader(http.StatusOK)
		return
	}
	writeRPC(w, http.StatusOK, out)
}

// serve answers a body: one response, a batch's list, or nil when every
// request was a notification.
func (s *jsonRPC) serve(ctx context.Context, body []byte) any {
	if !json.Valid(body) {
		return errorResponse(nullID, &rpcError{code: codeParseError, message: "parse error"})
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] != '[' {
		if resp, ok := s.one(ctx, body); ok {
			return resp
		}
		return nil
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(body, &batch); err != nil {
		return errorResponse(nullID, &rpcError{code: codeParseError, message: "parse error"})
	}
	switch {
	case len(batch) == 0:
		return errorResponse(nullID, &rpcError{code: codeInvalidRequest, message: "empty batch"})
	case len(batch) > MaxEVMBatch:
		return errorResponse(nullID, &rpcError{code: codeInvalidRequest, message: fmt.Sprintf("batch too large: more than %d requests", MaxEVMBatch)})
	}
	out := make([]rpcResponse, 0, len(batch))
	for _, raw := range batch {
		if resp, ok := s.one(ctx, raw); ok {
			out = append(out, resp)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// one answers one request; false for a notification (no id).
func (s *jsonRPC) one(ctx context.Context, raw json.RawMessage) (rpcResponse, bool) {
	var req rpcRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return errorResponse(nullID, &rpcError{code: codeInvalidRequest, message: "invalid request: want a JSON object"}), true
	}
	id := req.ID
	if len(id) == 0 {
		id = nullID
	}
	if req.Version != "2.0" || req.Method == "" {
		return errorResponse(id, &rpcError{code: codeInvalidRequest, message: `invalid request: want "jsonrpc":"2.0" and a method`}), true
	}
	result, err := s.call(ctx, req)
	if len(req.ID) == 0 {
		return rpcResponse{}, false
	}
	if err != nil {
		return errorResponse(id, err), true
	}
	enc, err := json.Marshal(result)
	if err != nil {
		return errorResponse(id, &rpcError{code: codeInternal, message: "encoding the result: " + err.Error()}), true
	}
	return rpcResponse{Version: "2.0", ID: id, Result: enc}, true
}

func (s *jsonRPC) call(ctx context.Context, req rpcRequest) (any, error) {
	m, ok := s.methods[req.Method]
	if !ok {
		return nil, &rpcError{code: codeMethodNotFound, message: fmt.Sprintf("the method %s does not exist/is not available", req.Method)}
	}
	var args rpcArgs
	if p := bytes.TrimSpace(req.Params); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		if err := json.Unmarshal(p, &args); err != nil {
			return nil, invalidParams("non-array args")
		}
	}
	if len(args) > m.maxArgs {
		return nil, invalidParams("too many arguments, want at most %d", m.maxArgs)
	}
	return m.call(ctx, args)
}

func errorResponse(id json.RawMessage, err error) rpcResponse {
	e := &rpcErrorJSON{Code: codeServer, Message: err.Error()}
	var re *rpcError
	if errors.As(err, &re) {
		e.Code, e.Data = re.code, re.data
	}
	return rpcResponse{Version: "2.0", ID: id, Error: e}
}

func writeRPC(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
