package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ethjson"
	"github.com/ledgerq/ledgerq/internal/store"
)

// newRPCServer builds the builder lane's JSON-RPC server: go-ethereum's own
// rpc.Server (framing, batches, errors and parameter decoding as geth does
// them), with ledgerq's methods registered under eth, net and ledgerq.
func (s *Server) newRPCServer() (*rpc.Server, error) {
	srv := rpc.NewServer()
	srv.SetHTTPBodyLimit(int(min(s.cfg.MaxBodyBytes, 1<<31-1)))
	srv.SetBatchLimits(s.pool.RPCBatchLimit, int(min(s.cfg.MaxBodyBytes, 1<<31-1)))
	for name, api := range map[string]any{"eth": &ethAPI{s}, "net": &netAPI{s}, "web3": &web3API{s}, "ledgerq": &ledgerqAPI{s}} {
		if err := srv.RegisterName(name, api); err != nil {
			return nil, fmt.Errorf("registering JSON-RPC namespace %s: %w", name, err)
		}
	}
	return srv, nil
}

// PostRPC answers POST /rpc with the JSON-RPC server, or 404 when the
// builder lane is off.
//
// go-ethereum's server times a batch out by its context's deadline, and its
// loop stops when that context ends: the calls it had not run then get an
// answer only if its own timer wrote theirs first, so a batch cut by the
// request's deadline could come back without some of its calls (ethers:
// "missing response for request"). The server gets a context that does not
// end; each method bounds its work by the request's own (rpcCall), so
// every call of a batch is answered, past the deadline with an error.
func (s *Server) PostRPC(c echo.Context) error {
	if s.rpc == nil {
		return errLaneOff
	}
	req := c.Request()
	call := rpcRequest{ctx: req.Context(), timeout: s.cfg.RequestTimeout}
	ctx := context.WithValue(context.WithoutCancel(req.Context()), rpcRequestKey{}, call)
	s.rpc.ServeHTTP(c.Response(), req.WithContext(ctx))
	return nil
}

// rpcRequestKey carries the request's context and the bound of each call
// (rpcRequest) to the JSON-RPC methods.
type rpcRequestKey struct{}

// rpcRequest is what a JSON-RPC method needs of its HTTP request: its
// context, which ends when the client goes away (the route has no deadline
// of its own: requestDeadline skips it), and RequestTimeout, which bounds
// each call.
type rpcRequest struct {
	ctx     context.Context
	timeout time.Duration
}

// rpcCall is the context a JSON-RPC method works under: the request's,
// bounded by RequestTimeout from the call's start. The bound is per call,
// not per request: go-ethereum's server runs a batch's calls one after
// another, and a client sends a burst as batches (ethers: up to 100 calls),
// so a request-wide deadline would fail a batch's last calls for the time
// its first ones took, although each took a fraction of it.
func rpcCall(ctx context.Context) (context.Context, context.CancelFunc) {
	req, ok := ctx.Value(rpcRequestKey{}).(rpcRequest)
	switch {
	case !ok:
		return context.WithCancel(ctx)
	case req.timeout <= 0:
		return context.WithCancel(req.ctx)
	}
	return context.WithTimeout(req.ctx, req.timeout)
}

// rpcFail turns an error of the pool or the store into what a JSON-RPC
// client gets: refusals as they are (their own codes and geth's messages),
// an unreachable database as an internal error that says so, anything else
// logged and answered "internal error".
func (s *Server) rpcFail(method string, err error) error {
	var perr *poolError
	switch {
	case errors.As(err, &perr):
		return perr
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), store.IsUnavailable(err):
		s.logger.Warn("httpapi: JSON-RPC call without a database", "method", method, "error", err)
		return &poolError{status: http.StatusServiceUnavailable, code: rpcCodeInternal, msg: "database unavailable"}
	}
	s.logger.Error("httpapi: JSON-RPC call failed", "method", method, "error", err)
	return &poolError{status: http.StatusInternalServerError, code: rpcCodeInternal, msg: "internal error"}
}

// ethAPI is the eth namespace. Every exported method is a JSON-RPC method
// (go-ethereum's rpc registers them by name: SendRawTransaction is
// eth_sendRawTransaction).
type ethAPI struct{ s *Server }

// SendRawTransaction is eth_sendRawTransaction: the pool's intake. It
// returns the transaction's hash, or geth's error.
func (api *ethAPI) SendRawTransaction(ctx context.Context, raw hexutil.Bytes) (common.Hash, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	_, hash, err := api.s.poolSubmit(ctx, raw)
	if err != nil {
		return common.Hash{}, api.s.rpcFail("eth_sendRawTransaction", err)
	}
	return hash, nil
}

// ChainId is eth_chainId: the configured chain id.
func (api *ethAPI) ChainId() *hexutil.Big {
	return (*hexutil.Big)(big.NewInt(api.s.pool.ChainID))
}

// GetTransactionCount is eth_getTransactionCount: with latest (safe,
// finalized) the chain's nonce at the block the tag names (atHead; the
// chain's newest state while none is executed, or without an EVM
// JSON-RPC); with pending, the chain's newest nonce past every nonce the
// pool's included and pending transactions hold without a gap.
// Other blocks are not served: the chain's history is not at hand.
func (api *ethAPI) GetTransactionCount(ctx context.Context, address common.Address, block rpc.BlockNumberOrHash) (*hexutil.Uint64, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	number, ok := block.Number()
	if !ok || (number != rpc.PendingBlockNumber && number != rpc.LatestBlockNumber &&
		number != rpc.SafeBlockNumber && number != rpc.FinalizedBlockNumber) {
		return nil, poolRefusal(http.StatusBadRequest, "block %s is not served: only latest and pending", block.String())
	}
	if number != rpc.PendingBlockNumber && api.s.evm != nil {
		// The nonce at the block the tag names (atHead), as the other
		// state reads.
		tag := rawJSON(number.String())
		at, err := api.s.atHead(ctx, "eth_getTransactionCount", tag)
		if err != nil {
			return nil, err
		}
		if at != tag {
			out, err := api.s.evmCall(ctx, "eth_getTransactionCount", rawJSON(address), at)
			if err != nil {
				return nil, err
			}
			var nonce hexutil.Uint64
			if err := json.Unmarshal(out, &nonce); err != nil {
				return nil, api.s.rpcFail("eth_getTransactionCount", fmt.Errorf("the chain's nonce: %w", err))
			}
			return &nonce, nil
		}
	}
	chainCtx, cancel := context.WithTimeout(ctx, api.s.pool.ChainTimeout)
	nonce, err := api.s.poolChain.NonceAt(chainCtx, ledger.Address(address))
	cancel()
	if err != nil {
		api.s.logger.Warn("httpapi: pool chain did not answer", "error", err, "sender", address)
		return nil, &poolError{status: http.StatusServiceUnavailable, code: rpcCodeInternal, msg: "chain unavailable: cannot read the nonce"}
	}
	if number == rpc.PendingBlockNumber {
		nonce, err = api.s.store.PoolPendingNonce(ctx, api.s.pool.ChainID, address.Hex(), nonce)
		if err != nil {
			return nil, api.s.rpcFail("eth_getTransactionCount", err)
		}
	}
	return (*hexutil.Uint64)(&nonce), nil
}

// GetTransactionByHash is eth_getTransactionByHash. Once its bundle
// executed, the chain's answer (with its block hash, number and index);
// before, the pool's pending, queued and included transactions as geth
// answers for a transaction not yet in a block (blockHash, blockNumber and
// transactionIndex null); null for a hash the pool does not hold (replaced
// and dropped ones included).
func (api *ethAPI) GetTransactionByHash(ctx context.Context, hash common.Hash) (any, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	tx, executed, err := api.s.executedTx(ctx, "eth_getTransactionByHash", hash)
	if err != nil {
		return nil, err
	}
	if executed {
		out, err := api.s.evmCall(ctx, "eth_getTransactionByHash", rawJSON(hash))
		if err != nil || !isNull(out) {
			return out, err
		}
		// The chain executed the bundle without it (it could not run):
		// the pool's record stands.
	}
	if tx.Hash == "" {
		return nil, nil // the pool never held it
	}
	if !tx.State.Live() {
		return nil, nil
	}
	decoded := new(types.Transaction)
	if err := decoded.UnmarshalBinary(tx.Raw); err != nil {
		return nil, api.s.rpcFail("eth_getTransactionByHash", fmt.Errorf("decoding stored transaction %s: %w", tx.Hash, err))
	}
	return ethjson.NewPendingTransaction(decoded, common.HexToAddress(tx.Sender)), nil
}

// netAPI is the net namespace.
type netAPI struct{ s *Server }

// Version is net_version: the chain id in decimal.
func (api *netAPI) Version() string { return strconv.FormatInt(api.s.pool.ChainID, 10) }

// ledgerqAPI is ledgerq's own namespace.
type ledgerqAPI struct{ s *Server }

// TxStatus is ledgerq_txStatus: the pool's record of hash, as GET
// /v1/pool/txs/{hash} answers it (pending, queued, included in bundle N,
// replaced by H, dropped with a reason; an included one with its bundle's
// state), or null when the pool never held it.
func (api *ledgerqAPI) TxStatus(ctx context.Context, hash common.Hash) (*poolTxJSON, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	tx, err := api.s.store.PoolGet(ctx, api.s.pool.ChainID, hash.Hex())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, api.s.rpcFail("ledgerq_txStatus", err)
	}
	out := toPoolTx(tx)
	if out.BundleState, err = api.s.bundleStateOf(ctx, tx); err != nil {
		return nil, api.s.rpcFail("ledgerq_txStatus", err)
	}
	return &out, nil
}
