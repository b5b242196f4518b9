package audit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"golang.org/x/sync/errgroup"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
)

// DefaultReads is how many blocks are read at once when Params leaves it 0:
// enough to hide a node's round trip, few enough not to be rate-limited.
const DefaultReads = 8

// window is how many blocks are read before their transactions are kept:
// a long range is read in windows so that the per-block results of one
// window only are held at a time.
const window = 512

// Params choose the wallet and the blocks an audit reads.
type Params struct {
	ChainID int64
	Address ledger.Address
	// FromBlock is the first block read. nil: the first block that holds a
	// transaction the database recorded as mined for the wallet, or 0 when
	// it recorded none (or one without its block).
	FromBlock *uint64
	// Reads is how many blocks are read at once (0: DefaultReads).
	Reads int
}

// Kind names what a finding is about; its values are part of --json's
// output.
type Kind string

// The exceptions, and the one notice.
const (
	// DoneNotOnChain: a done task's hash is in no block of the range.
	DoneNotOnChain Kind = "done_not_on_chain"
	// DoneHashNotAttempt: a done task's hash is on the chain but no
	// attempt of the task has it.
	DoneHashNotAttempt Kind = "done_hash_not_an_attempt"
	// TaskMinedTwice: a task has more than one transaction on the chain.
	TaskMinedTwice Kind = "task_mined_twice"
	// TaskMinedNotDone: the chain holds a transaction of a waiting task or
	// of a task in error.
	TaskMinedNotDone Kind = "task_mined_not_done"
	// Unexplained: a transaction of the wallet on the chain that no attempt
	// in the database holds.
	Unexplained Kind = "unexplained_transaction"
	// ForeignRecorded: a transaction of the wallet on the chain that the
	// database holds for no task and that is no no-op (the lane's restore
	// recovery recorded it).
	ForeignRecorded Kind = "foreign_transaction_recorded"
	// NonceMinedTwiceInDB: the database holds two transactions as mined
	// at one nonce.
	NonceMinedTwiceInDB Kind = "nonce_mined_twice_in_database"
	// NonceHole: nonces between the chain's nonce and the database's next
	// nonce that no live attempt holds.
	NonceHole Kind = "nonce_hole"
	// ChainReadIncomplete: the wallet's transactions read are not one per
	// nonce up to the chain's nonce.
	ChainReadIncomplete Kind = "chain_read_incomplete"
	// Moved (a notice, not an exception): a transaction is in another
	// block than the database recorded.
	Moved Kind = "moved"
)

// Finding is one exception (or notice): what is wrong, and what to do.
type Finding struct {
	Kind   Kind    `json:"kind"`
	Task   string  `json:"task,omitempty"`
	TxHash string  `json:"tx_hash,omitempty"`
	Nonce  *uint64 `json:"nonce,omitempty"`
	Block  *uint64 `json:"block,omitempty"`
	What   string  `json:"what"`
	Fix    string  `json:"fix"`
}

// Report is an audit's outcome.
type Report struct {
	ChainID int64  `json:"chain_id"`
	Address string `json:"address"`
	// FromBlock and ToBlock are the blocks read (ToBlock: the head when
	// the read began).
	FromBlock uint64 `json:"from_block"`
	ToBlock   uint64 `json:"to_block"`
	// ChainNonce is the wallet's nonce on the chain; NextNonce the
	// database's next nonce (nil: the lane never signed for the wallet).
	ChainNonce uint64 `json:"chain_nonce"`
	NextNonce  *int64 `json:"next_nonce"`
	// FirstNonce is the lowest nonce of the wallet's transactions read
	// (ChainNonce when none): nonces below it were not read.
	FirstNonce uint64 `json:"first_nonce"`
	// Transactions are the wallet's transactions in the blocks read: a
	// task's first at its nonce, a gas bump of one, a no-op.
	Transactions int `json:"transactions"`
	TaskTxs      int `json:"task_transactions"`
	Bumps        int `json:"bumps"`
	Noops        int `json:"noops"`
	// DoneChecked are the done tasks found on the chain with their hash;
	// DoneBeforeRange those whose transaction lies before FromBlock (not
	// checked).
	DoneChecked     int `json:"done_checked"`
	DoneBeforeRange int `json:"done_before_range"`
	// Exceptions make the audit fail; Notices do not.
	Exceptions []Finding `json:"exceptions"`
	Notices    []Finding `json:"notices"`
}

// OK reports whether the audit found no exception.
func (r Report) OK() bool { return len(r.Exceptions) == 0 }

// Summary is the report in one line.
func (r Report) Summary() string {
	nonces := "none"
	if r.Transactions > 0 {
		nonces = fmt.Sprintf("nonces %d–%d", r.FirstNonce, r.ChainNonce-1)
	}
	next := "none"
	if r.NextNonce != nil {
		next = fmt.Sprint(*r.NextNonce)
	}
	verdict := "no exception"
	if n := len(r.Exceptions); n > 0 {
		verdict = fmt.Sprintf("%d exception", n)
		if n > 1 {
			verdict += "s"
		}
	}
	return fmt.Sprintf("wallet %s on chain %d, blocks %d–%d: %d transactions (%d tasks', %d gas bumps, %d no-ops; %s), chain nonce %d, next nonce %s; %d done tasks on the chain; %s",
		r.Address, r.ChainID, r.FromBlock, r.ToBlock, r.Transactions, r.TaskTxs, r.Bumps, r.Noops, nonces, r.ChainNonce, next, r.DoneChecked, verdict)
}

// Text is the report for a reader: each exception with what to do, each
// notice, then the summary.
func (r Report) Text() string {
	var b strings.Builder
	for _, f := range r.Exceptions {
		fmt.Fprintf(&b, "EXCEPTION %s: %s\n  to do: %s\n", f.Kind, f.What, f.Fix)
	}
	for _, f := range r.Notices {
		fmt.Fprintf(&b, "notice %s: %s\n", f.Kind, f.What)
	}
	b.WriteString(r.Summary())
	b.WriteString("\n")
	return b.String()
}

// chainTx is one transaction of the wallet as a block holds it.
type chainTx struct {
	ledger.NonceTx
	block uint64
	hash  string
}

// Wallet audits the wallet p names: it reads the database (st), then the
// chain (led) from p.FromBlock to the head, and holds one against the
// other (the package doc says what it checks). An error means the audit
// could not be made (the database or the node did not answer); what it
// found is in the Report.
func Wallet(ctx context.Context, st *store.Store, led ledger.WalletLedger, p Params) (Report, error) {
	sender := p.Address.Hex()
	rep := Report{ChainID: p.ChainID, Address: sender, Exceptions: []Finding{}, Notices: []Finding{}}
	var from uint64
	if p.FromBlock != nil {
		from = *p.FromBlock
	} else {
		first, unknown, err := st.AttemptGetFirstMinedBlock(ctx, p.ChainID, sender)
		if err != nil {
			return rep, err
		}
		if !unknown && first > 0 {
			from = uint64(first)
		}
	}
	// The database first: whatever it records as mined is then in a block
	// the chain's read below reaches.
	rec, err := st.WalletRecordGet(ctx, p.ChainID, sender)
	if err != nil {
		return rep, err
	}
	chainNonce, err := led.NonceAt(ctx, p.Address)
	if err != nil {
		return rep, fmt.Errorf("reading the chain's nonce of %s: %w", sender, err)
	}
	head, err := led.HeadBlock(ctx)
	if err != nil {
		return rep, fmt.Errorf("reading the chain's head: %w", err)
	}
	if from > head.Number {
		return rep, fmt.Errorf("block %d is above the chain's head %d", from, head.Number)
	}
	rep.FromBlock, rep.ToBlock = from, head.Number
	txs, err := readBlocks(ctx, led, p.Address, from, head.Number, cmp.Or(max(p.Reads, 0), DefaultReads))
	if err != nil {
		return rep, err
	}
	a := &auditor{rep: &rep, p: p, rec: index(rec.Attempts)}
	a.checkChainNonces(txs, chainNonce)
	rep.NextNonce = rec.NextNonce
	if a.hasUnknown(txs) {
		// An attempt stored after the database was read, and mined before
		// the chain was: read the attempts again to explain it.
		later, err := st.WalletRecordGet(ctx, p.ChainID, sender)
		if err != nil {
			return rep, err
		}
		a.later = index(later.Attempts)
	}
	a.explain(txs)
	a.checkTasks()
	a.checkNonces()
	return rep, nil
}

// readBlocks returns addr's transactions in blocks from to to, in chain
// order, reading reads blocks at once.
func readBlocks(ctx context.Context, led ledger.WalletLedger, addr ledger.Address, from, to uint64, reads int) ([]chainTx, error) {
	var out []chainTx
	for start := from; ; start += window {
		end := min(to, start+window-1)
		blocks := make([][]ledger.NonceTx, end-start+1)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(reads)
		for n := start; n <= end; n++ {
			g.Go(func() error {
				txs, found, err := led.TxsInBlock(gctx, addr, n)
				switch {
				case err != nil:
					return fmt.Errorf("reading block %d: %w", n, err)
				case !found:
					return fmt.Errorf("block %d is no longer on the chain (its head went back while it was read): run the audit again", n)
				}
				blocks[n-start] = txs
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		for i, txs := range blocks {
			for _, tx := range txs {
				out = append(out, chainTx{NonceTx: tx, block: start + uint64(i), hash: tx.Hash.Hex()})
			}
		}
		if end == to {
			return out, nil
		}
	}
}

// record indexes the database's attempts of a wallet.
type record struct {
	byHash  map[string][]store.AttemptWithTask
	byTask  map[string][]store.AttemptWithTask
	byNonce map[int64][]store.AttemptWithTask
}

func index(atts []store.AttemptWithTask) record {
	r := record{byHash: map[string][]store.AttemptWithTask{}, byTask: map[string][]store.AttemptWithTask{}, byNonce: map[int64][]store.AttemptWithTask{}}
	for _, a := range atts {
		a.TxHash = strings.ToLower(a.TxHash)
		r.byHash[a.TxHash] = append(r.byHash[a.TxHash], a)
		if a.TaskID != "" {
			r.byTask[a.TaskID] = append(r.byTask[a.TaskID], a)
		}
		r.byNonce[a.Nonce] = append(r.byNonce[a.Nonce], a)
	}
	return r
}

type auditor struct {
	rep *Report
	p   Params
	// rec is the database as read before the chain; later, when set, as
	// read after it (only to explain a transaction rec does not hold).
	rec, later record
	// mined are each task's transactions on the chain.
	mined map[string][]chainTx
	// onChain are the chain's transactions read, by hash.
	onChain map[string]chainTx
}

func (a *auditor) except(f Finding) { a.rep.Exceptions = append(a.rep.Exceptions, f) }

// checkChainNonces checks that the transactions read are one per nonce,
// contiguous up to the chain's nonce, and sets the report's nonces.
func (a *auditor) checkChainNonces(txs []chainTx, chainNonce uint64) {
	r := a.rep
	r.ChainNonce, r.FirstNonce = chainNonce, chainNonce
	if len(txs) == 0 {
		return
	}
	sorted := slices.Clone(txs)
	slices.SortStableFunc(sorted, func(x, y chainTx) int { return cmp.Compare(x.Nonce, y.Nonce) })
	r.FirstNonce = sorted[0].Nonce
	for i := 1; i < len(sorted); i++ {
		prev, cur := sorted[i-1], sorted[i]
		switch {
		case cur.Nonce == prev.Nonce:
			a.except(Finding{Kind: ChainReadIncomplete, TxHash: cur.hash, Nonce: ptr(cur.Nonce), Block: ptr(cur.block),
				What: fmt.Sprintf("nonce %d was read twice, %s in block %d and %s in block %d (a chain holds one transaction per nonce)", cur.Nonce, prev.hash, prev.block, cur.hash, cur.block),
				Fix:  chainReadFix})
		case cur.Nonce != prev.Nonce+1:
			span := fmt.Sprintf("nonce %d is", prev.Nonce+1)
			if cur.Nonce-1 > prev.Nonce+1 {
				span = fmt.Sprintf("nonces %d to %d are", prev.Nonce+1, cur.Nonce-1)
			}
			a.except(Finding{Kind: ChainReadIncomplete, Nonce: ptr(prev.Nonce + 1),
				What: fmt.Sprintf("%s in no block read, between %s (block %d) and %s (block %d)", span, prev.hash, prev.block, cur.hash, cur.block),
				Fix:  chainReadFix})
		}
	}
	last := sorted[len(sorted)-1].Nonce
	switch {
	case last+1 > chainNonce:
		r.ChainNonce = last + 1 // mined after the nonce was read
	case last+1 < chainNonce:
		a.except(Finding{Kind: ChainReadIncomplete, Nonce: ptr(last + 1),
			What: fmt.Sprintf("the chain's nonce of the wallet is %d, but its transactions read up to block %d end at nonce %d", chainNonce, r.ToBlock, last),
			Fix:  chainReadFix})
	}
}

const chainReadFix = "the node lags, has lost blocks or reorganised while it was read: run the audit again, against another node of the chain if it persists"

// hasUnknown reports whether a transaction read has no attempt in rec.
func (a *auditor) hasUnknown(txs []chainTx) bool {
	for _, tx := range txs {
		if len(a.rec.byHash[tx.hash]) == 0 {
			return true
		}
	}
	return false
}

// explain classifies each transaction read by the attempts that hold it.
func (a *auditor) explain(txs []chainTx) {
	r := a.rep
	a.mined, a.onChain = map[string][]chainTx{}, map[string]chainTx{}
	for _, tx := range txs {
		a.onChain[tx.hash] = tx
		r.Transactions++
		atts := a.rec.byHash[tx.hash]
		if len(atts) == 0 {
			atts = a.later.byHash[tx.hash]
		}
		if len(atts) == 0 {
			what := fmt.Sprintf("the chain's transaction %s at nonce %d (block %d) is not in the database", tx.hash, tx.Nonce, tx.block)
			for _, o := range a.rec.byNonce[int64(tx.Nonce)] {
				if o.State != store.AttemptDropped {
					what += fmt.Sprintf("; the database holds that nonce for %s with %s (%s), which can no longer be mined", owner(o), o.TxHash, o.State)
				}
			}
			a.except(Finding{Kind: Unexplained, TxHash: tx.hash, Nonce: ptr(tx.Nonce), Block: ptr(tx.block), What: what,
				Fix: "someone else signed with this wallet's key, or the database was restored from a backup older than the chain and the lane has not yet recorded the transaction. " +
					"If the key is used elsewhere, stop that use (ledgerq must be its only signer); if the database was restored, let the lane run (its restore recovery records the transaction) and audit again"})
			continue
		}
		for _, at := range atts {
			if at.MinedBlock != nil && (uint64(*at.MinedBlock) != tx.block || !strings.EqualFold(at.MinedBlockHash, tx.Receipt.BlockHash.Hex())) {
				r.Notices = append(r.Notices, Finding{Kind: Moved, Task: at.TaskID, TxHash: tx.hash, Nonce: ptr(tx.Nonce), Block: ptr(tx.block),
					What: fmt.Sprintf("%s's transaction %s is in block %d (%s), not in block %d (%s) where the database recorded it: the chain reorganised after the lane saw it", owner(at), tx.hash, tx.block, tx.Receipt.BlockHash.Hex(), *at.MinedBlock, at.MinedBlockHash),
					Fix:  "nothing: the lane follows the block its transaction is in"})
				break
			}
		}
		if task := taskOf(atts); task != "" {
			a.mined[task] = append(a.mined[task], tx)
			if a.firstAt(task, int64(tx.Nonce)) == tx.hash {
				r.TaskTxs++
			} else {
				r.Bumps++
			}
			continue
		}
		var t types.Transaction
		if err := t.UnmarshalBinary(tx.Raw); err == nil && t.To() != nil && *t.To() == common.Address(a.p.Address) && t.Value().Sign() == 0 && len(t.Data()) == 0 {
			r.Noops++
			continue
		}
		what := fmt.Sprintf("the database holds the chain's transaction %s at nonce %d (block %d) for no task, and it is no no-op", tx.hash, tx.Nonce, tx.block)
		if len(tx.Raw) > 0 && t.To() != nil {
			what += fmt.Sprintf(" (it sends %s wei to %s with %d bytes of data)", t.Value(), strings.ToLower(t.To().Hex()), len(t.Data()))
		}
		a.except(Finding{Kind: ForeignRecorded, TxHash: tx.hash, Nonce: ptr(tx.Nonce), Block: ptr(tx.block),
			What: what + ": the lane's restore recovery found it at a nonce the database did not know",
			Fix:  "either someone else signed with this wallet's key (stop that use: ledgerq must be its only signer), or it carried a task accepted after the backup the database was restored from: tell that task's client it was carried out by this transaction"})
	}
}

// firstAt returns the hash of the task's first attempt at nonce (the one
// its gas bumps replaced), or "".
func (a *auditor) firstAt(task string, nonce int64) string {
	for _, rec := range []record{a.rec, a.later} {
		for _, at := range rec.byTask[task] { // in id order
			if at.Nonce == nonce {
				return at.TxHash
			}
		}
	}
	return ""
}

// taskOf returns the task the attempts carry, or "" for none.
func taskOf(atts []store.AttemptWithTask) string {
	for _, at := range atts {
		if at.TaskID != "" {
			return at.TaskID
		}
	}
	return ""
}

// owner names what an attempt is for.
func owner(at store.AttemptWithTask) string {
	if at.TaskID == "" {
		return "a transaction of no task"
	}
	return "task " + at.TaskID
}

// checkTasks checks every task the database read before the chain holds.
func (a *auditor) checkTasks() {
	tasks := make([]string, 0, len(a.rec.byTask))
	for id := range a.rec.byTask {
		tasks = append(tasks, id)
	}
	slices.Sort(tasks)
	for _, id := range tasks {
		atts := a.rec.byTask[id]
		status, done := atts[0].TaskStatus, strings.ToLower(atts[0].TaskTxHash)
		mined := a.mined[id]
		if len(mined) > 1 {
			list := make([]string, len(mined))
			for i, tx := range mined {
				list[i] = fmt.Sprintf("%s (nonce %d, block %d)", tx.hash, tx.Nonce, tx.block)
			}
			a.except(Finding{Kind: TaskMinedTwice, Task: id, TxHash: mined[1].hash, Nonce: ptr(mined[1].Nonce), Block: ptr(mined[1].block),
				What: fmt.Sprintf("task %s has %d transactions on the chain: %s: its request was carried out %d times", id, len(mined), strings.Join(list, ", "), len(mined)),
				Fix:  "recover the extra payments from their recipient, and report it as a bug of ledgerq with this report and the wallet's log"})
		}
		switch status {
		case store.TaskDone:
			a.checkDone(id, done, atts, mined)
		case store.TaskWaiting, store.TaskError:
			if len(mined) == 0 {
				continue
			}
			tx := mined[0]
			f := Finding{Kind: TaskMinedNotDone, Task: id, TxHash: tx.hash, Nonce: ptr(tx.Nonce), Block: ptr(tx.block)}
			if status == store.TaskWaiting {
				f.What = fmt.Sprintf("task %s is waiting, but the chain holds its transaction %s at nonce %d (block %d): sending it again would pay twice", id, tx.hash, tx.Nonce, tx.block)
				f.Fix = "cancel the task before the lane sends it (DELETE /v1/wallets/{wallet}/tasks/" + id + ", or the console) and tell its client this transaction carried it"
			} else {
				f.What = fmt.Sprintf("task %s ended in error, but the chain holds its transaction %s at nonce %d (block %d): its client was told it failed for a payment that happened", id, tx.hash, tx.Nonce, tx.block)
				f.Fix = "tell the task's client this transaction carried it, so that it does not send the request again"
			}
			a.except(f)
		}
	}
}

// checkDone checks a done task: its hash is on the chain and is one of its
// attempts'.
func (a *auditor) checkDone(id, hash string, atts []store.AttemptWithTask, mined []chainTx) {
	r := a.rep
	var own *store.AttemptWithTask
	for i := range atts {
		if atts[i].TxHash == hash {
			own = &atts[i]
		}
	}
	if tx, ok := a.onChain[hash]; ok {
		r.DoneChecked++
		if own == nil {
			a.except(Finding{Kind: DoneHashNotAttempt, Task: id, TxHash: hash, Nonce: ptr(tx.Nonce), Block: ptr(tx.block),
				What: fmt.Sprintf("task %s is done with %s, which the chain holds at nonce %d (block %d), but no attempt of the task has that hash", id, hash, tx.Nonce, tx.block),
				Fix:  "the database is inconsistent: find who changed ledgerq.wallet_tasks.tx_hash of the task, and compare the transaction with the task's request"})
		}
		return
	}
	// Not in the blocks read: before them, or missing.
	below := true
	for _, at := range atts {
		if at.Nonce >= int64(a.rep.FirstNonce) || (at.MinedBlock != nil && uint64(*at.MinedBlock) >= r.FromBlock) {
			below = false
		}
	}
	if below {
		r.DoneBeforeRange++
		return
	}
	f := Finding{Kind: DoneNotOnChain, Task: id, TxHash: hash,
		What: fmt.Sprintf("task %s is done with %s, which no block from %d to %d holds (the chain's nonce is %d)", id, hash, r.FromBlock, r.ToBlock, r.ChainNonce)}
	if own != nil {
		f.Nonce = ptr(uint64(own.Nonce))
	}
	if len(mined) > 0 {
		tx := mined[0]
		f.What += fmt.Sprintf("; the chain holds the task's transaction %s at nonce %d (block %d)", tx.hash, tx.Nonce, tx.block)
		f.Fix = fmt.Sprintf("the database names the wrong hash: the task was carried out by %s. Find who changed ledgerq.wallet_tasks.tx_hash of the task and set it back to that hash", tx.hash)
	} else {
		f.Fix = "its client was told done for a transaction the chain does not have. Run the audit again against another node of the chain (this one may lag or have lost blocks); " +
			"if it holds, start the lane if it is stopped (its confirm step takes back done and sends the same transaction again when the chain lost it), and if the task stays done, tell its client the payment did not happen"
	}
	a.except(f)
}

// checkNonces checks the database's nonces: none held as mined twice, and
// no hole between the chain's nonce and the next nonce.
func (a *auditor) checkNonces() {
	r := a.rep
	nonces := make([]int64, 0, len(a.rec.byNonce))
	for n := range a.rec.byNonce {
		nonces = append(nonces, n)
	}
	slices.Sort(nonces)
	for _, n := range nonces {
		var mined []store.AttemptWithTask
		for _, at := range a.rec.byNonce[n] {
			if (at.State == store.AttemptMined || at.State == store.AttemptConfirmed) && !slices.ContainsFunc(mined, func(m store.AttemptWithTask) bool { return m.TxHash == at.TxHash }) {
				mined = append(mined, at)
			}
		}
		if len(mined) < 2 {
			continue
		}
		list := make([]string, len(mined))
		for i, m := range mined {
			list[i] = fmt.Sprintf("%s (%s)", m.TxHash, owner(m))
		}
		what := fmt.Sprintf("the database holds nonce %d as mined by %s: a chain mines one transaction per nonce", n, strings.Join(list, " and "))
		for _, tx := range a.onChain {
			if tx.Nonce == uint64(n) {
				what += fmt.Sprintf("; the chain holds %s there", tx.hash)
			}
		}
		a.except(Finding{Kind: NonceMinedTwiceInDB, Nonce: ptr(uint64(n)), TxHash: mined[1].TxHash, What: what,
			Fix: "the database is wrong about all but one of them: compare with the chain's transaction at that nonce, and report it as a bug of ledgerq with this report"})
	}
	if r.NextNonce == nil {
		return
	}
	var holeFrom int64 = -1
	flush := func(to int64) {
		if holeFrom < 0 {
			return
		}
		span, use := fmt.Sprintf("nonce %d is", holeFrom), "it is"
		if to > holeFrom {
			span, use = fmt.Sprintf("nonces %d to %d are", holeFrom, to), "they are"
		}
		a.except(Finding{Kind: NonceHole, Nonce: ptr(uint64(holeFrom)),
			What: fmt.Sprintf("%s below the database's next nonce %d, held by no live transaction of ours, and not used on the chain (its nonce is %d): the chain mines none of the wallet's later transactions until %s used", span, *r.NextNonce, r.ChainNonce, use),
			Fix:  "a running lane fills a freed nonce with the next waiting task, or with a no-op after --wallet-stall-timeout; if the hole stays while the lane runs, read ledgerq.shards.last_error and ledgerq.wallet_health for the wallet"})
		holeFrom = -1
	}
	for n := int64(r.ChainNonce); n < *r.NextNonce; n++ {
		live := slices.ContainsFunc(a.rec.byNonce[n], func(at store.AttemptWithTask) bool { return at.State != store.AttemptDropped })
		switch {
		case !live && holeFrom < 0:
			holeFrom = n
		case live:
			flush(n - 1)
		}
	}
	flush(*r.NextNonce - 1)
}

func ptr[T any](v T) *T { return &v }
