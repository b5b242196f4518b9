package store

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// DirectoryWallet is a row of ledgerq.wallet_directory: where SQL
// (ledgerq.send_tx) learns a wallet's chain and sender.
type DirectoryWallet struct {
	Wallet  string
	ChainID int64
	// Sender is the wallet's address, 0x-prefixed hex (stored lower-case).
	Sender string
	// Source is "config" (written at serve start) or "runtime" (kept in
	// step with ledgerq.wallets by its trigger).
	Source   string
	Disabled bool
}

// WalletDirectorySyncConfig writes the configuration's wallets to the
// wallet directory, and removes the configuration's wallets it no longer
// declares, in one transaction (serve start). A wallet added at run time
// under one of the names keeps its own row.
func (s *Store) WalletDirectorySyncConfig(ctx context.Context, now time.Time, wallets []DirectoryWallet) error {
	ws := slices.Clone(wallets)
	slices.SortFunc(ws, func(a, b DirectoryWallet) int { return strings.Compare(a.Wallet, b.Wallet) })
	keep := make([]string, 0, len(ws))
	return s.withTx(ctx, func(q *dbsqlc.Queries) error {
		for _, w := range ws {
			if !hexAddress.MatchString(w.Sender) {
				return fmt.Errorf("wallet %q: sender %q is not a hex address", w.Wallet, w.Sender)
			}
			if err := q.WalletDirectoryPutConfig(ctx, dbsqlc.WalletDirectoryPutConfigParams{
				WalletID: w.Wallet, ChainID: w.ChainID, Sender: lowerHex(w.Sender), Now: now,
			}); err != nil {
				return fmt.Errorf("writing wallet %q to the wallet directory: %w", w.Wallet, err)
			}
			keep = append(keep, w.Wallet)
		}
		if _, err := q.WalletDirectoryDeleteConfigExcept(ctx, keep); err != nil {
			return fmt.Errorf("removing wallets the configuration no longer declares from the wallet directory: %w", err)
		}
		return nil
	})
}

// WalletDirectoryList returns the wallet directory, by wallet.
func (s *Store) WalletDirectoryList(ctx context.Context) ([]DirectoryWallet, error) {
	rows, err := s.q.WalletDirectoryList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the wallet directory: %w", err)
	}
	out := make([]DirectoryWallet, 0, len(rows))
	for _, r := range rows {
		out = append(out, DirectoryWallet{Wallet: r.WalletID, ChainID: r.ChainID, Sender: r.Sender, Source: r.Source, Disabled: r.Disabled})
	}
	return out, nil
}

// SettingWalletMaxFeePerGas is the ledgerq.settings row of
// --wallet-max-fee-per-gas, the fee ceiling ledgerq.send_tx applies.
const SettingWalletMaxFeePerGas = "wallet_max_fee_per_gas"

// SettingsPutMaxFeePerGas writes the server's fee ceiling for the SQL
// functions that apply it (serve start). The last serve to start sets it.
func (s *Store) SettingsPutMaxFeePerGas(ctx context.Context, now time.Time, ceiling *big.Int) error {
	if ceiling == nil || ceiling.Sign() < 0 {
		return fmt.Errorf("writing setting %s: %v is no fee ceiling", SettingWalletMaxFeePerGas, ceiling)
	}
	if err := s.q.SettingPut(ctx, dbsqlc.SettingPutParams{Name: SettingWalletMaxFeePerGas, Value: ceiling.String(), Now: now}); err != nil {
		return fmt.Errorf("writing setting %s: %w", SettingWalletMaxFeePerGas, err)
	}
	return nil
}

// SettingAPIMaxPayloadBytes is the ledgerq.settings row of
// --api-max-payload-bytes, the largest batch ledgerq.submit_batch takes.
const SettingAPIMaxPayloadBytes = "api_max_payload_bytes"

// SettingsPutMaxPayloadBytes writes the API's largest batch payload for
// ledgerq.submit_batch, which applies it as the API does (serve start). The
// last serve to start sets it.
func (s *Store) SettingsPutMaxPayloadBytes(ctx context.Context, now time.Time, bytes int) error {
	if bytes < 1 || bytes > 1<<31-1 {
		return fmt.Errorf("writing setting %s: %d is no payload bound", SettingAPIMaxPayloadBytes, bytes)
	}
	if err := s.q.SettingPut(ctx, dbsqlc.SettingPutParams{Name: SettingAPIMaxPayloadBytes, Value: strconv.Itoa(bytes), Now: now}); err != nil {
		return fmt.Errorf("writing setting %s: %w", SettingAPIMaxPayloadBytes, err)
	}
	return nil
}
