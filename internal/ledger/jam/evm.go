package jam

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/consensus/beacon"
	"github.com/ethereum/go-ethereum/consensus/ethash"
	"github.com/ethereum/go-ethereum/consensus/misc/eip1559"
	"github.com/ethereum/go-ethereum/consensus/misc/eip4844"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/rawdb"
	"github.com/ethereum/go-ethereum/core/state"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/core/vm"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth/gasprice"
	"github.com/ethereum/go-ethereum/event"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// EVM defaults.
const (
	// DefaultChainID is the EVM's chain id for a zero Config.ChainID, as
	// geth --dev and ledgerq's builder pool.
	DefaultChainID = 1337
	// BlockGasLimit is every EVM block's gas limit (the pool's default).
	BlockGasLimit = 30_000_000
	// DevAccountBalance is what Config.FundDevAccounts gives each dev
	// account: 10000 ether, as hardhat and anvil.
	DevAccountBalance = "10000000000000000000000"
	// DefaultTip is the suggested priority fee while no executed block
	// has a transaction to learn from: 1 gwei, the pool's minimum.
	DefaultTip = params.GWei
)

// ReasonBlobTx is the reason a blob transaction is left out of its block:
// the builder service takes no blob sidecars.
const ReasonBlobTx = "blob transactions are not executed by the builder service"

// SkippedTx is a transaction of an executed package the EVM refused, left
// out of its block.
type SkippedTx struct {
	Hash string `json:"hash"`
	// Reason is geth's error, for example "insufficient funds for gas *
	// price + value: address 0x… have 0 want 21000000000000".
	Reason string `json:"reason"`
	// NonceGap says the nonce was above the sender's next (geth's
	// core.ErrNonceTooHigh): the transaction may run once the nonces below
	// it have.
	NonceGap bool `json:"nonce_gap,omitempty"`
}

// evmChain is the builder service's EVM: a go-ethereum core.BlockChain on an
// in-memory database (archive mode, so every executed block's state answers),
// one block per executed bundle, with the bundle's number.
//
// It builds its blocks itself from core's parts (pre-execution system calls,
// ApplyTransaction, post-execution requests, AssembleBlock) and inserts them
// with InsertChain, which executes and validates each once more, rather than
// driving ethclient/simulated. simulated.Backend mines what its transaction
// pool holds, in the pool's price-and-nonce order and at wall-clock
// timestamps; the builder service must run a package's transactions in the
// package's order, leave out each one the EVM refuses with geth's reason
// (a pool keeps a nonce-gapped one queued and mines it in a later block),
// and rebuild the same blocks, hashes and all, from its journal after a
// restart. With no pool there is nothing left behind to roll back.
//
// Block N's header carries bundle N's hash (ledger.BundleHash) as its
// extraData, and is dated its JAM slot's start in Unix seconds, or its
// parent's time + 1 when several bundles execute within one second.
type evmChain struct {
	bc     *core.BlockChain
	config *params.ChainConfig
	oracle *gasprice.Oracle

	// txs locates every executed transaction. The chain's own index is
	// filled in the background; this one is written before a block is
	// visible, so a receipt never lags its block.
	mu  sync.RWMutex
	txs map[common.Hash]txLoc

	// nonces are the accounts' nonces read at the head nonceHead (a pool
	// intake reads one per transaction; a state opened per read cost more
	// than the read).
	nonceMu   sync.Mutex
	nonceHead common.Hash
	nonces    map[common.Address]uint64
}

// maxCachedNonces bounds the nonce cache of one head: a head that stays
// while many senders are asked about starts over past it.
const maxCachedNonces = 100_000

// nonce is addr's nonce by the head's state.
func (e *evmChain) nonce(addr common.Address) (uint64, error) {
	head := e.bc.CurrentBlock()
	hash := head.Hash()
	e.nonceMu.Lock()
	defer e.nonceMu.Unlock()
	if e.nonceHead != hash || len(e.nonces) >= maxCachedNonces {
		e.nonceHead, e.nonces = hash, map[common.Address]uint64{}
	}
	if n, ok := e.nonces[addr]; ok {
		return n, nil
	}
	st, err := e.bc.StateAt(head.Root, head.Number, head.Time)
	if err != nil {
		return 0, err
	}
	n := st.GetNonce(addr)
	e.nonces[addr] = n
	return n, nil
}

type txLoc struct {
	number uint64
	index  int
}

// EVMChainConfig is the protocol rules of the builder service's EVM for
// chain id chainID: geth --dev's, every fork up to Osaka active from
// genesis, and none that mainnet has not scheduled (clients expect mainnet's
// rules). The EVM executes by it and the builder lane's pool intake
// (queuer.PoolIntake) validates by it, so that the pool refuses exactly
// what the EVM would: one definition, so the two cannot drift. Every fork
// named by block number is at genesis, so the rules of a block depend on its
// time alone. Each call returns a new config the caller may change.
func EVMChainConfig(chainID int64) *params.ChainConfig {
	cfg := *params.AllDevChainProtocolChanges
	cfg.ChainID = big.NewInt(chainID)
	cfg.AmsterdamTime, cfg.BogotaTime = nil, nil
	return &cfg
}

// newEVMChain returns the EVM at its genesis block: EVMChainConfig's rules,
// alloc funded, dated genesis (Unix seconds).
func newEVMChain(chainID int64, alloc map[common.Address]*big.Int, genesis uint64) (*evmChain, error) {
	gen := core.DeveloperGenesisBlock(BlockGasLimit, nil)
	gen.Config = EVMChainConfig(chainID)
	gen.Timestamp = genesis
	for a, wei := range alloc {
		gen.Alloc[a] = types.Account{Balance: new(big.Int).Set(wei)}
	}
	bcCfg := core.DefaultConfig().WithArchive(true)
	bcCfg.SnapshotLimit, bcCfg.SnapshotWait = 0, false
	bcCfg.TrieCleanLimit = 16
	bcCfg.NoPrefetch = true
	bc, err := core.NewBlockChain(rawdb.NewMemoryDatabase(), gen, beacon.New(ethash.NewFaker()), bcCfg)
	if err != nil {
		return nil, fmt.Errorf("jam: EVM genesis: %w", err)
	}
	e := &evmChain{bc: bc, config: bc.Config(), txs: map[common.Hash]txLoc{}}
	e.oracle = gasprice.NewOracle(oracleBackend{e}, gasprice.Config{
		Blocks: 20, Percentile: 60, MaxHeaderHistory: 1024, MaxBlockHistory: 1024,
		MaxPrice: gasprice.DefaultMaxPrice, IgnorePrice: gasprice.DefaultIgnorePrice,
	}, big.NewInt(DefaultTip))
	return e, nil
}

func (e *evmChain) close() { e.bc.Stop() }

// genesisHash is the EVM genesis block's hash: it names the chain id and
// alloc a journal was written for.
func (e *evmChain) genesisHash() common.Hash { return e.bc.Genesis().Hash() }

func (e *evmChain) head() *types.Header { return e.bc.CurrentBlock() }

// build executes raws, in order, as the block after the head, dated
// blockTime (raised to the parent's + 1 if need be) and carrying bundle. A transaction
// the EVM refuses is left out, its state changes and gas undone, and listed
// with geth's reason; a nonce error also reports a nonce gap. Nothing is
// visible until insert. decoded, when not nil, is raws already decoded with
// their senders recovered (checkLocked's), so neither is done twice.
func (e *evmChain) build(bundle ledger.Hash, blockTime uint64, raws [][]byte, decoded []*types.Transaction) (block *types.Block, skipped []SkippedTx, nonceGaps int, err error) {
	ctx := context.Background()
	parent := e.bc.CurrentBlock()
	header := &types.Header{
		ParentHash: parent.Hash(),
		Number:     new(big.Int).Add(parent.Number, common.Big1),
		GasLimit:   core.CalcGasLimit(parent.GasLimit, BlockGasLimit),
		Time:       max(blockTime, parent.Time+1),
		Extra:      append([]byte(nil), bundle[:]...),
		Difficulty: new(big.Int),
		BaseFee:    eip1559.CalcBaseFee(e.config, parent),
	}
	excess := eip4844.CalcExcessBlobGas(e.config, parent, header.Time)
	header.ExcessBlobGas, header.BlobGasUsed = &excess, new(uint64)
	header.ParentBeaconRoot = new(common.Hash)

	statedb, err := e.bc.StateAtForkBoundary(parent, header)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("jam: EVM state of block %d: %w", parent.Number, err)
	}
	evm := vm.NewEVM(core.NewEVMBlockContext(header, e.bc, nil), statedb, e.config, vm.Config{})
	core.PreExecution(ctx, header.ParentBeaconRoot, parent, e.config, evm, header.Number, header.Time)
	gp := core.NewGasPool(header.GasLimit)
	var (
		txs      []*types.Transaction
		receipts []*types.Receipt
		logs     []*types.Log
	)
	for i, raw := range raws {
		tx, err := decodedOr(decoded, i, raw)
		if err != nil {
			// checkLocked refused these; a journal could still hold one.
			skipped = append(skipped, SkippedTx{Hash: crypto.Keccak256Hash(raw).Hex(), Reason: err.Error()})
			continue
		}
		if tx.Type() == types.BlobTxType {
			skipped = append(skipped, SkippedTx{Hash: tx.Hash().Hex(), Reason: ReasonBlobTx})
			continue
		}
		snap, gpSnap := statedb.Snapshot(), gp.Snapshot()
		statedb.SetTxContext(tx.Hash(), len(txs), uint32(len(txs)+1))
		receipt, _, err := core.ApplyTransaction(ctx, evm, gp, statedb, header, tx)
		if err != nil {
			statedb.RevertToSnapshot(snap)
			gp.Set(gpSnap)
			skipped = append(skipped, SkippedTx{Hash: tx.Hash().Hex(), Reason: err.Error(), NonceGap: errors.Is(err, core.ErrNonceTooHigh)})
			if errors.Is(err, core.ErrNonceTooHigh) || errors.Is(err, core.ErrNonceTooLow) {
				nonceGaps++
			}
			continue
		}
		txs = append(txs, tx)
		receipts = append(receipts, receipt)
		logs = append(logs, receipt.Logs...)
	}
	header.GasUsed = gp.Used()
	body := &types.Body{Transactions: txs, Withdrawals: types.Withdrawals{}}
	requests, _, err := core.PostExecution(ctx, e.config, header.Number, header.Time, logs, body.Withdrawals, evm, uint32(len(txs)+1))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("jam: EVM block %d post-execution: %w", header.Number, err)
	}
	if requests != nil {
		h := types.CalcRequestsHash(requests)
		header.RequestsHash = &h
	}
	e.bc.Engine().Finalize(e.bc, header, statedb, body)
	return core.AssembleBlock(e.bc, header, statedb, body, receipts, nil), skipped, nonceGaps, nil
}

// decodedOr is decoded[i], or raw decoded when there is no decoded list.
func decodedOr(decoded []*types.Transaction, i int, raw []byte) (*types.Transaction, error) {
	if decoded != nil {
		return decoded[i], nil
	}
	tx := new(types.Transaction)
	return tx, tx.UnmarshalBinary(raw)
}

// insert makes block the head. The chain executes it again and checks it
// against its header, so a block build got wrong is refused here.
func (e *evmChain) insert(block *types.Block) error {
	if _, err := e.bc.InsertChain(types.Blocks{block}); err != nil {
		return fmt.Errorf("jam: inserting EVM block %d: %w", block.NumberU64(), err)
	}
	e.mu.Lock()
	for i, tx := range block.Transactions() {
		e.txs[tx.Hash()] = txLoc{number: block.NumberU64(), index: i}
	}
	e.mu.Unlock()
	return nil
}

// tx finds an executed transaction: its block and index.
func (e *evmChain) tx(hash common.Hash) (*types.Block, int, bool) {
	e.mu.RLock()
	loc, ok := e.txs[hash]
	e.mu.RUnlock()
	if !ok {
		return nil, 0, false
	}
	b := e.bc.GetBlockByNumber(loc.number)
	if b == nil || loc.index >= len(b.Transactions()) {
		return nil, 0, false
	}
	return b, loc.index, true
}

// headerByNumber resolves n: every tag but "earliest" is the head (see the
// package doc); nil if the block is not there.
func (e *evmChain) headerByNumber(n rpc.BlockNumber) *types.Header {
	switch {
	case n == rpc.EarliestBlockNumber:
		return e.bc.GetHeaderByNumber(0)
	case n < 0:
		return e.bc.CurrentBlock()
	default:
		return e.bc.GetHeaderByNumber(uint64(n))
	}
}

// headerOf resolves a block number, tag or hash (EIP-1898).
func (e *evmChain) headerOf(bnh rpc.BlockNumberOrHash) (*types.Header, error) {
	if h, ok := bnh.Hash(); ok {
		header := e.bc.GetHeaderByHash(h)
		if header == nil {
			return nil, errors.New("header for hash not found")
		}
		if bnh.RequireCanonical && e.bc.GetCanonicalHash(header.Number.Uint64()) != h {
			return nil, fmt.Errorf("hash %s is not currently canonical", h.Hex())
		}
		return header, nil
	}
	n, _ := bnh.Number()
	header := e.headerByNumber(n)
	if header == nil {
		return nil, errors.New("header not found")
	}
	return header, nil
}

// stateOf is the state after the block bnh names.
func (e *evmChain) stateOf(bnh rpc.BlockNumberOrHash) (*state.StateDB, *types.Header, error) {
	header, err := e.headerOf(bnh)
	if err != nil {
		return nil, nil, err
	}
	statedb, err := e.bc.StateAt(header.Root, header.Number, header.Time)
	if err != nil {
		return nil, nil, err
	}
	return statedb, header, nil
}

// oracleBackend gives geth's gas price oracle the executed blocks; there is
// no pending block.
type oracleBackend struct{ e *evmChain }

func (b oracleBackend) HeaderByNumber(_ context.Context, n rpc.BlockNumber) (*types.Header, error) {
	if h := b.e.headerByNumber(n); h != nil {
		return h, nil
	}
	return nil, errors.New("header not found")
}

func (b oracleBackend) BlockByNumber(_ context.Context, n rpc.BlockNumber) (*types.Block, error) {
	h := b.e.headerByNumber(n)
	if h == nil {
		return nil, errors.New("block not found")
	}
	return b.e.bc.GetBlock(h.Hash(), h.Number.Uint64()), nil
}

func (b oracleBackend) GetReceipts(_ context.Context, hash common.Hash) (types.Receipts, error) {
	return b.e.bc.GetReceiptsByHash(hash), nil
}

func (b oracleBackend) Pending() (*types.Block, types.Receipts, *state.StateDB) { return nil, nil, nil }

func (b oracleBackend) ChainConfig() *params.ChainConfig { return b.e.config }

func (b oracleBackend) SubscribeChainHeadEvent(ch chan<- core.ChainHeadEvent) event.Subscription {
	return b.e.bc.SubscribeChainHeadEvent(ch)
}
