package queuer

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/txpool"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
)

// The builder lane's intake: which transactions the pool takes. The rules
// are geth's own pool's, before it looks at the account
// (core/txpool/validation.go): type, size, gas, fees, sender, intrinsic
// gas, the calldata floor, the per-transaction gas cap, init-code size,
// minimum tip. They are judged on the protocol rules the chain's EVM
// executes by (jam.EVMChainConfig), at the block the transaction will land
// in, so that every transaction the EVM would refuse on those rules is
// refused here, with geth's message, rather than taken and then skipped by
// the chain. What the pool then does with the sender's nonces is the
// store's intake (store.PoolAdd), under the sender's lock.

// Refusal says why the intake refused a transaction: Err is geth's error
// (errors.Is with txpool.ErrOversizedData, core.ErrIntrinsicGas, …), with
// geth's message.
type Refusal struct {
	Kind RefusalKind
	Err  error
}

func (r *Refusal) Error() string { return r.Err.Error() }

// Unwrap returns geth's error.
func (r *Refusal) Unwrap() error { return r.Err }

// RefusalKind is what a refusal is about.
type RefusalKind int

const (
	// RefusedInvalid: the transaction itself breaks a rule.
	RefusedInvalid RefusalKind = iota + 1
	// RefusedTooLarge: larger than builder.PoolConfig.MaxTxSize.
	RefusedTooLarge
)

// refuse makes err a Refusal of the kind it is.
func refuse(err error) *Refusal {
	if errors.Is(err, txpool.ErrOversizedData) {
		return &Refusal{Kind: RefusedTooLarge, Err: err}
	}
	return &Refusal{Kind: RefusedInvalid, Err: err}
}

// PoolIntake is the builder lane's intake: which transactions the pool
// takes (POST /rpc's eth_sendRawTransaction and POST /v1/pool/txs), by the
// lane's pool settings and the chain's protocol rules.
type PoolIntake struct {
	builder.PoolConfig
	// ChainTimeout bounds one ledger.PoolChain call: the lane's
	// Ledger.Timeout.
	ChainTimeout time.Duration

	// What checkPoolTx hands geth's ValidateTransaction, built once from
	// the settings, and the clock that dates the block a transaction will
	// land in.
	clock  clock.Clock
	signer types.Signer
	opts   *txpool.ValidationOptions
}

// acceptedTxTypes are the transaction types the pool takes: legacy, access
// list and dynamic fee. A blob transaction needs a sidecar the builder
// service does not take, and a set-code transaction moves the nonces of
// accounts other than its sender, which the pool's per-sender view cannot
// follow. ValidateTransaction refuses both with geth's
// core.ErrTxTypeNotSupported ("tx type 4 not supported by this pool").
const acceptedTxTypes = 1<<types.LegacyTxType | 1<<types.AccessListTxType | 1<<types.DynamicFeeTxType

// NewPoolIntake returns the builder lane's intake, cfg with its defaults,
// or the first setting that cannot work. clk tells the time of the block a
// transaction will land in (the chain dates its blocks by the same clock);
// nil means clock.Real.
func NewPoolIntake(cfg builder.Config, clk clock.Clock) (*PoolIntake, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.Real{}
	}
	rules := jam.EVMChainConfig(cfg.Pool.ChainID)
	return &PoolIntake{
		PoolConfig: cfg.Pool, ChainTimeout: cfg.Ledger.Timeout,
		clock:  clk,
		signer: types.LatestSigner(rules),
		opts: &txpool.ValidationOptions{
			Config:  rules,
			Accept:  acceptedTxTypes,
			MaxSize: uint64(cfg.Pool.MaxTxSize),
			MinTip:  cfg.Pool.MinTip,
		},
	}, nil
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
		return PoolTx{}, refuse(fmt.Errorf("%w: transaction size %d, limit %d", txpool.ErrOversizedData, len(raw), c.MaxTxSize))
	}
	tx := new(types.Transaction)
	if err := tx.UnmarshalBinary(raw); err != nil {
		return PoolTx{}, refuse(err)
	}
	if !tx.Protected() {
		// geth's RPC answer (internal/ethapi), which it does not export.
		return PoolTx{}, refuse(errors.New("only replay-protected (EIP-155) transactions allowed over RPC"))
	}
	sender, err := c.checkPoolTx(tx)
	if err != nil {
		return PoolTx{}, err
	}
	// Stricter than geth, which allows up to 2^64-2 (EIP-2681): the pool
	// stores nonces as PostgreSQL bigints.
	if tx.Nonce() >= math.MaxInt64 {
		return PoolTx{}, refuse(core.ErrNonceMax)
	}
	return PoolTx{Tx: tx, Raw: raw, Sender: sender}, nil
}

// checkPoolTx checks tx as geth's pool checks a transaction before it looks
// at the account: go-ethereum's core/txpool.ValidateTransaction on the
// chain's protocol rules (jam.EVMChainConfig) at the next block (nextHead),
// with the pool's settings (the transaction types it takes, MaxTxSize,
// MinTip, BlockGasLimit as the block's gas limit). It returns the sender,
// recovered for the configured chain id.
func (c *PoolIntake) checkPoolTx(tx *types.Transaction) (common.Address, error) {
	if err := txpool.ValidateTransaction(tx, c.nextHead(), c.signer, c.opts); err != nil {
		return common.Address{}, refuse(err)
	}
	sender, err := types.Sender(c.signer, tx) // cached by ValidateTransaction
	if err != nil {
		return common.Address{}, refuse(fmt.Errorf("%w: %v", txpool.ErrInvalidSender, err))
	}
	return sender, nil
}

// nextHead is the header of the block a transaction taken now lands in, as
// far as the rules tell blocks apart. Its time is now: the chain dates a
// block by its slot's start, which for a transaction taken now is no
// earlier, so a fork the chain has activated by time is active here too.
// Its number is the first after genesis: jam.EVMChainConfig has every fork
// named by block number at genesis, so every later block is judged alike
// and the intake need not ask the chain for its head. Difficulty 0 is
// past the merge.
func (c *PoolIntake) nextHead() *types.Header {
	return &types.Header{
		Number: common.Big1, Difficulty: common.Big0,
		Time: uint64(max(c.clock.Now().Unix(), 0)), GasLimit: c.BlockGasLimit,
	}
}
