package evmsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// maxBodyBytes bounds a JSON-RPC request body.
const maxBodyBytes = 4 << 20

// NewServer serves l over Ethereum JSON-RPC (HTTP POST, single or batched
// requests), enough for go-ethereum's ethclient and so the evm adapter:
// eth_chainId, net_version, eth_blockNumber, eth_getBlockByNumber and
// eth_getBlockByHash (with or without full transactions),
// eth_getBlockReceipts, eth_getTransactionCount (latest, pending or at a
// block number), eth_getBalance, eth_gasPrice, eth_maxPriorityFeePerGas,
// eth_estimateGas, eth_sendRawTransaction and eth_getTransactionReceipt. Refusals carry geth's
// messages with geth's code (-32000). A simulated transient failure is an
// HTTP 503; a lost response cuts the connection after the ledger took the
// transaction. Latency applies to sends only.
func NewServer(l *Ledger, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &server{l: l, log: logger}
}

type server struct {
	l   *Ledger
	log *slog.Logger
}

type rpcRequest struct {
	ID     json.RawMessage   `json:"id"`
	Method string            `json:"method"`
	Params []json.RawMessage `json:"params"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// errFault is a simulated fault that must reach the transport.
type errFault struct{ f fault }

func (e errFault) Error() string { return fmt.Sprintf("simulated fault %d", e.f) }

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "JSON-RPC over POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	trimmed := strings.TrimSpace(string(body))
	batch := strings.HasPrefix(trimmed, "[")
	var reqs []rpcRequest
	if batch {
		err = json.Unmarshal(body, &reqs)
	} else {
		var one rpcRequest
		err = json.Unmarshal(body, &one)
		reqs = []rpcRequest{one}
	}
	if err != nil {
		writeJSON(w, rpcResponse{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &rpcError{Code: -32700, Message: "parse error"}})
		return
	}
	resps := make([]rpcResponse, 0, len(reqs))
	for _, req := range reqs {
		result, err := s.call(r.Context(), req)
		var fe errFault
		if errors.As(err, &fe) {
			switch fe.f {
			case faultTransient:
				http.Error(w, ErrTransient, http.StatusServiceUnavailable)
				return
			case faultLost:
				panic(http.ErrAbortHandler)
			}
		}
		resp := rpcResponse{JSONRPC: "2.0", ID: req.ID, Result: result}
		if err != nil {
			var re *rpcError
			if !errors.As(err, &re) {
				re = &rpcError{Code: -32000, Message: ledger.ReasonOf(err)}
			}
			resp.Error, resp.Result = re, nil
		} else if result == nil {
			resp.Result = json.RawMessage("null")
		}
		resps = append(resps, resp)
	}
	if batch {
		writeJSON(w, resps)
		return
	}
	writeJSON(w, resps[0])
}

func (e *rpcError) Error() string { return e.Message }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func param[T any](req rpcRequest, i int) (T, error) {
	var v T
	if i >= len(req.Params) {
		return v, &rpcError{Code: -32602, Message: fmt.Sprintf("missing value for required argument %d", i)}
	}
	if err := json.Unmarshal(req.Params[i], &v); err != nil {
		return v, &rpcError{Code: -32602, Message: fmt.Sprintf("invalid argument %d: %v", i, err)}
	}
	return v, nil
}

type callArgs struct {
	From  common.Address  `json:"from"`
	To    *common.Address `json:"to"`
	Value *hexutil.Big    `json:"value"`
	Data  hexutil.Bytes   `json:"data"`
	Input hexutil.Bytes   `json:"input"`
}

func (s *server) call(ctx context.Context, req rpcRequest) (any, error) {
	l := s.l
	switch req.Method {
	case "eth_chainId":
		return (*hexutil.Big)(l.chainID), nil
	case "net_version":
		return l.chainID.String(), nil
	case "eth_blockNumber":
		return hexutil.Uint64(l.Head().Number), nil
	case "eth_gasPrice":
		return (*hexutil.Big)(big.NewInt(l.cfg.BaseFee + l.cfg.Tip)), nil
	case "eth_maxPriorityFeePerGas":
		return (*hexutil.Big)(big.NewInt(l.cfg.Tip)), nil
	case "eth_getTransactionCount":
		addr, err := param[common.Address](req, 0)
		if err != nil {
			return nil, err
		}
		tag, _ := param[string](req, 1)
		var n uint64
		switch tag {
		case "pending":
			n, err = l.PendingNonceAt(ctx, ledger.Address(addr))
		case "", "latest", "safe", "finalized":
			n, err = l.NonceAt(ctx, ledger.Address(addr))
		default:
			num, derr := hexutil.DecodeUint64(tag)
			if derr != nil {
				return nil, &rpcError{Code: -32602, Message: "invalid block number"}
			}
			n = l.NonceAtBlock(addr, num)
		}
		return hexutil.Uint64(n), err
	case "eth_getBalance":
		addr, err := param[common.Address](req, 0)
		if err != nil {
			return nil, err
		}
		b, err := l.BalanceAt(ctx, ledger.Address(addr))
		return (*hexutil.Big)(b), err
	case "eth_estimateGas":
		args, err := param[callArgs](req, 0)
		if err != nil {
			return nil, err
		}
		data := args.Input
		if len(data) == 0 {
			data = args.Data
		}
		msg := ledger.CallMsg{From: ledger.Address(args.From), Data: data}
		if args.To != nil {
			a := ledger.Address(*args.To)
			msg.To = &a
		}
		g, err := l.EstimateGas(ctx, msg)
		return hexutil.Uint64(g), err
	case "eth_getBlockByNumber", "eth_getBlockByHash", "eth_getBlockReceipts":
		var b Block
		var ok bool
		if req.Method == "eth_getBlockByHash" {
			h, err := param[common.Hash](req, 0)
			if err != nil {
				return nil, err
			}
			b, ok = l.BlockByHash(h)
		} else {
			tag, err := param[string](req, 0)
			if err != nil {
				// eth_getBlockReceipts also takes {"blockHash": …}.
				ref, rerr := param[struct {
					BlockHash common.Hash `json:"blockHash"`
				}](req, 0)
				if rerr != nil {
					return nil, err
				}
				tag = ref.BlockHash.Hex()
			}
			b, ok, err = l.blockByTag(tag)
			if err != nil {
				return nil, err
			}
		}
		if !ok {
			return nil, nil
		}
		txs, receipts := l.blockContents(b)
		if req.Method == "eth_getBlockReceipts" {
			return receipts, nil
		}
		full, _ := param[bool](req, 1)
		return l.blockJSON(b, txs, full), nil
	case "eth_sendRawTransaction":
		raw, err := param[hexutil.Bytes](req, 0)
		if err != nil {
			return nil, err
		}
		hash, f, err := l.send(ctx, raw)
		if f != noFault {
			return nil, errFault{f}
		}
		if err != nil {
			return nil, err
		}
		return hash, nil
	case "eth_getTransactionReceipt":
		h, err := param[common.Hash](req, 0)
		if err != nil {
			return nil, err
		}
		r, b, ok := l.receiptOf(h)
		if !ok {
			return nil, nil
		}
		return receiptJSON(r, b), nil
	}
	return nil, &rpcError{Code: -32601, Message: fmt.Sprintf("the method %s does not exist/is not available", req.Method)}
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
