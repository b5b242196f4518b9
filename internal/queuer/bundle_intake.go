package queuer

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/txpool"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"

	"github.com/ledgerq/ledgerq/internal/builder"
)

// The builder lane's intake: which transactions the pool takes. The rules
// are geth's own pool's, before it looks at the account
// (core/txpool/validation.go): type, size, gas, fees, sender, intrinsic
// gas, minimum tip. What the pool then does with the sender's nonces is the
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
// lane's pool settings.
type PoolIntake struct {
	builder.PoolConfig
	// ChainTimeout bounds one ledger.PoolChain call: the lane's
	// Ledger.Timeout.
	ChainTimeout time.Duration

	// What checkPoolTx hands geth's ValidateTransaction, built once from
	// the settings: the same for every transaction.
	head   *types.Header
	signer types.Signer
	opts   *txpool.ValidationOptions
}

// NewPoolIntake returns the builder lane's intake, cfg with its defaults,
// or the first setting that cannot work.
func NewPoolIntake(cfg builder.Config) (*PoolIntake, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	chainID := big.NewInt(cfg.Pool.ChainID)
	return &PoolIntake{
		PoolConfig: cfg.Pool, ChainTimeout: cfg.Ledger.Timeout,
		head:   &types.Header{Number: common.Big1, Difficulty: common.Big0, Time: 1, GasLimit: cfg.Pool.BlockGasLimit},
		signer: types.LatestSignerForChainID(chainID),
		opts: &txpool.ValidationOptions{
			Config:  shanghai(chainID),
			Accept:  1<<types.LegacyTxType | 1<<types.AccessListTxType | 1<<types.DynamicFeeTxType,
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
// at the account: go-ethereum's core/txpool.ValidateTransaction on
// Shanghai's rules, with the pool's settings (the transaction types it
// takes, MaxTxSize, MinTip, BlockGasLimit as the head's gas limit). It
// returns the sender, recovered for the configured chain id.
func (c *PoolIntake) checkPoolTx(tx *types.Transaction) (common.Address, error) {
	if err := txpool.ValidateTransaction(tx, c.head, c.signer, c.opts); err != nil {
		return common.Address{}, refuse(err)
	}
	sender, err := types.Sender(c.signer, tx) // cached by ValidateTransaction
	if err != nil {
		return common.Address{}, refuse(fmt.Errorf("%w: %v", txpool.ErrInvalidSender, err))
	}
	return sender, nil
}

// shanghai is a chain config with every fork up to Shanghai from genesis
// and none after it: the protocol rules the intake checks a transaction on
// (no blob or set-code transactions, no Prague calldata floor, no Osaka gas
// cap).
func shanghai(chainID *big.Int) *params.ChainConfig {
	zero := uint64(0)
	return &params.ChainConfig{
		ChainID: chainID, HomesteadBlock: common.Big0, EIP150Block: common.Big0, EIP155Block: common.Big0,
		EIP158Block: common.Big0, ByzantiumBlock: common.Big0, ConstantinopleBlock: common.Big0,
		PetersburgBlock: common.Big0, IstanbulBlock: common.Big0, MuirGlacierBlock: common.Big0, BerlinBlock: common.Big0,
		LondonBlock: common.Big0, ArrowGlacierBlock: common.Big0, GrayGlacierBlock: common.Big0,
		MergeNetsplitBlock: common.Big0, TerminalTotalDifficulty: common.Big0, ShanghaiTime: &zero,
	}
}
