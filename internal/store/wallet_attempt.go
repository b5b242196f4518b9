package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// AttemptState is a transaction attempt's state.
type AttemptState string

// Attempt states, as stored.
const (
	// AttemptSigned: stored before any broadcast, not known sent; recover
	// re-broadcasts it.
	AttemptSigned AttemptState = "signed"
	// AttemptSent: broadcast, or its outcome was indeterminate.
	AttemptSent AttemptState = "sent"
	// AttemptMined: it has a receipt, but fewer blocks on top of it than the
	// lane's confirmations; its task is still executing.
	AttemptMined AttemptState = "mined"
	// AttemptConfirmed: mined and deep enough: final.
	AttemptConfirmed AttemptState = "confirmed"
	// AttemptDropped: will never be mined; its nonce is free again.
	AttemptDropped AttemptState = "dropped"
)

// AttemptKind says why an attempt was signed when a client asked for it;
// the lane's own attempts (a send, a gas bump, a no-op) have none.
type AttemptKind string

// Attempt kinds, as stored.
const (
	// AttemptCancel: the no-op a cancel sent at its task's nonce (a 0-value
	// transfer to the wallet itself, an attempt of the task). Mined, it ends
	// the task cancelled; a gas bump of it is one too.
	AttemptCancel AttemptKind = "cancel"
	// AttemptSpeedUp: the task's transaction signed again with the fees a
	// client asked for (POST …/speed-up).
	AttemptSpeedUp AttemptKind = "speed_up"
)

// SignedTx is a transaction the caller signed for a task, to be stored
// before it is broadcast.
type SignedTx struct {
	TaskID string
	// Kind is set for a cancel's no-op and a speed-up (AttemptBump).
	Kind  AttemptKind
	Nonce int64
	// TxHash is the signed transaction's hash, 0x-prefixed hex.
	TxHash string
	// Raw is the signed transaction as it will be broadcast.
	Raw                  []byte
	GasLimit             uint64
	MaxFeePerGas         *big.Int
	MaxPriorityFeePerGas *big.Int
}

// Attempt is one row of ledgerq.tx_attempts.
type Attempt struct {
	SignedTx
	// ID is the row's key, in the order attempts were stored.
	ID          int64
	ChainID     int64
	Sender      string
	State       AttemptState
	LastError   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	SentAt      *time.Time
	ConfirmedAt *time.Time
	// SupersededBy is the hash of the gas bump that replaced this attempt
	// for its nonce (it is dropped, but may still be mined).
	SupersededBy string
	// MinedBlock and MinedBlockHash are the block its receipt was last seen
	// in (mined and confirmed attempts), MinedAt when.
	MinedBlock     *int64
	MinedBlockHash string
	MinedAt        *time.Time
	// Reorgs is how many times its mined transaction left the chain.
	Reorgs int
}

// Noop reports whether the attempt is a no-op (a 0-value transfer to self
// filling a nonce no task holds): an attempt of no task.
func (a Attempt) Noop() bool { return a.TaskID == "" }

func attemptFromRow(r dbsqlc.LedgerqTxAttempt) Attempt {
	return Attempt{
		SignedTx: SignedTx{
			TaskID: deref(r.TaskID), Kind: AttemptKind(deref(r.Kind)), Nonce: r.Nonce, TxHash: r.TxHash, Raw: r.Raw, GasLimit: uint64(r.GasLimit),
			MaxFeePerGas: bigFromNumeric(r.MaxFeePerGas), MaxPriorityFeePerGas: bigFromNumeric(r.MaxPriorityFeePerGas),
		},
		ID: r.ID, ChainID: r.ChainID, Sender: r.Sender, State: AttemptState(r.State),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		SentAt: utcPtr(r.SentAt), ConfirmedAt: utcPtr(r.ConfirmedAt),
		MinedBlock: r.MinedBlock, MinedBlockHash: deref(r.MinedBlockHash), MinedAt: utcPtr(r.MinedAt), Reorgs: int(r.Reorgs),
		LastError: deref(r.LastError), SupersededBy: deref(r.SupersededBy),
	}
}

// NonceTakenError says a live attempt already holds one of the nonces: a
// second transaction for it would be a double spend, so nothing was stored.
type NonceTakenError struct {
	ChainID int64
	Sender  string
}

func (e *NonceTakenError) Error() string {
	return fmt.Sprintf("a live transaction attempt of %s already holds one of these nonces", WalletShardKey(e.ChainID, e.Sender))
}

// AttemptStoreManyParams are the signed transactions of one send round.
type AttemptStoreManyParams struct {
	Now     time.Time
	ChainID int64
	Sender  string
	// FirstNonce is the next nonce the caller read (WalletNonceGet, or the
	// chain's pending nonce for an address with none stored) and signed
	// Attempts[0] with; Attempts[i] has nonce FirstNonce+i.
	FirstNonce int64
	// Attempts: one per task, each task waiting.
	Attempts []SignedTx
	// Reused are attempts at freed nonces (recycled nonces):
	// below FirstNonce, each held by no live attempt (the unique index
	// refuses one that is). They do not move the next nonce. One per task,
	// each task waiting, none also in Attempts.
	Reused []SignedTx
	// SignRequests: the wallet's signer is outside the process, so the
	// requests recorded before it signed (SignRequestRecord) are deleted
	// at the stored nonces in the same transaction: the stored attempt now
	// holds each nonce. A wallet whose key is in the process records none
	// and makes no statement for them.
	SignRequests bool
}

// AttemptStoreMany is the wallet lane's write-ahead: in one
// transaction it moves the tasks waiting -> executing, advances the wallet's
// next nonce from FirstNonce past the attempts, and stores the attempts
// (signed, with their raw bytes) — before anything is broadcast.
//
// The caller reads the next nonce, signs with consecutive nonces from it,
// and stores; the nonce moves only if it is still FirstNonce (a
// compare-and-set), so the caller never needs to sign inside a database
// transaction. It fails, storing nothing, with *NonceMovedError when the
// nonce moved, *NonceTakenError when a live attempt already holds one of the
// nonces (the unique index refuses a second transaction for a nonce), and
// *TaskNotWaitingError when a task was cancelled or started meanwhile.
// Signed bytes of a failed store were never stored, so they must not be
// broadcast. A worker runs it inside ShardFenced, so a worker whose lease
// was rescued stores nothing.
//
// Reused attempts are stored in the same transaction; they need the
// wallet's next nonce to be stored already and equal to FirstNonce. It
// returns the stored attempts, Reused first, then Attempts.
func (s *Store) AttemptStoreMany(ctx context.Context, p AttemptStoreManyParams) ([]Attempt, error) {
	all := append(append([]SignedTx(nil), p.Reused...), p.Attempts...)
	n := len(all)
	if n == 0 {
		return nil, nil
	}
	sender := lowerHex(p.Sender)
	ins := dbsqlc.AttemptInsertManyParams{
		ChainID: p.ChainID, Sender: sender, Now: p.Now,
		TxHashes: make([]string, n), TaskIds: make([]string, n), Nonces: make([]int64, n), Raws: make([][]byte, n),
		GasLimits: make([]int64, n), MaxFees: make([]pgtype.Numeric, n), MaxTips: make([]pgtype.Numeric, n),
	}
	seen := make(map[string]bool, n)
	reusedNonces := make(map[int64]bool, len(p.Reused))
	for i, a := range all {
		reused := i < len(p.Reused)
		switch {
		case reused && (a.Nonce < 0 || a.Nonce >= p.FirstNonce):
			return nil, fmt.Errorf("storing attempts: reused nonce %d is not below the next nonce %d", a.Nonce, p.FirstNonce)
		case reused && reusedNonces[a.Nonce]:
			return nil, fmt.Errorf("storing attempts: reused nonce %d twice", a.Nonce)
		case !reused && a.Nonce != p.FirstNonce+int64(i-len(p.Reused)):
			return nil, fmt.Errorf("storing attempts: attempt %d has nonce %d, not %d: nonces must be consecutive from the next nonce", i-len(p.Reused), a.Nonce, p.FirstNonce+int64(i-len(p.Reused)))
		case seen[a.TaskID]:
			return nil, fmt.Errorf("storing attempts: task %q twice", a.TaskID)
		case a.GasLimit == 0 || a.GasLimit > 1<<63-1:
			return nil, fmt.Errorf("storing attempts: gas limit %d out of range", a.GasLimit)
		}
		seen[a.TaskID] = true
		if reused {
			reusedNonces[a.Nonce] = true
		}
		ins.TxHashes[i], ins.TaskIds[i], ins.Nonces[i], ins.Raws[i] = lowerHex(a.TxHash), a.TaskID, a.Nonce, a.Raw
		ins.GasLimits[i], ins.MaxFees[i], ins.MaxTips[i] = int64(a.GasLimit), numericFromBig(a.MaxFeePerGas), numericFromBig(a.MaxPriorityFeePerGas)
	}
	key := WalletShardKey(p.ChainID, sender)
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		started, err := q.TaskStartMany(ctx, dbsqlc.TaskStartManyParams{Now: p.Now, Ids: ins.TaskIds, ChainID: p.ChainID, Sender: sender})
		if err != nil {
			return fmt.Errorf("starting the tasks of %s: %w", key, err)
		}
		if started != int64(n) {
			return &TaskNotWaitingError{Wanted: n, Waiting: int(started)}
		}
		if len(p.Reused) > 0 {
			// A nonce below the next one was assigned before: only then can
			// it have been freed.
			if _, err := one(q.WalletNonceGet(ctx, dbsqlc.WalletNonceGetParams{ChainID: p.ChainID, Sender: sender})); errors.Is(err, ErrNotFound) {
				return &NonceMovedError{ChainID: p.ChainID, Sender: sender, Expected: p.FirstNonce}
			} else if err != nil {
				return fmt.Errorf("reading the next nonce of %s: %w", key, err)
			}
		}
		_, err = one(q.WalletNonceAdvance(ctx, dbsqlc.WalletNonceAdvanceParams{
			ChainID: p.ChainID, Sender: sender, Expected: p.FirstNonce, Next: p.FirstNonce + int64(len(p.Attempts)), Now: p.Now,
		}))
		switch {
		case errors.Is(err, ErrNotFound):
			return &NonceMovedError{ChainID: p.ChainID, Sender: sender, Expected: p.FirstNonce}
		case err != nil:
			return fmt.Errorf("advancing the next nonce of %s: %w", key, err)
		}
		if _, err := q.AttemptInsertMany(ctx, ins); err != nil {
			if pgUniqueViolation(err, "tx_attempts_live_nonce") {
				return &NonceTakenError{ChainID: p.ChainID, Sender: sender}
			}
			return fmt.Errorf("storing the attempts of %s: %w", key, err)
		}
		if p.SignRequests {
			if _, err := q.SignRequestDeleteAt(ctx, dbsqlc.SignRequestDeleteAtParams{ChainID: p.ChainID, Sender: sender, Nonces: ins.Nonces}); err != nil {
				return fmt.Errorf("deleting the sign requests of %s: %w", key, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Attempt, n)
	for i, a := range all {
		a.TxHash = ins.TxHashes[i]
		out[i] = Attempt{SignedTx: a, ChainID: p.ChainID, Sender: sender, State: AttemptSigned, CreatedAt: p.Now, UpdatedAt: p.Now}
	}
	return out, nil
}

// AttemptStoreNoopParams are a no-op transaction (a 0-value transfer to
// self) for a nonce below the wallet's next nonce that no live attempt
// holds.
type AttemptStoreNoopParams struct {
	Now     time.Time
	ChainID int64
	Sender  string
	// Tx has no TaskID.
	Tx SignedTx
}

// AttemptStoreNoop stores a no-op before it is broadcast (the write-ahead).
// It fails, storing nothing, with *NonceTakenError when a live attempt holds
// the nonce or a task's sign request pins it (a signer outside the process
// was asked for that task's transaction there: no other content may take
// the nonce), and with *NonceMovedError when the nonce is not below the
// wallet's next nonce (it was never assigned, so it is no gap). A no-op's
// own sign request at the nonce is deleted with it stored.
func (s *Store) AttemptStoreNoop(ctx context.Context, p AttemptStoreNoopParams) error {
	if p.Tx.TaskID != "" {
		return fmt.Errorf("storing a no-op: it has task %q", p.Tx.TaskID)
	}
	sender := lowerHex(p.Sender)
	return s.withTx(ctx, func(q *dbsqlc.Queries) error {
		next, err := one(q.WalletNonceGet(ctx, dbsqlc.WalletNonceGetParams{ChainID: p.ChainID, Sender: sender}))
		switch {
		case errors.Is(err, ErrNotFound) || err == nil && p.Tx.Nonce >= next.NextNonce:
			return &NonceMovedError{ChainID: p.ChainID, Sender: sender, Expected: p.Tx.Nonce + 1}
		case err != nil:
			return fmt.Errorf("reading the next nonce of %s: %w", WalletShardKey(p.ChainID, sender), err)
		}
		pinned, err := one(q.SignRequestTakeForNoop(ctx, dbsqlc.SignRequestTakeForNoopParams{ChainID: p.ChainID, Sender: sender, Nonce: p.Tx.Nonce}))
		switch {
		case err != nil:
			return fmt.Errorf("reading the sign requests of %s: %w", WalletShardKey(p.ChainID, sender), err)
		case pinned > 0:
			return &NonceTakenError{ChainID: p.ChainID, Sender: sender}
		}
		return insertOne(ctx, q, p.Now, p.ChainID, sender, p.Tx)
	})
}

// AttemptBumpParams are a gas bump: the sent attempt it replaces and the
// new one, signed for the same task and nonce with higher fees. A cancel's
// no-op (New.Kind AttemptCancel) and a speed-up (AttemptSpeedUp) are stored
// the same way.
type AttemptBumpParams struct {
	Now     time.Time
	ChainID int64
	Sender  string
	// Old is the hash of the nonce's live, sent attempt.
	Old string
	New SignedTx
}

// AttemptBump stores a gas bump before it is broadcast (the write-ahead), in
// one transaction: the old attempt leaves the live set (dropped, superseded
// by the new hash: it may still be mined, and confirm looks it up), the new
// one is stored signed, and the task's bump count goes up (not for a
// cancel's no-op: it is no bump of the task's transaction; a speed-up is
// one, and the task's request for it is done). It returns ErrNotFound,
// storing nothing, when the old attempt is no longer sent or belongs to
// another task or nonce.
func (s *Store) AttemptBump(ctx context.Context, p AttemptBumpParams) error {
	sender, oldHash, newHash := lowerHex(p.Sender), lowerHex(p.Old), lowerHex(p.New.TxHash)
	return s.withTx(ctx, func(q *dbsqlc.Queries) error {
		old, err := one(q.AttemptGetLiveAt(ctx, dbsqlc.AttemptGetLiveAtParams{ChainID: p.ChainID, Sender: sender, Nonce: p.New.Nonce}))
		if err != nil {
			return fmt.Errorf("bumping nonce %d of %s: %w", p.New.Nonce, WalletShardKey(p.ChainID, sender), err)
		}
		if old.TxHash != oldHash || deref(old.TaskID) != p.New.TaskID {
			return fmt.Errorf("bumping nonce %d of %s: attempt %s is not its live attempt: %w", p.New.Nonce, WalletShardKey(p.ChainID, sender), oldHash, ErrNotFound)
		}
		if _, err := one(q.AttemptSupersede(ctx, dbsqlc.AttemptSupersedeParams{SupersededBy: newHash, Now: p.Now, ChainID: p.ChainID, TxHash: oldHash})); err != nil {
			return fmt.Errorf("superseding attempt %s: %w", oldHash, err)
		}
		if err := insertOne(ctx, q, p.Now, p.ChainID, sender, p.New); err != nil {
			return err
		}
		if p.New.TaskID == "" {
			return nil
		}
		if p.New.Kind != "" {
			// The request is done; a speed-up not stored before a cancel
			// is one the cancel's no-op overrides.
			if _, err := q.TaskClearSpeedUp(ctx, dbsqlc.TaskClearSpeedUpParams{Now: p.Now, ID: p.New.TaskID}); err != nil {
				return fmt.Errorf("recording the %s of task %q: %w", p.New.Kind, p.New.TaskID, err)
			}
		}
		if p.New.Kind == AttemptCancel {
			return nil
		}
		n, err := q.TaskCountBump(ctx, dbsqlc.TaskCountBumpParams{Now: p.Now, ID: p.New.TaskID})
		if err != nil {
			return fmt.Errorf("counting the bump of task %q: %w", p.New.TaskID, err)
		}
		if n != 1 {
			return fmt.Errorf("counting the bump of task %q: %w", p.New.TaskID, ErrNotFound)
		}
		return nil
	})
}

func insertOne(ctx context.Context, q *dbsqlc.Queries, now time.Time, chainID int64, sender string, a SignedTx) error {
	if a.GasLimit == 0 || a.GasLimit > 1<<63-1 {
		return fmt.Errorf("storing an attempt: gas limit %d out of range", a.GasLimit)
	}
	ins := dbsqlc.AttemptInsertOneParams{
		ChainID: chainID, TxHash: lowerHex(a.TxHash), Sender: sender, Nonce: a.Nonce, Raw: a.Raw,
		GasLimit: int64(a.GasLimit), MaxFee: numericFromBig(a.MaxFeePerGas), MaxTip: numericFromBig(a.MaxPriorityFeePerGas), Now: now,
	}
	if a.TaskID != "" {
		ins.TaskID = &a.TaskID
	}
	if a.Kind != "" {
		ins.Kind = (*string)(&a.Kind)
	}
	if err := q.AttemptInsertOne(ctx, ins); err != nil {
		if pgUniqueViolation(err, "tx_attempts_live_nonce") {
			return &NonceTakenError{ChainID: chainID, Sender: sender}
		}
		return fmt.Errorf("storing attempt %s of %s: %w", ins.TxHash, WalletShardKey(chainID, sender), err)
	}
	return nil
}

// AttemptListParams select a wallet's attempts in nonce order.
type AttemptListParams struct {
	ChainID int64
	Sender  string
	// Below, for AttemptListSentBelow: only nonces below it (the chain's nonce).
	Below int64
	Max   int
}

// AttemptListUnsent returns the wallet's attempts that were signed and stored
// but are not known sent, in nonce order: recover re-broadcasts
// them first, with the same bytes.
func (s *Store) AttemptListUnsent(ctx context.Context, p AttemptListParams) ([]Attempt, error) {
	rows, err := s.q.AttemptListUnsent(ctx, dbsqlc.AttemptListUnsentParams{ChainID: p.ChainID, Sender: lowerHex(p.Sender), Max: int32(p.Max)})
	if err != nil {
		return nil, fmt.Errorf("reading the unsent attempts of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return fromRows(rows, attemptFromRow), nil
}

// AttemptListSentBelow returns the wallet's sent attempts with a nonce below
// p.Below (the chain's nonce passed them: confirm looks up their receipts),
// in nonce order.
func (s *Store) AttemptListSentBelow(ctx context.Context, p AttemptListParams) ([]Attempt, error) {
	rows, err := s.q.AttemptListSentBelow(ctx, dbsqlc.AttemptListSentBelowParams{ChainID: p.ChainID, Sender: lowerHex(p.Sender), Below: p.Below, Max: int32(p.Max)})
	if err != nil {
		return nil, fmt.Errorf("reading the sent attempts of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return fromRows(rows, attemptFromRow), nil
}

// AttemptListMined returns the wallet's attempts that are mined but not yet
// final, in nonce order: each confirm checks their receipts again.
func (s *Store) AttemptListMined(ctx context.Context, p AttemptListParams) ([]Attempt, error) {
	rows, err := s.q.AttemptListMined(ctx, dbsqlc.AttemptListMinedParams{ChainID: p.ChainID, Sender: lowerHex(p.Sender), Max: int32(p.Max)})
	if err != nil {
		return nil, fmt.Errorf("reading the mined attempts of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return fromRows(rows, attemptFromRow), nil
}

// AttemptListFromParams select a wallet's attempts from a nonce on, in
// nonce order (AttemptListMinedFrom, AttemptListUncertain,
// AttemptListSentFrom).
type AttemptListFromParams struct {
	ChainID int64
	Sender  string
	// From is the chain's nonce: attempts below it are mined or replaced,
	// which confirm finds out.
	From int64
	Max  int
}

// AttemptListMinedFrom returns the wallet's mined or confirmed attempts at or
// above nonce p.From (the chain's nonce), in nonce order: by the chain's
// own count none of them is in it.
func (s *Store) AttemptListMinedFrom(ctx context.Context, p AttemptListFromParams) ([]Attempt, error) {
	rows, err := s.q.AttemptListMinedFrom(ctx, dbsqlc.AttemptListMinedFromParams{ChainID: p.ChainID, Sender: lowerHex(p.Sender), FromNonce: p.From, Max: int32(p.Max)})
	if err != nil {
		return nil, fmt.Errorf("reading the mined attempts of %s from nonce %d: %w", WalletShardKey(p.ChainID, p.Sender), p.From, err)
	}
	return fromRows(rows, attemptFromRow), nil
}

// AttemptListUncertain returns the wallet's sent attempts from nonce p.From
// on whose last broadcast had an indeterminate outcome (LastError set), in
// nonce order. They count as sent, so their nonce is never recycled, but the
// node may never have taken them: confirm broadcasts them again, with the
// same bytes.
func (s *Store) AttemptListUncertain(ctx context.Context, p AttemptListFromParams) ([]Attempt, error) {
	rows, err := s.q.AttemptListUncertain(ctx, dbsqlc.AttemptListUncertainParams{
		ChainID: p.ChainID, Sender: lowerHex(p.Sender), FromNonce: p.From, Max: int32(p.Max),
	})
	if err != nil {
		return nil, fmt.Errorf("reading the uncertain attempts of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return fromRows(rows, attemptFromRow), nil
}

// AttemptListSentFrom returns every sent attempt of the wallet from nonce
// p.From on, in nonce order: confirm broadcasts them again, with the same
// bytes, when the chain lost blocks or its nonce has not moved for a while.
func (s *Store) AttemptListSentFrom(ctx context.Context, p AttemptListFromParams) ([]Attempt, error) {
	rows, err := s.q.AttemptListSentFrom(ctx, dbsqlc.AttemptListSentFromParams{
		ChainID: p.ChainID, Sender: lowerHex(p.Sender), FromNonce: p.From, Max: int32(p.Max),
	})
	if err != nil {
		return nil, fmt.Errorf("reading the sent attempts of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return fromRows(rows, attemptFromRow), nil
}

// AttemptListByTask returns a task's attempts, oldest first.
func (s *Store) AttemptListByTask(ctx context.Context, taskID string) ([]Attempt, error) {
	return attemptListByTask(ctx, s.q, taskID)
}

func attemptListByTask(ctx context.Context, q *dbsqlc.Queries, taskID string) ([]Attempt, error) {
	rows, err := q.AttemptListByTask(ctx, &taskID)
	if err != nil {
		return nil, fmt.Errorf("reading the attempts of task %q: %w", taskID, err)
	}
	return fromRows(rows, attemptFromRow), nil
}

// AttemptListHashesOfNonce returns every hash ever stored for a's nonce on behalf
// of a's task (or of a no-op), newest first, a's own included: a gas bump's
// superseded attempts may be the one mined, so confirm asks about them all.
func (s *Store) AttemptListHashesOfNonce(ctx context.Context, a Attempt) ([]string, error) {
	qp := dbsqlc.AttemptListHashesOfNonceParams{ChainID: a.ChainID, Sender: lowerHex(a.Sender), Nonce: a.Nonce}
	if !a.Noop() {
		qp.TaskID = &a.TaskID
	}
	out, err := s.q.AttemptListHashesOfNonce(ctx, qp)
	if err != nil {
		return nil, fmt.Errorf("reading the hashes of nonce %d of %s: %w", a.Nonce, WalletShardKey(a.ChainID, a.Sender), err)
	}
	return out, nil
}

// AttemptGetLiveAt returns the live (signed or sent) attempt holding nonce, or
// ErrNotFound.
func (s *Store) AttemptGetLiveAt(ctx context.Context, chainID int64, sender string, nonce int64) (Attempt, error) {
	row, err := one(s.q.AttemptGetLiveAt(ctx, dbsqlc.AttemptGetLiveAtParams{ChainID: chainID, Sender: lowerHex(sender), Nonce: nonce}))
	if err != nil {
		return Attempt{}, fmt.Errorf("reading the attempt at nonce %d of %s: %w", nonce, WalletShardKey(chainID, sender), err)
	}
	return attemptFromRow(row), nil
}

// AttemptGetMaxLiveNonce returns the highest nonce a live attempt (signed,
// sent or mined) of the wallet holds, or -1 when none does.
func (s *Store) AttemptGetMaxLiveNonce(ctx context.Context, chainID int64, sender string) (int64, error) {
	n, err := one(s.q.AttemptGetMaxLiveNonce(ctx, dbsqlc.AttemptGetMaxLiveNonceParams{ChainID: chainID, Sender: lowerHex(sender)}))
	if err != nil {
		return 0, fmt.Errorf("reading the highest live nonce of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return n, nil
}

// AttemptGetMaxHeldNonce returns the highest nonce any attempt of the wallet
// that is not dropped holds, confirmed ones included, or -1 when none does:
// the next nonce never moves to or below it.
func (s *Store) AttemptGetMaxHeldNonce(ctx context.Context, chainID int64, sender string) (int64, error) {
	n, err := one(s.q.AttemptGetMaxHeldNonce(ctx, dbsqlc.AttemptGetMaxHeldNonceParams{ChainID: chainID, Sender: lowerHex(sender)}))
	if err != nil {
		return 0, fmt.Errorf("reading the highest held nonce of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return n, nil
}

// AttemptCounts counts a wallet's live attempts.
type AttemptCounts struct {
	// InFlight: signed or sent and not yet mined (what the in-flight budget
	// counts).
	InFlight int
	// Mined: mined, not yet final.
	Mined int
}

// AttemptCountLive returns how many of the wallet's attempts are signed or
// sent and not yet mined, and how many are mined but not yet final.
func (s *Store) AttemptCountLive(ctx context.Context, chainID int64, sender string) (AttemptCounts, error) {
	r, err := one(s.q.AttemptCountLive(ctx, dbsqlc.AttemptCountLiveParams{ChainID: chainID, Sender: lowerHex(sender)}))
	if err != nil {
		return AttemptCounts{}, fmt.Errorf("counting the attempts in flight of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return AttemptCounts{InFlight: int(r.InFlight), Mined: int(r.Mined)}, nil
}

// AttemptMarkSentParams record broadcasts.
type AttemptMarkSentParams struct {
	Now      time.Time
	ChainID  int64
	TxHashes []string
	// Error is the broadcast's error when its outcome was indeterminate
	// (treated as sent), for operators; empty on success.
	Error string
}

// AttemptMarkSent moves signed attempts to sent and returns how many moved;
// attempts in any other state are left alone. In the same transaction each
// moved attempt of a task emits submitted with its hash and nonce, in nonce
// order: an attempt marked sent again (a new broadcast of the same bytes)
// moves nothing and emits nothing, and a gas bump, a new attempt, emits
// submitted again with its new hash. No-ops emit nothing.
func (s *Store) AttemptMarkSent(ctx context.Context, p AttemptMarkSentParams) (int64, error) {
	hashes := make([]string, len(p.TxHashes))
	for i, h := range p.TxHashes {
		hashes[i] = lowerHex(h)
	}
	qp := dbsqlc.AttemptMarkSentParams{Now: p.Now, ChainID: p.ChainID, TxHashes: hashes}
	if p.Error != "" {
		qp.Error = &p.Error
	}
	var n int64
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		rows, err := q.AttemptMarkSent(ctx, qp)
		if err != nil {
			return fmt.Errorf("marking attempts sent: %w", err)
		}
		n = int64(len(rows))
		return emitSubmitted(ctx, q, p.Now, rows)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// emitSubmitted emits submitted for the attempts of tasks that moved to
// sent, in nonce order.
func emitSubmitted(ctx context.Context, q *dbsqlc.Queries, now time.Time, moved []dbsqlc.LedgerqTxAttempt) error {
	var ids []string
	for _, a := range moved {
		if a.TaskID != nil {
			ids = append(ids, *a.TaskID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := q.TaskGetMany(ctx, ids)
	if err != nil {
		return fmt.Errorf("reading the tasks of %d sent attempts: %w", len(ids), err)
	}
	tasks := byKey(rows, func(r dbsqlc.LedgerqWalletTask) (string, Task) { return r.ID, taskFromRow(r) })
	slices.SortFunc(moved, func(a, b dbsqlc.LedgerqTxAttempt) int {
		return cmp.Or(cmp.Compare(a.Nonce, b.Nonce), strings.Compare(a.TxHash, b.TxHash))
	})
	events := make([]WebhookEvent, 0, len(ids))
	for _, a := range moved {
		if a.TaskID == nil {
			continue
		}
		t, ok := tasks[*a.TaskID]
		if !ok {
			return fmt.Errorf("reading the task of sent attempt %s: %w", a.TxHash, ErrNotFound)
		}
		events = append(events, TaskWebhookEvent(WebhookSubmitted, t, a.TxHash, &a.Nonce))
	}
	_, err = emitWebhookEvents(ctx, q, now, events)
	return err
}

// AttemptRecordBroadcastParams record a sent attempt's new broadcast.
type AttemptRecordBroadcastParams struct {
	Now     time.Time
	ChainID int64
	TxHash  string
	// Error is the broadcast's error when its outcome was indeterminate
	// again; empty when the node took the transaction or already had it.
	Error string
}

// AttemptRecordBroadcast records the outcome of broadcasting a sent attempt
// again and reports whether the attempt was still sent.
func (s *Store) AttemptRecordBroadcast(ctx context.Context, p AttemptRecordBroadcastParams) (bool, error) {
	qp := dbsqlc.AttemptRecordBroadcastParams{Now: p.Now, ChainID: p.ChainID, TxHash: lowerHex(p.TxHash)}
	if p.Error != "" {
		qp.Error = &p.Error
	}
	n, err := s.q.AttemptRecordBroadcast(ctx, qp)
	if err != nil {
		return false, fmt.Errorf("recording the broadcast of attempt %s: %w", p.TxHash, err)
	}
	return n > 0, nil
}

// AttemptConfirmParams record a receipt.
type AttemptConfirmParams struct {
	Now     time.Time
	ChainID int64
	// TxHash is the hash that has the receipt.
	TxHash string
	// Live, when set and not TxHash, is the nonce's live attempt: TxHash is
	// one it superseded (a gas bump that was not the one mined). Live is
	// dropped and TxHash takes its place.
	Live string
	// Block and BlockHash are the receipt's block.
	Block     uint64
	BlockHash string
	// Final: the block is deep enough (the lane's confirmations). Otherwise
	// the attempt is only mined and its task stays executing.
	Final bool
	// Reverted: the receipt's status is 0. The task is done all the same.
	Reverted bool
	// GasUsed and EffectiveGasPrice are the receipt's fee, kept for the
	// wallet's fee caps; a nil price: not known (the caps then count the
	// attempt's worst case).
	GasUsed           uint64
	EffectiveGasPrice *big.Int
}

// receiptFee is p's fee as AttemptConfirm's statements take it (nils: not
// known).
func (p AttemptConfirmParams) receiptFee() (*int64, pgtype.Numeric) {
	if p.EffectiveGasPrice == nil || p.EffectiveGasPrice.Sign() < 0 || p.EffectiveGasPrice.BitLen() > 256 || p.GasUsed > 1<<63-1 {
		return nil, pgtype.Numeric{}
	}
	g := int64(p.GasUsed)
	return &g, numericFromBig(p.EffectiveGasPrice)
}

// AttemptConfirm records a receipt of the attempt's transaction. With Final
// it is final: in one transaction the attempt becomes confirmed and its task
// done with the attempt's hash (and reverted as the receipt says), and
// confirmed is emitted with the mined hash and nonce. Without it the attempt
// becomes mined in p.Block (or moves there, mined again after a reorg) and
// its task stays executing. A no-op has no task (the zero Task). It returns
// the task, or ErrNotFound when the attempt is not live (or, with p.Live,
// the superseded hash is not Live's task's) or its task is not executing
// (nothing changes then).
func (s *Store) AttemptConfirm(ctx context.Context, p AttemptConfirmParams) (Task, error) {
	hash, live := lowerHex(p.TxHash), lowerHex(p.Live)
	if p.Block > 1<<63-1 {
		return Task{}, fmt.Errorf("confirming attempt %s: block %d out of range", hash, p.Block)
	}
	block, blockHash := int64(p.Block), lowerHex(p.BlockHash)
	// A final receipt may come without its block (a caller that has only
	// the receipt's word); a mined one needs it, to be checked again.
	var blockArg *int64
	var blockHashArg *string
	switch {
	case blockHash != "":
		blockArg, blockHashArg = &block, &blockHash
	case !p.Final:
		return Task{}, fmt.Errorf("recording attempt %s mined: no block hash", hash)
	}
	gasUsed, price := p.receiptFee()
	var out Task
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		var taskID, kind *string
		var nonce int64
		switch {
		case live != "" && live != hash:
			// The live bump leaves the live set first: the unique index
			// holds one live attempt per nonce at every row.
			d, err := one(q.AttemptDrop(ctx, dbsqlc.AttemptDropParams{Error: "superseded attempt " + hash + " was mined", Now: p.Now, ChainID: p.ChainID, TxHash: live}))
			if err != nil {
				return fmt.Errorf("confirming attempt %s: %w", hash, err)
			}
			r, err := one(q.AttemptMineSuperseded(ctx, dbsqlc.AttemptMineSupersededParams{
				Final: p.Final, Now: p.Now, MinedBlock: blockArg, MinedBlockHash: blockHashArg, ChainID: p.ChainID, TxHash: hash, TaskID: d.TaskID,
				GasUsed: gasUsed, EffectiveGasPriceWei: price,
			}))
			if err != nil {
				return fmt.Errorf("confirming attempt %s: %w", hash, err)
			}
			taskID, nonce, kind = r.TaskID, r.Nonce, r.Kind
		case p.Final:
			r, err := one(q.AttemptConfirm(ctx, dbsqlc.AttemptConfirmParams{Now: p.Now, MinedBlock: blockArg, MinedBlockHash: blockHashArg, ChainID: p.ChainID, TxHash: hash, GasUsed: gasUsed, EffectiveGasPriceWei: price}))
			if err != nil {
				return fmt.Errorf("confirming attempt %s: %w", hash, err)
			}
			taskID, nonce, kind = r.TaskID, r.Nonce, r.Kind
		default:
			r, err := one(q.AttemptMarkMined(ctx, dbsqlc.AttemptMarkMinedParams{MinedBlock: block, MinedBlockHash: blockHash, Now: p.Now, ChainID: p.ChainID, TxHash: hash, GasUsed: gasUsed, EffectiveGasPriceWei: price}))
			if err != nil {
				return fmt.Errorf("recording attempt %s mined: %w", hash, err)
			}
			taskID, nonce = r.TaskID, r.Nonce
		}
		if taskID == nil {
			return nil // a no-op
		}
		if !p.Final {
			rows, err := q.TaskGetMany(ctx, []string{*taskID})
			if err != nil {
				return fmt.Errorf("reading task %q of attempt %s: %w", *taskID, hash, err)
			}
			if len(rows) != 1 || rows[0].Status != int16(TaskExecuting) {
				return fmt.Errorf("recording attempt %s mined: task %q is not executing: %w", hash, *taskID, ErrNotFound)
			}
			out = taskFromRow(rows[0])
			return nil
		}
		if AttemptKind(deref(kind)) == AttemptCancel {
			// The cancel won the race: the nonce went to its no-op, and
			// the task's transaction will never run.
			row, err := one(q.TaskFinishCancelled(ctx, dbsqlc.TaskFinishCancelledParams{Now: p.Now, ID: *taskID}))
			if err != nil {
				return fmt.Errorf("cancelling task %q of no-op %s: %w", *taskID, hash, err)
			}
			out = taskFromRow(row)
			_, err = emitWebhookEvents(ctx, q, p.Now, []WebhookEvent{TaskWebhookEvent(WebhookFailed, out, hash, &nonce)})
			return err
		}
		row, err := one(q.TaskFinishDone(ctx, dbsqlc.TaskFinishDoneParams{Now: p.Now, ID: *taskID, TxHash: &hash, Reverted: p.Reverted}))
		if err != nil {
			return fmt.Errorf("finishing task %q of attempt %s: %w", *taskID, hash, err)
		}
		out = taskFromRow(row)
		_, err = emitWebhookEvents(ctx, q, p.Now, []WebhookEvent{TaskWebhookEvent(WebhookConfirmed, out, hash, &nonce)})
		return err
	})
	return out, err
}

// AttemptConfirmMany is AttemptConfirm for a confirm round's final receipts
// at once: each attempt becomes confirmed and its task done, in one
// statement instead of two per attempt, and their confirmed events are
// emitted together. Each p must be Final, with its block hash, for a live
// attempt of a task (Live empty or TxHash), and all must share Now and
// ChainID. It records all of them or none: when one attempt is not live or
// its task is not executing, it changes nothing and returns ErrNotFound, and
// the caller records them one at a time with AttemptConfirm, which tells
// which one.
func (s *Store) AttemptConfirmMany(ctx context.Context, ps []AttemptConfirmParams) ([]Task, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	now, chainID := ps[0].Now, ps[0].ChainID
	qp := dbsqlc.AttemptConfirmFinalManyParams{
		Now: now, ChainID: chainID, TxHashes: make([]string, len(ps)), MinedBlocks: make([]int64, len(ps)),
		MinedBlockHashes: make([]string, len(ps)), Reverted: make([]bool, len(ps)),
		GasUsed: make([]int64, len(ps)), EffectiveGasPrices: make([]string, len(ps)),
	}
	for i, p := range ps {
		hash := lowerHex(p.TxHash)
		switch {
		case !p.Final || p.BlockHash == "" || p.Block > 1<<63-1:
			return nil, fmt.Errorf("confirming attempt %s with others: not a final receipt with its block", hash)
		case p.Live != "" && lowerHex(p.Live) != hash:
			return nil, fmt.Errorf("confirming attempt %s with others: it superseded %s", hash, p.Live)
		case !p.Now.Equal(now) || p.ChainID != chainID:
			return nil, fmt.Errorf("confirming attempt %s with others: another time or chain", hash)
		}
		qp.TxHashes[i], qp.MinedBlocks[i], qp.MinedBlockHashes[i], qp.Reverted[i] = hash, int64(p.Block), lowerHex(p.BlockHash), p.Reverted
		qp.GasUsed[i], qp.EffectiveGasPrices[i] = -1, ""
		if g, _ := p.receiptFee(); g != nil {
			qp.GasUsed[i], qp.EffectiveGasPrices[i] = *g, p.EffectiveGasPrice.String()
		}
	}
	var out []Task
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		rows, err := q.AttemptConfirmFinalMany(ctx, qp)
		if err != nil {
			return fmt.Errorf("confirming %d attempts: %w", len(ps), err)
		}
		if len(rows) != len(ps) {
			return fmt.Errorf("confirming %d attempts: %d of them have a live attempt and an executing task: %w", len(ps), len(rows), ErrNotFound)
		}
		out = make([]Task, len(rows))
		events := make([]WebhookEvent, len(rows))
		for i, r := range rows {
			out[i] = taskFromRow(r.LedgerqWalletTask)
			events[i] = TaskWebhookEvent(WebhookConfirmed, out[i], out[i].TxHash, &r.AttemptNonce)
		}
		_, err = emitWebhookEvents(ctx, q, now, events)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AttemptReopenParams name a mined or confirmed attempt whose transaction
// left the chain.
type AttemptReopenParams struct {
	Now     time.Time
	ChainID int64
	TxHash  string
	// Reason is kept as the attempt's last error, for operators; it also
	// makes the attempt due for a new broadcast.
	Reason string
}

// AttemptReopen records that a mined or confirmed attempt's transaction is
// no longer on the chain (a reorg, a node that lost blocks or was restored
// from an older state): in one transaction the attempt goes back to sent —
// its nonce stays held and its same bytes are broadcast again — and its task
// is executing again (a done one too), with the reorg counted on both; a
// task that was done emits reorged. It returns the task (the zero Task for a
// no-op), or ErrNotFound when the attempt is not mined or confirmed.
func (s *Store) AttemptReopen(ctx context.Context, p AttemptReopenParams) (Task, error) {
	if p.Reason == "" {
		return Task{}, fmt.Errorf("reopening attempt %s: no reason given", p.TxHash)
	}
	hash := lowerHex(p.TxHash)
	var out Task
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		r, err := one(q.AttemptReopen(ctx, dbsqlc.AttemptReopenParams{Now: p.Now, Error: p.Reason, ChainID: p.ChainID, TxHash: hash}))
		if err != nil {
			return fmt.Errorf("reopening attempt %s: %w", hash, err)
		}
		if r.TaskID == nil {
			return nil
		}
		before, err := q.TaskGetMany(ctx, []string{*r.TaskID})
		if err != nil {
			return fmt.Errorf("reading task %q of attempt %s: %w", *r.TaskID, hash, err)
		}
		row, err := one(q.TaskReopen(ctx, dbsqlc.TaskReopenParams{Now: p.Now, ID: *r.TaskID}))
		if err != nil {
			return fmt.Errorf("reopening task %q of attempt %s: %w", *r.TaskID, hash, err)
		}
		out = taskFromRow(row)
		if len(before) != 1 || before[0].Status != int16(TaskDone) && !before[0].Cancelled {
			return nil
		}
		_, err = emitWebhookEvents(ctx, q, p.Now, []WebhookEvent{TaskWebhookEvent(WebhookReorged, out, hash, &r.Nonce)})
		return err
	})
	return out, err
}

// AttemptRequeueParams name an attempt that will never be mined.
type AttemptRequeueParams struct {
	Now     time.Time
	ChainID int64
	TxHash  string
	// Reason is kept on the dropped attempt, for operators.
	Reason string
	// Replaced: another transaction took the attempt's nonce (every hash of
	// ours definitively absent). The task's replacements count goes up, and
	// past MaxReplacements the task ends in error with Reason instead.
	Replaced        bool
	MaxReplacements int
}

// AttemptRequeue drops a live, unmined attempt that will never be mined —
// another transaction took its nonce, or it was signed and never broadcast —
// and puts its task back to waiting, in one transaction: the task is sent
// again with a new nonce, and the attempt's nonce is free. A replaced task
// that already went back MaxReplacements times ends in error instead. A
// replaced task emits replaced (with the dropped hash and nonce), and failed
// too when it ends in error, in the same transaction; other requeues emit
// nothing. A no-op's attempt is only dropped (the zero Task). It returns the task, or
// ErrNotFound when the attempt was not live or its task not executing
// (nothing changes then).
func (s *Store) AttemptRequeue(ctx context.Context, p AttemptRequeueParams) (Task, error) {
	if p.Reason == "" {
		return Task{}, fmt.Errorf("requeueing the task of attempt %s: no reason given", p.TxHash)
	}
	hash := lowerHex(p.TxHash)
	var out Task
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		dropped, err := one(q.AttemptDrop(ctx, dbsqlc.AttemptDropParams{Error: p.Reason, Now: p.Now, ChainID: p.ChainID, TxHash: hash}))
		if err != nil {
			return fmt.Errorf("dropping attempt %s: %w", hash, err)
		}
		taskID := dropped.TaskID
		if taskID == nil {
			return nil // a no-op
		}
		var row dbsqlc.LedgerqWalletTask
		switch {
		case !p.Replaced:
			row, err = one(q.TaskRequeue(ctx, dbsqlc.TaskRequeueParams{Now: p.Now, ID: *taskID}))
		default:
			row, err = one(q.TaskRequeueReplaced(ctx, dbsqlc.TaskRequeueReplacedParams{Now: p.Now, ID: *taskID}))
			if err == nil && int(row.Replacements) > p.MaxReplacements {
				reason := fmt.Sprintf("%s (replaced %d times, the limit is %d)", p.Reason, row.Replacements, p.MaxReplacements)
				row, err = one(q.TaskFinishError(ctx, dbsqlc.TaskFinishErrorParams{Now: p.Now, ID: *taskID, Error: reason}))
			}
		}
		if err != nil {
			return fmt.Errorf("requeueing task %q of attempt %s: %w", *taskID, hash, err)
		}
		// A task a client asked to cancel is not sent again: its
		// transaction never ran, which is what the cancel asked for.
		cancelled := row.Status == int16(TaskWaiting) && row.CancelRequestedAt != nil
		if cancelled {
			if row, err = one(q.TaskFinishCancelled(ctx, dbsqlc.TaskFinishCancelledParams{Now: p.Now, ID: *taskID})); err != nil {
				return fmt.Errorf("cancelling task %q of attempt %s: %w", *taskID, hash, err)
			}
		}
		out = taskFromRow(row)
		if !p.Replaced && !cancelled {
			return nil
		}
		if !p.Replaced {
			_, err = emitWebhookEvents(ctx, q, p.Now, []WebhookEvent{TaskWebhookEvent(WebhookFailed, out, hash, &dropped.Nonce)})
			return err
		}
		events := []WebhookEvent{TaskWebhookEvent(WebhookReplaced, out, hash, &dropped.Nonce)}
		if out.Status == TaskError {
			events = append(events, TaskWebhookEvent(WebhookFailed, out, hash, &dropped.Nonce))
		}
		_, err = emitWebhookEvents(ctx, q, p.Now, events)
		return err
	})
	return out, err
}

// AttemptWithTask is one attempt as the wallet's audit reads it: the
// attempt, and its task's status and done hash.
type AttemptWithTask struct {
	ID     int64
	TaskID string // "" for a no-op, or a transaction adopted for no task
	Nonce  int64
	TxHash string
	State  AttemptState
	// SupersededBy is the hash of the gas bump that replaced it.
	SupersededBy string
	// MinedBlock and MinedBlockHash are the block its receipt was last
	// seen in (nil and "" when none was recorded).
	MinedBlock     *int64
	MinedBlockHash string
	// TaskStatus and TaskTxHash are its task's (zero without a task).
	TaskStatus TaskStatus
	TaskTxHash string
}

// WalletRecord is what the database says a wallet sent: every attempt it
// keeps, in nonce order, and the next nonce (nil before the first attempt).
type WalletRecord struct {
	Attempts  []AttemptWithTask
	NextNonce *int64
}

// WalletRecordGet reads the wallet's attempts (with their tasks) and its
// next nonce in one read-only snapshot, so that they agree with each other.
func (s *Store) WalletRecordGet(ctx context.Context, chainID int64, sender string) (WalletRecord, error) {
	sender = lowerHex(sender)
	var rec WalletRecord
	err := s.inSnapshot(ctx, func(q *dbsqlc.Queries) error {
		rows, err := q.AttemptListOfWallet(ctx, dbsqlc.AttemptListOfWalletParams{ChainID: chainID, Sender: sender})
		if err != nil {
			return fmt.Errorf("listing the attempts of %s: %w", WalletShardKey(chainID, sender), err)
		}
		rec.Attempts = make([]AttemptWithTask, len(rows))
		for i, r := range rows {
			rec.Attempts[i] = AttemptWithTask{
				ID: r.ID, TaskID: deref(r.TaskID), Nonce: r.Nonce, TxHash: r.TxHash, State: AttemptState(r.State),
				SupersededBy: deref(r.SupersededBy), MinedBlock: r.MinedBlock, MinedBlockHash: deref(r.MinedBlockHash),
				TaskStatus: TaskStatus(deref(r.TaskStatus)), TaskTxHash: deref(r.TaskTxHash),
			}
		}
		next, err := one(q.WalletNonceGet(ctx, dbsqlc.WalletNonceGetParams{ChainID: chainID, Sender: sender}))
		switch {
		case err == nil:
			rec.NextNonce = &next.NextNonce
		case !errors.Is(err, ErrNotFound):
			return fmt.Errorf("reading the next nonce of %s: %w", WalletShardKey(chainID, sender), err)
		}
		return nil
	})
	return rec, err
}

// AttemptGetFirstMinedBlock returns the lowest block of the wallet's mined
// or confirmed attempts, or -1 when it has none; unknown is true when one
// of them has no block recorded (confirmed before blocks were kept).
func (s *Store) AttemptGetFirstMinedBlock(ctx context.Context, chainID int64, sender string) (block int64, unknown bool, err error) {
	row, err := one(s.q.AttemptGetFirstMinedBlock(ctx, dbsqlc.AttemptGetFirstMinedBlockParams{ChainID: chainID, Sender: lowerHex(sender)}))
	if err != nil {
		return 0, false, fmt.Errorf("reading the first mined block of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return row.Block, row.Unknown, nil
}
