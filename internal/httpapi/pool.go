package httpapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/store"
)

// PoolChain is what the builder lane's pool needs of the chain its
// transactions are for. The JAM chain's EVM service will implement it (its
// adapter is not built yet); MemoryPoolChain stands in for it meanwhile.
type PoolChain interface {
	// NonceAt returns sender's account nonce in the chain's latest executed
	// state: every transaction of an executed bundle counted, none of a
	// bundle still in flight (those are the pool's included transactions,
	// which intake counts itself). It is read before the intake's database
	// transaction, never inside it; a read that lags is harmless (the pool
	// keeps the highest nonce it was told per sender).
	NonceAt(ctx context.Context, sender common.Address) (uint64, error)
}

// PoolConfig configures the builder lane's ingress: POST /rpc and
// /v1/pool/txs. With Deps.Pool nil the lane is off and they answer 404.
type PoolConfig struct {
	// ChainID is the chain the pool takes transactions for: eth_chainId,
	// and the only chain id a transaction may be signed for.
	ChainID int64
	// Limits are seed 000's pool limits (1000 pending, 1000 queued, 16 per
	// sender, TTL 1 h).
	Limits store.PoolLimits
	// MaxTxSize is the largest transaction accepted, in bytes (seed: 32 KiB).
	MaxTxSize int
	// MinTip is the minimum price in wei (seed: 1 gwei). As in geth, it
	// applies to the tip: a legacy transaction's gas price, a dynamic-fee
	// transaction's max priority fee per gas.
	MinTip *big.Int
	// BlockGasLimit is the largest gas limit a transaction may have.
	BlockGasLimit uint64
	// RPCBatchLimit bounds the requests of one JSON-RPC batch.
	RPCBatchLimit int
	// ChainTimeout bounds one PoolChain call.
	ChainTimeout time.Duration
}

// DefaultPoolConfig returns seed 000's configuration for chainID.
func DefaultPoolConfig(chainID int64) PoolConfig {
	return PoolConfig{
		ChainID: chainID, Limits: store.DefaultPoolLimits(), MaxTxSize: 32 << 10, MinTip: big.NewInt(1_000_000_000),
		BlockGasLimit: 30_000_000, RPCBatchLimit: 100, ChainTimeout: 2 * time.Second,
	}
}

// Validate reports a configuration that cannot work.
func (c PoolConfig) Validate() error {
	switch {
	case c.ChainID <= 0:
		return fmt.Errorf("pool: chain id %d must be positive", c.ChainID)
	case c.MaxTxSize < 1 || c.MaxTxSize > maxPoolTxSize:
		return fmt.Errorf("pool: max transaction size %d must be from 1 to %d bytes", c.MaxTxSize, maxPoolTxSize)
	case c.MinTip == nil || c.MinTip.Sign() < 0:
		return errors.New("pool: minimum price must be set and not negative")
	case c.BlockGasLimit < 21000 || c.BlockGasLimit > math.MaxInt64:
		return fmt.Errorf("pool: block gas limit %d must be from 21000 to 2^63-1", c.BlockGasLimit)
	case c.RPCBatchLimit < 1:
		return fmt.Errorf("pool: JSON-RPC batch limit %d must be at least 1", c.RPCBatchLimit)
	case c.ChainTimeout <= 0:
		return fmt.Errorf("pool: chain timeout %s must be positive", c.ChainTimeout)
	}
	return c.Limits.Validate()
}

// errLaneOff answers the builder lane's routes when the lane is off.
var errLaneOff = errorf(http.StatusNotFound, "not found: the builder lane is off")

// maxPoolTxSize is geth's own pool's largest transaction (4 slots of
// 32 KiB), and what the table's CHECK allows.
const maxPoolTxSize = 128 << 10

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
// -32000; limits get EIP-1474's "limit exceeded" so that clients can tell a
// full pool from a bad transaction.
const (
	rpcCodeRefused       = -32000
	rpcCodeLimitExceeded = -32005
	rpcCodeInternal      = -32603
)

func poolRefusal(status int, format string, args ...any) *poolError {
	return &poolError{status: status, code: rpcCodeRefused, msg: fmt.Sprintf(format, args...)}
}

// poolTx is a decoded transaction and its recovered sender.
type poolTx struct {
	tx     *types.Transaction
	raw    []byte
	sender common.Address
}

// decodePoolTx decodes raw with go-ethereum's types (legacy, access-list,
// dynamic-fee) and checks it (checkPoolTx).
func (c PoolConfig) decodePoolTx(raw []byte) (poolTx, error) {
	// The size again before decoding, so that no large body is decoded.
	if len(raw) > c.MaxTxSize {
		return poolTx{}, poolRefusal(http.StatusRequestEntityTooLarge, "oversized data: transaction size %d, limit %d", len(raw), c.MaxTxSize)
	}
	tx := new(types.Transaction)
	if err := tx.UnmarshalBinary(raw); err != nil {
		return poolTx{}, poolRefusal(http.StatusBadRequest, "%s", err.Error())
	}
	if !tx.Protected() {
		return poolTx{}, poolRefusal(http.StatusBadRequest, "only replay-protected (EIP-155) transactions allowed over RPC")
	}
	sender, err := c.checkPoolTx(tx)
	if err != nil {
		return poolTx{}, err
	}
	// geth allows up to 2^64-2 (EIP-2681); the pool stores nonces as
	// PostgreSQL bigints.
	if tx.Nonce() >= math.MaxInt64 {
		return poolTx{}, poolRefusal(http.StatusBadRequest, "nonce has max value")
	}
	return poolTx{tx: tx, raw: raw, sender: sender}, nil
}

// checkPoolTx checks tx as geth's pool checks a transaction before it looks
// at the account (core/txpool.ValidateTransaction on Shanghai's rules, with
// geth's messages), seed 000's size, price, gas and value rules among them,
// and recovers its sender for the configured chain id. geth's function
// itself would bring the whole EVM into the binary; a test holds this one to
// it.
func (c PoolConfig) checkPoolTx(tx *types.Transaction) (common.Address, error) {
	switch tx.Type() {
	case types.LegacyTxType, types.AccessListTxType, types.DynamicFeeTxType:
	default:
		return common.Address{}, poolRefusal(http.StatusBadRequest, "%s: tx type %d not supported by this pool", types.ErrTxTypeNotSupported, tx.Type())
	}
	if tx.Size() > uint64(c.MaxTxSize) {
		return common.Address{}, poolRefusal(http.StatusRequestEntityTooLarge, "oversized data: transaction size %d, limit %d", tx.Size(), c.MaxTxSize)
	}
	if tx.To() == nil && len(tx.Data()) > maxInitCodeSize {
		return common.Address{}, poolRefusal(http.StatusBadRequest, "max initcode size exceeded: code size %d limit %d", len(tx.Data()), maxInitCodeSize)
	}
	if tx.Value().Sign() < 0 {
		return common.Address{}, poolRefusal(http.StatusBadRequest, "negative value")
	}
	if tx.Gas() > c.BlockGasLimit {
		return common.Address{}, poolRefusal(http.StatusBadRequest, "exceeds block gas limit")
	}
	if tx.GasFeeCap().BitLen() > 256 {
		return common.Address{}, poolRefusal(http.StatusBadRequest, "max fee per gas higher than 2^256-1")
	}
	if tx.GasTipCap().BitLen() > 256 {
		return common.Address{}, poolRefusal(http.StatusBadRequest, "max priority fee per gas higher than 2^256-1")
	}
	if tx.GasFeeCapIntCmp(tx.GasTipCap()) < 0 {
		return common.Address{}, poolRefusal(http.StatusBadRequest, "max priority fee per gas higher than max fee per gas")
	}
	sender, err := types.Sender(types.LatestSignerForChainID(big.NewInt(c.ChainID)), tx)
	if err != nil {
		return common.Address{}, poolRefusal(http.StatusBadRequest, "invalid sender: %v", err)
	}
	if tx.Nonce()+1 < tx.Nonce() {
		return common.Address{}, poolRefusal(http.StatusBadRequest, "nonce has max value")
	}
	if tx.Value().BitLen() > 256 {
		return common.Address{}, poolRefusal(http.StatusBadRequest, "insufficient funds for gas * price + value")
	}
	if need := intrinsicGas(tx); tx.Gas() < need {
		return common.Address{}, poolRefusal(http.StatusBadRequest, "intrinsic gas too low: gas %d, minimum needed %d", tx.Gas(), need)
	}
	if tx.GasTipCapIntCmp(c.MinTip) < 0 {
		return common.Address{}, poolRefusal(http.StatusBadRequest, "transaction gas price below minimum: gas tip cap %s, minimum needed %s", tx.GasTipCap(), c.MinTip)
	}
	return sender, nil
}

// maxInitCodeSize is EIP-3860's limit (Shanghai): 2 × 24576 bytes.
const maxInitCodeSize = 49152

// intrinsicGas is core.IntrinsicGas on Shanghai's rules (Homestead's
// creation cost, EIP-2028's calldata price, EIP-2930's access lists,
// EIP-3860's init code words); seed 000's "gas > 0" is the least of it. A
// transaction below it could never run, and would stall its sender's
// nonces in a bundle. Sizes are bounded by maxPoolTxSize, so nothing
// overflows.
func intrinsicGas(tx *types.Transaction) uint64 {
	gas := uint64(21000)
	if tx.To() == nil {
		gas = 53000
	}
	data := tx.Data()
	for _, b := range data {
		if b == 0 {
			gas += 4
		} else {
			gas += 16
		}
	}
	if tx.To() == nil {
		gas += (uint64(len(data)) + 31) / 32 * 2
	}
	al := tx.AccessList()
	gas += uint64(len(al))*2400 + uint64(al.StorageKeys())*1900
	return gas
}

// poolSubmit admits raw to the pool: decode and check it, read the sender's
// nonce from the chain (outside any database transaction), then the store's
// intake, one database transaction. It returns the transaction's hash once
// decoded; refusals are *poolError.
func (s *Server) poolSubmit(ctx context.Context, raw []byte) (store.PoolAddResult, common.Hash, error) {
	ptx, err := s.pool.decodePoolTx(raw)
	if err != nil {
		return store.PoolAddResult{}, common.Hash{}, err
	}
	hash := ptx.tx.Hash()
	chainCtx, cancel := context.WithTimeout(ctx, s.pool.ChainTimeout)
	chainNonce, err := s.poolChain.NonceAt(chainCtx, ptx.sender)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return store.PoolAddResult{}, hash, ctx.Err()
		}
		s.logger.Warn("httpapi: pool chain did not answer", "error", err, "sender", ptx.sender)
		return store.PoolAddResult{}, hash, &poolError{status: http.StatusServiceUnavailable, code: rpcCodeInternal,
			msg: "chain unavailable: cannot read the sender's nonce"}
	}
	tx := ptx.tx
	nt := store.NewPoolTx{
		ChainID: s.pool.ChainID, Hash: hash.Hex(), Sender: ptx.sender.Hex(), Nonce: tx.Nonce(), Type: tx.Type(),
		GasFeeCap: tx.GasFeeCap(), GasTipCap: tx.GasTipCap(), Gas: tx.Gas(), Value: tx.Value(), Raw: raw,
	}
	if to := tx.To(); to != nil {
		nt.To = to.Hex()
	}
	res, err := s.store.PoolAdd(ctx, store.PoolAddParams{Now: s.clock.Now(), Tx: nt, ChainNonce: chainNonce, Limits: s.pool.Limits})
	if err != nil {
		return store.PoolAddResult{}, hash, poolStoreError(err)
	}
	if (res.Tx.State == store.PoolPending || res.Promoted > 0) && s.onPoolPending != nil {
		s.onPoolPending()
	}
	return res, hash, nil
}

// poolStoreError turns the store's refusals into poolErrors; other errors
// (the database) pass through.
func poolStoreError(err error) error {
	var low *store.PoolNonceTooLowError
	var acct *store.PoolAccountLimitError
	switch {
	case errors.Is(err, store.ErrPoolAlreadyKnown):
		return &poolError{status: http.StatusOK, code: rpcCodeRefused, msg: err.Error(), known: true}
	case errors.As(err, &low), errors.Is(err, store.ErrPoolReplaceUnderpriced):
		return poolRefusal(http.StatusConflict, "%s", err.Error())
	case errors.As(err, &acct), errors.Is(err, store.ErrPoolFull):
		return &poolError{status: http.StatusTooManyRequests, code: rpcCodeLimitExceeded, msg: err.Error()}
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
	}
	if t.To != "" {
		o.To = &t.To
	}
	if t.ReplacedBy != "" {
		o.ReplacedBy = &t.ReplacedBy
	}
	if t.DropReason != "" {
		o.DropReason = &t.DropReason
	}
	return poolTxJSON{PoolTx: o, ReceivedAt: apiTime(t.ReceivedAt), ExpiresAt: apiTime(t.ExpiresAt), UpdatedAt: apiTime(t.UpdatedAt)}
}

// poolTxResult is the answer of the pool's REST routes; created is nil on
// GET.
func poolTxResult(t store.PoolTx, created *bool, replaced string) poolTxResultJSON {
	r := poolTxResultJSON{PoolTxResult: apigen.PoolTxResult{Success: true, Created: created}, Tx: toPoolTx(t)}
	if replaced != "" {
		r.Replaced = &replaced
	}
	return r
}
