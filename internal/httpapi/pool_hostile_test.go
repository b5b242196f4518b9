package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/builder"
)

// postWith posts body with a content type; the answer must be one the
// document describes.
func (f *poolFixture) postWith(path, contentType string, body []byte) httpResult {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url+path, bytes.NewReader(body))
	require.NoError(f.t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return do(f.t, req)
}

// requireNoServerFault fails when an answer of /rpc is a 5xx, or a
// JSON-RPC error that is the server's fault (-32603, internal error).
func requireNoServerFault(t *testing.T, what string, resp httpResult) {
	t.Helper()
	require.Less(t, resp.StatusCode, 500, "%s: %s", what, resp.Body)
	require.NotContains(t, resp.Body, `"code":-32603`, what)
	require.NotContains(t, resp.Body, "internal error", what)
}

func TestPoolIngress_HostileInputNeverAnswers5xx(t *testing.T) {
	t.Parallel()
	f := setupPool(t, func(c *builder.Config) { c.Pool.MaxTxSize = 2048; c.Pool.RPCBatchLimit = 10 })
	valid := rawHex(t, dynTx(t, newKey(t), 0, 2, 1))
	call := func(method, params string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params)
	}
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	batch := "[" + strings.Repeat(call("eth_chainId", "[]")+",", 20) + call("eth_chainId", "[]") + "]"
	rpcBodies := []string{
		"", "{", "[]", "[{}]", "null", `"x"`, "\x00\xff\xfe", deep, batch,
		call("eth_sendRawTransaction", "[]"),
		call("eth_sendRawTransaction", "[null]"),
		call("eth_sendRawTransaction", "[1]"),
		call("eth_sendRawTransaction", `["0x"]`),
		call("eth_sendRawTransaction", `["0xzz"]`),
		call("eth_sendRawTransaction", `["0x0"]`),
		call("eth_sendRawTransaction", `["0x02"]`),
		call("eth_sendRawTransaction", `["0x03c0"]`),
		call("eth_sendRawTransaction", `["0xf8"]`),
		call("eth_sendRawTransaction", `["`+valid+`00"]`),
		call("eth_sendRawTransaction", `["`+valid+`","extra"]`),
		call("eth_sendRawTransaction", `["0x`+strings.Repeat("ab", 4096)+`"]`),
		call("eth_getTransactionCount", `["0x12", "latest"]`),
		call("eth_getTransactionCount", `["0x00000000000000000000000000000000000000b2", "0x5"]`),
		call("eth_getTransactionCount", `["0x00000000000000000000000000000000000000b2", {"blockHash":"0x01"}]`),
		call("eth_getTransactionCount", `["0x00000000000000000000000000000000000000b2", "earliest"]`),
		call("eth_getTransactionCount", `["0x00000000000000000000000000000000000000b2"]`),
		call("eth_getTransactionByHash", `["0x12"]`),
		call("eth_getTransactionByHash", `[{}]`),
		call("ledgerq_txStatus", `[123]`),
		call("eth_sendTransaction", `[{}]`),
		call("debug_setHead", `["0x0"]`),
		call("rpc_modules", `[]`),
		`{"jsonrpc":"2.0","id":{"a":1},"method":"eth_chainId"}`,
		`{"jsonrpc":"2.0","method":"eth_chainId"}`,
	}
	for i, body := range rpcBodies {
		requireNoServerFault(t, fmt.Sprintf("rpc body %d", i), f.postWith("/rpc", "application/json", []byte(body)))
	}
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=bogus", "application/jsonx"} {
		resp := f.postWith("/rpc", ct, []byte(call("eth_chainId", "[]")))
		requireNoServerFault(t, "content type "+ct, resp)
	}
	big := f.postWith("/rpc", "application/json", bytes.Repeat([]byte(" "), 9<<20))
	require.Equal(t, http.StatusRequestEntityTooLarge, big.StatusCode)

	restBodies := []string{
		"", "{", "[]", "null", `{"raw":1}`, `{"raw":null}`, `{"raw":""}`, `{"raw":"0x"}`, `{"raw":"zz"}`, `{"raw":"0xabc"}`,
		`{"raw":"0xzz"}`, `{"raw":"` + valid + `","colour":1}`, `{"raw":"` + valid + `"}{}`, `{"RAW":"` + valid + `"}`,
		`{"raw":"0x` + strings.Repeat("ab", 5000) + `"}`, `{"raw":"0x02"}`, `{"raw":"0x03c0"}`, `{"raw":"\u0000"}`, "\xff\xfe",
	}
	for i, body := range restBodies {
		resp := f.postWith("/v1/pool/txs", "application/json", []byte(body))
		require.GreaterOrEqual(t, resp.StatusCode, 400, "rest body %d: %s", i, resp.Body)
		require.Less(t, resp.StatusCode, 500, "rest body %d: %s", i, resp.Body)
	}
	for _, path := range []string{"/v1/pool/txs/0x", "/v1/pool/txs/%00", "/v1/pool/txs/" + strings.Repeat("a", 5000), "/v1/pool/txs/0x" + strings.Repeat("g", 64)} {
		resp := f.get(path)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", path, resp.Body)
	}

	// Valid bytes with random damage: flipped, cut and grown, through both
	// doors. Each is refused (or, by chance still valid, admitted), never a
	// server fault.
	raw, err := hexutil.Decode(valid)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		b := bytes.Clone(raw)
		switch i % 3 {
		case 0:
			for range 1 + rng.IntN(4) {
				b[rng.IntN(len(b))] = byte(rng.IntN(256))
			}
		case 1:
			b = b[:rng.IntN(len(b))]
		case 2:
			b = append(b, bytes.Repeat([]byte{byte(rng.IntN(256))}, 1+rng.IntN(40))...)
		}
		hexRaw, _ := json.Marshal(hexutil.Encode(b))
		requireNoServerFault(t, fmt.Sprintf("damaged %d", i),
			f.postWith("/rpc", "application/json", []byte(call("eth_sendRawTransaction", "["+string(hexRaw)+"]"))))
		resp := f.postWith("/v1/pool/txs", "application/json", []byte(`{"raw":`+string(hexRaw)+`}`))
		require.Less(t, resp.StatusCode, 500, "damaged %d: %s", i, resp.Body)
	}
}
