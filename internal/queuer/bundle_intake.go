package queuer

import (
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"

	"github.com/ledgerq/ledgerq/internal/builder"
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
	// RefusedTooLarge: larger than builder.PoolConfig.MaxTxSize.
	RefusedTooLarge
)

func refuse(kind RefusalKind, format string, args ...any) *Refusal {
	return &Refusal{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// PoolIntake is the builder lane's intake: which transactions the pool
// takes (POST /rpc's eth_sendRawTransaction and POST /v1/pool/txs), by the
// lane's pool settings.
type PoolIntake struct {
	builder.PoolConfig
	// ChainTimeout bounds one ledger.PoolChain call: the lane's
	// Ledger.Timeout.
	ChainTimeout time.Duration
}

// NewPoolIntake returns the builder lane's intake, cfg with its defaults,
// or the first setting that cannot work.
func NewPoolIntake(cfg builder.Config) (*PoolIntake, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &PoolIntake{PoolConfig: cfg.Pool, ChainTimeout: cfg.Ledger.Timeout}, nil
}

// PoolTx is a decoded transaction and its recovered sender.
type PoolTx struct {
	Tx     *types.Transaction
	Raw    []byte
	Sender common.Address
}

// DecodePoolTx decodes raw with go-ethereum's types (legacy, access-list,
// dynamic-fee) and checks it (checkPoolTx).
func (c *PoolIntake) DecodePoolTx(raw []byte) (PoolTx, error) {
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
func (c *PoolIntake) checkPoolTx(tx *types.Transaction) (common.Address, error) {
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
	// builder.MaxPoolTxSize, so it does not overflow.
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
