package evm

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// DefaultCallTimeout bounds each call to the node when Config leaves it 0.
const DefaultCallTimeout = 10 * time.Second

// Config configures a Ledger.
type Config struct {
	// CallTimeout bounds every call to the node (inside the caller's own
	// deadline, if shorter). 0 means DefaultCallTimeout.
	CallTimeout time.Duration
}

// Client is the part of go-ethereum's ethclient the adapter uses. Both
// *ethclient.Client and ethclient/simulated's Client have it.
type Client interface {
	ChainID(ctx context.Context) (*big.Int, error)
	PendingNonceAt(ctx context.Context, account common.Address) (uint64, error)
	NonceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (uint64, error)
	BalanceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (*big.Int, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	BlockByHash(ctx context.Context, hash common.Hash) (*types.Block, error)
	SuggestGasPrice(ctx context.Context) (*big.Int, error)
	SuggestGasTipCap(ctx context.Context) (*big.Int, error)
	EstimateGas(ctx context.Context, msg ethereum.CallMsg) (uint64, error)
	CallContract(ctx context.Context, msg ethereum.CallMsg, blockNumber *big.Int) ([]byte, error)
	PendingCallContract(ctx context.Context, msg ethereum.CallMsg) ([]byte, error)
	SendTransaction(ctx context.Context, tx *types.Transaction) error
	TransactionReceipt(ctx context.Context, txHash common.Hash) (*types.Receipt, error)
}

// Ledger is a ledger.WalletLedger over one node's JSON-RPC endpoint.
type Ledger struct {
	ec      Client
	closer  func()
	timeout time.Duration
}

var _ ledger.WalletLedger = (*Ledger)(nil)

// Dial connects to the node at url (http, https, ws, wss or an IPC path).
func Dial(ctx context.Context, url string, cfg Config) (*Ledger, error) {
	ec, err := ethclient.DialContext(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("evm: dialing %s: %w", url, err)
	}
	l := New(ec, cfg)
	l.closer = ec.Close
	return l, nil
}

// New returns a Ledger over an existing client (ethclient/simulated's in
// tests). Close leaves c open.
func New(c Client, cfg Config) *Ledger {
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	return &Ledger{ec: c, timeout: cfg.CallTimeout}
}

// Close closes the connection Dial opened.
func (l *Ledger) Close() {
	if l.closer != nil {
		l.closer()
	}
}

func (l *Ledger) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.timeout)
}

// ChainID implements ledger.WalletLedger.
func (l *Ledger) ChainID(ctx context.Context) (*big.Int, error) {
	ctx, cancel := l.callCtx(ctx)
	defer cancel()
	id, err := l.ec.ChainID(ctx)
	if err != nil {
		return nil, fmt.Errorf("evm: eth_chainId: %w", err)
	}
	return id, nil
}

// PendingNonceAt implements ledger.WalletLedger.
func (l *Ledger) PendingNonceAt(ctx context.Context, addr ledger.Address) (uint64, error) {
	ctx, cancel := l.callCtx(ctx)
	defer cancel()
	n, err := l.ec.PendingNonceAt(ctx, common.Address(addr))
	if err != nil {
		return 0, fmt.Errorf("evm: pending nonce of %s: %w", addr.Hex(), err)
	}
	return n, nil
}

// NonceAt implements ledger.WalletLedger.
func (l *Ledger) NonceAt(ctx context.Context, addr ledger.Address) (uint64, error) {
	ctx, cancel := l.callCtx(ctx)
	defer cancel()
	n, err := l.ec.NonceAt(ctx, common.Address(addr), nil)
	if err != nil {
		return 0, fmt.Errorf("evm: latest nonce of %s: %w", addr.Hex(), err)
	}
	return n, nil
}

// BalanceAt implements ledger.WalletLedger.
func (l *Ledger) BalanceAt(ctx context.Context, addr ledger.Address) (*big.Int, error) {
	ctx, cancel := l.callCtx(ctx)
	defer cancel()
	b, err := l.ec.BalanceAt(ctx, common.Address(addr), nil)
	if err != nil {
		return nil, fmt.Errorf("evm: balance of %s: %w", addr.Hex(), err)
	}
	return b, nil
}

// SuggestFees implements ledger.WalletLedger: ledger.FeesOver the latest
// base fee with the node's suggested tip. On a chain without a base fee
// (pre-London) both are the node's gas price.
func (l *Ledger) SuggestFees(ctx context.Context) (ledger.Fees, error) {
	ctx, cancel := l.callCtx(ctx)
	defer cancel()
	head, err := l.ec.HeaderByNumber(ctx, nil)
	if err != nil {
		return ledger.Fees{}, fmt.Errorf("evm: latest header: %w", err)
	}
	if head.BaseFee == nil {
		price, err := l.ec.SuggestGasPrice(ctx)
		if err != nil {
			return ledger.Fees{}, fmt.Errorf("evm: eth_gasPrice: %w", err)
		}
		return ledger.Fees{TipCap: price, FeeCap: new(big.Int).Set(price)}, nil
	}
	tip, err := l.ec.SuggestGasTipCap(ctx)
	if err != nil {
		return ledger.Fees{}, fmt.Errorf("evm: eth_maxPriorityFeePerGas: %w", err)
	}
	return ledger.FeesOver(head.BaseFee, tip), nil
}

// callMsg is msg as ethclient takes it.
func callMsg(msg ledger.CallMsg) ethereum.CallMsg {
	cm := ethereum.CallMsg{From: common.Address(msg.From), Value: msg.Value, Data: msg.Data, Gas: msg.Gas}
	if msg.To != nil {
		to := common.Address(*msg.To)
		cm.To = &to
	}
	return cm
}

// EstimateGas implements ledger.WalletLedger.
func (l *Ledger) EstimateGas(ctx context.Context, msg ledger.CallMsg) (uint64, error) {
	ctx, cancel := l.callCtx(ctx)
	defer cancel()
	cm := callMsg(msg)
	cm.Gas = 0
	g, err := l.ec.EstimateGas(ctx, cm)
	if err != nil {
		return 0, fmt.Errorf("evm: eth_estimateGas: %w", classifyCall(err))
	}
	return g, nil
}

// Call implements ledger.WalletLedger (eth_call at "pending" or at a block
// number).
func (l *Ledger) Call(ctx context.Context, msg ledger.CallMsg, block *uint64) ([]byte, error) {
	ctx, cancel := l.callCtx(ctx)
	defer cancel()
	var (
		out []byte
		err error
	)
	if block == nil {
		out, err = l.ec.PendingCallContract(ctx, callMsg(msg))
	} else {
		out, err = l.ec.CallContract(ctx, callMsg(msg), new(big.Int).SetUint64(*block))
	}
	if err != nil {
		return nil, fmt.Errorf("evm: eth_call: %w", classifyCall(err))
	}
	return out, nil
}

// classifyCall classes a failed eth_estimateGas or eth_call: a JSON-RPC
// error object is the node's answer, classed by
// ledger.ClassifyCallMessage, and its revert data, when a verdict carries
// some, is kept in the chain (a *ledger.RevertError); anything else (an
// HTTP status, a timeout, a transport error) is Transient, a failure to
// get an answer.
func classifyCall(err error) error {
	var rpcErr rpc.Error
	var httpErr rpc.HTTPError
	if !errors.As(err, &httpErr) && errors.As(err, &rpcErr) {
		class := ledger.ClassifyCallMessage(rpcErr.ErrorCode(), rpcErr.Error())
		if data, ok := revertData(err); ok && class == ledger.Deterministic {
			return ledger.NewError(class, rpcErr.Error(), fmt.Errorf("%w: %w", err, data))
		}
		return ledger.NewError(class, rpcErr.Error(), err)
	}
	return ledger.NewError(ledger.Transient, err.Error(), err)
}

// revertData is the revert data of a node's error object: its "data"
// member, a hex string (geth's code 3 "execution reverted", anvil's, reth's).
// Data that is not hex is no revert data.
func revertData(err error) (*ledger.RevertError, bool) {
	var de rpc.DataError
	if !errors.As(err, &de) {
		return nil, false
	}
	s, ok := de.ErrorData().(string)
	if !ok {
		return nil, false
	}
	b, derr := hexutil.Decode(s)
	if derr != nil {
		return nil, false
	}
	return ledger.NewRevertError(b), true
}

// SendRawTransaction implements ledger.WalletLedger. It returns nil when the
// node took the transaction or already had it (`already known`), and a
// *ledger.SendError otherwise. The bytes are decoded and sent through
// ethclient, which encodes them back byte for byte (eth_sendRawTransaction);
// bytes that do not decode are refused without a call.
func (l *Ledger) SendRawTransaction(ctx context.Context, raw []byte) error {
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		return ledger.NewSendError(ledger.SendRejected, "transaction does not decode", err)
	}
	ctx, cancel := l.callCtx(ctx)
	defer cancel()
	err := l.ec.SendTransaction(ctx, &tx)
	if err == nil {
		return nil
	}
	r := classifySend(err)
	if r == ledger.SendAccepted {
		return nil
	}
	return ledger.NewSendError(r, err.Error(), err)
}

// classifySend tells what a failed eth_sendRawTransaction means. Only a
// JSON-RPC error object is the node's own answer; it is classified by its
// code and message, for any client (ledger.ClassifySend). An HTTP 429 is a
// rate limit in front of the node, which did not take the transaction
// (SendBusy). Any other HTTP status (a proxy's 5xx), a timeout or a
// transport error may have come after the node took it.
func classifySend(err error) ledger.SendResult {
	var httpErr rpc.HTTPError
	if errors.As(err, &httpErr) {
		if httpErr.StatusCode == http.StatusTooManyRequests {
			return ledger.SendBusy
		}
		return ledger.SendIndeterminate
	}
	var rpcErr rpc.Error
	if errors.As(err, &rpcErr) {
		return ledger.ClassifySend(rpcErr.ErrorCode(), rpcErr.Error())
	}
	return ledger.SendIndeterminate
}

// TransactionReceipt implements ledger.WalletLedger. A node that has no
// receipt answers null, which is Found: false; any error is returned as such
// and never read as "not found".
func (l *Ledger) TransactionReceipt(ctx context.Context, hash ledger.TxHash) (ledger.Receipt, error) {
	ctx, cancel := l.callCtx(ctx)
	defer cancel()
	r, err := l.ec.TransactionReceipt(ctx, common.Hash(hash))
	if errors.Is(err, ethereum.NotFound) {
		return ledger.Receipt{}, nil
	}
	if err != nil {
		return ledger.Receipt{}, fmt.Errorf("evm: receipt of %s: %w", hash.Hex(), err)
	}
	return ReceiptOf(r), nil
}

// ReceiptOf is a node's receipt as the wallet lane reads it.
func ReceiptOf(r *types.Receipt) ledger.Receipt {
	out := ledger.Receipt{Found: true, Status: ledger.ReceiptReverted, GasUsed: r.GasUsed, EffectiveGasPrice: r.EffectiveGasPrice}
	if r.Status == types.ReceiptStatusSuccessful {
		out.Status = ledger.ReceiptSuccess
	}
	if r.BlockNumber != nil {
		out.BlockNumber = r.BlockNumber.Uint64()
	}
	out.BlockHash = ledger.Hash(r.BlockHash)
	out.Logs = LogsOf(r.Logs)
	return out
}

// LogsOf is a receipt's logs as the wallet lane reads them.
func LogsOf(logs []*types.Log) []ledger.Log {
	if len(logs) == 0 {
		return nil
	}
	out := make([]ledger.Log, len(logs))
	for i, lg := range logs {
		topics := make([]ledger.Hash, len(lg.Topics))
		for j, t := range lg.Topics {
			topics[j] = ledger.Hash(t)
		}
		out[i] = ledger.Log{Address: ledger.Address(lg.Address), Topics: topics, Data: lg.Data, Index: lg.Index}
	}
	return out
}

// HeadBlock implements ledger.WalletLedger.
func (l *Ledger) HeadBlock(ctx context.Context) (ledger.BlockRef, error) {
	ctx, cancel := l.callCtx(ctx)
	defer cancel()
	h, err := l.ec.HeaderByNumber(ctx, nil)
	if err != nil {
		return ledger.BlockRef{}, fmt.Errorf("evm: latest header: %w", err)
	}
	return ledger.BlockRef{Number: h.Number.Uint64(), Hash: ledger.Hash(h.Hash())}, nil
}

// BlockAt implements ledger.WalletLedger. A node that has no block at number
// (above its head) answers null, which is found false.
func (l *Ledger) BlockAt(ctx context.Context, number uint64) (ledger.BlockRef, bool, error) {
	ctx, cancel := l.callCtx(ctx)
	defer cancel()
	h, err := l.ec.HeaderByNumber(ctx, new(big.Int).SetUint64(number))
	if errors.Is(err, ethereum.NotFound) {
		return ledger.BlockRef{}, false, nil
	}
	if err != nil {
		return ledger.BlockRef{}, false, fmt.Errorf("evm: header %d: %w", number, err)
	}
	return ledger.BlockRef{Number: h.Number.Uint64(), Hash: ledger.Hash(h.Hash())}, true, nil
}

// TxsAtNonce implements ledger.WalletLedger from blocks alone: the block
// where addr's nonce passed nonce is found by the account's nonce at past
// blocks (eth_getTransactionCount at a number: an exponential search down
// from the head, then a binary one, so a recent block costs a few calls),
// and its body and receipts are read by its hash (eth_getBlockByHash,
// eth_getBlockReceipts), which no stale index by transaction hash can
// mislead. A block whose state the node has pruned makes it an error.
func (l *Ledger) TxsAtNonce(ctx context.Context, addr ledger.Address, nonce uint64) ([]ledger.NonceTx, bool, error) {
	ctx, cancel := l.callCtx(ctx)
	defer cancel()
	account := common.Address(addr)
	head, err := l.ec.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("evm: latest header: %w", err)
	}
	passed := func(n uint64) (bool, error) {
		got, err := l.ec.NonceAt(ctx, account, new(big.Int).SetUint64(n))
		if err != nil {
			return false, fmt.Errorf("evm: nonce of %s at block %d: %w", addr.Hex(), n, err)
		}
		return got > nonce, nil
	}
	top := head.Number.Uint64()
	if ok, err := passed(top); err != nil || !ok {
		return nil, false, err
	}
	// The lowest block whose state has the nonce passed: in (lo, hi].
	hi, lo, step := top, uint64(0), uint64(1)
	for hi > 0 {
		probe := hi - min(step, hi)
		ok, err := passed(probe)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			lo = probe
			break
		}
		hi, step = probe, step*2
		if probe == 0 {
			// Passed at genesis: no block holds it.
			return nil, false, fmt.Errorf("evm: the nonce of %s is above %d at genesis", addr.Hex(), nonce)
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := passed(mid)
		if err != nil {
			return nil, false, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	out, err := l.txsIn(ctx, account, hi)
	if err != nil {
		return nil, false, err
	}
	for _, tx := range out {
		if tx.Nonce == nonce {
			return out, true, nil
		}
	}
	// The chain moved between the reads (a reorg): ask again.
	return nil, false, fmt.Errorf("evm: block %d does not hold nonce %d of %s", hi, nonce, addr.Hex())
}

// TxsInBlock implements ledger.WalletLedger: the block's body and receipts
// are read by its hash, as for TxsAtNonce, with no state of past blocks.
func (l *Ledger) TxsInBlock(ctx context.Context, addr ledger.Address, number uint64) ([]ledger.NonceTx, bool, error) {
	ctx, cancel := l.callCtx(ctx)
	defer cancel()
	out, err := l.txsIn(ctx, common.Address(addr), number)
	if errors.Is(err, ethereum.NotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// txsIn returns account's transactions in the canonical block at number,
// each with its receipt: the header by number, then the body and receipts by
// the header's hash, which no stale index by transaction hash can mislead.
// Receipts are read only for a block that holds one of account's.
func (l *Ledger) txsIn(ctx context.Context, account common.Address, number uint64) ([]ledger.NonceTx, error) {
	header, err := l.ec.HeaderByNumber(ctx, new(big.Int).SetUint64(number))
	if err != nil {
		return nil, fmt.Errorf("evm: header %d: %w", number, err)
	}
	block, err := l.ec.BlockByHash(ctx, header.Hash())
	if err != nil {
		return nil, fmt.Errorf("evm: block %d: %w", number, err)
	}
	var mine []int
	for i, tx := range block.Transactions() {
		from, err := types.Sender(types.LatestSignerForChainID(tx.ChainId()), tx)
		if err == nil && from == account {
			mine = append(mine, i)
		}
	}
	if len(mine) == 0 {
		return nil, nil
	}
	receipts, err := l.blockReceipts(ctx, block)
	if err != nil {
		return nil, fmt.Errorf("evm: receipts of block %d: %w", number, err)
	}
	if len(receipts) != len(block.Transactions()) {
		return nil, fmt.Errorf("evm: block %d has %d transactions and %d receipts", number, len(block.Transactions()), len(receipts))
	}
	out := make([]ledger.NonceTx, 0, len(mine))
	for _, i := range mine {
		tx, r := block.Transactions()[i], receipts[i]
		rc := ledger.Receipt{Found: true, Status: ledger.ReceiptReverted, BlockNumber: number, BlockHash: ledger.Hash(block.Hash()),
			GasUsed: r.GasUsed, EffectiveGasPrice: r.EffectiveGasPrice, Logs: LogsOf(r.Logs)}
		if r.Status == types.ReceiptStatusSuccessful {
			rc.Status = ledger.ReceiptSuccess
		}
		raw, err := tx.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("evm: encoding transaction %s: %w", tx.Hash().Hex(), err)
		}
		out = append(out, ledger.NonceTx{Nonce: tx.Nonce(), Hash: ledger.TxHash(tx.Hash()), Receipt: rc, Raw: raw})
	}
	return out, nil
}

// blockReceipter is a client that reads a block's receipts by the block
// (eth_getBlockReceipts): *ethclient.Client.
type blockReceipter interface {
	BlockReceipts(ctx context.Context, blockNrOrHash rpc.BlockNumberOrHash) ([]*types.Receipt, error)
}

// blockReceipts returns the receipts of block's transactions in order: by
// the block's hash where the client can, else one by one by transaction
// hash (ethclient/simulated, whose index a crash cannot leave stale).
func (l *Ledger) blockReceipts(ctx context.Context, block *types.Block) ([]*types.Receipt, error) {
	if br, ok := l.ec.(blockReceipter); ok {
		return br.BlockReceipts(ctx, rpc.BlockNumberOrHashWithHash(block.Hash(), false))
	}
	out := make([]*types.Receipt, len(block.Transactions()))
	for i, tx := range block.Transactions() {
		r, err := l.ec.TransactionReceipt(ctx, tx.Hash())
		if err != nil {
			return nil, err
		}
		if r.BlockHash != block.Hash() {
			return nil, fmt.Errorf("the receipt of %s is in block %s, not %s", tx.Hash().Hex(), r.BlockHash.Hex(), block.Hash().Hex())
		}
		out[i] = r
	}
	return out, nil
}
