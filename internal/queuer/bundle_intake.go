package queuer

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"

	"github.com/ledgerq/ledgerq/internal/store"
)

// The builder lane's intake: which transactions the pool takes. The rules
// are geth's own pool's, before it looks at the account
// (core/txpool/validation.go): type, size, gas, fees, sender, intrinsic
// gas, minimum tip. What the pool then does with the sender's nonces is the
// store's intake (store.PoolAdd), under the sender's lock.

// Refusal says why the intake refused a transaction, with geth's message.
type Refusal struct {
	Kind RefusalKind
	Msg  string
}

func (r *Refusal) Error() string { return r.Msg }

// RefusalKind is what a refusal is about.
type RefusalKind int

const (
	// RefusedInvalid: the transaction itself breaks a rule.
	RefusedInvalid RefusalKind = iota + 1
	// RefusedTooLarge: larger than PoolConfig.MaxTxSize.
	RefusedTooLarge
)

func refuse(kind RefusalKind, format string, args ...any) *Refusal {
	return &Refusal{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// PoolConfig configures the builder lane's intake: which transactions the
// pool takes (POST /rpc's eth_sendRawTransaction and POST /v1/pool/txs).
type PoolConfig struct {
	// ChainID is the chain the pool takes transactions for: eth_chainId,
	// and the only chain id a transaction may be signed for.
	ChainID int64
	// Limits are the pool's limits (1000 pending, 1000 queued, 16 per
	// sender, TTL 1 h by default).
	Limits store.PoolLimits
	// MaxTxSize is the largest transaction accepted, in bytes (32 KiB by default).
	MaxTxSize int
	// MinTip is the minimum price in wei (1 gwei by default). As in geth, it
	// applies to the tip: a legacy transaction's gas price, a dynamic-fee
	// transaction's max priority fee per gas.
	MinTip *big.Int
	// BlockGasLimit is the largest gas limit a transaction may have.
	BlockGasLimit uint64
	// RPCBatchLimit bounds the requests of one JSON-RPC batch.
	RPCBatchLimit int
	// ChainTimeout bounds one ledger.PoolChain call.
	ChainTimeout time.Duration
}

// DefaultPoolConfig returns the pool's default configuration for chainID.
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
	case c.MaxTxSize < 1 || c.MaxTxSize > MaxPoolTxSize:
		return fmt.Errorf("pool: max transaction size %d must be from 1 to %d bytes", c.MaxTxSize, MaxPoolTxSize)
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

// MaxPoolTxSize is geth's own pool's largest transaction (4 slots of
// 32 KiB), and what the table's CHECK allows.
const MaxPoolTxSize = 128 << 10

// PoolTx is a decoded transaction and its recovered sender.
type PoolTx struct {
	Tx     *types.Transaction
	Raw    []byte
	Sender common.Address
}

// DecodePoolTx decodes raw with go-ethereum's types (legacy, access-list,
// dynamic-fee) and checks it (checkPoolTx).
func (c PoolConfig) DecodePoolTx(raw []byte) (PoolTx, error) {
	// The size again before decoding, so that no large body is decoded.
	if len(raw) > c.MaxTxSize {
		return PoolTx{}, refuse(RefusedTooLarge, "oversized data: transaction size %d, limit %d", len(raw), c.MaxTxSize)
	}
	tx := new(types.Transaction)
	if err := tx.UnmarshalBinary(raw); err != nil {
		return PoolTx{}, refuse(RefusedInvalid, "%s", err.Error())
	}
	if !tx.Protected() {
		return PoolTx{}, refuse(RefusedInvalid, "only replay-protected (EIP-155) transactions allowed over RPC")
	}
	sender, err := c.checkPoolTx(tx)
	if err != nil {
		return PoolTx{}, err
	}
	// geth allows up to 2^64-2 (EIP-2681); the pool stores nonces as
	// PostgreSQL bigints.
	if tx.Nonce() >= math.MaxInt64 {
		return PoolTx{}, refuse(RefusedInvalid, "nonce has max value")
	}
	return PoolTx{Tx: tx, Raw: raw, Sender: sender}, nil
}

// checkPoolTx checks tx as geth's pool checks a transaction before it looks
// at the account (core/txpool.ValidateTransaction on Shanghai's rules, with
// geth's messages), the pool's size, price, gas and value rules among them,
// and recovers its sender for the configured chain id. A test holds it to
// geth's function.
func (c PoolConfig) checkPoolTx(tx *types.Transaction) (common.Address, error) {
	switch tx.Type() {
	case types.LegacyTxType, types.AccessListTxType, types.DynamicFeeTxType:
	default:
		return common.Address{}, refuse(RefusedInvalid, "%s: tx type %d not supported by this pool", types.ErrTxTypeNotSupported, tx.Type())
	}
	if tx.Size() > uint64(c.MaxTxSize) {
		return common.Address{}, refuse(RefusedTooLarge, "oversized data: transaction size %d, limit %d", tx.Size(), c.MaxTxSize)
	}
	if tx.To() == nil && len(tx.Data()) > params.MaxInitCodeSize {
		return common.Address{}, refuse(RefusedInvalid, "max initcode size exceeded: code size %d limit %d", len(tx.Data()), params.MaxInitCodeSize)
	}
	if tx.Value().Sign() < 0 {
		return common.Address{}, refuse(RefusedInvalid, "negative value")
	}
	if tx.Gas() > c.BlockGasLimit {
		return common.Address{}, refuse(RefusedInvalid, "exceeds block gas limit")
	}
	if tx.GasFeeCap().BitLen() > 256 {
		return common.Address{}, refuse(RefusedInvalid, "max fee per gas higher than 2^256-1")
	}
	if tx.GasTipCap().BitLen() > 256 {
		return common.Address{}, refuse(RefusedInvalid, "max priority fee per gas higher than 2^256-1")
	}
	if tx.GasFeeCapIntCmp(tx.GasTipCap()) < 0 {
		return common.Address{}, refuse(RefusedInvalid, "max priority fee per gas higher than max fee per gas")
	}
	sender, err := types.Sender(types.LatestSignerForChainID(big.NewInt(c.ChainID)), tx)
	if err != nil {
		return common.Address{}, refuse(RefusedInvalid, "invalid sender: %v", err)
	}
	if tx.Nonce()+1 < tx.Nonce() {
		return common.Address{}, refuse(RefusedInvalid, "nonce has max value")
	}
	if tx.Value().BitLen() > 256 {
		return common.Address{}, refuse(RefusedInvalid, "insufficient funds for gas * price + value")
	}
	// A transaction below its intrinsic gas could never run, and would
	// stall its sender's nonces in a bundle. Sizes are bounded by
	// MaxPoolTxSize, so it does not overflow.
	need, err := core.IntrinsicGas(tx.Data(), tx.AccessList(), nil, sender, tx.To(), nil, shanghai)
	if err != nil {
		return common.Address{}, refuse(RefusedInvalid, "%v", err)
	}
	if tx.Gas() < need {
		return common.Address{}, refuse(RefusedInvalid, "intrinsic gas too low: gas %d, minimum needed %d", tx.Gas(), need)
	}
	if tx.GasTipCapIntCmp(c.MinTip) < 0 {
		return common.Address{}, refuse(RefusedInvalid, "transaction gas price below minimum: gas tip cap %s, minimum needed %s", tx.GasTipCap(), c.MinTip)
	}
	return sender, nil
}

// shanghai are the protocol rules the intake checks a transaction on.
var shanghai = params.Rules{
	IsHomestead: true, IsEIP150: true, IsEIP155: true, IsEIP158: true, IsByzantium: true, IsConstantinople: true,
	IsPetersburg: true, IsIstanbul: true, IsBerlin: true, IsLondon: true, IsMerge: true, IsShanghai: true,
}
