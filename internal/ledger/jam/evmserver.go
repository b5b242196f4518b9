package jam

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/state"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/core/vm"
	"github.com/ethereum/go-ethereum/eth/gasestimator"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/holiman/uint256"

	"github.com/ledgerq/ledgerq/internal/ledger/ethjson"
)

// Limits of eth_call, eth_estimateGas and eth_getLogs, geth's defaults.
const (
	// RPCGasCap bounds the gas of eth_call and eth_estimateGas.
	RPCGasCap = 50_000_000
	// RPCEVMTimeout bounds an eth_call's run.
	RPCEVMTimeout = 5 * time.Second
	// MaxLogsBlockRange bounds the blocks one eth_getLogs reads.
	MaxLogsBlockRange = 10_000
	// estimateErrorRatio is how far above the least gas an estimate may
	// stop (geth's eth_estimateGas).
	estimateErrorRatio = 0.015
)

// ClientVersion is web3_clientVersion's answer.
const ClientVersion = "ledgerq-jam-sim/go-ethereum-core"

// EVMHandler serves the chain's EVM JSON-RPC (the package doc lists the
// methods): what NewHandler serves at POST /evm, for a caller in this
// process. Every request first produces the blocks whose slot has begun,
// then reads the EVM without holding the chain.
func (c *Chain) EVMHandler() http.Handler { return c.rpc }

// evmAPI is the eth namespace. Every exported method is a JSON-RPC method
// (go-ethereum's rpc.Server registers them by name: GetBalance is
// eth_getBalance); an optional argument is a pointer, nil when absent or
// null.
type evmAPI struct {
	e       *evmChain
	chainID *big.Int
}

// netAPI is the net namespace.
type netAPI struct{ chainID *big.Int }

// Version is net_version: the chain id in decimal.
func (a netAPI) Version() string { return a.chainID.String() }

// web3API is the web3 namespace.
type web3API struct{}

// ClientVersion is web3_clientVersion.
func (web3API) ClientVersion() string { return ClientVersion }

// ChainId is eth_chainId.
func (a *evmAPI) ChainId() *hexutil.Big { return (*hexutil.Big)(a.chainID) }

// Syncing is eth_syncing: never, the chain is the node.
func (a *evmAPI) Syncing() bool { return false }

// BlockNumber is eth_blockNumber: the last executed block.
func (a *evmAPI) BlockNumber() hexutil.Uint64 { return hexutil.Uint64(a.e.head().Number.Uint64()) }

// GetBlockByNumber is eth_getBlockByNumber: null above the last executed
// block.
func (a *evmAPI) GetBlockByNumber(n rpc.BlockNumber, full *bool) map[string]any {
	h := a.e.headerByNumber(n)
	if h == nil {
		return nil
	}
	return a.marshalBlock(a.e.bc.GetBlock(h.Hash(), h.Number.Uint64()), full != nil && *full)
}

// GetBlockByHash is eth_getBlockByHash.
func (a *evmAPI) GetBlockByHash(hash common.Hash, full *bool) map[string]any {
	return a.marshalBlock(a.e.bc.GetBlockByHash(hash), full != nil && *full)
}

// GetTransactionByHash is eth_getTransactionByHash: null for a transaction
// the chain has not executed.
func (a *evmAPI) GetTransactionByHash(hash common.Hash) *ethjson.Transaction {
	b, i, ok := a.e.tx(hash)
	if !ok {
		return nil
	}
	return a.marshalTx(b, i)
}

// GetTransactionReceipt is eth_getTransactionReceipt: null for a
// transaction the chain has not executed.
func (a *evmAPI) GetTransactionReceipt(hash common.Hash) (map[string]any, error) {
	b, i, ok := a.e.tx(hash)
	if !ok {
		return nil, nil
	}
	receipts := a.e.bc.GetReceiptsByHash(b.Hash())
	if i >= len(receipts) {
		return nil, fmt.Errorf("receipts of block %d not found", b.NumberU64())
	}
	return a.marshalReceipt(receipts[i], b, i), nil
}

// stateAt is the state at block, the latest when nil.
func (a *evmAPI) stateAt(block *rpc.BlockNumberOrHash) (*state.StateDB, *types.Header, error) {
	bnh := rpc.BlockNumberOrHashWithNumber(rpc.LatestBlockNumber)
	if block != nil {
		bnh = *block
	}
	return a.e.stateOf(bnh)
}

// GetTransactionCount is eth_getTransactionCount.
func (a *evmAPI) GetTransactionCount(addr common.Address, block *rpc.BlockNumberOrHash) (hexutil.Uint64, error) {
	st, _, err := a.stateAt(block)
	if err != nil {
		return 0, err
	}
	return hexutil.Uint64(st.GetNonce(addr)), nil
}

// GetBalance is eth_getBalance.
func (a *evmAPI) GetBalance(addr common.Address, block *rpc.BlockNumberOrHash) (*hexutil.Big, error) {
	st, _, err := a.stateAt(block)
	if err != nil {
		return nil, err
	}
	return (*hexutil.Big)(st.GetBalance(addr).ToBig()), nil
}

// GetCode is eth_getCode.
func (a *evmAPI) GetCode(addr common.Address, block *rpc.BlockNumberOrHash) (hexutil.Bytes, error) {
	st, _, err := a.stateAt(block)
	if err != nil {
		return nil, err
	}
	return st.GetCode(addr), nil
}

// GetStorageAt is eth_getStorageAt.
func (a *evmAPI) GetStorageAt(addr common.Address, key string, block *rpc.BlockNumberOrHash) (hexutil.Bytes, error) {
	slot, err := storageKey(key)
	if err != nil {
		return nil, invalidParams("invalid argument 1: %v", err)
	}
	st, _, err := a.stateAt(block)
	if err != nil {
		return nil, err
	}
	v := st.GetState(addr, slot)
	return v[:], nil
}

// storageKey reads a storage slot as geth does: hex, 0x optional, up to 32
// bytes, left-padded (so "0x0" and a 32-byte hash both name slot 0).
func storageKey(s string) (common.Hash, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if len(s)%2 == 1 {
		s = "0" + s
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) > common.HashLength {
		return common.Hash{}, fmt.Errorf("storage slot %q: want hex of at most 32 bytes", s)
	}
	return common.BytesToHash(b), nil
}

// callArgs are eth_call's and eth_estimateGas' transaction (geth's
// TransactionArgs, without blobs).
type callArgs struct {
	From                 *common.Address              `json:"from"`
	To                   *common.Address              `json:"to"`
	Gas                  *hexutil.Uint64              `json:"gas"`
	GasPrice             *hexutil.Big                 `json:"gasPrice"`
	MaxFeePerGas         *hexutil.Big                 `json:"maxFeePerGas"`
	MaxPriorityFeePerGas *hexutil.Big                 `json:"maxPriorityFeePerGas"`
	Value                *hexutil.Big                 `json:"value"`
	Nonce                *hexutil.Uint64              `json:"nonce"`
	Data                 *hexutil.Bytes               `json:"data"`
	Input                *hexutil.Bytes               `json:"input"`
	AccessList           *types.AccessList            `json:"accessList"`
	ChainID              *hexutil.Big                 `json:"chainId"`
	AuthorizationList    []types.SetCodeAuthorization `json:"authorizationList"`
}

// message is the call as geth runs it: gas defaults to gas and is capped at
// RPCGasCap; with no fee field the call pays nothing; nonce, EOA and gas
// cap are not checked.
func (c *callArgs) message(baseFee, chainID *big.Int, gas uint64) (*core.Message, error) {
	if c.GasPrice != nil && (c.MaxFeePerGas != nil || c.MaxPriorityFeePerGas != nil) {
		return nil, errors.New("both gasPrice and (maxFeePerGas or maxPriorityFeePerGas) specified")
	}
	if c.ChainID != nil && c.ChainID.ToInt().Cmp(chainID) != 0 {
		return nil, fmt.Errorf("chainId does not match node's (have=%v, want=%v)", c.ChainID.ToInt(), chainID)
	}
	if c.Data != nil && c.Input != nil && !bytes.Equal(*c.Data, *c.Input) {
		return nil, errors.New(`both "data" and "input" are set and not equal. Please use "input" to pass transaction call data`)
	}
	if c.To == nil && c.AuthorizationList != nil {
		return nil, core.ErrSetCodeTxCreate
	}
	if c.Gas != nil {
		gas = uint64(*c.Gas)
	}
	gas = min(gas, RPCGasCap)
	u256 := func(b *hexutil.Big) *uint256.Int {
		if b == nil {
			return new(uint256.Int)
		}
		return uint256.MustFromBig(b.ToInt())
	}
	var price, feeCap, tip *uint256.Int
	if c.GasPrice != nil {
		price = u256(c.GasPrice)
		feeCap, tip = price, price
	} else {
		feeCap, tip = u256(c.MaxFeePerGas), u256(c.MaxPriorityFeePerGas)
		price = new(uint256.Int)
		if feeCap.Sign() > 0 || tip.Sign() > 0 {
			price.Add(tip, uint256.MustFromBig(baseFee))
			if price.Cmp(feeCap) > 0 {
				price.Set(feeCap)
			}
		}
	}
	msg := &core.Message{
		To: c.To, Value: u256(c.Value), GasLimit: gas, GasPrice: price, GasFeeCap: feeCap, GasTipCap: tip,
		SetCodeAuthorizations: c.AuthorizationList,
	}
	if c.From != nil {
		msg.From = *c.From
	}
	if c.Nonce != nil {
		msg.Nonce = uint64(*c.Nonce)
	}
	switch {
	case c.Input != nil:
		msg.Data = *c.Input
	case c.Data != nil:
		msg.Data = *c.Data
	}
	if c.AccessList != nil {
		msg.AccessList = *c.AccessList
	}
	return msg.SkipNonceCheck().SkipEOACheck().SkipGasLimitCapCheck(), nil
}

// callMessage reads eth_call's and eth_estimateGas' arguments: the call,
// as a message whose gas defaults to gas, and the state and header of the
// block it runs on (latest when nil).
func (a *evmAPI) callMessage(call callArgs, block *rpc.BlockNumberOrHash, gas uint64) (*core.Message, *state.StateDB, *types.Header, error) {
	st, header, err := a.stateAt(block)
	if err != nil {
		return nil, nil, nil, err
	}
	msg, err := call.message(header.BaseFee, a.chainID, gas)
	return msg, st, header, err
}

// Call is eth_call: the call run on the state at block (latest when
// absent); a revert is code 3 with the revert data.
func (a *evmAPI) Call(ctx context.Context, args callArgs, block *rpc.BlockNumberOrHash) (hexutil.Bytes, error) {
	msg, st, header, err := a.callMessage(args, block, RPCGasCap)
	if err != nil {
		return nil, err
	}
	blockCtx := core.NewEVMBlockContext(header, a.e.bc, nil)
	if msg.GasPrice.Sign() == 0 {
		// A call that pays nothing runs under a zero base fee, as in geth.
		blockCtx.BaseFee = new(big.Int)
	}
	evm := vm.NewEVM(blockCtx, st, a.e.config, vm.Config{NoBaseFee: true})
	ctx, cancel := context.WithTimeout(ctx, RPCEVMTimeout)
	defer cancel()
	go func() {
		<-ctx.Done()
		evm.Cancel()
	}()
	res, err := core.ApplyMessage(evm, msg, core.NewGasPool(RPCGasCap))
	switch {
	case evm.Cancelled():
		return nil, fmt.Errorf("execution aborted (timeout = %v)", RPCEVMTimeout)
	case err != nil:
		return nil, fmt.Errorf("err: %w (supplied gas %d)", err, msg.GasLimit)
	case errors.Is(res.Err, vm.ErrExecutionReverted):
		return nil, revertError(res.Revert())
	case res.Err != nil:
		return nil, res.Err
	}
	return hexutil.Bytes(res.Return()), nil
}

// EstimateGas is eth_estimateGas, with geth's estimator.
func (a *evmAPI) EstimateGas(ctx context.Context, args callArgs, block *rpc.BlockNumberOrHash) (hexutil.Uint64, error) {
	// No gas given: the estimator searches up to the block gas limit.
	msg, st, header, err := a.callMessage(args, block, 0)
	if err != nil {
		return 0, err
	}
	gas, revert, err := gasestimator.Estimate(ctx, msg, &gasestimator.Options{
		Config: a.e.config, Chain: a.e.bc, Header: header, State: st, ErrorRatio: estimateErrorRatio,
	}, RPCGasCap)
	if err != nil {
		if errors.Is(err, vm.ErrExecutionReverted) {
			return 0, revertError(revert)
		}
		return 0, err
	}
	return hexutil.Uint64(gas), nil
}

// revertError is geth's answer to a reverted call: code 3, the reason
// decoded when it is an Error(string) or Panic(uint256), the revert data as
// the error's data.
func revertError(data []byte) error {
	msg := vm.ErrExecutionReverted.Error()
	if reason, err := abi.UnpackRevert(data); err == nil {
		msg += ": " + reason
	}
	return &rpcError{code: codeReverted, message: msg, data: hexutil.Encode(data)}
}

// GasPrice is eth_gasPrice: the oracle's tip plus the head's base fee.
func (a *evmAPI) GasPrice(ctx context.Context) (*hexutil.Big, error) {
	tip, err := a.e.oracle.SuggestTipCap(ctx)
	if err != nil {
		return nil, err
	}
	if fee := a.e.head().BaseFee; fee != nil {
		tip.Add(tip, fee)
	}
	return (*hexutil.Big)(tip), nil
}

// MaxPriorityFeePerGas is eth_maxPriorityFeePerGas: geth's oracle over the
// executed blocks.
func (a *evmAPI) MaxPriorityFeePerGas(ctx context.Context) (*hexutil.Big, error) {
	tip, err := a.e.oracle.SuggestTipCap(ctx)
	if err != nil {
		return nil, err
	}
	return (*hexutil.Big)(tip), nil
}

type feeHistoryJSON struct {
	OldestBlock      *hexutil.Big     `json:"oldestBlock"`
	Reward           [][]*hexutil.Big `json:"reward,omitempty"`
	BaseFee          []*hexutil.Big   `json:"baseFeePerGas,omitempty"`
	GasUsedRatio     []float64        `json:"gasUsedRatio"`
	BlobBaseFee      []*hexutil.Big   `json:"baseFeePerBlobGas,omitempty"`
	BlobGasUsedRatio []float64        `json:"blobGasUsedRatio,omitempty"`
}

// FeeHistory is eth_feeHistory, geth's oracle's answer; the reward
// percentiles are optional.
func (a *evmAPI) FeeHistory(ctx context.Context, count math.HexOrDecimal64, newest rpc.BlockNumber, percentiles *[]float64) (*feeHistoryJSON, error) {
	var ps []float64
	if percentiles != nil {
		ps = *percentiles
	}
	oldest, reward, baseFee, used, blobFee, blobUsed, err := a.e.oracle.FeeHistory(ctx, uint64(count), newest, ps)
	if err != nil {
		return nil, err
	}
	out := &feeHistoryJSON{OldestBlock: (*hexutil.Big)(oldest), GasUsedRatio: used, BlobGasUsedRatio: blobUsed,
		BaseFee: hexBigs(baseFee), BlobBaseFee: hexBigs(blobFee)}
	if reward != nil {
		out.Reward = make([][]*hexutil.Big, len(reward))
		for i, r := range reward {
			out.Reward[i] = hexBigs(r)
		}
	}
	return out, nil
}

func hexBigs(bs []*big.Int) []*hexutil.Big {
	if bs == nil {
		return nil
	}
	out := make([]*hexutil.Big, len(bs))
	for i, b := range bs {
		out[i] = (*hexutil.Big)(b)
	}
	return out
}

// logFilter is eth_getLogs' argument.
type logFilter struct {
	BlockHash *common.Hash     `json:"blockHash"`
	FromBlock *rpc.BlockNumber `json:"fromBlock"`
	ToBlock   *rpc.BlockNumber `json:"toBlock"`
	Address   oneOrMany        `json:"address"`
	Topics    []oneOrMany      `json:"topics"`
}

// oneOrMany is a filter field: null (any), one hex value, or a list of them.
type oneOrMany []string

func (o *oneOrMany) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*o = oneOrMany{one}
		return nil
	}
	var many []*string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("want null, a hex string or a list of them")
	}
	*o = nil
	for _, s := range many {
		if s != nil {
			*o = append(*o, *s)
		}
	}
	return nil
}

// GetLogs is eth_getLogs over the executed blocks, at most
// MaxLogsBlockRange of them.
func (a *evmAPI) GetLogs(f logFilter) ([]*types.Log, error) {
	addrs := make([]common.Address, 0, len(f.Address))
	for _, s := range f.Address {
		if !common.IsHexAddress(s) {
			return nil, invalidParams("invalid argument 0: address %q", s)
		}
		addrs = append(addrs, common.HexToAddress(s))
	}
	if len(f.Topics) > 4 {
		return nil, invalidParams("invalid argument 0: exceed max topics")
	}
	topics := make([][]common.Hash, len(f.Topics))
	for i, set := range f.Topics {
		for _, s := range set {
			b, err := hexutil.Decode(s)
			if err != nil || len(b) != common.HashLength {
				return nil, invalidParams("invalid argument 0: topic %q", s)
			}
			topics[i] = append(topics[i], common.BytesToHash(b))
		}
	}
	var from, to uint64
	head := a.e.head().Number.Uint64()
	if f.BlockHash != nil {
		if f.FromBlock != nil || f.ToBlock != nil {
			return nil, invalidParams("invalid argument 0: cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other")
		}
		h := a.e.bc.GetHeaderByHash(*f.BlockHash)
		if h == nil {
			return nil, errors.New("unknown block")
		}
		from, to = h.Number.Uint64(), h.Number.Uint64()
	} else {
		resolve := func(n *rpc.BlockNumber) uint64 {
			switch {
			case n == nil:
				return head
			case *n == rpc.EarliestBlockNumber:
				return 0
			case *n < 0:
				return head
			default:
				return uint64(*n)
			}
		}
		from, to = resolve(f.FromBlock), resolve(f.ToBlock)
		if from > to && f.ToBlock != nil && *f.ToBlock >= 0 {
			return nil, invalidParams("invalid block range params")
		}
		// Blocks not executed yet have no logs: a range past the head
		// (from block 9 to "latest" 5, say) has none.
		to = min(to, head)
		if to >= from && to-from >= MaxLogsBlockRange {
			return nil, fmt.Errorf("block range too large: at most %d blocks", MaxLogsBlockRange)
		}
	}
	out := []*types.Log{}
	for n := from; n <= to; n++ {
		h := a.e.bc.GetHeaderByNumber(n)
		if h == nil || !bloomMatches(h.Bloom, addrs, topics) {
			continue
		}
		for _, r := range a.e.bc.GetReceiptsByHash(h.Hash()) {
			for _, l := range r.Logs {
				if logMatches(l, addrs, topics) {
					out = append(out, l)
				}
			}
		}
	}
	return out, nil
}

func bloomMatches(bloom types.Bloom, addrs []common.Address, topics [][]common.Hash) bool {
	if len(addrs) > 0 && !slices.ContainsFunc(addrs, func(a common.Address) bool { return bloom.Test(a[:]) }) {
		return false
	}
	for _, set := range topics {
		if len(set) > 0 && !slices.ContainsFunc(set, func(h common.Hash) bool { return bloom.Test(h[:]) }) {
			return false
		}
	}
	return true
}

func logMatches(l *types.Log, addrs []common.Address, topics [][]common.Hash) bool {
	if len(addrs) > 0 && !slices.Contains(addrs, l.Address) {
		return false
	}
	if len(topics) > len(l.Topics) {
		return false
	}
	for i, set := range topics {
		if len(set) > 0 && !slices.Contains(set, l.Topics[i]) {
			return false
		}
	}
	return true
}

// marshalBlock is geth's block JSON: the header's fields, size, uncles,
// withdrawals, and the transactions' hashes or (full) the transactions.
func (a *evmAPI) marshalBlock(b *types.Block, full bool) map[string]any {
	if b == nil {
		return nil
	}
	h := b.Header()
	m := map[string]any{
		"number":           (*hexutil.Big)(h.Number),
		"hash":             b.Hash(),
		"parentHash":       h.ParentHash,
		"nonce":            h.Nonce,
		"mixHash":          h.MixDigest,
		"sha3Uncles":       h.UncleHash,
		"logsBloom":        h.Bloom,
		"stateRoot":        h.Root,
		"miner":            h.Coinbase,
		"difficulty":       (*hexutil.Big)(h.Difficulty),
		"extraData":        hexutil.Bytes(h.Extra),
		"gasLimit":         hexutil.Uint64(h.GasLimit),
		"gasUsed":          hexutil.Uint64(h.GasUsed),
		"timestamp":        hexutil.Uint64(h.Time),
		"transactionsRoot": h.TxHash,
		"receiptsRoot":     h.ReceiptHash,
		"size":             hexutil.Uint64(b.Size()),
		"uncles":           []common.Hash{},
	}
	if h.BaseFee != nil {
		m["baseFeePerGas"] = (*hexutil.Big)(h.BaseFee)
	}
	if h.WithdrawalsHash != nil {
		m["withdrawalsRoot"] = h.WithdrawalsHash
		m["withdrawals"] = b.Withdrawals()
	}
	if h.BlobGasUsed != nil {
		m["blobGasUsed"] = hexutil.Uint64(*h.BlobGasUsed)
	}
	if h.ExcessBlobGas != nil {
		m["excessBlobGas"] = hexutil.Uint64(*h.ExcessBlobGas)
	}
	if h.ParentBeaconRoot != nil {
		m["parentBeaconBlockRoot"] = h.ParentBeaconRoot
	}
	if h.RequestsHash != nil {
		m["requestsHash"] = h.RequestsHash
	}
	txs := make([]any, len(b.Transactions()))
	for i, tx := range b.Transactions() {
		if full {
			txs[i] = a.marshalTx(b, i)
		} else {
			txs[i] = tx.Hash()
		}
	}
	m["transactions"] = txs
	return m
}

// marshalTx is geth's JSON of the executed transaction at index i of b.
func (a *evmAPI) marshalTx(b *types.Block, i int) *ethjson.Transaction {
	return ethjson.NewTransaction(b, i, a.sender(b, i))
}

// sender is the signer of the transaction at index i of b.
func (a *evmAPI) sender(b *types.Block, i int) common.Address {
	from, _ := types.Sender(types.MakeSigner(a.e.config, b.Number(), b.Time()), b.Transactions()[i])
	return from
}

// marshalReceipt is geth's receipt JSON.
func (a *evmAPI) marshalReceipt(r *types.Receipt, b *types.Block, i int) map[string]any {
	tx := b.Transactions()[i]
	m := map[string]any{
		"blockHash":         b.Hash(),
		"blockNumber":       hexutil.Uint64(b.NumberU64()),
		"transactionHash":   tx.Hash(),
		"transactionIndex":  hexutil.Uint64(i),
		"from":              a.sender(b, i),
		"to":                tx.To(),
		"gasUsed":           hexutil.Uint64(r.GasUsed),
		"cumulativeGasUsed": hexutil.Uint64(r.CumulativeGasUsed),
		"contractAddress":   nil,
		"logs":              r.Logs,
		"logsBloom":         r.Bloom,
		"type":              hexutil.Uint(tx.Type()),
		"effectiveGasPrice": (*hexutil.Big)(r.EffectiveGasPrice),
		"status":            hexutil.Uint(r.Status),
	}
	if r.Logs == nil {
		m["logs"] = []*types.Log{}
	}
	if r.ContractAddress != (common.Address{}) {
		m["contractAddress"] = r.ContractAddress
	}
	return m
}
