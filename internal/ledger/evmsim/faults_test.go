package evmsim_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
)

func nonces(t *testing.T, l *evmsim.Ledger, a ledger.Address) (latest, pending uint64) {
	t.Helper()
	ctx := context.Background()
	latest, err := l.NonceAt(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if pending, err = l.PendingNonceAt(ctx, a); err != nil {
		t.Fatal(err)
	}
	return latest, pending
}

func TestLedger_ALostTransactionAnswersSuccessButIsNeverMined(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{LostTxRate: 1})
	tx := sign(t, bd.key, 0, 1, 3, 1, nil)
	if err := bd.l.SendRawTransaction(context.Background(), tx); err != nil {
		t.Fatalf("a lost transaction's send answered %v, want success", err)
	}
	bd.l.Mine()
	if r := receipt(t, bd.l, hashOf(t, tx)); r.Found {
		t.Fatalf("a lost transaction was mined: %+v", r)
	}
	if latest, pending := nonces(t, bd.l, bd.from); latest != 0 || pending != 0 {
		t.Fatalf("nonces after a lost transaction = %d latest, %d pending; want 0, 0", latest, pending)
	}
	if s := bd.l.Stats(); s.LostTxs != 1 {
		t.Fatalf("stats = %+v, want one lost transaction", s)
	}
}

func TestLedger_ARewindUnminesTheLastBlocksAndReturnsTheirTransactionsToThePool(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{})
	ctx := context.Background()
	before := mustBalance(t, bd.l, bd.from)
	tx0, tx1 := sign(t, bd.key, 0, 1, 3, 1000, nil), sign(t, bd.key, 1, 1, 3, 1000, nil)
	if err := bd.l.SendRawTransaction(ctx, tx0); err != nil {
		t.Fatal(err)
	}
	bd.l.Mine()
	if err := bd.l.SendRawTransaction(ctx, tx1); err != nil {
		t.Fatal(err)
	}
	bd.l.Mine()
	n, err := bd.l.Reorg(1)
	if err != nil || n != 1 {
		t.Fatalf("Reorg(1) = %d, %v; want 1 transaction un-mined", n, err)
	}
	if r := receipt(t, bd.l, hashOf(t, tx1)); r.Found {
		t.Fatalf("the rewound transaction still has a receipt: %+v", r)
	}
	if r := receipt(t, bd.l, hashOf(t, tx0)); !r.Found {
		t.Fatal("the block before the rewind lost its transaction")
	}
	if latest, pending := nonces(t, bd.l, bd.from); latest != 1 || pending != 2 {
		t.Fatalf("nonces after the rewind = %d latest, %d pending; want 1, 2 (back in the pool)", latest, pending)
	}
	if h := bd.l.Head(); h.Number != 1 {
		t.Fatalf("head after rewinding 1 of 2 blocks = %d, want 1", h.Number)
	}
	if n, _ := bd.l.Reorg(5); n != 1 {
		t.Fatalf("Rewind past genesis un-mined %d, want 1", n)
	}
	if b := mustBalance(t, bd.l, bd.from); b.Cmp(before) != 0 {
		t.Fatalf("balance after rewinding to genesis = %v, want %v", b, before)
	}
	if b, _ := bd.l.BalanceAt(ctx, ledger.Address(to)); b.Sign() != 0 {
		t.Fatalf("recipient balance after rewinding to genesis = %v, want 0", b)
	}
	bd.l.Mine()
	for _, tx := range [][]byte{tx0, tx1} {
		if r := receipt(t, bd.l, hashOf(t, tx)); !r.Found || r.BlockNumber != 1 {
			t.Fatalf("a returned transaction was not mined again in block 1: %+v", r)
		}
	}
	if s := bd.l.Stats(); s.Reorgs != 2 || s.Unmined != 2 || s.Dropped != 0 {
		t.Fatalf("stats = %+v, want 2 rewinds, 2 un-mined, none dropped", s)
	}
}

func TestLedger_ARewindAtTheDropRateDropsItsTransactionsAndTheSameBytesAreTakenAgain(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{ReorgDropRate: 1})
	ctx := context.Background()
	tx := sign(t, bd.key, 0, 1, 3, 1, nil)
	if err := bd.l.SendRawTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	bd.l.Mine()
	if _, err := bd.l.Reorg(1); err != nil {
		t.Fatal(err)
	}
	bd.l.Mine()
	if r := receipt(t, bd.l, hashOf(t, tx)); r.Found {
		t.Fatalf("a dropped transaction was mined again: %+v", r)
	}
	if latest, pending := nonces(t, bd.l, bd.from); latest != 0 || pending != 0 {
		t.Fatalf("nonces after a dropping rewind = %d, %d; want 0, 0", latest, pending)
	}
	err := bd.l.Send(ctx, tx)
	wantResult(t, err, ledger.SendAccepted)
	if ledger.ReasonOf(errOrOK(err)) == "already known" {
		t.Fatal("a dropped transaction's bytes are still known")
	}
	bd.l.Mine()
	if r := receipt(t, bd.l, hashOf(t, tx)); !r.Found {
		t.Fatal("the dropped transaction sent again was not mined")
	}
}

func TestLedger_RewindsComeAtTheRatePerBlockAndTheSameSeedRewindsAlike(t *testing.T) {
	t.Parallel()
	key, _ := crypto.GenerateKey()
	run := func(seed int64) (evmsim.Stats, uint64) {
		c := clock.NewFake(t0)
		l := evmsim.New(evmsim.Config{Seed: seed, Clock: c, BlockPeriod: time.Second, ReorgRate: 0.2, ReorgDepth: 2,
			LostTxRate: 0.2, Alloc: map[common.Address]*big.Int{crypto.PubkeyToAddress(key.PublicKey): ether}})
		for n := uint64(0); n < 60; n++ {
			_ = l.Send(context.Background(), sign(t, key, n, 1, 3, 1, nil))
			c.Advance(time.Second)
		}
		latest, _ := l.NonceAt(context.Background(), ledger.Address(crypto.PubkeyToAddress(key.PublicKey)))
		return l.Stats(), latest
	}
	a, na := run(3)
	b, nb := run(3)
	if a != b || na != nb {
		t.Fatalf("one seed, two runs: %+v nonce %d, then %+v nonce %d", a, na, b, nb)
	}
	if a.Reorgs == 0 || a.ReorgedBlocks < a.Reorgs || a.ReorgedBlocks > 2*a.Reorgs || a.LostTxs == 0 {
		t.Fatalf("stats at rewind rate 0.2 depth 2 and lost rate 0.2 over 60 blocks = %+v, want some of each", a)
	}
}
