package evmsim_test

import (
	"bytes"
	"context"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
)

func TestLedger_ReplayOfTheJournalRestoresNoncesBalancesAndReceipts(t *testing.T) {
	t.Parallel()
	var journal bytes.Buffer
	bd := setup(t, evmsim.Config{Journal: &journal})
	ctx := context.Background()
	var hashes []ledger.TxHash
	for n := range uint64(5) {
		raw := sign(t, bd.key, n, 1, 3, 1000, nil)
		if err := bd.l.SendRawTransaction(ctx, raw); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, hashOf(t, raw))
		if n == 2 {
			bd.l.Mine()
		}
	}
	// Pending, not mined: not in the journal, and not in the replayed chain.
	pending := sign(t, bd.key, 5, 1, 3, 1000, nil)
	bd.l.Mine()
	if err := bd.l.SendRawTransaction(ctx, pending); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(journal.String(), "\n"); got != 5 {
		t.Fatalf("journal has %d lines, want the 5 mined transactions", got)
	}

	// The restarted ledger: same genesis, the journal replayed.
	again := evmsim.New(evmsim.Config{Clock: bd.clock, Alloc: map[common.Address]*big.Int{common.Address(bd.from): ether}, Journal: &journal})
	n, err := again.Replay(bytes.NewReader(append([]byte(nil), journal.Bytes()...)))
	if err != nil || n != 5 {
		t.Fatalf("Replay = %d, %v; want 5, nil", n, err)
	}
	if got := strings.Count(journal.String(), "\n"); got != 5 {
		t.Fatalf("replay wrote to the journal again: %d lines", got)
	}
	if nonce, _ := again.NonceAt(ctx, bd.from); nonce != 5 {
		t.Fatalf("nonce after replay = %d, want 5", nonce)
	}
	want, _ := bd.l.BalanceAt(ctx, bd.from)
	if got, _ := again.BalanceAt(ctx, bd.from); got.Cmp(want) != 0 {
		t.Fatalf("balance after replay = %s, want %s", got, want)
	}
	for _, h := range hashes {
		if r := receipt(t, again, h); !r.Found || r.Status != ledger.ReceiptSuccess {
			t.Fatalf("receipt of %s after replay = %+v", h.Hex(), r)
		}
	}
	if r := receipt(t, again, hashOf(t, pending)); r.Found {
		t.Fatal("a transaction that was only pending has a receipt after replay")
	}
}

func TestLedger_ReplayStopsQuietlyAtATornLastLineAndFailsOnAnotherBadLine(t *testing.T) {
	t.Parallel()
	var journal bytes.Buffer
	bd := setup(t, evmsim.Config{Journal: &journal})
	ctx := context.Background()
	for n := range uint64(2) {
		if err := bd.l.SendRawTransaction(ctx, sign(t, bd.key, n, 1, 3, 1000, nil)); err != nil {
			t.Fatal(err)
		}
	}
	bd.l.Mine()
	lines := strings.SplitAfter(journal.String(), "\n")
	alloc := map[common.Address]*big.Int{common.Address(bd.from): ether}

	torn := lines[0] + lines[1][:len(lines[1])/2]
	n, err := evmsim.New(evmsim.Config{Clock: bd.clock, Alloc: alloc}).Replay(strings.NewReader(torn))
	if err != nil || n != 1 {
		t.Fatalf("Replay of a torn journal = %d, %v; want 1, nil", n, err)
	}
	bad := "zz\n" + lines[0] + lines[1]
	if _, err := evmsim.New(evmsim.Config{Clock: bd.clock, Alloc: alloc}).Replay(strings.NewReader(bad)); err == nil {
		t.Fatal("Replay accepted a bad line before the last")
	}
}
