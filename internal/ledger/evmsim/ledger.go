package evmsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/trie"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/gethpool"
)

// RevertMarker: a transaction whose data starts with it is mined reverted.
var RevertMarker = []byte{0xde, 0xad, 0xbe, 0xef}

// Config configures a Ledger. Rates are fractions in [0, 1].
type Config struct {
	// Seed seeds every random choice.
	Seed int64
	// Clock tells the ledger's time; nil means clock.Real.
	Clock clock.Clock
	// ChainID is the EIP-155 chain id; 0 means 1337, as geth --dev.
	ChainID int64
	// Alloc funds accounts at genesis, in wei.
	Alloc map[common.Address]*big.Int
	// BlockPeriod is the time between blocks by Clock; 0 mines only on Mine.
	BlockPeriod time.Duration
	// BaseFee is every block's base fee in wei; 0 means 1 gwei.
	BaseFee int64
	// Tip is the priority fee the ledger suggests; 0 means 1 gwei.
	Tip int64
	// GasLimit is the block gas limit; 0 means 30 000 000.
	GasLimit uint64
	// MinTip is the least effective tip per gas a block includes, in wei
	// (geth's --miner.gasprice): a transaction paying less stays in the pool
	// and holds up its sender's later nonces — a stalled nonce. 0: none.
	// SetMinTip changes it while the ledger runs.
	MinTip int64
	// TransientRate is the fraction of sends refused before the ledger looks
	// at them (over HTTP: a 503).
	TransientRate float64
	// LostResponseRate is the fraction of sends the ledger takes but whose
	// answer is lost: the caller gets a timeout (over HTTP: the connection
	// is cut).
	LostResponseRate float64
	// Latency is a real wait before every send, honouring the caller's
	// context.
	Latency time.Duration
	// LostTxRate is the fraction of sends that pass the pool's checks and
	// answer success but whose transaction is dropped from the pool at
	// once: never mined, its hash unknown (the same bytes sent again are
	// taken anew).
	LostTxRate float64
	// ReorgRate is the fraction of mined blocks after which the chain
	// reorganizes its last ReorgDepth blocks (see Reorg). Ignored
	// with a Journal.
	ReorgRate float64
	// ReorgDepth is how many blocks a reorg replaces; 0 means 1.
	ReorgDepth int
	// ReorgDropRate is the fraction of a reorg's transactions dropped
	// instead of returned to the pool.
	ReorgDropRate float64
	// Journal, when set, receives every mined transaction's raw bytes, one
	// hex line each, in the order they were mined: Replay of it rebuilds
	// the chain's accounts and receipts after a restart (ledgerq dev keeps
	// its chain in its data directory this way).
	Journal io.Writer
}

// ErrTransient is the answer of a send that a simulated fault refused.
const ErrTransient = "simulated transient failure: try again"

// ErrLostResponse is the answer of a send whose response a simulated fault lost.
const ErrLostResponse = "simulated lost response: timeout"

type account struct {
	balance *big.Int
	nonce   uint64
}

type receipt struct {
	tx       *types.Transaction
	status   uint64
	block    uint64
	index    uint
	gasUsed  uint64
	price    *big.Int
	contract common.Address
}

// Block is a mined block's header fields.
type Block struct {
	Number  uint64
	Time    time.Time
	BaseFee *big.Int
	GasUsed uint64
	Hash    common.Hash
	Parent  common.Hash
	// era is how many reorgs the chain had when the block was mined: a
	// block mined again at the same height after a reorg has another hash.
	era int
	// txRoot is the root of its transactions, as a header has it.
	txRoot common.Hash
}

// Ledger is the simulated EVM ledger. It is safe for concurrent use.
type Ledger struct {
	cfg     Config
	clock   clock.Clock
	signer  types.Signer
	chainID *big.Int
	genesis time.Time

	mu       sync.Mutex
	rng      *rand.Rand
	accounts map[common.Address]*account
	pool     map[common.Address]map[uint64]*types.Transaction
	known    map[common.Hash]bool // in the pool or mined
	receipts map[common.Hash]*receipt
	blocks   []Block

	blockTxs [][]*types.Transaction // blockTxs[n]: block n's transactions in order

	journalErr error
	replaying  bool
	minTip     *big.Int
	stats      Stats
}

// Stats counts the simulated faults a Ledger has produced.
type Stats struct {
	// Transient sends refused, responses lost, transactions lost.
	Transient, LostResponses, LostTxs int
	// Reorgs, the blocks they replaced, the transactions they un-mined
	// and, of those, the ones dropped rather than returned to the pool.
	Reorgs, ReorgedBlocks, Unmined, Dropped int
}

var _ ledger.WalletLedger = (*Ledger)(nil)

// New returns a Ledger at its genesis block, dated the clock's now.
func New(cfg Config) *Ledger {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.ChainID == 0 {
		cfg.ChainID = 1337
	}
	if cfg.BaseFee == 0 {
		cfg.BaseFee = params.GWei
	}
	if cfg.Tip == 0 {
		cfg.Tip = params.GWei
	}
	if cfg.GasLimit == 0 {
		cfg.GasLimit = 30_000_000
	}
	if cfg.ReorgDepth <= 0 {
		cfg.ReorgDepth = 1
	}
	l := &Ledger{
		cfg:      cfg,
		clock:    cfg.Clock,
		chainID:  big.NewInt(cfg.ChainID),
		signer:   types.LatestSignerForChainID(big.NewInt(cfg.ChainID)),
		genesis:  cfg.Clock.Now(),
		rng:      rand.New(rand.NewPCG(uint64(cfg.Seed), 0x65766d73696d)),
		accounts: map[common.Address]*account{},
		pool:     map[common.Address]map[uint64]*types.Transaction{},
		known:    map[common.Hash]bool{},
		receipts: map[common.Hash]*receipt{},
	}
	for a, b := range cfg.Alloc {
		l.accounts[a] = &account{balance: new(big.Int).Set(b)}
	}
	l.minTip = big.NewInt(cfg.MinTip)
	genesis := Block{Number: 0, Time: l.genesis, BaseFee: big.NewInt(cfg.BaseFee), txRoot: types.EmptyTxsHash}
	genesis.Hash = l.header(genesis).Hash()
	l.blocks = []Block{genesis}
	l.blockTxs = [][]*types.Transaction{nil}
	return l
}

func (l *Ledger) acct(a common.Address) *account {
	ac, ok := l.accounts[a]
	if !ok {
		ac = &account{balance: new(big.Int)}
		l.accounts[a] = ac
	}
	return ac
}

// catchUp mines the blocks whose time has come. With a ReorgRate, each
// block mined may call for a reorg, done once they are all mined: the
// blocks taken back are mined again, their time having come, by the next
// call, with other hashes.
// Called with mu held.
func (l *Ledger) catchUp() {
	if l.cfg.BlockPeriod <= 0 {
		return
	}
	now := l.clock.Now()
	reorg := false
	for {
		next := l.blocks[len(l.blocks)-1].Time.Add(l.cfg.BlockPeriod)
		if next.After(now) {
			break
		}
		l.mine(next)
		if l.cfg.ReorgRate > 0 && l.cfg.Journal == nil && !l.replaying && l.rng.Float64() < l.cfg.ReorgRate {
			reorg = true
		}
	}
	if reorg {
		l.reorg(l.cfg.ReorgDepth)
	}
}

// Mine produces one block now, whatever the period.
func (l *Ledger) Mine() Block {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	return l.mine(l.clock.Now())
}

// intrinsicGas is the gas a transaction pays before any code runs: a call's
// or a contract creation's base cost and its data's cost.
func intrinsicGas(create bool, data []byte) uint64 {
	g := params.TxGas
	if create {
		g = params.TxGasContractCreation
	}
	for _, b := range data {
		if b == 0 {
			g += params.TxDataZeroGas
		} else {
			g += params.TxDataNonZeroGasEIP2028
		}
	}
	return g
}

func effectivePrice(tx *types.Transaction, baseFee *big.Int) *big.Int {
	p := new(big.Int).Add(baseFee, tx.GasTipCap())
	if p.Cmp(tx.GasFeeCap()) > 0 {
		p.Set(tx.GasFeeCap())
	}
	return p
}

// mine includes, sender by sender in address order, each sender's pool
// transactions from its nonce on while they are contiguous, affordable and
// fit the block. Called with mu held.
func (l *Ledger) mine(at time.Time) Block {
	parent := l.blocks[len(l.blocks)-1]
	b := Block{Number: parent.Number + 1, Time: at, BaseFee: big.NewInt(l.cfg.BaseFee), Parent: parent.Hash, era: l.stats.Reorgs}
	var included []*types.Transaction
	senders := make([]common.Address, 0, len(l.pool))
	for a := range l.pool {
		senders = append(senders, a)
	}
	sort.Slice(senders, func(i, j int) bool { return bytes.Compare(senders[i][:], senders[j][:]) < 0 })
	var index uint
	for _, from := range senders {
		ac := l.acct(from)
		for {
			tx, ok := l.pool[from][ac.nonce]
			if !ok {
				break
			}
			gas := intrinsicGas(tx.To() == nil, tx.Data())
			price := effectivePrice(tx, b.BaseFee)
			if new(big.Int).Sub(price, b.BaseFee).Cmp(l.minTip) < 0 {
				break // below the miner's minimum tip: stalls the sender
			}
			fee := new(big.Int).Mul(price, new(big.Int).SetUint64(gas))
			cost := new(big.Int).Add(fee, tx.Value())
			if b.GasUsed+gas > l.cfg.GasLimit || ac.balance.Cmp(cost) < 0 {
				break
			}
			r := &receipt{tx: tx, status: types.ReceiptStatusSuccessful, block: b.Number, index: index, gasUsed: gas, price: price}
			ac.balance.Sub(ac.balance, fee)
			if bytes.HasPrefix(tx.Data(), RevertMarker) {
				r.status = types.ReceiptStatusFailed
			} else {
				ac.balance.Sub(ac.balance, tx.Value())
				to := tx.To()
				if to == nil {
					r.contract = crypto.CreateAddress(from, ac.nonce)
					to = &r.contract
				}
				dst := l.acct(*to)
				dst.balance.Add(dst.balance, tx.Value())
			}
			delete(l.pool[from], ac.nonce)
			ac.nonce++
			l.receipts[tx.Hash()] = r
			included = append(included, tx)
			l.journal(tx)
			b.GasUsed += gas
			index++
		}
		if len(l.pool[from]) == 0 {
			delete(l.pool, from)
		}
	}
	// Pool entries below their sender's nonce can never be mined: drop them,
	// as geth's pool does on a new head. Their hashes stay unknown.
	for from, txs := range l.pool {
		for n, tx := range txs {
			if n < l.acct(from).nonce {
				delete(txs, n)
				delete(l.known, tx.Hash())
			}
		}
	}
	// The hash is the header's, as a client computes it from the header
	// the server answers: it names the parent, the time, the era and the
	// transactions.
	b.txRoot = types.DeriveSha(types.Transactions(included), trie.NewStackTrie(nil))
	b.Hash = l.header(b).Hash()
	l.blocks = append(l.blocks, b)
	l.blockTxs = append(l.blockTxs, included)
	return b
}

// Reorg takes back the last n blocks (never the genesis block), as a reorg
// to a chain n blocks shorter would: their transactions are un-mined, newest
// first — balances and nonces go back, receipts disappear — and each is
// returned to the pool, or dropped (its hash unknown again) at the
// ReorgDropRate. Blocks whose time has come are mined again by the next
// call. It returns how many transactions were un-mined, and an error with a
// Journal (the journal cannot take a block back).
func (l *Ledger) Reorg(n int) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	if l.cfg.Journal != nil {
		return 0, fmt.Errorf("evmsim: a ledger with a journal cannot reorganize")
	}
	return l.reorg(n), nil
}

// reorg takes back up to n blocks. Called with mu held.
func (l *Ledger) reorg(n int) int {
	n = min(n, len(l.blocks)-1)
	if n <= 0 {
		return 0
	}
	l.stats.Reorgs++
	l.stats.ReorgedBlocks += n
	unmined := 0
	for range n {
		last := len(l.blocks) - 1
		txs := l.blockTxs[last]
		for i := len(txs) - 1; i >= 0; i-- {
			l.unmine(txs[i])
			unmined++
		}
		l.blocks, l.blockTxs = l.blocks[:last], l.blockTxs[:last]
	}
	l.stats.Unmined += unmined
	return unmined
}

// unmine reverses a mined transaction, its sender's newest. Called with mu
// held.
func (l *Ledger) unmine(tx *types.Transaction) {
	h := tx.Hash()
	r := l.receipts[h]
	from, _ := types.Sender(l.signer, tx) // it was mined: its signature is good
	ac := l.acct(from)
	fee := new(big.Int).Mul(r.price, new(big.Int).SetUint64(r.gasUsed))
	ac.balance.Add(ac.balance, fee)
	if r.status == types.ReceiptStatusSuccessful {
		to := tx.To()
		if to == nil {
			to = &r.contract
		}
		dst := l.acct(*to)
		dst.balance.Sub(dst.balance, tx.Value())
		ac.balance.Add(ac.balance, tx.Value())
	}
	ac.nonce = tx.Nonce()
	delete(l.receipts, h)
	if l.cfg.ReorgDropRate > 0 && l.rng.Float64() < l.cfg.ReorgDropRate {
		delete(l.known, h)
		l.stats.Dropped++
		return
	}
	if l.pool[from] == nil {
		l.pool[from] = map[uint64]*types.Transaction{}
	}
	l.pool[from][tx.Nonce()] = tx
}

// SetReorgDropRate changes Config.ReorgDropRate: the fraction of a reorg's
// transactions dropped instead of returned to the pool (1: a node that lost
// its blocks and its pool).
func (l *Ledger) SetReorgDropRate(rate float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg.ReorgDropRate = rate
}

// ForgetPool drops every transaction of the pool, as a node restarted
// without its pool's journal: their hashes are unknown again, and the same
// bytes sent again are taken anew.
func (l *Ledger) ForgetPool() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	n := 0
	for from, txs := range l.pool {
		for _, tx := range txs {
			delete(l.known, tx.Hash())
			n++
		}
		delete(l.pool, from)
	}
	return n
}

// Stats returns the faults produced so far.
func (l *Ledger) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	return l.stats
}

// journal writes a mined transaction to cfg.Journal. Called with mu held.
func (l *Ledger) journal(tx *types.Transaction) {
	if l.cfg.Journal == nil || l.journalErr != nil || l.replaying {
		return
	}
	raw, err := tx.MarshalBinary()
	if err == nil {
		_, err = fmt.Fprintf(l.cfg.Journal, "%x\n", raw)
	}
	l.journalErr = err
}

// JournalErr returns the first error writing the journal; after it the
// journal is no longer written.
func (l *Ledger) JournalErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.journalErr
}

// Replay mines again, in order, the transactions of a journal a Ledger with
// the same Config wrote, without writing them to the journal again:
// balances, nonces and receipts are as they were, block numbers and times
// are new. A torn last line (the process died while writing it) ends the
// replay without an error; any other bad line is an error.
func (l *Ledger) Replay(r io.Reader) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.replaying = true
	// Every journal transaction was mined once: the minimum tip of the time
	// does not stop it again.
	minTip := l.minTip
	l.minTip = new(big.Int)
	defer func() { l.replaying, l.minTip = false, minTip }()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var pending []*types.Transaction
	n := 0
	for line := 1; sc.Scan(); line++ {
		raw, err := hex.DecodeString(sc.Text())
		var tx types.Transaction
		if err == nil {
			err = tx.UnmarshalBinary(raw)
		}
		if err != nil {
			if sc.Scan() { // not the last line
				return n, fmt.Errorf("evmsim: journal line %d: %w", line, err)
			}
			break
		}
		pending = append(pending, &tx)
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("evmsim: reading the journal: %w", err)
	}
	for _, tx := range pending {
		if err := l.admit(tx); err != nil {
			return n, fmt.Errorf("evmsim: journal transaction %s: %w", tx.Hash().Hex(), err)
		}
		n++
		// A full block (or a transaction whose turn has not come) is mined
		// before the next is admitted, so the order is the journal's.
		if l.pendingCount() >= 1000 {
			l.mine(l.clock.Now())
		}
	}
	for l.pendingCount() > 0 {
		before := l.pendingCount()
		l.mine(l.clock.Now())
		if l.pendingCount() == before {
			return n, fmt.Errorf("evmsim: %d journal transactions cannot be mined again", before)
		}
	}
	return n, nil
}

// pendingCount is the number of transactions in the pool. Called with mu held.
func (l *Ledger) pendingCount() int {
	n := 0
	for _, txs := range l.pool {
		n += len(txs)
	}
	return n
}

// sendError is a send refused with geth's message.
func sendError(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return ledger.NewSendError(ledger.ClassifySendMessage(msg), msg, nil)
}

// Send takes one signed transaction. It returns nil, a *ledger.SendError
// carrying geth's message, or, for a simulated fault, a *ledger.SendError
// with ErrTransient or ErrLostResponse (both indeterminate to the caller;
// only the lost response took the transaction).
func (l *Ledger) Send(ctx context.Context, raw []byte) error {
	_, _, err := l.send(ctx, raw)
	return err
}

// fault is what a simulated fault did to a send.
type fault int

const (
	noFault fault = iota
	faultTransient
	faultLost
)

// send returns the transaction's hash with the ledger's answer.
func (l *Ledger) send(ctx context.Context, raw []byte) (common.Hash, fault, error) {
	if l.cfg.Latency > 0 {
		t := time.NewTimer(l.cfg.Latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return common.Hash{}, noFault, ledger.NewSendError(ledger.SendIndeterminate, ctx.Err().Error(), ctx.Err())
		case <-t.C:
		}
	}
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		return common.Hash{}, noFault, sendError("rlp: %v", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	if l.cfg.TransientRate > 0 && l.rng.Float64() < l.cfg.TransientRate {
		l.stats.Transient++
		return tx.Hash(), faultTransient, ledger.NewSendError(ledger.SendIndeterminate, ErrTransient, nil)
	}
	lost := l.cfg.LostResponseRate > 0 && l.rng.Float64() < l.cfg.LostResponseRate
	lostTx := l.cfg.LostTxRate > 0 && l.rng.Float64() < l.cfg.LostTxRate
	err := l.admit(&tx)
	if lostTx && err == nil {
		// Dropped from the pool: as if a replacement or eviction took it.
		from, _ := types.Sender(l.signer, &tx)
		delete(l.pool[from], tx.Nonce())
		if len(l.pool[from]) == 0 {
			delete(l.pool, from)
		}
		delete(l.known, tx.Hash())
		l.stats.LostTxs++
	}
	if lost && err == nil {
		l.stats.LostResponses++
		return tx.Hash(), faultLost, ledger.NewSendError(ledger.SendIndeterminate, ErrLostResponse, context.DeadlineExceeded)
	}
	return tx.Hash(), noFault, err
}

// admit applies geth's pool checks, in geth's order where it matters.
// Called with mu held.
func (l *Ledger) admit(tx *types.Transaction) error {
	if l.known[tx.Hash()] {
		return sendError("already known")
	}
	if tx.ChainId().Cmp(l.chainID) != 0 {
		return sendError("invalid sender: invalid chain id for signer: have %v want %v", tx.ChainId(), l.chainID)
	}
	from, err := types.Sender(l.signer, tx)
	if err != nil {
		return sendError("invalid sender: %v", err)
	}
	if tx.Gas() > l.cfg.GasLimit {
		return sendError("exceeds block gas limit")
	}
	if tx.GasTipCap().Cmp(tx.GasFeeCap()) > 0 {
		return sendError("max priority fee per gas higher than max fee per gas: address %s, maxPriorityFeePerGas: %v, maxFeePerGas: %v", from.Hex(), tx.GasTipCap(), tx.GasFeeCap())
	}
	if need := intrinsicGas(tx.To() == nil, tx.Data()); tx.Gas() < need {
		return sendError("intrinsic gas too low: gas %d, minimum needed %d", tx.Gas(), need)
	}
	ac := l.acct(from)
	if tx.Nonce() < ac.nonce {
		return sendError("nonce too low: next nonce %d, tx nonce %d", ac.nonce, tx.Nonce())
	}
	baseFee := l.blocks[len(l.blocks)-1].BaseFee
	if tx.GasFeeCap().Cmp(baseFee) < 0 {
		return sendError("max fee per gas less than block base fee: address %s, maxFeePerGas: %v, baseFee: %v", from.Hex(), tx.GasFeeCap(), baseFee)
	}
	cost := tx.Cost()
	if ac.balance.Cmp(cost) < 0 {
		return sendError("insufficient funds for gas * price + value: balance %v, tx cost %v, overshot %v", ac.balance, cost, new(big.Int).Sub(cost, ac.balance))
	}
	if old, ok := l.pool[from][tx.Nonce()]; ok {
		// geth's replacement rule with its default price bump.
		next := gethpool.Fees{FeeCap: tx.GasFeeCap(), Tip: tx.GasTipCap()}
		if !gethpool.Replaces(next, gethpool.Fees{FeeCap: old.GasFeeCap(), Tip: old.GasTipCap()}, gethpool.PriceBump) {
			return sendError("replacement transaction underpriced: new tx gas fee cap %v <= %v queued + 10%% replacement penalty", tx.GasFeeCap(), old.GasFeeCap())
		}
		delete(l.known, old.Hash())
	}
	if l.pool[from] == nil {
		l.pool[from] = map[uint64]*types.Transaction{}
	}
	l.pool[from][tx.Nonce()] = tx
	l.known[tx.Hash()] = true
	return nil
}

// ChainID implements ledger.WalletLedger.
func (l *Ledger) ChainID(context.Context) (*big.Int, error) { return new(big.Int).Set(l.chainID), nil }

// PendingNonceAt implements ledger.WalletLedger: the account's nonce plus its
// contiguous pool transactions.
func (l *Ledger) PendingNonceAt(_ context.Context, addr ledger.Address) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	from := common.Address(addr)
	n := l.acct(from).nonce
	for {
		if _, ok := l.pool[from][n]; !ok {
			return n, nil
		}
		n++
	}
}

// NonceAt implements ledger.WalletLedger.
func (l *Ledger) NonceAt(_ context.Context, addr ledger.Address) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	return l.acct(common.Address(addr)).nonce, nil
}

// BalanceAt implements ledger.WalletLedger.
func (l *Ledger) BalanceAt(_ context.Context, addr ledger.Address) (*big.Int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	return new(big.Int).Set(l.acct(common.Address(addr)).balance), nil
}

// SuggestFees implements ledger.WalletLedger as the evm adapter computes it
// (ledger.FeesOver the base fee with the configured tip).
func (l *Ledger) SuggestFees(context.Context) (ledger.Fees, error) {
	return ledger.FeesOver(big.NewInt(l.cfg.BaseFee), big.NewInt(l.cfg.Tip)), nil
}

// EstimateGas implements ledger.WalletLedger: the intrinsic gas.
func (l *Ledger) EstimateGas(_ context.Context, msg ledger.CallMsg) (uint64, error) {
	return intrinsicGas(msg.To == nil, msg.Data), nil
}

// Call implements ledger.WalletLedger as far as a chain without EVM code
// can: a call whose data starts with RevertMarker reverts, as its
// transaction would be mined, with the rest of its data as the revert data
// (so a test chooses what a revert answers: RevertMarker followed by an
// Error(string)'s encoding reverts with that reason), answered as geth does
// (code 3, "execution reverted"); any other call succeeds and returns
// nothing. The state is the head's whatever block names: no call here reads
// state.
func (l *Ledger) Call(_ context.Context, msg ledger.CallMsg, _ *uint64) ([]byte, error) {
	if rest, ok := bytes.CutPrefix(msg.Data, RevertMarker); ok {
		return nil, CallReverted(rest)
	}
	return nil, nil
}

// CallReverted is the error of a call that reverted with data: geth's code
// 3 "execution reverted" with the data, classed as the evm adapter classes
// it.
func CallReverted(data []byte) error {
	re := &rpcError{Code: 3, Message: "execution reverted", Data: hexutil.Encode(data)}
	return ledger.NewError(ledger.Deterministic, re.Message, fmt.Errorf("%w: %w", re, ledger.NewRevertError(data)))
}

// SendRawTransaction implements ledger.WalletLedger. `already known` is a
// success, as the evm adapter reports it.
func (l *Ledger) SendRawTransaction(ctx context.Context, raw []byte) error {
	err := l.Send(ctx, raw)
	if ledger.SendResultOf(err) == ledger.SendAccepted {
		return nil
	}
	return err
}

// TransactionReceipt implements ledger.WalletLedger.
func (l *Ledger) TransactionReceipt(_ context.Context, hash ledger.TxHash) (ledger.Receipt, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	r, ok := l.receipts[common.Hash(hash)]
	if !ok {
		return ledger.Receipt{}, nil
	}
	out := ledger.Receipt{Found: true, Status: ledger.ReceiptReverted, BlockNumber: r.block, BlockHash: ledger.Hash(l.blocks[r.block].Hash),
		GasUsed: r.gasUsed, EffectiveGasPrice: new(big.Int).Set(r.price)}
	if r.status == types.ReceiptStatusSuccessful {
		out.Status = ledger.ReceiptSuccess
	}
	return out, nil
}

// HeadBlock implements ledger.WalletLedger.
func (l *Ledger) HeadBlock(context.Context) (ledger.BlockRef, error) {
	b := l.Head()
	return ledger.BlockRef{Number: b.Number, Hash: ledger.Hash(b.Hash)}, nil
}

// BlockAt implements ledger.WalletLedger.
func (l *Ledger) BlockAt(_ context.Context, number uint64) (ledger.BlockRef, bool, error) {
	b, ok := l.BlockByNumber(number)
	if !ok {
		return ledger.BlockRef{}, false, nil
	}
	return ledger.BlockRef{Number: b.Number, Hash: ledger.Hash(b.Hash)}, true, nil
}

// TxsAtNonce implements ledger.WalletLedger: addr's transactions in the
// block that holds its transaction with nonce, with their receipts.
func (l *Ledger) TxsAtNonce(_ context.Context, addr ledger.Address, nonce uint64) ([]ledger.NonceTx, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	from := common.Address(addr)
	if l.acct(from).nonce <= nonce {
		return nil, false, nil
	}
	for n := len(l.blocks) - 1; n >= 0; n-- {
		out, err := l.senderTxs(from, uint64(n))
		if err != nil {
			return nil, false, err
		}
		for _, tx := range out {
			if tx.Nonce == nonce {
				return out, true, nil
			}
		}
	}
	return nil, false, fmt.Errorf("evmsim: no block holds nonce %d of %s", nonce, from.Hex())
}

// TxsInBlock implements ledger.WalletLedger: addr's transactions in block
// number, with their receipts.
func (l *Ledger) TxsInBlock(_ context.Context, addr ledger.Address, number uint64) ([]ledger.NonceTx, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	if number >= uint64(len(l.blocks)) {
		return nil, false, nil
	}
	out, err := l.senderTxs(common.Address(addr), number)
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// senderTxs returns from's transactions in block number, with their
// receipts and signed bytes. The caller holds l.mu.
func (l *Ledger) senderTxs(from common.Address, number uint64) ([]ledger.NonceTx, error) {
	var out []ledger.NonceTx
	for _, tx := range l.blockTxs[number] {
		if sender, _ := types.Sender(l.signer, tx); sender != from {
			continue
		}
		r := l.receipts[tx.Hash()]
		rc := ledger.Receipt{Found: true, Status: ledger.ReceiptReverted, BlockNumber: r.block, BlockHash: ledger.Hash(l.blocks[r.block].Hash),
			GasUsed: r.gasUsed, EffectiveGasPrice: new(big.Int).Set(r.price)}
		if r.status == types.ReceiptStatusSuccessful {
			rc.Status = ledger.ReceiptSuccess
		}
		raw, err := tx.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("evmsim: encoding transaction %s: %w", tx.Hash().Hex(), err)
		}
		out = append(out, ledger.NonceTx{Nonce: tx.Nonce(), Hash: ledger.TxHash(tx.Hash()), Receipt: rc, Raw: raw})
	}
	return out, nil
}

// nonceAtBlock is addr's nonce by block n: one more than its transaction
// with the highest nonce in blocks 0 to n. Called with mu held.
func (l *Ledger) nonceAtBlock(addr common.Address, n uint64) uint64 {
	for b := min(n, uint64(len(l.blocks)-1)); ; b-- {
		txs := l.blockTxs[b]
		for i := len(txs) - 1; i >= 0; i-- {
			if sender, _ := types.Sender(l.signer, txs[i]); sender == addr {
				return txs[i].Nonce() + 1
			}
		}
		if b == 0 {
			return 0
		}
	}
}

// SetMinTip changes Config.MinTip: the least effective tip a block
// includes, in wei (0: none). Blocks due before the change are mined first
// under the old one.
func (l *Ledger) SetMinTip(wei int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	l.minTip = big.NewInt(wei)
}

// Credit adds wei to addr's balance (a deposit from outside the simulation).
func (l *Ledger) Credit(addr common.Address, wei *big.Int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	ac := l.acct(addr)
	ac.balance.Add(ac.balance, wei)
}

// Head returns the latest block, after mining those whose time has come.
func (l *Ledger) Head() Block {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	return l.blocks[len(l.blocks)-1]
}

// BlockByNumber returns block n, if mined.
func (l *Ledger) BlockByNumber(n uint64) (Block, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	if n >= uint64(len(l.blocks)) {
		return Block{}, false
	}
	return l.blocks[n], true
}

// BlockByHash returns the canonical block with hash h, if any.
func (l *Ledger) BlockByHash(h common.Hash) (Block, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	for i := len(l.blocks) - 1; i >= 0; i-- {
		if l.blocks[i].Hash == h {
			return l.blocks[i], true
		}
	}
	return Block{}, false
}

// NonceAtBlock is addr's nonce by block n (the head's above it).
func (l *Ledger) NonceAtBlock(addr common.Address, n uint64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	return l.nonceAtBlock(addr, n)
}

// blockByTag returns the block a JSON-RPC block tag or number names.
func (l *Ledger) blockByTag(tag string) (Block, bool, error) {
	switch tag {
	case "latest", "pending", "safe", "finalized":
		return l.Head(), true, nil
	case "earliest":
		b, ok := l.BlockByNumber(0)
		return b, ok, nil
	}
	if strings.HasPrefix(tag, "0x") && len(tag) == 66 {
		b, ok := l.BlockByHash(common.HexToHash(tag))
		return b, ok, nil
	}
	n, err := hexutil.DecodeUint64(tag)
	if err != nil {
		return Block{}, false, &rpcError{Code: -32602, Message: "invalid block number"}
	}
	b, ok := l.BlockByNumber(n)
	return b, ok, nil
}

// blockContents returns block b's transactions and their receipts, for the
// server.
func (l *Ledger) blockContents(b Block) ([]rpcTx, []*types.Receipt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b.Number >= uint64(len(l.blocks)) || l.blocks[b.Number].Hash != b.Hash {
		return nil, nil
	}
	txs := make([]rpcTx, 0, len(l.blockTxs[b.Number]))
	receipts := make([]*types.Receipt, 0, len(txs))
	for i, tx := range l.blockTxs[b.Number] {
		from, _ := types.Sender(l.signer, tx)
		txs = append(txs, rpcTx{Transaction: tx, From: from, Block: b, Index: uint(i)})
		receipts = append(receipts, receiptJSON(*l.receipts[tx.Hash()], b))
	}
	return txs, receipts
}

// receiptOf returns a copy of the stored receipt of hash, for the server.
func (l *Ledger) receiptOf(hash common.Hash) (receipt, Block, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	r, ok := l.receipts[hash]
	if !ok {
		return receipt{}, Block{}, false
	}
	return *r, l.blocks[r.block], true
}

// TransactionsIn returns the transactions of canonical block n, in block
// order (nil when n is above the head), for a test that judges what the
// chain holds by its blocks.
func (l *Ledger) TransactionsIn(n uint64) []*types.Transaction {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	if n >= uint64(len(l.blocks)) {
		return nil
	}
	return append([]*types.Transaction(nil), l.blockTxs[n]...)
}
