package evmrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/evmrpc"
)

// node answers JSON-RPC with answer(method, params), echoing the id.
func node(answer func(method string, params []json.RawMessage) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage   `json:"id"`
			Method string            `json:"method"`
			Params []json.RawMessage `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,`+answer(req.Method, req.Params)+`}`)
	})
}

func TestClient_OverHTTPAndInProcessTheNodesResultAndErrorPassUnchanged(t *testing.T) {
	t.Parallel()
	h := node(func(method string, params []json.RawMessage) string {
		switch method {
		case "eth_getBalance":
			return `"result":{"params":[` + string(params[0]) + `,` + string(params[1]) + `]}`
		case "eth_getTransactionReceipt":
			return `"result":null`
		default:
			return `"error":{"code":3,"message":"execution reverted","data":"0x08c379a0"}`
		}
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	overHTTP, err := evmrpc.New(evmrpc.Config{URL: srv.URL})
	require.NoError(t, err)
	inProcess, err := evmrpc.New(evmrpc.Config{Handler: h})
	require.NoError(t, err)
	for name, c := range map[string]*evmrpc.Client{"http": overHTTP, "in-process": inProcess} {
		got, err := c.Call(t.Context(), "eth_getBalance", []json.RawMessage{json.RawMessage(`"0xab"`), nil})
		require.NoError(t, err, name)
		require.JSONEq(t, `{"params":["0xab",null]}`, string(got), name)

		got, err = c.Call(t.Context(), "eth_getTransactionReceipt", []json.RawMessage{json.RawMessage(`"0x01"`)})
		require.NoError(t, err, name)
		require.Equal(t, "null", string(got), name)

		_, err = c.Call(t.Context(), "eth_call", nil)
		var rpcErr *evmrpc.Error
		require.ErrorAs(t, err, &rpcErr, name)
		require.Equal(t, 3, rpcErr.ErrorCode())
		require.Equal(t, "execution reverted", rpcErr.Error())
		require.Equal(t, json.RawMessage(`"0x08c379a0"`), rpcErr.ErrorData())
	}
}

func TestClient_ANodeThatDoesNotAnswerAJSONRPCResponseIsUnavailable(t *testing.T) {
	t.Parallel()
	for name, h := range map[string]http.HandlerFunc{
		"not JSON": func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "<html>bad gateway</html>") },
		"no result": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1}`)
		},
		"too large": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":"`+strings.Repeat("a", 2048)+`"}`)
		},
		"too slow": func(http.ResponseWriter, *http.Request) { time.Sleep(time.Second) }, // past the client's timeout
	} {
		srv := httptest.NewServer(h)
		c, err := evmrpc.New(evmrpc.Config{URL: srv.URL, Timeout: 200 * time.Millisecond, MaxResponseBytes: 1024})
		require.NoError(t, err)
		_, err = c.Call(context.Background(), "eth_blockNumber", nil)
		require.ErrorIs(t, err, evmrpc.ErrUnavailable, name)
		var rpcErr *evmrpc.Error
		require.False(t, errors.As(err, &rpcErr), name)
		srv.Close()
	}
}

func TestNew_RefusesWhatCannotBeANodesURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "ftp://x", "127.0.0.1:8545", "http://"} {
		_, err := evmrpc.New(evmrpc.Config{URL: u})
		require.Error(t, err, u)
	}
}
