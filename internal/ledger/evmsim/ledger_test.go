package evmsim_test

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/ledger/gethpool/gethpooltest"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
)

var (
	to    = common.Address{0xaa}
	gwei  = big.NewInt(params.GWei)
	t0    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ether = new(big.Int).Mul(big.NewInt(10), big.NewInt(params.Ether))
)

type bundle struct {
	l     *evmsim.Ledger
	clock *clock.Fake
	key   *ecdsa.PrivateKey
	from  ledger.Address
}

func setup(t *testing.T, cfg evmsim.Config) bundle {
	t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	from := crypto.PubkeyToAddress(key.PublicKey)
	c := clock.NewFake(t0)
	cfg.Clock = c
	cfg.Alloc = map[common.Address]*big.Int{from: ether}
	return bundle{l: evmsim.New(cfg), clock: c, key: key, from: ledger.Address(from)}
}

func sign(t *testing.T, key *ecdsa.PrivateKey, nonce uint64, tip, feeCap int64, value int64, data []byte) []byte {
	t.Helper()
	id := big.NewInt(1337)
	return ledgertest.RawTx(t, ledgertest.SignTx(t, key, &types.DynamicFeeTx{
		ChainID: id, Nonce: nonce, GasTipCap: new(big.Int).Mul(big.NewInt(tip), gwei), GasFeeCap: new(big.Int).Mul(big.NewInt(feeCap), gwei),
		Gas: 100_000, To: &to, Value: big.NewInt(value), Data: data,
	}))
}

func hashOf(t *testing.T, raw []byte) ledger.TxHash {
	t.Helper()
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	return ledger.TxHash(tx.Hash())
}

func wantResult(t *testing.T, err error, want ledger.SendResult) {
	t.Helper()
	if got := ledger.SendResultOf(err); got != want {
		t.Fatalf("send result = %s (%v), want %s", got, err, want)
	}
}

func receipt(t *testing.T, l *evmsim.Ledger, h ledger.TxHash) ledger.Receipt {
	t.Helper()
	r, err := l.TransactionReceipt(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLedger_BlocksComeOnThePeriodOfTheInjectedClock(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{BlockPeriod: 2 * time.Second})
	ctx := context.Background()
	tx := sign(t, bd.key, 0, 1, 3, 1000, nil)
	if err := bd.l.SendRawTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if n, _ := bd.l.PendingNonceAt(ctx, bd.from); n != 1 {
		t.Fatalf("pending nonce = %d, want 1", n)
	}
	bd.clock.Advance(time.Second)
	if r := receipt(t, bd.l, hashOf(t, tx)); r.Found {
		t.Fatalf("mined before the period: %+v", r)
	}
	bd.clock.Advance(time.Second)
	r := receipt(t, bd.l, hashOf(t, tx))
	if !r.Found || r.Status != ledger.ReceiptSuccess || r.BlockNumber != 1 || r.GasUsed != params.TxGas {
		t.Fatalf("receipt after the period = %+v, want success in block 1", r)
	}
	if n, _ := bd.l.NonceAt(ctx, bd.from); n != 1 {
		t.Fatalf("latest nonce = %d, want 1", n)
	}
	if b, _ := bd.l.BalanceAt(ctx, ledger.Address(to)); b.Int64() != 1000 {
		t.Fatalf("recipient balance = %v, want 1000", b)
	}
	// price = base fee 1 gwei + tip 1 gwei
	spent := new(big.Int).Sub(ether, mustBalance(t, bd.l, bd.from))
	want := new(big.Int).Add(big.NewInt(1000), new(big.Int).Mul(big.NewInt(2*params.GWei), big.NewInt(int64(params.TxGas))))
	if spent.Cmp(want) != 0 {
		t.Fatalf("sender spent %v, want %v", spent, want)
	}
	bd.clock.Advance(10 * time.Second)
	if h := bd.l.Head(); h.Number != 6 {
		t.Fatalf("head after 12s at 2s a block = %d, want 6", h.Number)
	}
}

func mustBalance(t *testing.T, l *evmsim.Ledger, a ledger.Address) *big.Int {
	t.Helper()
	b, err := l.BalanceAt(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLedger_ReplacementNeedsTenPercentMore(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{})
	ctx := context.Background()
	first := sign(t, bd.key, 0, 10, 30, 1, nil)
	if err := bd.l.SendRawTransaction(ctx, first); err != nil {
		t.Fatal(err)
	}
	wantResult(t, bd.l.SendRawTransaction(ctx, sign(t, bd.key, 0, 10, 30, 2, nil)), ledger.SendUnderpriced)
	wantResult(t, bd.l.SendRawTransaction(ctx, sign(t, bd.key, 0, 10, 33, 2, nil)), ledger.SendUnderpriced) // tip not bumped
	replacement := sign(t, bd.key, 0, 11, 33, 3, nil)
	if err := bd.l.SendRawTransaction(ctx, replacement); err != nil {
		t.Fatalf("a 10%% bump is refused: %v", err)
	}
	bd.l.Mine()
	if r := receipt(t, bd.l, hashOf(t, first)); r.Found {
		t.Fatalf("the replaced transaction was mined: %+v", r)
	}
	if r := receipt(t, bd.l, hashOf(t, replacement)); !r.Found {
		t.Fatal("the replacement was not mined")
	}
}

// geth's replacement rule in wei, where a percentage alone misleads: fee
// cap and tip each strictly above the old ones and at least old × 110 / 100
// in integer division (core/txpool/legacypool/list.go). Each case is its own
// sender's nonce 0, on a chain whose base fee is 1 wei.
func TestLedger_ReplacementFollowsGethsRuleAtNonMultiplesOfTenAndZeroTips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range gethpooltest.Edges {
		if tc.OldFeeCap < 1 {
			continue // below this chain's base fee of 1 wei: never mined, so no replacement to test
		}
		bd := setup(t, evmsim.Config{BaseFee: 1})
		signWei := func(feeCap, tip int64) []byte {
			return ledgertest.RawTx(t, ledgertest.SignTx(t, bd.key, &types.DynamicFeeTx{
				ChainID: big.NewInt(1337), GasTipCap: big.NewInt(tip), GasFeeCap: big.NewInt(feeCap), Gas: 21000, To: &to,
			}))
		}
		if err := bd.l.SendRawTransaction(ctx, signWei(tc.OldFeeCap, tc.OldTip)); err != nil {
			t.Fatalf("%s: the first transaction: %v", tc.Name, err)
		}
		err := bd.l.SendRawTransaction(ctx, signWei(tc.FeeCap, tc.Tip))
		if got := ledger.SendResultOf(err); tc.Replaces && err != nil || !tc.Replaces && got != ledger.SendUnderpriced {
			t.Errorf("%s: send result %s (%v), want replaced: %v", tc.Name, got, err, tc.Replaces)
		}
	}
}

func TestLedger_AnswersAsGethDoes(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{})
	ctx := context.Background()
	tx := sign(t, bd.key, 0, 1, 3, 1, nil)
	if err := bd.l.SendRawTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	wantResult(t, bd.l.Send(ctx, tx), ledger.SendAccepted) // "already known"
	if err := bd.l.Send(ctx, tx); ledger.ReasonOf(err) != "already known" {
		t.Fatalf("resend = %v, want geth's already known", err)
	}
	bd.l.Mine()
	wantResult(t, bd.l.Send(ctx, sign(t, bd.key, 0, 1, 3, 2, nil)), ledger.SendNonceTooLow)

	poor, _ := crypto.GenerateKey()
	wantResult(t, bd.l.Send(ctx, sign(t, poor, 0, 1, 3, 1, nil)), ledger.SendRejected)
	wantResult(t, bd.l.Send(ctx, sign(t, bd.key, 1, 1, 0, 1, nil)), ledger.SendRejected) // fee cap below base fee and tip
	wantResult(t, bd.l.Send(ctx, sign(t, bd.key, 1, 0, 0, 1, nil)), ledger.SendRejected) // fee cap below base fee
}

func TestLedger_RevertMarkerMinesReverted(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{})
	ctx := context.Background()
	tx := sign(t, bd.key, 0, 1, 3, 1000, append(append([]byte{}, evmsim.RevertMarker...), 1, 2))
	if err := bd.l.SendRawTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	bd.l.Mine()
	if r := receipt(t, bd.l, hashOf(t, tx)); !r.Found || r.Status != ledger.ReceiptReverted {
		t.Fatalf("receipt = %+v, want reverted", r)
	}
	if n, _ := bd.l.NonceAt(ctx, bd.from); n != 1 {
		t.Fatalf("a reverted transaction uses its nonce: %d", n)
	}
	if b, _ := bd.l.BalanceAt(ctx, ledger.Address(to)); b.Sign() != 0 {
		t.Fatalf("a reverted transaction moved value: %v", b)
	}
}

func TestLedger_LostResponseTakesTheTransaction(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{LostResponseRate: 1})
	tx := sign(t, bd.key, 0, 1, 3, 1, nil)
	err := bd.l.SendRawTransaction(context.Background(), tx)
	wantResult(t, err, ledger.SendIndeterminate)
	bd.l.Mine()
	if r := receipt(t, bd.l, hashOf(t, tx)); !r.Found {
		t.Fatal("a send whose answer was lost was not mined")
	}
}

func TestLedger_TransientFailureTakesNothing(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{TransientRate: 1})
	err := bd.l.SendRawTransaction(context.Background(), sign(t, bd.key, 0, 1, 3, 1, nil))
	wantResult(t, err, ledger.SendIndeterminate)
	if n, _ := bd.l.PendingNonceAt(context.Background(), bd.from); n != 0 {
		t.Fatalf("pending nonce after a transient failure = %d, want 0", n)
	}
}

func TestLedger_SameSeedSameFaults(t *testing.T) {
	t.Parallel()
	key, _ := crypto.GenerateKey()
	run := func(seed int64) []string {
		l := evmsim.New(evmsim.Config{Seed: seed, Clock: clock.NewFake(t0), TransientRate: 0.3, LostResponseRate: 0.3,
			Alloc: map[common.Address]*big.Int{crypto.PubkeyToAddress(key.PublicKey): ether}})
		var out []string
		for n := uint64(0); n < 40; n++ {
			out = append(out, ledger.ReasonOf(errOrOK(l.Send(context.Background(), sign(t, key, n, 1, 3, 1, nil)))))
		}
		return out
	}
	a, b := run(7), run(7)
	faults := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("send %d: %q then %q under one seed", i, a[i], b[i])
		}
		if a[i] != "ok" {
			faults++
		}
	}
	if faults == 0 || faults == len(a) {
		t.Fatalf("%d faults in %d sends at rates 0.3+0.3", faults, len(a))
	}
}

type okErr struct{}

func (okErr) Error() string { return "ok" }

func errOrOK(err error) error {
	if err == nil {
		return okErr{}
	}
	return err
}

// geth's --miner.gasprice: a transaction whose effective tip is below the
// minimum stays in the pool and holds up its sender's later nonces; a
// replacement paying enough is mined, and so is anything once the minimum
// drops.
func TestLedger_ATipBelowTheMinimumStallsTheSenderUntilReplacedOrTheMinimumDrops(t *testing.T) {
	ctx := context.Background()
	b := setup(t, evmsim.Config{MinTip: 5 * params.GWei})
	low := sign(t, b.key, 0, 1, 10, 1, nil)
	next := sign(t, b.key, 1, 6, 20, 1, nil)
	wantResult(t, b.l.SendRawTransaction(ctx, low), ledger.SendAccepted)
	wantResult(t, b.l.SendRawTransaction(ctx, next), ledger.SendAccepted)
	b.l.Mine()
	if n, _ := b.l.NonceAt(ctx, b.from); n != 0 {
		t.Fatalf("nonce = %d, want 0: the low tip stalls the sender", n)
	}
	bumped := sign(t, b.key, 0, 6, 20, 1, nil)
	wantResult(t, b.l.SendRawTransaction(ctx, bumped), ledger.SendAccepted)
	b.l.Mine()
	if n, _ := b.l.NonceAt(ctx, b.from); n != 2 {
		t.Fatalf("nonce = %d, want 2 after the bump", n)
	}
	if !receipt(t, b.l, hashOf(t, bumped)).Found || receipt(t, b.l, hashOf(t, low)).Found {
		t.Fatal("the bump, not the low transaction, is mined")
	}

	wantResult(t, b.l.SendRawTransaction(ctx, sign(t, b.key, 2, 1, 10, 1, nil)), ledger.SendAccepted)
	b.l.Mine()
	if n, _ := b.l.NonceAt(ctx, b.from); n != 2 {
		t.Fatalf("nonce = %d, want 2", n)
	}
	b.l.SetMinTip(0)
	b.l.Mine()
	if n, _ := b.l.NonceAt(ctx, b.from); n != 3 {
		t.Fatalf("nonce = %d, want 3 once the minimum drops", n)
	}
	b.l.Credit(common.Address(b.from), big.NewInt(7))
}
