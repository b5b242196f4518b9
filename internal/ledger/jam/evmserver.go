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

// evmAPI answers the EVM methods.
type evmAPI struct {
	e       *evmChain
	chainID *big.Int
}

func newEVMServer(c *Chain) http.Handler {
	a := &evmAPI{e: c.evm, chainID: big.NewInt(c.cfg.ChainID)}
	return &jsonRPC{before: c.advance, methods: map[string]rpcMethod{
		"eth_chainId":               {0, a.chainIDHex},
		"net_version":               {0, a.netVersion},
		"web3_clientVersion":        {0, constant(ClientVersion)},
		"eth_syncing":               {0, constant(false)},
		"eth_blockNumber":           {0, a.blockNumber},
		"eth_getBlockByNumber":      {2, a.blockByNumber},
		"eth_getBlockByHash":        {2, a.blockByHash},
		"eth_getTransactionByHash":  {1, a.transactionByHash},
		"eth_getTransactionReceipt": {1, a.transactionReceipt},
		"eth_getTransactionCount":   {2, a.accountRead(nonceOf)},
		"eth_getBalance":            {2, a.accountRead(balanceOf)},
		"eth_getCode":               {2, a.accountRead(codeOf)},
		"eth_getStorageAt":          {3, a.storageAt},
		"eth_call":                  {2, a.call},
		"eth_estimateGas":           {2, a.estimateGas},
		"eth_gasPrice":              {0, a.gasPrice},
		"eth_maxPriorityFeePerGas":  {0, a.maxPriorityFeePerGas},
		"eth_feeHistory":            {3, a.feeHistory},
		"eth_getLogs":               {1, a.logs},
	}}
}

func constant(v any) func(context.Context, rpcArgs) (any, error) {
	return func(context.Context, rpcArgs) (any, error) { return v, nil }
}

func (a *evmAPI) chainIDHex(context.Context, rpcArgs) (any, error) {
	return (*hexutil.Big)(a.chainID), nil
}

func (a *evmAPI) netVersion(context.Context, rpcArgs) (any, error) {
	return a.chainID.String(), nil
}

func (a *evmAPI) blockNumber(context.Context, rpcArgs) (any, error) {
	return hexutil.Uint64(a.e.head().Number.Uint64()), nil
}

// blockQuery reads a block method's arguments: the block (a number or a
// hash) and whether its transactions are wanted in full.
func blockQuery[T any](args rpcArgs) (block T, full bool, err error) {
	if err = args.need(0, &block); err == nil {
		_, err = args.get(1, &full)
	}
	return block, full, err
}

func (a *evmAPI) blockByNumber(_ context.Context, args rpcArgs) (any, error) {
	n, full, err := blockQuery[rpc.BlockNumber](args)
	if err != nil {
		return nil, err
	}
	h := a.e.headerByNumber(n)
	if h == nil {
		return nil, nil
	}
	return a.marshalBlock(a.e.bc.GetBlock(h.Hash(), h.Number.Uint64()), full), nil
}

func (a *evmAPI) blockByHash(_ context.Context, args rpcArgs) (any, error) {
	hash, full, err := blockQuery[common.Hash](args)
	if err != nil {
		return nil, err
	}
	return a.marshalBlock(a.e.bc.GetBlockByHash(hash), full), nil
}

// txArg finds the executed transaction its hash argument names: its block
// and index, or a nil block when the chain has not executed it.
func (a *evmAPI) txArg(args rpcArgs) (*types.Block, int, error) {
	var hash common.Hash
	if err := args.need(0, &hash); err != nil {
		return nil, 0, err
	}
	b, i, ok := a.e.tx(hash)
	if !ok {
		return nil, 0, nil
	}
	return b, i, nil
}

func (a *evmAPI) transactionByHash(_ context.Context, args rpcArgs) (any, error) {
	b, i, err := a.txArg(args)
	if b == nil {
		return nil, err
	}
	return a.marshalTx(b, i), nil
}

func (a *evmAPI) transactionReceipt(_ context.Context, args rpcArgs) (any, error) {
	b, i, err := a.txArg(args)
	if b == nil {
		return nil, err
	}
	receipts := a.e.bc.GetReceiptsByHash(b.Hash())
	if i >= len(receipts) {
		return nil, fmt.Errorf("receipts of block %d not found", b.NumberU64())
	}
	return a.marshalReceipt(receipts[i], b, i), nil
}

// withBlock reads argument 0 into v and an optional block at argument
// blockArg (latest when absent).
func withBlock[T any](args rpcArgs, blockArg int) (v T, bnh rpc.BlockNumberOrHash, err error) {
	bnh = rpc.BlockNumberOrHashWithNumber(rpc.LatestBlockNumber)
	if err = args.need(0, &v); err == nil {
		_, err = args.get(blockArg, &bnh)
	}
	return v, bnh, err
}

// accountRead is a method that reads one thing of an account (its
// argument 0) in the state at a block (argument 1, latest when absent).
func (a *evmAPI) accountRead(read func(*state.StateDB, common.Address) any) func(context.Context, rpcArgs) (any, error) {
	return func(_ context.Context, args rpcArgs) (any, error) {
		addr, bnh, err := withBlock[common.Address](args, 1)
		if err != nil {
			return nil, err
		}
		st, _, err := a.e.stateOf(bnh)
		if err != nil {
			return nil, err
		}
		return read(st, addr), nil
	}
}

func nonceOf(st *state.StateDB, addr common.Address) any { return hexutil.Uint64(st.GetNonce(addr)) }

func balanceOf(st *state.StateDB, addr common.Address) any {
	return (*hexutil.Big)(st.GetBalance(addr).ToBig())
}

func codeOf(st *state.StateDB, addr common.Address) any { return hexutil.Bytes(st.GetCode(addr)) }

func (a *evmAPI) storageAt(_ context.Context, args rpcArgs) (any, error) {
	addr, bnh, err := withBlock[common.Address](args, 2)
	if err != nil {
		return nil, err
	}
	var key string
	if err := args.need(1, &key); err != nil {
		return nil, err
	}
	slot, err := storageKey(key)
	if err != nil {
		return nil, invalidParams("invalid argument 1: %v", err)
	}
	st, _, err := a.e.stateOf(bnh)
	if err != nil {
		return nil, err
	}
	v := st.GetState(addr, slot)
	return hexutil.Bytes(v[:]), nil
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
// block it runs on (latest when absent).
func (a *evmAPI) callMessage(args rpcArgs, gas uint64) (*core.Message, *state.StateDB, *types.Header, error) {
	call, bnh, err := withBlock[callArgs](args, 1)
	if err != nil {
		return nil, nil, nil, err
	}
	st, header, err := a.e.stateOf(bnh)
	if err != nil {
		return nil, nil, nil, err
	}
	msg, err := call.message(header.BaseFee, a.chainID, gas)
	return msg, st, header, err
}

func (a *evmAPI) call(ctx context.Context, args rpcArgs) (any, error) {
	msg, st, header, err := a.callMessage(args, RPCGasCap)
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

func (a *evmAPI) estimateGas(ctx context.Context, args rpcArgs) (any, error) {
	// No gas given: the estimator searches up to the block gas limit.
	msg, st, header, err := a.callMessage(args, 0)
	if err != nil {
		return nil, err
	}
	gas, revert, err := gasestimator.Estimate(ctx, msg, &gasestimator.Options{
		Config: a.e.config, Chain: a.e.bc, Header: header, State: st, ErrorRatio: estimateErrorRatio,
	}, RPCGasCap)
	if err != nil {
		if errors.Is(err, vm.ErrExecutionReverted) {
			return nil, revertError(revert)
		}
		return nil, err
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

func (a *evmAPI) gasPrice(ctx context.Context, _ rpcArgs) (any, error) {
	tip, err := a.e.oracle.SuggestTipCap(ctx)
	if err != nil {
		return nil, err
	}
	if fee := a.e.head().BaseFee; fee != nil {
		tip.Add(tip, fee)
	}
	return (*hexutil.Big)(tip), nil
}

func (a *evmAPI) maxPriorityFeePerGas(ctx context.Context, _ rpcArgs) (any, error) {
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

func (a *evmAPI) feeHistory(ctx context.Context, args rpcArgs) (any, error) {
	var (
		count       math.HexOrDecimal64
		newest      rpc.BlockNumber
		percentiles []float64
	)
	if err := args.need(0, &count); err != nil {
		return nil, err
	}
	if err := args.need(1, &newest); err != nil {
		return nil, err
	}
	if _, err := args.get(2, &percentiles); err != nil {
		return nil, err
	}
	oldest, reward, baseFee, used, blobFee, blobUsed, err := a.e.oracle.FeeHistory(ctx, uint64(count), newest, percentiles)
	if err != nil {
		return nil, err
	}
	out := feeHistoryJSON{OldestBlock: (*hexutil.Big)(oldest), GasUsedRatio: used, BlobGasUsedRatio: blobUsed,
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

func (a *evmAPI) logs(_ context.Context, args rpcArgs) (any, error) {
	var f logFilter
	if err := args.need(0, &f); err != nil {
		return nil, err
	}
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
func (a *evmAPI) marshalBlock(b *types.Block, full bool) any {
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
