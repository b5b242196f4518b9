package evmsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// NewServer serves l over Ethereum JSON-RPC with go-ethereum's rpc.Server
// (HTTP POST, single or batched requests, geth's framing, argument decoding
// and body limit), enough for go-ethereum's ethclient and so the evm
// adapter: eth_chainId, net_version, eth_blockNumber, eth_getBlockByNumber
// and eth_getBlockByHash (with or without full transactions),
// eth_getBlockReceipts, eth_getTransactionCount (latest, pending or at a
// block number), eth_getBalance, eth_gasPrice, eth_maxPriorityFeePerGas,
// eth_estimateGas, eth_sendRawTransaction and eth_getTransactionReceipt
// (and geth's rpc_modules). Refusals carry geth's messages with geth's code
// (-32000). The simulated faults a send draws are answered by HTTP
// middleware around the server (withFaults): a transient failure is an
// HTTP 503, a lost response cuts the connection after the ledger took the
// transaction. Latency applies to sends only.
func NewServer(l *Ledger, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv := rpc.NewServer()
	for name, api := range map[string]any{"eth": &ethAPI{l: l}, "net": &netAPI{l: l}} {
		if err := srv.RegisterName(name, api); err != nil {
			// Only a service without a method to serve is refused: a
			// programming error every test meets.
			panic(fmt.Sprintf("evmsim: registering JSON-RPC namespace %s: %v", name, err))
		}
	}
	return withFaults(srv, logger)
}

// rpcError is an error answered with its own code: go-ethereum's rpc.Server
// reads it through ErrorCode.
type rpcError struct {
	Code    int
	Message string
	// Data is the error's data member (a revert's data, hex); "" has none.
	Data string
}

// ErrorData is the JSON-RPC error's data (go-ethereum's rpc.DataError);
// nil leaves it out.
func (e *rpcError) ErrorData() any {
	if e.Data == "" {
		return nil
	}
	return e.Data
}

func (e *rpcError) Error() string { return e.Message }

// ErrorCode is the JSON-RPC code (go-ethereum's rpc.Error).
func (e *rpcError) ErrorCode() int { return e.Code }

// rpcFail is the JSON-RPC error of the ledger's err: its own code when it
// has one, else geth's -32000 with the ledger's reason (geth's message).
func rpcFail(err error) error {
	var re *rpcError
	if err == nil {
		return nil
	}
	if errors.As(err, &re) {
		// The server reads the code and data of the error itself, not of
		// what it wraps.
		return re
	}
	return &rpcError{Code: -32000, Message: ledger.ReasonOf(err)}
}

// netAPI is the net namespace.
type netAPI struct{ l *Ledger }

// Version is net_version: the chain id in decimal.
func (a *netAPI) Version() string { return a.l.chainID.String() }

// ethAPI is the eth namespace. Every exported method is a JSON-RPC method
// (go-ethereum's rpc.Server registers them by name: GetBalance is
// eth_getBalance); an optional argument is a pointer, nil when absent or
// null.
type ethAPI struct{ l *Ledger }

// ChainId is eth_chainId.
func (a *ethAPI) ChainId() *hexutil.Big { return (*hexutil.Big)(a.l.chainID) }

// BlockNumber is eth_blockNumber: the head's number.
func (a *ethAPI) BlockNumber() hexutil.Uint64 { return hexutil.Uint64(a.l.Head().Number) }

// GasPrice is eth_gasPrice: the base fee plus the tip.
func (a *ethAPI) GasPrice() *hexutil.Big {
	return (*hexutil.Big)(big.NewInt(a.l.cfg.BaseFee + a.l.cfg.Tip))
}

// MaxPriorityFeePerGas is eth_maxPriorityFeePerGas: the configured tip.
func (a *ethAPI) MaxPriorityFeePerGas() *hexutil.Big { return (*hexutil.Big)(big.NewInt(a.l.cfg.Tip)) }

// GetTransactionCount is eth_getTransactionCount: the pending nonce for
// "pending", the head's for latest, safe and finalized (and when absent),
// the nonce by a block for its number.
func (a *ethAPI) GetTransactionCount(ctx context.Context, addr common.Address, tag *string) (hexutil.Uint64, error) {
	var n uint64
	var err error
	switch t := derefOr(tag, ""); t {
	case "pending":
		n, err = a.l.PendingNonceAt(ctx, ledger.Address(addr))
	case "", "latest", "safe", "finalized":
		n, err = a.l.NonceAt(ctx, ledger.Address(addr))
	default:
		num, derr := hexutil.DecodeUint64(t)
		if derr != nil {
			return 0, &rpcError{Code: -32602, Message: "invalid block number"}
		}
		n = a.l.NonceAtBlock(addr, num)
	}
	return hexutil.Uint64(n), rpcFail(err)
}

// GetBalance is eth_getBalance: the head's balance, whatever the block.
func (a *ethAPI) GetBalance(ctx context.Context, addr common.Address, _ *rpc.BlockNumberOrHash) (*hexutil.Big, error) {
	b, err := a.l.BalanceAt(ctx, ledger.Address(addr))
	if err != nil {
		return nil, rpcFail(err)
	}
	return (*hexutil.Big)(b), nil
}

// callArgs are eth_estimateGas' transaction: the fields the ledger reads.
type callArgs struct {
	From  common.Address  `json:"from"`
	To    *common.Address `json:"to"`
	Value *hexutil.Big    `json:"value"`
	Data  hexutil.Bytes   `json:"data"`
	Input hexutil.Bytes   `json:"input"`
}

// EstimateGas is eth_estimateGas on the head, whatever the block.
func (a *ethAPI) EstimateGas(ctx context.Context, args callArgs, _ *rpc.BlockNumberOrHash) (hexutil.Uint64, error) {
	data := args.Input
	if len(data) == 0 {
		data = args.Data
	}
	msg := ledger.CallMsg{From: ledger.Address(args.From), Data: data}
	if args.To != nil {
		to := ledger.Address(*args.To)
		msg.To = &to
	}
	g, err := a.l.EstimateGas(ctx, msg)
	return hexutil.Uint64(g), rpcFail(err)
}

// Call is eth_call on the head, whatever the block (Ledger.Call).
func (a *ethAPI) Call(ctx context.Context, args callArgs, _ *rpc.BlockNumberOrHash) (hexutil.Bytes, error) {
	data := args.Input
	if len(data) == 0 {
		data = args.Data
	}
	msg := ledger.CallMsg{From: ledger.Address(args.From), Data: data}
	if args.To != nil {
		to := ledger.Address(*args.To)
		msg.To = &to
	}
	out, err := a.l.Call(ctx, msg, nil)
	return out, rpcFail(err)
}

// blockTag names a block: a tag ("latest", "earliest", …), a number or a
// hash in hex, or, as eth_getBlockReceipts also takes, {"blockHash": …}.
type blockTag string

func (t *blockTag) UnmarshalJSON(b []byte) error {
	var s string
	err := json.Unmarshal(b, &s)
	if err != nil {
		var ref struct {
			BlockHash common.Hash `json:"blockHash"`
		}
		if json.Unmarshal(b, &ref) != nil {
			return err
		}
		s = ref.BlockHash.Hex()
	}
	*t = blockTag(s)
	return nil
}

// GetBlockByNumber is eth_getBlockByNumber: null for a block the chain has
// not mined.
func (a *ethAPI) GetBlockByNumber(tag blockTag, full *bool) (map[string]any, error) {
	b, ok, err := a.l.blockByTag(string(tag))
	if err != nil || !ok {
		return nil, err
	}
	txs, _ := a.l.blockContents(b)
	return a.l.blockJSON(b, txs, derefOr(full, false)), nil
}

// GetBlockByHash is eth_getBlockByHash: null for a block not canonical.
func (a *ethAPI) GetBlockByHash(h common.Hash, full *bool) map[string]any {
	b, ok := a.l.BlockByHash(h)
	if !ok {
		return nil
	}
	txs, _ := a.l.blockContents(b)
	return a.l.blockJSON(b, txs, derefOr(full, false))
}

// GetBlockReceipts is eth_getBlockReceipts: null for a block the chain has
// not mined.
func (a *ethAPI) GetBlockReceipts(tag blockTag) ([]*types.Receipt, error) {
	b, ok, err := a.l.blockByTag(string(tag))
	if err != nil || !ok {
		return nil, err
	}
	_, receipts := a.l.blockContents(b)
	return receipts, nil
}

// SendRawTransaction is eth_sendRawTransaction. A simulated fault the send
// draws is handed to withFaults, which answers the whole HTTP request with
// it; a later send of the same request (a batch) is then not made, as the
// fault ends the request.
func (a *ethAPI) SendRawTransaction(ctx context.Context, raw hexutil.Bytes) (common.Hash, error) {
	faults := faultsOf(ctx)
	if err := faults.ended(); err != nil {
		return common.Hash{}, err
	}
	hash, f, err := a.l.send(ctx, raw)
	if f != noFault {
		faults.record(f)
		return common.Hash{}, err
	}
	if err != nil {
		return common.Hash{}, rpcFail(err)
	}
	return hash, nil
}

// GetTransactionReceipt is eth_getTransactionReceipt: null for a
// transaction not mined. The answer is an interface: go-ethereum's server
// calls a result's MarshalJSON itself, which a nil *types.Receipt cannot
// answer.
func (a *ethAPI) GetTransactionReceipt(h common.Hash) any {
	r, b, ok := a.l.receiptOf(h)
	if !ok {
		return nil
	}
	return receiptJSON(r, b)
}

// derefOr is *p, or def when p is nil.
func derefOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// receiptJSON is a receipt as geth answers it.
func receiptJSON(r receipt, b Block) *types.Receipt {
	return &types.Receipt{
		Type: r.tx.Type(), Status: r.status, CumulativeGasUsed: r.gasUsed, Logs: []*types.Log{},
		TxHash: r.tx.Hash(), ContractAddress: r.contract, GasUsed: r.gasUsed, EffectiveGasPrice: r.price,
		BlockHash: b.Hash, BlockNumber: new(big.Int).SetUint64(b.Number), TransactionIndex: r.index,
	}
}

// rpcTx is a transaction in a block as geth answers it: the transaction's
// own fields and where it is.
type rpcTx struct {
	*types.Transaction
	From  common.Address
	Block Block
	Index uint
}

func (t rpcTx) MarshalJSON() ([]byte, error) {
	raw, err := t.Transaction.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	m["from"] = t.From
	m["blockHash"] = t.Block.Hash
	m["blockNumber"] = hexutil.Uint64(t.Block.Number)
	m["transactionIndex"] = hexutil.Uint64(t.Index)
	return json.Marshal(m)
}

// blockJSON is a block as geth answers it: its header's fields, its hash
// and its transactions, in full or as hashes.
func (l *Ledger) blockJSON(b Block, txs []rpcTx, full bool) map[string]any {
	raw, _ := json.Marshal(l.header(b))
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	m["hash"] = b.Hash
	m["uncles"] = []common.Hash{}
	list := make([]any, len(txs))
	for i, tx := range txs {
		if full {
			list[i] = tx
		} else {
			list[i] = tx.Hash()
		}
	}
	m["transactions"] = list
	return m
}

func (l *Ledger) header(b Block) *types.Header {
	return &types.Header{
		ParentHash: b.Parent, UncleHash: types.EmptyUncleHash, Root: types.EmptyRootHash,
		TxHash: b.txRoot, ReceiptHash: types.EmptyReceiptsHash, Difficulty: new(big.Int),
		Number: new(big.Int).SetUint64(b.Number), GasLimit: l.cfg.GasLimit, GasUsed: b.GasUsed,
		Time: uint64(b.Time.Unix()), Extra: fmt.Appendf(nil, "evmsim era %d", b.era), BaseFee: b.BaseFee,
	}
}
