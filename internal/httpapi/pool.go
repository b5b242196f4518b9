package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"regexp"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/txpool"
	"github.com/ethereum/go-ethereum/core/txpool/legacypool"
	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/store"
)

var errLaneOff = errorf(http.StatusNotFound, "not found: the builder lane is off")

// poolError is a refusal of the pool's ingress, with the HTTP status the
// REST API answers and the JSON-RPC code /rpc answers (it implements
// go-ethereum's rpc.Error). Messages are go-ethereum's own.
type poolError struct {
	status int
	code   int
	msg    string
	// known: the same bytes are already pooled (geth's "already known").
	known bool
}

func (e *poolError) Error() string { return e.msg }

// ErrorCode is the JSON-RPC error code.
func (e *poolError) ErrorCode() int { return e.code }

// JSON-RPC error codes: geth answers every transaction pool refusal with
// -32000, a full pool and the account limit included. Clients react to the
// message, and some to the code: EIP-1474's -32005 ("limit exceeded") is
// what rate-limited RPC providers answer, and viem retries it without end.
const (
	rpcCodeRefused  = -32000
	rpcCodeInternal = -32603
)

func poolRefusal(status int, format string, args ...any) *poolError {
	return &poolError{status: status, code: rpcCodeRefused, msg: fmt.Sprintf(format, args...)}
}

// poolSubmit admits raw to the pool: decode and check it, read the sender's
// nonce from the chain (outside any database transaction), then the store's
// intake, one database transaction. It returns the transaction's hash once
// decoded; refusals are *poolError.
func (s *Server) poolSubmit(ctx context.Context, raw []byte) (store.PoolAddResult, common.Hash, error) {
	ptx, err := s.pool.DecodePoolTx(raw)
	if err != nil {
		return store.PoolAddResult{}, common.Hash{}, refusalError(err)
	}
	hash := ptx.Tx.Hash()
	chainCtx, cancel := context.WithTimeout(ctx, s.pool.ChainTimeout)
	chainNonce, err := s.poolChain.NonceAt(chainCtx, ledger.Address(ptx.Sender))
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return store.PoolAddResult{}, hash, ctx.Err()
		}
		s.logger.Warn("httpapi: pool chain did not answer", "error", err, "sender", ptx.Sender)
		return store.PoolAddResult{}, hash, &poolError{status: http.StatusServiceUnavailable, code: rpcCodeInternal,
			msg: "chain unavailable: cannot read the sender's nonce"}
	}
	balance, err := s.senderBalance(ctx, ptx.Sender)
	if err != nil {
		return store.PoolAddResult{}, hash, err
	}
	tx := ptx.Tx
	nt := store.NewPoolTx{
		ChainID: s.pool.ChainID, Hash: hash.Hex(), Sender: ptx.Sender.Hex(), Nonce: tx.Nonce(), Type: tx.Type(),
		GasFeeCap: tx.GasFeeCap(), GasTipCap: tx.GasTipCap(), Gas: tx.Gas(), Value: tx.Value(), Raw: raw,
	}
	if to := tx.To(); to != nil {
		nt.To = to.Hex()
	}
	res, err := s.store.PoolAdd(ctx, store.PoolAddParams{Now: s.clock.Now(), Tx: nt, ChainNonce: chainNonce, Balance: balance, Limits: s.pool.Limits})
	if err != nil {
		return store.PoolAddResult{}, hash, poolStoreError(err)
	}
	if res.Evicted != "" {
		// The client that sent the evicted transaction learns of it from
		// ledgerq_txStatus (dropped, reason evicted) and must resend it.
		s.metrics.Transition("pool", store.PoolDropEvicted, 1)
	}
	if (res.Tx.State == store.PoolPending || res.Promoted > 0) && s.onPoolPending != nil {
		s.onPoolPending()
	}
	return res, hash, nil
}

// senderBalance reads sender's balance in the chain's latest executed state
// from its EVM JSON-RPC, for the intake's funds check; nil (no check)
// without one.
func (s *Server) senderBalance(ctx context.Context, sender common.Address) (*big.Int, error) {
	if s.evm == nil {
		return nil, nil
	}
	chainCtx, cancel := context.WithTimeout(ctx, s.pool.ChainTimeout)
	defer cancel()
	out, err := s.evm.Call(chainCtx, "eth_getBalance", []json.RawMessage{*rawJSON(sender), json.RawMessage(`"latest"`)})
	var b hexutil.Big
	if err == nil {
		err = json.Unmarshal(out, &b)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.logger.Warn("httpapi: the chain's EVM JSON-RPC did not give a balance", "error", err, "sender", sender)
		return nil, &poolError{status: http.StatusServiceUnavailable, code: rpcCodeInternal, msg: "chain unavailable: cannot read the sender's balance"}
	}
	return b.ToInt(), nil
}

// refusalError turns the intake's refusals into poolErrors.
func refusalError(err error) error {
	var r *queuer.Refusal
	if !errors.As(err, &r) {
		return err
	}
	status := http.StatusBadRequest
	if r.Kind == queuer.RefusedTooLarge {
		status = http.StatusRequestEntityTooLarge
	}
	return poolRefusal(status, "%s", r.Error())
}

// poolStoreError turns the store's refusals into poolErrors; other errors
// (the database) pass through.
func poolStoreError(err error) error {
	var low *store.PoolNonceTooLowError
	var acct *store.PoolAccountLimitError
	var funds *store.PoolInsufficientFundsError
	switch {
	case errors.Is(err, txpool.ErrAlreadyKnown):
		return &poolError{status: http.StatusOK, code: rpcCodeRefused, msg: err.Error(), known: true}
	case errors.As(err, &low), errors.Is(err, txpool.ErrReplaceUnderpriced), errors.As(err, &funds):
		return poolRefusal(http.StatusConflict, "%s", err.Error())
	case errors.As(err, &acct), errors.Is(err, legacypool.ErrTxPoolOverflow):
		return &poolError{status: http.StatusTooManyRequests, code: rpcCodeRefused, msg: err.Error()}
	}
	return err
}

// PostPoolTx answers POST /v1/pool/txs.
func (s *Server) PostPoolTx(c echo.Context) error {
	if s.pool == nil {
		return errLaneOff
	}
	// Strictly, as POST /v1/batches: the field name exact and given once.
	var body apigen.NewPoolTx
	if err := decodeStrictJSON(c, &body); err != nil {
		return err
	}
	if body.Raw == "" {
		return errorf(http.StatusBadRequest, "field raw: required")
	}
	if len(body.Raw) > 2+2*s.pool.MaxTxSize {
		return errorf(http.StatusRequestEntityTooLarge, "field raw: oversized data: transaction size %d, limit %d", (len(body.Raw)-2)/2, s.pool.MaxTxSize)
	}
	raw, err := hexutil.Decode(body.Raw)
	if err != nil {
		return errorf(http.StatusBadRequest, "field raw: %v", err)
	}
	ctx := c.Request().Context()
	res, hash, err := s.poolSubmit(ctx, raw)
	var perr *poolError
	switch {
	case errors.As(err, &perr) && perr.known:
		// The same bytes again: answered as an idempotent repost.
		tx, err := s.store.PoolGet(ctx, s.pool.ChainID, hash.Hex())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, poolTxResult(tx, ptr(false), ""))
	case errors.As(err, &perr):
		return &Error{Status: perr.status, Message: perr.msg}
	case err != nil:
		return err
	}
	return c.JSON(http.StatusCreated, poolTxResult(res.Tx, ptr(true), res.Replaced))
}

// GetPoolTx answers GET /v1/pool/txs/{hash}.
func (s *Server) GetPoolTx(c echo.Context, hash string) error {
	if s.pool == nil {
		return errLaneOff
	}
	if !txHashPattern.MatchString(hash) {
		return errorf(http.StatusBadRequest, "path parameter hash: must be 0x and 64 hex digits")
	}
	tx, err := s.store.PoolGet(c.Request().Context(), s.pool.ChainID, hash)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "transaction %s is not in the pool", strings.ToLower(hash))
	}
	if err != nil {
		return err
	}
	out := poolTxResult(tx, nil, "")
	if out.Tx.BundleState, err = s.bundleStateOf(c.Request().Context(), tx); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// bundleStateOf returns the state of an included transaction's bundle (nil
// for the other states): the rest of its story.
func (s *Server) bundleStateOf(ctx context.Context, tx store.PoolTx) (*apigen.BundleState, error) {
	if tx.State != store.PoolIncluded || tx.BundleBlock == nil {
		return nil, nil
	}
	b, err := s.store.BundleGet(ctx, tx.ChainID, uint64(*tx.BundleBlock))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ptr(apigen.BundleState(b.State)), nil
}

func ptr[T any](v T) *T {
	return &v
}

// omitZero is v, or nil for the zero value: an optional field the API
// leaves out when the stored value is empty.
func omitZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

var txHashPattern = regexp.MustCompile(`^0x[0-9a-fA-F]{64}$`)

// poolTxJSON is apigen.PoolTx as the API writes it: times by apiTime (see
// batchJSON).
type poolTxJSON struct {
	apigen.PoolTx
	ReceivedAt apiTime `json:"received_at"`
	ExpiresAt  apiTime `json:"expires_at"`
	UpdatedAt  apiTime `json:"updated_at"`
}

type poolTxResultJSON struct {
	apigen.PoolTxResult
	Tx poolTxJSON `json:"tx"`
}

// toPoolTx converts a stored pool transaction to the API's PoolTx.
func toPoolTx(t store.PoolTx) poolTxJSON {
	o := apigen.PoolTx{
		Hash: t.Hash, ChainID: t.ChainID, Sender: t.Sender, Nonce: int64(t.Nonce), Type: int(t.Type), Gas: int64(t.Gas),
		GasFeeCap: t.GasFeeCap.String(), GasTipCap: t.GasTipCap.String(), Value: t.Value.String(),
		State: apigen.PoolTxState(t.State), BundleBlock: t.BundleBlock,
		To: omitZero(t.To), ReplacedBy: omitZero(t.ReplacedBy), DropReason: omitZero(t.DropReason),
		ChainReason: omitZero(t.ChainReason),
	}
	return poolTxJSON{PoolTx: o, ReceivedAt: apiTime(t.ReceivedAt), ExpiresAt: apiTime(t.ExpiresAt), UpdatedAt: apiTime(t.UpdatedAt)}
}

// poolTxResult is the answer of the pool's REST routes; created is nil on
// GET.
func poolTxResult(t store.PoolTx, created *bool, replaced string) poolTxResultJSON {
	return poolTxResultJSON{
		PoolTxResult: apigen.PoolTxResult{Success: true, Created: created, Replaced: omitZero(replaced)}, Tx: toPoolTx(t),
	}
}
