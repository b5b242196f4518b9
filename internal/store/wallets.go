package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// WalletDecl is a wallet added at run time (ledgerq.wallets): where its key
// is, never the key.
type WalletDecl struct {
	Name    string
	Chain   string
	ChainID int64
	// Address is lower-case hex.
	Address string
	// Backend is keystore, pkcs11, awskms or clef; KeyRef the key within
	// it (a file name, a label, a key id; empty for clef).
	Backend  string
	KeyRef   string
	Disabled bool

	CreatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func walletDeclFromRow(r dbsqlc.LedgerqWallet) WalletDecl {
	return WalletDecl{
		Name: r.Name, Chain: r.Chain, ChainID: r.ChainID, Address: r.Address, Backend: r.Backend, KeyRef: r.KeyRef,
		Disabled: r.Disabled, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

// ErrWalletTaken is WalletsAdd's error when the name, or the chain and
// address, belong to a wallet already.
var ErrWalletTaken = errors.New("a wallet with this name, or of this address on this chain, exists")

// ErrWalletBusy is WalletsRemove's error when the wallet has tasks that
// have not ended.
var ErrWalletBusy = errors.New("the wallet has tasks that have not ended")

// WalletsList returns the wallets added at run time, by name.
func (s *Store) WalletsList(ctx context.Context) ([]WalletDecl, error) {
	rows, err := s.q.WalletsList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing wallets: %w", err)
	}
	out := make([]WalletDecl, len(rows))
	for i, r := range rows {
		out[i] = walletDeclFromRow(r)
	}
	return out, nil
}

// WalletsGet returns the wallet added at run time named name, or
// ErrNotFound.
func (s *Store) WalletsGet(ctx context.Context, name string) (WalletDecl, error) {
	r, err := one(s.q.WalletsGet(ctx, name))
	if err != nil {
		return WalletDecl{}, err
	}
	return walletDeclFromRow(r), nil
}

// WalletsAdd stores d (its CreatedAt and UpdatedAt are now), audited, and
// notifies every process; ErrWalletTaken when its name or its (chain,
// address) is in use.
func (s *Store) WalletsAdd(ctx context.Context, d WalletDecl, now time.Time, audit *AuditEntry) (WalletDecl, error) {
	var out WalletDecl
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		row, err := one(q.WalletsInsert(ctx, dbsqlc.WalletsInsertParams{
			Name: d.Name, Chain: d.Chain, ChainID: d.ChainID, Address: lowerHex(d.Address), Backend: d.Backend,
			KeyRef: d.KeyRef, Disabled: d.Disabled, CreatedBy: d.CreatedBy, Now: now,
		}))
		if errors.Is(err, ErrNotFound) {
			return ErrWalletTaken
		} else if err != nil {
			return err
		}
		out = walletDeclFromRow(row)
		if err := auditInsert(ctx, q, auditOf(audit).with(now, "wallet.add", "wallet/"+d.Name, map[string]any{
			"chain": out.Chain, "chain_id": out.ChainID, "address": out.Address, "backend": out.Backend, "key": out.KeyRef, "disabled": out.Disabled,
		})); err != nil {
			return err
		}
		return wake(ctx, q, notify.Wallets)
	})
	if err != nil {
		return WalletDecl{}, fmt.Errorf("adding wallet %s: %w", d.Name, err)
	}
	return out, nil
}

// WalletsSetDisabled disables (or enables) the wallet added at run time
// named name, audited, and notifies every process; ErrNotFound when there
// is none. changed is false when it already was so (nothing is recorded).
func (s *Store) WalletsSetDisabled(ctx context.Context, name string, disabled bool, now time.Time, audit *AuditEntry) (d WalletDecl, changed bool, err error) {
	err = s.withTx(ctx, func(q *dbsqlc.Queries) error {
		before, err := one(q.WalletsGet(ctx, name))
		if err != nil {
			return err
		}
		if before.Disabled == disabled {
			d = walletDeclFromRow(before)
			return nil
		}
		row, err := one(q.WalletsSetDisabled(ctx, dbsqlc.WalletsSetDisabledParams{Name: name, Disabled: disabled, Now: now}))
		if err != nil {
			return err
		}
		d, changed = walletDeclFromRow(row), true
		action := "wallet.enable"
		if disabled {
			action = "wallet.disable"
		}
		if err := auditInsert(ctx, q, auditOf(audit).with(now, action, "wallet/"+name, map[string]any{"address": d.Address, "chain_id": d.ChainID})); err != nil {
			return err
		}
		return wake(ctx, q, notify.Wallets)
	})
	if err != nil {
		return WalletDecl{}, false, fmt.Errorf("setting wallet %s disabled=%t: %w", name, disabled, err)
	}
	return d, changed, nil
}

// WalletsRemove deletes the wallet added at run time named name, audited,
// and notifies every process: ErrNotFound when there is none, ErrWalletBusy
// while it has tasks that have not ended (it can be disabled instead). The
// wallet's row is locked first, so that no task of it is stored meanwhile
// by a process that reads the wallet as present (see WalletsLockShared).
func (s *Store) WalletsRemove(ctx context.Context, name string, now time.Time, audit *AuditEntry) error {
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		before, err := one(q.WalletsLock(ctx, name))
		if err != nil {
			return err
		}
		busy, err := one(q.WalletsUnfinishedTasks(ctx, name))
		if err != nil {
			return err
		}
		if busy > 0 {
			return fmt.Errorf("%w (%d); disable it, and remove it once they have", ErrWalletBusy, busy)
		}
		if _, err := q.WalletsDelete(ctx, name); err != nil {
			return err
		}
		// Its policy set through the API goes with it, so that a wallet
		// added again under the name starts without one (the
		// configuration's stays: the configuration names the wallet).
		detail := map[string]any{"address": before.Address, "chain_id": before.ChainID, "backend": before.Backend, "key": before.KeyRef}
		switch policy, err := one(q.WalletPolicyDeleteAPI(ctx, name)); {
		case err == nil:
			detail["policy"] = json.RawMessage(policy.Policy)
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if err := auditInsert(ctx, q, auditOf(audit).with(now, "wallet.remove", "wallet/"+name, detail)); err != nil {
			return err
		}
		return wake(ctx, q, notify.Wallets)
	})
	if err != nil {
		return fmt.Errorf("removing wallet %s: %w", name, err)
	}
	return nil
}

// auditOf is e, or an anonymous entry when the caller gave none: a wallet's
// change is always recorded.
func auditOf(e *AuditEntry) *AuditEntry {
	if e == nil {
		return &AuditEntry{}
	}
	return e
}
