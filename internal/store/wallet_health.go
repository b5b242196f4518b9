package store

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// WalletHealth is one row of ledgerq.wallet_health: what confirm last read
// of the wallet's chain nonce and balance, and its nonce resets.
type WalletHealth struct {
	ChainID int64
	Sender  string
	// ChainNonce is the chain's nonce as confirm last read it, unmoved since
	// ChainNonceSince (both nil before the first read).
	ChainNonce      *int64
	ChainNonceSince *time.Time
	// Balance as read at BalanceAt (both nil before the first read;
	// BalanceAt nil after an insufficient-funds failure asks for a new read).
	Balance   *big.Int
	BalanceAt *time.Time
	// Threshold: sending pauses while the balance is below it (what a plain
	// transfer cost at the fees read with the balance).
	Threshold *big.Int
	// ChainHead is the chain's latest block as the last confirm read it.
	ChainHead *int64
	Paused    bool
	// HeldAt and HeldBy: an operator's hold (WalletHealthHold); no new
	// task is sent while it stands. Nil when not held.
	HeldAt *time.Time
	HeldBy *string
	// Resets counts nonce resets; the last one's time and nonces.
	Resets                     int
	LastResetAt                *time.Time
	LastResetFrom, LastResetTo *int64
	// RecoveryReason, when set, is why nothing is signed for the wallet: the
	// chain used nonces the database does not know (a restore from an older
	// backup) and their transactions could not be read yet. RecoverySince is
	// when it was first held.
	RecoveryReason *string
	RecoverySince  *time.Time
	// ScanBlock, while the chain's blocks are read one by one for the
	// wallet's transactions at nonces the database does not know, is the
	// next block to read.
	ScanBlock *int64
	// Signer is the wallet's signer as its last signature found it; its
	// State is empty before the first signature recorded.
	Signer               SignerHealth
	CreatedAt, UpdatedAt time.Time
}

// SignerState is a wallet's signer as its last signature found it.
type SignerState string

const (
	// SignerOK: the signer signed.
	SignerOK SignerState = "ok"
	// SignerUnavailable: the signer could not be reached or throttled
	// (*keystore.UnavailableError): the wallet's tasks wait.
	SignerUnavailable SignerState = "unavailable"
)

// SignerHealth is the state of a wallet's signer, as wallet_health records
// it: the zero value before the first signature recorded.
type SignerHealth struct {
	// Backend is the signer's backend (keystore.BackendOf).
	Backend string
	State   SignerState
	// Error, when State is SignerUnavailable, is the error that made the
	// signer unavailable (at most MaxSignerError bytes).
	Error string
	// Since is when the signer entered State.
	Since *time.Time
}

// SignerOf returns the signer state recorded for a wallet whose signer is
// now of backend: the zero SignerHealth (none recorded) when the one
// recorded is another backend's (the wallet's signer was changed since).
func (h WalletHealth) SignerOf(backend string) SignerHealth {
	if h.Signer.Backend != backend {
		return SignerHealth{}
	}
	return h.Signer
}

// WalletStatus says whether a wallet sends its waiting tasks, and if not
// the first reason: the API's and the console's one word for it.
type WalletStatus string

const (
	// WalletSending: it sends its waiting tasks.
	WalletSending WalletStatus = "sending"
	// WalletPaused: an operator's hold (HeldAt).
	WalletPaused WalletStatus = "paused"
	// WalletRecovering: held for a restore's recovery (RecoveryReason).
	WalletRecovering WalletStatus = "recovering"
	// WalletSignerUnavailable: the signer could not be reached or
	// throttled at its last signature.
	WalletSignerUnavailable WalletStatus = "signer_unavailable"
	// WalletLowBalance: the balance is below the threshold (Paused).
	WalletLowBalance WalletStatus = "low_balance"
)

// StatusOf returns the status of a wallet whose signer is of backend, from
// its health (nil before its first run): an operator's hold first, then a
// recovery, an unavailable signer, a low balance.
func StatusOf(h *WalletHealth, backend string) WalletStatus {
	switch {
	case h == nil:
		return WalletSending
	case h.HeldAt != nil:
		return WalletPaused
	case h.RecoveryReason != nil:
		return WalletRecovering
	case h.SignerOf(backend).State == SignerUnavailable:
		return WalletSignerUnavailable
	case h.Paused:
		return WalletLowBalance
	}
	return WalletSending
}

// MaxSignerError is the most of a signer's error wallet_health keeps
// (the table's wallet_health_signer_error): WalletHealthSetSigner cuts a
// longer one.
const MaxSignerError = 1024

func healthFromRow(r dbsqlc.LedgerqWalletHealth) WalletHealth {
	h := WalletHealth{
		ChainID: r.ChainID, Sender: r.Sender, ChainNonce: r.ChainNonce, ChainNonceSince: utcPtr(r.ChainNonceSince),
		BalanceAt: utcPtr(r.BalanceAt), Threshold: bigFromNumeric(r.ThresholdWei), Paused: r.Paused, ChainHead: r.ChainHead,
		Resets: int(r.Resets), LastResetAt: utcPtr(r.LastResetAt), LastResetFrom: r.LastResetFrom, LastResetTo: r.LastResetTo,
		RecoveryReason: r.RecoveryReason, RecoverySince: utcPtr(r.RecoverySince), ScanBlock: r.ScanBlock,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), HeldAt: utcPtr(r.HeldAt), HeldBy: r.HeldBy,
	}
	if r.BalanceWei.Valid {
		h.Balance = bigFromNumeric(r.BalanceWei)
	}
	if r.SignerState != nil {
		h.Signer = SignerHealth{Backend: deref(r.SignerBackend), State: SignerState(*r.SignerState), Error: deref(r.SignerError), Since: utcPtr(r.SignerSince)}
	}
	return h
}

// WalletHealthGet returns the wallet's health row, or ErrNotFound before
// its first confirm or balance read.
func (s *Store) WalletHealthGet(ctx context.Context, chainID int64, sender string) (WalletHealth, error) {
	return walletHealthGet(ctx, s.q, chainID, sender)
}

func walletHealthGet(ctx context.Context, q *dbsqlc.Queries, chainID int64, sender string) (WalletHealth, error) {
	row, err := one(q.WalletHealthGet(ctx, dbsqlc.WalletHealthGetParams{ChainID: chainID, Sender: lowerHex(sender)}))
	if err != nil {
		return WalletHealth{}, fmt.Errorf("reading the health of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return healthFromRow(row), nil
}

// WalletHealthObserveNonce records the chain's nonce and head as confirm
// read them; the time the nonce was first seen moves only when it changed.
func (s *Store) WalletHealthObserveNonce(ctx context.Context, now time.Time, chainID int64, sender string, nonce, head int64) error {
	if err := s.q.WalletHealthObserveNonce(ctx, dbsqlc.WalletHealthObserveNonceParams{ChainID: chainID, Sender: lowerHex(sender), ChainNonce: nonce, ChainHead: head, Now: now}); err != nil {
		return fmt.Errorf("recording the chain's nonce of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return nil
}

// WalletHealthSetBalance records the wallet's balance as read and the
// threshold computed with it, and whether sending pauses (balance below the
// threshold); it returns the row.
func (s *Store) WalletHealthSetBalance(ctx context.Context, now time.Time, chainID int64, sender string, balance, threshold *big.Int) (WalletHealth, error) {
	row, err := one(s.q.WalletHealthSetBalance(ctx, dbsqlc.WalletHealthSetBalanceParams{
		ChainID: chainID, Sender: lowerHex(sender), Balance: numericFromBig(balance), Threshold: numericFromBig(threshold), Now: now,
	}))
	if err != nil {
		return WalletHealth{}, fmt.Errorf("recording the balance of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return healthFromRow(row), nil
}

// WalletHealthMarkBalanceStale asks for a new balance read before the wallet's
// next send (a send was refused for insufficient funds).
func (s *Store) WalletHealthMarkBalanceStale(ctx context.Context, now time.Time, chainID int64, sender string) error {
	if err := s.q.WalletHealthMarkBalanceStale(ctx, dbsqlc.WalletHealthMarkBalanceStaleParams{ChainID: chainID, Sender: lowerHex(sender), Now: now}); err != nil {
		return fmt.Errorf("marking the balance of %s stale: %w", WalletShardKey(chainID, sender), err)
	}
	return nil
}

// WalletKey names one wallet's queue: a chain and a sender address.
type WalletKey struct {
	ChainID int64
	// Sender is lower-case hex.
	Sender string
}

// WalletListWithWorkParams select a page of wallets with work.
type WalletListWithWorkParams struct {
	// After is the last wallet of the previous page (zero for the first).
	After WalletKey
	// WatchSince: wallets whose chain nonce moved after it are listed too,
	// so that their final transactions are watched a while longer.
	WatchSince time.Time
	Max        int
}

// WalletListWithWork returns up to Max wallets, in (chain, sender) order after
// p.After, that have live attempts (signed, sent or mined) or waiting tasks,
// or whose chain nonce moved after p.WatchSince: the shards that must keep
// running until their transactions are final (and a while after).
//
// It reads tx_attempts and wallet_tasks as well as wallet_health; it lives
// here because wallet_health is the wallet aggregate's row per wallet, and the
// watch window it applies is that row's.
func (s *Store) WalletListWithWork(ctx context.Context, p WalletListWithWorkParams) ([]WalletKey, error) {
	rows, err := s.q.WalletListWithWork(ctx, dbsqlc.WalletListWithWorkParams{
		Max: int32(p.Max), AfterChainID: p.After.ChainID, AfterSender: lowerHex(p.After.Sender), WatchSince: p.WatchSince,
	})
	if err != nil {
		return nil, fmt.Errorf("listing the wallets with work: %w", err)
	}
	out := make([]WalletKey, len(rows))
	for i, r := range rows {
		out[i] = WalletKey{ChainID: r.ChainID, Sender: r.Sender}
	}
	return out, nil
}

// WalletHoldParams name the wallet an operator holds or releases.
type WalletHoldParams struct {
	Now     time.Time
	ChainID int64
	Sender  string
	// Wallet is the wallet's name, for the audit.
	Wallet string
	// Audit, when set, is written in the same transaction (its At, Action
	// and Target are filled in).
	Audit *AuditEntry
}

// WalletHealthHold holds the wallet: from its next cycle no new task is
// sent (those in flight are still confirmed, bumped and sent again), until
// WalletHealthRelease. A held wallet stays held by its first hold. It
// returns the health row and whether this call held it.
func (s *Store) WalletHealthHold(ctx context.Context, p WalletHoldParams) (WalletHealth, bool, error) {
	by := "operator"
	if p.Audit != nil {
		by = p.Audit.KeyName
	}
	var out WalletHealth
	var held bool
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		before, err := one(q.WalletHealthGet(ctx, dbsqlc.WalletHealthGetParams{ChainID: p.ChainID, Sender: lowerHex(p.Sender)}))
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		row, err := one(q.WalletHealthHold(ctx, dbsqlc.WalletHealthHoldParams{ChainID: p.ChainID, Sender: lowerHex(p.Sender), Now: p.Now, HeldBy: &by}))
		if err != nil {
			return err
		}
		out, held = healthFromRow(row), before.HeldAt == nil
		if !held || p.Audit == nil {
			return nil
		}
		return auditInsert(ctx, q, p.Audit.with(p.Now, "wallet.hold", "wallet/"+p.Wallet, map[string]any{"sender": out.Sender}))
	})
	if err != nil {
		return WalletHealth{}, false, fmt.Errorf("holding wallet %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return out, held, nil
}

// WalletHealthRelease ends the wallet's hold. It returns the health row and
// whether the wallet was held; a wallet never held is ErrNotFound-free: it
// returns false.
func (s *Store) WalletHealthRelease(ctx context.Context, p WalletHoldParams) (WalletHealth, bool, error) {
	var out WalletHealth
	var released bool
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		before, err := one(q.WalletHealthGet(ctx, dbsqlc.WalletHealthGetParams{ChainID: p.ChainID, Sender: lowerHex(p.Sender)}))
		if errors.Is(err, ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		row, err := one(q.WalletHealthRelease(ctx, dbsqlc.WalletHealthReleaseParams{ChainID: p.ChainID, Sender: lowerHex(p.Sender), Now: p.Now}))
		if err != nil {
			return err
		}
		out, released = healthFromRow(row), before.HeldAt != nil
		if !released || p.Audit == nil {
			return nil
		}
		return auditInsert(ctx, q, p.Audit.with(p.Now, "wallet.release", "wallet/"+p.Wallet,
			map[string]any{"sender": out.Sender, "held_by": deref(before.HeldBy), "held_at": before.HeldAt}))
	})
	if err != nil {
		return WalletHealth{}, false, fmt.Errorf("releasing wallet %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return out, released, nil
}

// WalletSignerParams are a wallet's signer state to record.
type WalletSignerParams struct {
	Now     time.Time
	ChainID int64
	Sender  string
	// Backend is the signer's backend (keystore.BackendOf).
	Backend string
	State   SignerState
	// Error, for SignerUnavailable, is the signer's error (err.Error() of
	// its *keystore.UnavailableError): cut to MaxSignerError bytes, at a
	// character's boundary; empty is recorded as "unavailable".
	Error string
}

// WalletHealthSetSigner records that the wallet's signer entered p.State
// (with p.Backend): a transition, written with its time and, when
// unavailable, the error. It reports whether the row changed: a state the
// row already records (the same state and backend) is left as it is, its
// time and error unmoved.
func (s *Store) WalletHealthSetSigner(ctx context.Context, p WalletSignerParams) (bool, error) {
	var msg *string
	switch p.State {
	case SignerOK:
	case SignerUnavailable:
		// PostgreSQL's text holds valid UTF-8 without NUL.
		e := strings.ReplaceAll(strings.ToValidUTF8(p.Error, "\uFFFD"), "\x00", "")
		if e == "" {
			e = "unavailable"
		}
		e = cutUTF8(e, MaxSignerError)
		msg = &e
	default:
		return false, fmt.Errorf("recording the signer of %s: state %q is neither %q nor %q", WalletShardKey(p.ChainID, p.Sender), p.State, SignerOK, SignerUnavailable)
	}
	n, err := s.q.WalletHealthSetSigner(ctx, dbsqlc.WalletHealthSetSignerParams{
		ChainID: p.ChainID, Sender: lowerHex(p.Sender), Backend: p.Backend, State: string(p.State), Error: msg, Now: p.Now,
	})
	if err != nil {
		return false, fmt.Errorf("recording the signer of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return n > 0, nil
}

// WalletHealthListSignerUnavailable returns the health of up to max
// wallets whose signer is unavailable, in (chain, sender) order.
func (s *Store) WalletHealthListSignerUnavailable(ctx context.Context, max int) ([]WalletHealth, error) {
	rows, err := s.q.WalletHealthListSignerUnavailable(ctx, int32(max))
	if err != nil {
		return nil, fmt.Errorf("listing the wallets whose signer is unavailable: %w", err)
	}
	out := make([]WalletHealth, len(rows))
	for i, r := range rows {
		out[i] = healthFromRow(r)
	}
	return out, nil
}

// cutUTF8 returns s cut to at most n bytes, at a character's boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
