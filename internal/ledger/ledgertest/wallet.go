package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

var _ ledger.WalletLedger = (*WalletLedger)(nil)

// WalletLedger is a ledger.WalletLedger in front of another one (a simulated
// chain, usually): it answers with the other's answers, counts every call,
// records every send, and lets the test fail reads, refuse sends, act
// before them, and make reads lag (SetLag).
//
// Its methods are safe for concurrent use. Set its fields before the ledger
// is used, or between calls: a field set while a call runs is a data race.
type WalletLedger struct {
	ledger.WalletLedger

	// RaiseFees makes every fee suggestion one wei above the other ledger's,
	// plus one wei for each earlier suggestion, so a transaction signed again
	// never has the bytes of the first.
	RaiseFees bool
	// MinedIsNonceTooLow answers the send of a mined transaction as geth
	// does, `nonce too low` (a simulated chain may say `already known`).
	MinedIsNonceTooLow bool
	// BeforeSend, when set, runs before each send reaches the other ledger.
	BeforeSend func(tx *types.Transaction)
	// Refuse, when set and returning an error, answers a send with it; the
	// transaction does not reach the other ledger.
	Refuse func(tx *types.Transaction) error
	// FailReceipt, when set and true for a hash (0x-prefixed hex), makes the
	// receipt lookup of that hash fail.
	FailReceipt func(hash string) bool
	// FailBlocks makes every read of the chain's blocks for a wallet's
	// transactions (TxsAtNonce, TxsInBlock) fail.
	FailBlocks bool
	// FailNonceSearch makes TxsAtNonce alone fail, as on a node that has
	// pruned the state of past blocks: the blocks themselves can be read.
	FailNonceSearch bool
	// OnSuggestFees, when set, runs inside SuggestFees.
	OnSuggestFees func()
	// EstimateErr, when set, is EstimateGas's error for msg (nil: estimate).
	EstimateErr func(msg ledger.CallMsg) error
	// CallErr, when set, is Call's error for msg at block (nil: the other
	// ledger's answer).
	CallErr func(msg ledger.CallMsg, block *uint64) error
	// Down, when set and returning an error, answers every call with it,
	// sends too, before the call reaches the other ledger: a node, or a
	// provider, that gives no answer (refused connections, 503s, rate
	// limits) until Down returns nil again. Calls are still counted.
	Down func() error

	mu    sync.Mutex
	calls map[string]int
	sends []Send
	tip   int64
	// lag is SetLag's; lagged counts the reads that lagged.
	lag     Lag
	lagRand *rand.Rand
	lagged  int
}

// Send is one SendRawTransaction the ledger answered: the transaction's
// sender, nonce and hash (zero when raw did not decode), its bytes, and the
// answer.
type Send struct {
	From  common.Address
	Nonce uint64
	Hash  string
	Raw   []byte
	Err   error
}

// NewWalletLedger returns a ledger in front of l.
func NewWalletLedger(l ledger.WalletLedger) *WalletLedger {
	return &WalletLedger{WalletLedger: l}
}

func (l *WalletLedger) count(method string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = map[string]int{}
	}
	l.calls[method]++
}

// call counts a call of method and returns Down's error, if any.
func (l *WalletLedger) call(method string) error {
	l.count(method)
	if l.Down != nil {
		return l.Down()
	}
	return nil
}

// Calls returns how many times method (a method name of
// ledger.WalletLedger) was called.
func (l *WalletLedger) Calls(method string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[method]
}

// TotalCalls returns how many calls of any method were made.
func (l *WalletLedger) TotalCalls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		n += c
	}
	return n
}

// Sends returns every send so far, in call order.
func (l *WalletLedger) Sends() []Send {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Send(nil), l.sends...)
}

// HashesPerNonce returns, per sender and nonce, the distinct hashes ever
// sent.
func (l *WalletLedger) HashesPerNonce() map[common.Address]map[uint64]map[string]bool {
	out := map[common.Address]map[uint64]map[string]bool{}
	for _, s := range l.Sends() {
		if out[s.From] == nil {
			out[s.From] = map[uint64]map[string]bool{}
		}
		if out[s.From][s.Nonce] == nil {
			out[s.From][s.Nonce] = map[string]bool{}
		}
		out[s.From][s.Nonce][s.Hash] = true
	}
	return out
}

// ChainID counts the call and asks the other ledger.
func (l *WalletLedger) ChainID(ctx context.Context) (*big.Int, error) {
	if err := l.call("ChainID"); err != nil {
		return nil, err
	}
	return l.WalletLedger.ChainID(ctx)
}

// PendingNonceAt counts the call and asks the other ledger.
func (l *WalletLedger) PendingNonceAt(ctx context.Context, a ledger.Address) (uint64, error) {
	if err := l.call("PendingNonceAt"); err != nil {
		return 0, err
	}
	return l.WalletLedger.PendingNonceAt(ctx, a)
}

// NonceAt counts the call and asks the other ledger (or lags).
func (l *WalletLedger) NonceAt(ctx context.Context, a ledger.Address) (uint64, error) {
	if err := l.call("NonceAt"); err != nil {
		return 0, err
	}
	if g, ok := l.lags("NonceAt"); ok {
		return l.laggingNonce(ctx, g, a)
	}
	return l.WalletLedger.NonceAt(ctx, a)
}

// BalanceAt counts the call and asks the other ledger.
func (l *WalletLedger) BalanceAt(ctx context.Context, a ledger.Address) (*big.Int, error) {
	if err := l.call("BalanceAt"); err != nil {
		return nil, err
	}
	return l.WalletLedger.BalanceAt(ctx, a)
}

// EstimateGas counts the call and answers EstimateErr's error, or the other
// ledger's estimate.
func (l *WalletLedger) EstimateGas(ctx context.Context, m ledger.CallMsg) (uint64, error) {
	if err := l.call("EstimateGas"); err != nil {
		return 0, err
	}
	if l.EstimateErr != nil {
		if err := l.EstimateErr(m); err != nil {
			return 0, err
		}
	}
	return l.WalletLedger.EstimateGas(ctx, m)
}

// Call counts the call and answers CallErr's error, or the other ledger's
// answer.
func (l *WalletLedger) Call(ctx context.Context, m ledger.CallMsg, block *uint64) ([]byte, error) {
	if err := l.call("Call"); err != nil {
		return nil, err
	}
	if l.CallErr != nil {
		if err := l.CallErr(m, block); err != nil {
			return nil, err
		}
	}
	return l.WalletLedger.Call(ctx, m, block)
}

// SuggestFees counts the call, runs OnSuggestFees, and answers the other
// ledger's suggestion (raised, with RaiseFees).
func (l *WalletLedger) SuggestFees(ctx context.Context) (ledger.Fees, error) {
	if err := l.call("SuggestFees"); err != nil {
		return ledger.Fees{}, err
	}
	if l.OnSuggestFees != nil {
		l.OnSuggestFees()
	}
	f, err := l.WalletLedger.SuggestFees(ctx)
	if err != nil || !l.RaiseFees {
		return f, err
	}
	l.mu.Lock()
	l.tip++
	raise := big.NewInt(l.tip)
	l.mu.Unlock()
	return ledger.Fees{TipCap: new(big.Int).Add(f.TipCap, raise), FeeCap: new(big.Int).Add(f.FeeCap, raise)}, nil
}

// TransactionReceipt counts the call and fails as FailReceipt says, or asks
// the other ledger (or lags).
func (l *WalletLedger) TransactionReceipt(ctx context.Context, h ledger.TxHash) (ledger.Receipt, error) {
	if err := l.call("TransactionReceipt"); err != nil {
		return ledger.Receipt{}, err
	}
	if l.FailReceipt != nil && l.FailReceipt(h.Hex()) {
		return ledger.Receipt{}, errors.New("ledgertest: receipt lookup failed as scripted")
	}
	if g, ok := l.lags("TransactionReceipt"); ok {
		return l.lagReceipt(ctx, g, h)
	}
	return l.WalletLedger.TransactionReceipt(ctx, h)
}

// HeadBlock counts the call and asks the other ledger (or lags).
func (l *WalletLedger) HeadBlock(ctx context.Context) (ledger.BlockRef, error) {
	if err := l.call("HeadBlock"); err != nil {
		return ledger.BlockRef{}, err
	}
	if g, ok := l.lags("HeadBlock"); ok {
		return l.laggingHead(ctx, g)
	}
	return l.WalletLedger.HeadBlock(ctx)
}

// BlockAt counts the call and asks the other ledger (or lags).
func (l *WalletLedger) BlockAt(ctx context.Context, number uint64) (ledger.BlockRef, bool, error) {
	if err := l.call("BlockAt"); err != nil {
		return ledger.BlockRef{}, false, err
	}
	if g, ok := l.lags("BlockAt"); ok {
		return l.lagBlockAt(ctx, g, number)
	}
	return l.WalletLedger.BlockAt(ctx, number)
}

// TxsAtNonce counts the call and fails with FailBlocks, or asks the other
// ledger (or lags).
func (l *WalletLedger) TxsAtNonce(ctx context.Context, a ledger.Address, nonce uint64) ([]ledger.NonceTx, bool, error) {
	if err := l.call("TxsAtNonce"); err != nil {
		return nil, false, err
	}
	if l.FailBlocks {
		return nil, false, errors.New("ledgertest: block read failed as scripted")
	}
	if l.FailNonceSearch {
		return nil, false, errors.New("ledgertest: missing trie node (the state of past blocks is pruned), as scripted")
	}
	if g, ok := l.lags("TxsAtNonce"); ok {
		return l.lagTxsAtNonce(ctx, g, a, nonce)
	}
	return l.WalletLedger.TxsAtNonce(ctx, a, nonce)
}

// TxsInBlock counts the call and fails with FailBlocks, or asks the other
// ledger (or lags).
func (l *WalletLedger) TxsInBlock(ctx context.Context, a ledger.Address, number uint64) ([]ledger.NonceTx, bool, error) {
	if err := l.call("TxsInBlock"); err != nil {
		return nil, false, err
	}
	if l.FailBlocks {
		return nil, false, errors.New("ledgertest: block read failed as scripted")
	}
	if g, ok := l.lags("TxsInBlock"); ok {
		return l.lagTxsInBlock(ctx, g, a, number)
	}
	return l.WalletLedger.TxsInBlock(ctx, a, number)
}

// SendRawTransaction counts and records the call. It answers Down's error,
// or runs BeforeSend, then answers Refuse's error, or `nonce too low` for a mined transaction with
// MinedIsNonceTooLow, or the other ledger's answer.
func (l *WalletLedger) SendRawTransaction(ctx context.Context, raw []byte) error {
	down := l.call("SendRawTransaction")
	rec := Send{Raw: raw}
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		// Not a transaction: the other ledger says what it says to that.
		rec.Err = down
		if rec.Err == nil {
			rec.Err = l.WalletLedger.SendRawTransaction(ctx, raw)
		}
		l.record(rec)
		return rec.Err
	}
	rec.Nonce, rec.Hash = tx.Nonce(), tx.Hash().Hex()
	if from, err := types.Sender(types.LatestSignerForChainID(tx.ChainId()), &tx); err == nil {
		rec.From = from
	}
	if down != nil {
		rec.Err = down
		l.record(rec)
		return rec.Err
	}
	if l.BeforeSend != nil {
		l.BeforeSend(&tx)
	}
	if l.Refuse != nil {
		rec.Err = l.Refuse(&tx)
	}
	if rec.Err == nil && l.MinedIsNonceTooLow {
		if rc, _ := l.WalletLedger.TransactionReceipt(ctx, ledger.TxHash(tx.Hash())); rc.Found {
			rec.Err = ledger.NewSendError(ledger.SendNonceTooLow, fmt.Sprintf("nonce too low: tx nonce %d", tx.Nonce()), nil)
		}
	}
	if rec.Err == nil {
		rec.Err = l.WalletLedger.SendRawTransaction(ctx, raw)
	}
	l.record(rec)
	return rec.Err
}

func (l *WalletLedger) record(s Send) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sends = append(l.sends, s)
}
