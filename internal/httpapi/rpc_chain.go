package httpapi

// The chain side of POST /rpc. ledgerq owns the write path (the pool); every
// read a client makes of the chain is answered from what the chain executed,
// as production private-transaction endpoints answer them: blocks and
// receipts only up to the newest bundle ledgerq saw executed, so that a
// client never sees a block the pool's own answers do not know yet, and the
// rest (balances, code, calls, gas estimates, fees, logs) from the chain's
// EVM JSON-RPC, to which the methods below are the allow-list. The fee
// hints are the chain's raised to what the pool admits (rpc_fees.go).
//
// Block tags map to the bundles' states: latest and pending are the newest
// bundle executed on the chain (accumulated or finalized), safe and
// finalized the newest finalized one, earliest the EVM's genesis (0).

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ledgerq/ledgerq/internal/ledger/evmrpc"
	"github.com/ledgerq/ledgerq/internal/store"
)

// rpcCodeMethodNotFound is JSON-RPC's "method not found", which geth
// answers for a method it does not serve.
const rpcCodeMethodNotFound = -32601

// evmCall calls method on the chain's EVM JSON-RPC with params, trailing
// nil (absent) ones left out. The node's JSON-RPC errors pass to the client
// with their data (a revert's), in geth's code and words where the node is
// another client (asGeth); no answer is -32603.
func (s *Server) evmCall(ctx context.Context, method string, params ...*json.RawMessage) (json.RawMessage, error) {
	if s.evm == nil {
		return nil, &poolError{status: http.StatusNotFound, code: rpcCodeMethodNotFound,
			msg: "the method " + method + " is not available: no EVM JSON-RPC is configured for the builder lane"}
	}
	for len(params) > 0 && params[len(params)-1] == nil {
		params = params[:len(params)-1]
	}
	ps := make([]json.RawMessage, len(params))
	for i, p := range params {
		if p != nil {
			ps[i] = *p
		}
	}
	out, err := s.evm.Call(ctx, method, ps)
	var nodeErr *evmrpc.Error
	switch {
	case err == nil:
		return out, nil
	case errors.As(err, &nodeErr):
		return nil, asGeth(nodeErr)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	s.logger.Warn("httpapi: the chain's EVM JSON-RPC did not answer", "method", method, "error", err)
	return nil, &poolError{status: http.StatusServiceUnavailable, code: rpcCodeInternal, msg: "chain unavailable: " + method + " was not answered"}
}

// rpcCodeGethDefault is the code geth gives every error that is not a
// revert (go-ethereum's rpc, errcodeDefault).
const rpcCodeGethDefault = -32000

// gethAnswers rewrite another client's answer to a call or gas estimate into
// geth's, so /rpc's clients see one node whatever runs behind it: each
// matches the beginning of the node's message (lower case) and gives geth's
// phrase for the same case, which replaces that beginning; the node's
// details after it stay. Each client's texts: docs/clients.md.
var gethAnswers = []struct{ prefix, geth, end string }{
	{"insufficient funds for gas * price + value", "insufficient funds for gas * price + value", ""}, // anvil, reth (-32003)
	{"upfront cost exceeds account balance", "insufficient funds for gas * price + value", ""},       // Besu (-32004)
	{"out of gas: gas required exceeds allowance: ", "gas required exceeds allowance (", ")"},        // anvil (-32003)
	{"nonce too low", "nonce too low", ""},                                                           // anvil (-32003), Besu (-32001)
	{"intrinsic gas exceeds gas limit", "intrinsic gas too low", ""},                                 // Besu (-32003)
	{"max fee per gas less than block base fee", "max fee per gas less than block base fee", ""},     // anvil (-32003)
	{"max priority fee per gas higher than max fee per gas", "max priority fee per gas higher than max fee per gas", ""},
}

// asGeth returns e as geth would have answered the same case: a revert keeps
// code 3 and its data, in geth's words ("execution reverted: reason", where
// Besu says "Execution reverted (reason)"); a refusal in gethAnswers gets
// geth's code (-32000) and phrase. Anything else passes unchanged.
func asGeth(e *evmrpc.Error) *evmrpc.Error {
	const reverted = "execution reverted"
	msg := strings.TrimSpace(e.Message)
	lower := strings.ToLower(msg)
	if e.Code == 3 {
		if !strings.HasPrefix(lower, reverted) {
			return e
		}
		rest := strings.TrimSpace(msg[len(reverted):])
		if reason, ok := strings.CutPrefix(rest, "("); ok {
			rest = ": " + strings.TrimSuffix(reason, ")")
		}
		return &evmrpc.Error{Code: 3, Message: reverted + rest, Data: e.Data}
	}
	for _, a := range gethAnswers {
		if strings.HasPrefix(lower, a.prefix) {
			return &evmrpc.Error{Code: rpcCodeGethDefault, Message: a.geth + msg[len(a.prefix):] + a.end, Data: e.Data}
		}
	}
	return e
}

// heads reads the newest executed and finalized bundles.
func (s *Server) heads(ctx context.Context, method string) (store.BundleHeads, error) {
	h, err := s.store.BundleHeads(ctx, s.pool.ChainID)
	if err != nil {
		return h, s.rpcFail(method, err)
	}
	return h, nil
}

// BlockNumber is eth_blockNumber: the newest bundle the chain executed.
func (api *ethAPI) BlockNumber(ctx context.Context) (hexutil.Uint64, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	h, err := api.s.heads(ctx, "eth_blockNumber")
	return hexutil.Uint64(h.Executed), err
}

// GetBlockByNumber is eth_getBlockByNumber: the chain's block for the
// number or tag (latest, pending: the newest executed bundle; safe,
// finalized: the newest finalized one; earliest: 0), null above the newest
// executed bundle.
func (api *ethAPI) GetBlockByNumber(ctx context.Context, number rpc.BlockNumber, full bool) (json.RawMessage, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	h, err := api.s.heads(ctx, "eth_getBlockByNumber")
	if err != nil {
		return nil, err
	}
	var n uint64
	switch number {
	case rpc.LatestBlockNumber, rpc.PendingBlockNumber:
		n = h.Executed
	case rpc.SafeBlockNumber, rpc.FinalizedBlockNumber:
		n = h.Finalized
	case rpc.EarliestBlockNumber:
		n = 0
	default:
		if number < 0 || uint64(number) > h.Executed {
			return nil, nil
		}
		n = uint64(number)
	}
	return api.s.evmCall(ctx, "eth_getBlockByNumber", rawJSON(hexutil.EncodeUint64(n)), rawJSON(full))
}

// GetBlockByHash is eth_getBlockByHash: the chain's block, null for one
// above the newest executed bundle.
func (api *ethAPI) GetBlockByHash(ctx context.Context, hash common.Hash, full bool) (json.RawMessage, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	out, err := api.s.evmCall(ctx, "eth_getBlockByHash", rawJSON(hash), rawJSON(full))
	if err != nil || isNull(out) {
		return out, err
	}
	var blk struct {
		Number hexutil.Uint64 `json:"number"`
	}
	if err := json.Unmarshal(out, &blk); err != nil {
		return nil, api.s.rpcFail("eth_getBlockByHash", errors.New("the chain's block has no number"))
	}
	h, err := api.s.heads(ctx, "eth_getBlockByHash")
	if err != nil {
		return nil, err
	}
	if uint64(blk.Number) > h.Executed {
		return nil, nil
	}
	return out, nil
}

// executedTx returns the pool's record of hash when its bundle executed on
// the chain (accumulated or finalized); ok is false otherwise.
func (s *Server) executedTx(ctx context.Context, method string, hash common.Hash) (tx store.PoolTx, ok bool, err error) {
	tx, err = s.store.PoolGet(ctx, s.pool.ChainID, hash.Hex())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return tx, false, nil
	case err != nil:
		return tx, false, s.rpcFail(method, err)
	case tx.State != store.PoolIncluded || tx.BundleBlock == nil:
		return tx, false, nil
	}
	b, err := s.store.BundleGet(ctx, s.pool.ChainID, uint64(*tx.BundleBlock))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return tx, false, nil
	case err != nil:
		return tx, false, s.rpcFail(method, err)
	}
	return tx, b.State == store.BundleAccumulated || b.State == store.BundleFinalized, nil
}

// GetTransactionReceipt is eth_getTransactionReceipt: the chain's receipt
// (status, gas used, logs, block number and hash as its EVM reports them)
// once the transaction's bundle executed; null before, and for a hash the
// pool never held.
func (api *ethAPI) GetTransactionReceipt(ctx context.Context, hash common.Hash) (json.RawMessage, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	_, executed, err := api.s.executedTx(ctx, "eth_getTransactionReceipt", hash)
	if err != nil || !executed {
		return nil, err
	}
	return api.s.evmCall(ctx, "eth_getTransactionReceipt", rawJSON(hash))
}

// Accounts is eth_accounts: ledgerq holds no key for /rpc's clients.
func (api *ethAPI) Accounts() []common.Address { return []common.Address{} }

// The chain's state, from its EVM JSON-RPC, at the block the client asks
// for, a tag being the bundle it names (atHead).

// atHead is the block a state read is made at: latest, pending or none is
// the newest bundle ledgerq saw executed (eth_blockNumber's), safe and
// finalized the newest finalized one, so that a client never reads a nonce,
// balance or call result from a block it cannot fetch yet (the chain may
// have executed further). A number, a hash, earliest, or a tag while no
// such bundle exists (0), passes as given.
func (s *Server) atHead(ctx context.Context, method string, block *json.RawMessage) (*json.RawMessage, error) {
	tag := "latest"
	if block != nil && !isNull(*block) {
		if err := json.Unmarshal(*block, &tag); err != nil {
			return block, nil // a number or an object: as given
		}
	}
	h, err := s.heads(ctx, method)
	if err != nil {
		return nil, err
	}
	var n uint64
	switch tag {
	case "latest", "pending":
		n = h.Executed
	case "safe", "finalized":
		n = h.Finalized
	}
	if n == 0 {
		return block, nil
	}
	return rawJSON(hexutil.EncodeUint64(n)), nil
}

// Call is eth_call.
func (api *ethAPI) Call(ctx context.Context, args json.RawMessage, block, overrides, blockOverrides *json.RawMessage) (json.RawMessage, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	block, err := api.s.atHead(ctx, "eth_call", block)
	if err != nil {
		return nil, err
	}
	return api.s.evmCall(ctx, "eth_call", &args, block, overrides, blockOverrides)
}

// EstimateGas is eth_estimateGas.
func (api *ethAPI) EstimateGas(ctx context.Context, args json.RawMessage, block, overrides *json.RawMessage) (json.RawMessage, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	block, err := api.s.atHead(ctx, "eth_estimateGas", block)
	if err != nil {
		return nil, err
	}
	return api.s.evmCall(ctx, "eth_estimateGas", &args, block, overrides)
}

// GetBalance is eth_getBalance.
func (api *ethAPI) GetBalance(ctx context.Context, address json.RawMessage, block *json.RawMessage) (json.RawMessage, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	block, err := api.s.atHead(ctx, "eth_getBalance", block)
	if err != nil {
		return nil, err
	}
	return api.s.evmCall(ctx, "eth_getBalance", &address, block)
}

// GetCode is eth_getCode.
func (api *ethAPI) GetCode(ctx context.Context, address json.RawMessage, block *json.RawMessage) (json.RawMessage, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	block, err := api.s.atHead(ctx, "eth_getCode", block)
	if err != nil {
		return nil, err
	}
	return api.s.evmCall(ctx, "eth_getCode", &address, block)
}

// GetStorageAt is eth_getStorageAt.
func (api *ethAPI) GetStorageAt(ctx context.Context, address, slot json.RawMessage, block *json.RawMessage) (json.RawMessage, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	block, err := api.s.atHead(ctx, "eth_getStorageAt", block)
	if err != nil {
		return nil, err
	}
	return api.s.evmCall(ctx, "eth_getStorageAt", &address, &slot, block)
}

// GetLogs is eth_getLogs.
func (api *ethAPI) GetLogs(ctx context.Context, filter json.RawMessage) (json.RawMessage, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	return api.s.evmCall(ctx, "eth_getLogs", &filter)
}

// Syncing is eth_syncing.
func (api *ethAPI) Syncing(ctx context.Context) (json.RawMessage, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	return api.s.evmCall(ctx, "eth_syncing")
}

// web3API is the web3 namespace.
type web3API struct{ s *Server }

// ClientVersion is web3_clientVersion: ledgerq and its version.
func (api *web3API) ClientVersion() string { return "ledgerq/" + api.s.version }

// rawJSON is v as a JSON parameter.
func rawJSON(v any) *json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("httpapi: " + err.Error()) // only hashes, numbers and booleans
	}
	r := json.RawMessage(b)
	return &r
}

func isNull(b json.RawMessage) bool { return len(b) == 0 || string(b) == "null" }

// netListening is net_listening: true while the API serves.
func (api *netAPI) Listening() bool { return true }
