package jam_test

import (
	"context"
	"crypto/ecdsa"
	"maps"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
)

var (
	t0   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	slot = 6 * time.Second
	ctx  = context.Background()
)

type bundle struct {
	chain *jam.Chain
	clock *clock.Fake
	key   *ecdsa.PrivateKey
	// nonce is the next nonce tx signs with.
	nonce uint64
}

// Test keys: key and other are funded at genesis (see setup).
var (
	key, _   = crypto.ToECDSA(common.LeftPadBytes([]byte{0x42}, 32))
	other, _ = crypto.ToECDSA(common.LeftPadBytes([]byte{0x43}, 32))
	ether    = big.NewInt(1e18)
)

// setup starts a chain on a fake clock at t0 (see withTestAlloc).
func setup(t *testing.T, cfg jam.Config) *bundle {
	t.Helper()
	c := clock.NewFake(t0)
	cfg.Clock = c
	chain := jam.New(withTestAlloc(cfg))
	t.Cleanup(func() { _ = chain.Close() })
	return &bundle{chain: chain, clock: c, key: key}
}

// withTestAlloc funds key and other with 100 ether each, unless cfg.Alloc
// says otherwise.
func withTestAlloc(cfg jam.Config) jam.Config {
	alloc := map[common.Address]*big.Int{
		crypto.PubkeyToAddress(key.PublicKey):   new(big.Int).Mul(big.NewInt(100), ether),
		crypto.PubkeyToAddress(other.PublicKey): new(big.Int).Mul(big.NewInt(100), ether),
	}
	maps.Copy(alloc, cfg.Alloc)
	cfg.Alloc = alloc
	return cfg
}

// tx signs the next transaction.
func (b *bundle) tx(t *testing.T) []byte {
	t.Helper()
	raw := signTx(t, b.key, b.nonce)
	b.nonce++
	return raw
}

func signTx(t *testing.T, key *ecdsa.PrivateKey, nonce uint64) []byte {
	t.Helper()
	id := big.NewInt(1337)
	to := common.Address{0xaa}
	return ledgertest.RawTx(t, ledgertest.SignTx(t, key, &types.DynamicFeeTx{
		ChainID: id, Nonce: nonce, GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(2e9), Gas: 21_000, To: &to, Value: big.NewInt(1),
	}))
}

// advance moves the clock n slots on.
func (b *bundle) advance(n int) { b.clock.Advance(time.Duration(n) * slot) }

// head returns the newest block.
func head(t *testing.T, l ledger.BundleLedger) ledger.BlockRef {
	t.Helper()
	recent, err := l.RecentBlocks(ctx)
	if err != nil || len(recent) == 0 {
		t.Fatalf("RecentBlocks = %v, %v", recent, err)
	}
	return recent[len(recent)-1]
}

// pkg builds version v of EVM block n on parent, anchored at the head.
func pkg(t *testing.T, l ledger.BundleLedger, n uint64, parent ledger.Hash, v int, txs ...[]byte) ledger.WorkPackage {
	t.Helper()
	return ledger.WorkPackage{Number: n, Parent: parent, Version: v, Core: 0, Anchor: head(t, l), Txs: txs}
}

// hashes returns wp's EVM block hash and package hash.
func hashes(t *testing.T, wp ledger.WorkPackage) (block, pkgHash ledger.Hash) {
	t.Helper()
	var txHashes []ledger.Hash
	for _, raw := range wp.Txs {
		var tx types.Transaction
		if err := tx.UnmarshalBinary(raw); err != nil {
			t.Fatal(err)
		}
		txHashes = append(txHashes, ledger.Hash(tx.Hash()))
	}
	block = ledger.BundleHash(wp.Parent, wp.Number, txHashes)
	return block, ledger.PackageHash(block, wp.Version, wp.Core, wp.Anchor)
}

func submit(t *testing.T, l ledger.BundleLedger, wp ledger.WorkPackage) {
	t.Helper()
	if err := l.SubmitWorkPackage(ctx, wp); err != nil {
		t.Fatalf("SubmitWorkPackage(block %d v%d) = %v", wp.Number, wp.Version, err)
	}
}

// blockAt returns the block of slot s.
func blockAt(t *testing.T, l ledger.BundleLedger, s uint64) ledger.JAMBlock {
	t.Helper()
	bs, err := l.Blocks(ctx, s-1, 1)
	if err != nil || len(bs) != 1 || bs[0].Slot != s {
		t.Fatalf("Blocks(%d, 1) = %v, %v; want the block of slot %d", s-1, bs, err, s)
	}
	return bs[0]
}

func wantClass(t *testing.T, err error, want ledger.Class) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want a %s error", want)
	}
	if got := ledger.ClassOf(err); got != want {
		t.Fatalf("class of %v = %s, want %s", err, got, want)
	}
}

func TestChain_TakenPackageIsGuaranteedInTheNextBlockAndAccumulatedAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	b.advance(3)
	wp := pkg(t, b.chain, 1, ledger.Hash{}, 1, b.tx(t))
	evmHash, h := hashes(t, wp)
	submit(t, b.chain, wp)

	b.advance(1)
	if g := blockAt(t, b.chain, 4).Guarantees; len(g) != 1 || g[0] != h {
		t.Fatalf("block 4 guarantees = %v, want [%s]", g, h.Hex())
	}
	if len(b.chain.Executions()) != 0 {
		t.Fatal("executed in the guarantee's block")
	}
	b.advance(1)
	if a := blockAt(t, b.chain, 5).Accumulations; len(a) != 1 || a[0] != h {
		t.Fatalf("block 5 accumulations = %v, want [%s]", a, h.Hex())
	}
	info, err := b.chain.Info(ctx)
	if err != nil || info.Executed != (ledger.BlockRef{Number: 1, Hash: evmHash}) {
		t.Fatalf("Info().Executed = %+v, %v; want block 1 %s", info.Executed, err, evmHash.Hex())
	}
	if s := b.chain.Stats(); s.Taken != 1 || s.Guaranteed != 1 || s.Executed != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestChain_G15RefusesAnchorNotAmongRecentBlocks(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	b.advance(10)
	recent, _ := b.chain.RecentBlocks(ctx)
	if len(recent) != ledger.RecentHistorySize || recent[0].Number != 3 || recent[7].Number != 10 {
		t.Fatalf("recent = %v, want slots 3..10", recent)
	}
	stale := blockAt(t, b.chain, 2)
	unknown := recent[7]
	unknown.Hash[0] ^= 1
	for name, anchor := range map[string]ledger.BlockRef{
		"stale":   {Number: stale.Slot, Hash: stale.Hash},
		"unknown": unknown,
		"future":  {Number: 11, Hash: recent[7].Hash},
	} {
		wp := pkg(t, b.chain, 1, ledger.Hash{}, 1, b.tx(t))
		wp.Anchor = anchor
		err := b.chain.SubmitWorkPackage(ctx, wp)
		wantClass(t, err, ledger.Deterministic)
		if !strings.HasPrefix(ledger.ReasonOf(err), ledger.AnchorNotRecent) {
			t.Errorf("%s anchor: reason %q, want prefix %q", name, ledger.ReasonOf(err), ledger.AnchorNotRecent)
		}
	}
	oldest := pkg(t, b.chain, 1, ledger.Hash{}, 1, b.tx(t))
	oldest.Anchor = recent[0]
	submit(t, b.chain, oldest)
	if s := b.chain.Stats(); s.Refused.G15 != 3 || s.Taken != 1 {
		t.Fatalf("stats = %+v, want 3 G15 refusals and 1 taken", s)
	}
}

func TestChain_RefusesBadCoreEmptyPackageAndUndecodableTx(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{Cores: 2})
	for name, tc := range map[string]struct {
		edit   func(*ledger.WorkPackage)
		reason string
	}{
		"core 2":     {func(wp *ledger.WorkPackage) { wp.Core = 2 }, jam.ReasonBadCore},
		"core -1":    {func(wp *ledger.WorkPackage) { wp.Core = -1 }, jam.ReasonBadCore},
		"no txs":     {func(wp *ledger.WorkPackage) { wp.Txs = nil }, jam.ReasonNoTxs},
		"garbage tx": {func(wp *ledger.WorkPackage) { wp.Txs = append(wp.Txs, []byte{0x02, 0xff}) }, jam.ReasonBadTx},
	} {
		wp := pkg(t, b.chain, 1, ledger.Hash{}, 1, b.tx(t))
		tc.edit(&wp)
		err := b.chain.SubmitWorkPackage(ctx, wp)
		wantClass(t, err, ledger.Deterministic)
		if ledger.ReasonOf(err) != tc.reason {
			t.Errorf("%s: reason %q, want %q", name, ledger.ReasonOf(err), tc.reason)
		}
	}
	if s := b.chain.Stats(); s.Taken != 0 || s.Refused.BadCore != 2 || s.Refused.NoTxs != 1 || s.Refused.BadTx != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestChain_NoGuaranteeOnceTheAnchorExpired(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{LateGuarantee: 1, LateSlots: 4})
	b.advance(10)
	recent, _ := b.chain.RecentBlocks(ctx)
	// Anchored 7 slots back, guaranteed 4 slots on: 11 slots past its
	// anchor, out of the recent history.
	old := pkg(t, b.chain, 1, ledger.Hash{}, 1, b.tx(t))
	old.Anchor = recent[0]
	_, oldHash := hashes(t, old)
	submit(t, b.chain, old)
	// Anchored at the head: still recent 4 slots on.
	fresh := pkg(t, b.chain, 1, ledger.Hash{}, 2, old.Txs...)
	_, freshHash := hashes(t, fresh)
	submit(t, b.chain, fresh)

	b.advance(6)
	bs, err := b.chain.Blocks(ctx, 10, 0)
	if err != nil || len(bs) != 6 {
		t.Fatalf("Blocks(10) = %d blocks, %v; want 6", len(bs), err)
	}
	for _, blk := range bs {
		for _, g := range blk.Guarantees {
			if g == oldHash {
				t.Errorf("package on an expired anchor guaranteed in slot %d", blk.Slot)
			}
			if g == freshHash && blk.Slot != 14 {
				t.Errorf("late package guaranteed in slot %d, want 14", blk.Slot)
			}
		}
	}
	if g := blockAt(t, b.chain, 14).Guarantees; len(g) != 1 || g[0] != freshHash {
		t.Errorf("slot 14 guarantees = %v, want the fresh package only", g)
	}
	if s := b.chain.Stats(); s.NeverGuaranteed != 1 || s.Guaranteed != 1 || s.Faults.LateGuarantee != 2 {
		t.Fatalf("stats = %+v, want 1 never guaranteed, 1 guaranteed, 2 late", s)
	}
}

func TestChain_ExecutesInBlockOrderHoldingAndCascading(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	b.advance(2)
	wp1 := pkg(t, b.chain, 1, ledger.Hash{}, 1, b.tx(t))
	evm1, h1 := hashes(t, wp1)
	wp2 := pkg(t, b.chain, 2, evm1, 1, b.tx(t))
	evm2, h2 := hashes(t, wp2)
	wp3 := pkg(t, b.chain, 3, evm2, 1, b.tx(t))
	_, h3 := hashes(t, wp3)
	submit(t, b.chain, wp3)
	submit(t, b.chain, wp2)
	b.advance(2) // guaranteed in 3, accumulated in 4: held
	if ex := b.chain.Executions(); len(ex) != 0 {
		t.Fatalf("executed %v before block 1", ex)
	}
	if s := b.chain.Stats(); s.Held != 2 {
		t.Fatalf("held = %d, want 2", s.Held)
	}
	submit(t, b.chain, wp1)
	b.advance(2) // guaranteed in 5, accumulated in 6 with its successors
	acc := blockAt(t, b.chain, 6).Accumulations
	if len(acc) != 3 || acc[0] != h1 || acc[1] != h2 || acc[2] != h3 {
		t.Fatalf("slot 6 accumulations = %v, want blocks 1, 2, 3 in order", acc)
	}
	ex := b.chain.Executions()
	for i, e := range ex {
		if e.Number != uint64(i+1) || e.Slot != 6 {
			t.Fatalf("execution %d = %+v, want block %d in slot 6", i, e, i+1)
		}
	}
	if s := b.chain.Stats(); s.Held != 0 || s.Executed != 3 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestChain_DuplicateNumberIsExecutedOnceAndCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	b.advance(2)
	tx := b.tx(t)
	v1 := pkg(t, b.chain, 1, ledger.Hash{}, 1, tx)
	v2 := pkg(t, b.chain, 1, ledger.Hash{}, 2, tx)
	v2.Core = 1
	_, h1 := hashes(t, v1)
	_, h2 := hashes(t, v2)
	submit(t, b.chain, v1)
	submit(t, b.chain, v2)
	b.advance(1)
	if g := blockAt(t, b.chain, 3).Guarantees; len(g) != 2 || g[0] != h1 || g[1] != h2 {
		t.Fatalf("slot 3 guarantees = %v, want both versions", g)
	}
	b.advance(1)
	if ex := b.chain.Executions(); len(ex) != 1 || ex[0].Version != 1 {
		t.Fatalf("executions = %+v, want version 1 only", ex)
	}
	if r := b.chain.Refusals(); len(r) != 1 || r[0].Version != 2 || r[0].Refused != jam.RefusedDuplicate {
		t.Fatalf("refusals = %+v, want version 2 as duplicate", r)
	}
	if s := b.chain.Stats(); s.Duplicates != 1 || s.Executed != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestChain_ParentMismatchIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	b.advance(2)
	wp1 := pkg(t, b.chain, 1, ledger.Hash{}, 1, b.tx(t))
	evm1, _ := hashes(t, wp1)
	wrong := evm1
	wrong[31] ^= 1
	wp2 := pkg(t, b.chain, 2, wrong, 1, b.tx(t))
	submit(t, b.chain, wp1)
	submit(t, b.chain, wp2)
	b.advance(2)
	if ex := b.chain.Executions(); len(ex) != 1 || ex[0].Number != 1 {
		t.Fatalf("executions = %+v, want block 1 only", ex)
	}
	if r := b.chain.Refusals(); len(r) != 1 || r[0].Number != 2 || r[0].Refused != jam.RefusedParentMismatch {
		t.Fatalf("refusals = %+v, want block 2 as parent_mismatch", r)
	}
	info, _ := b.chain.Info(ctx)
	if s := b.chain.Stats(); s.ParentMismatches != 1 || info.Executed.Number != 1 {
		t.Fatalf("stats = %+v, executed %d", s, info.Executed.Number)
	}
}

func TestChain_BlocksPaginateAfterAndLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	b.advance(10)
	checkPagination(t, b.chain)
}

func checkPagination(t *testing.T, l ledger.BundleLedger) {
	t.Helper()
	slots := func(after uint64, limit int) []uint64 {
		bs, err := l.Blocks(ctx, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for i, blk := range bs {
			out = append(out, blk.Slot)
			if i > 0 && blk.Slot != bs[i-1].Slot+1 {
				t.Fatalf("Blocks(%d, %d) skips: %v", after, limit, out)
			}
		}
		return out
	}
	if got := slots(0, 3); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Errorf("Blocks(0, 3) = %v, want 1..3", got)
	}
	if got := slots(3, 100); len(got) != 7 || got[0] != 4 || got[6] != 10 {
		t.Errorf("Blocks(3, 100) = %v, want 4..10", got)
	}
	if got := slots(10, 5); len(got) != 0 {
		t.Errorf("Blocks(10, 5) = %v, want none", got)
	}
	if got := slots(99, 5); len(got) != 0 {
		t.Errorf("Blocks(99, 5) = %v, want none", got)
	}
	// Block hashes chain: the head is the child of the block before it.
	bs, _ := l.Blocks(ctx, 8, 2)
	if len(bs) != 2 || bs[0].Hash == bs[1].Hash {
		t.Errorf("Blocks(8, 2) = %v", bs)
	}
}

func TestChain_NonceGapsAreCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	b.advance(2)
	// Sender one: 0, 1, then 3 (a gap). Sender two: 0, 1.
	wp1 := pkg(t, b.chain, 1, ledger.Hash{}, 1, signTx(t, b.key, 0), signTx(t, other, 0), signTx(t, b.key, 1))
	evm1, _ := hashes(t, wp1)
	wp2 := pkg(t, b.chain, 2, evm1, 1, signTx(t, b.key, 3), signTx(t, other, 1))
	submit(t, b.chain, wp1)
	submit(t, b.chain, wp2)
	b.advance(2)
	if ex := b.chain.Executions(); len(ex) != 2 {
		t.Fatalf("executions = %+v, want 2", ex)
	}
	if s := b.chain.Stats(); s.NonceGaps != 1 {
		t.Fatalf("nonce gaps = %d, want 1", s.NonceGaps)
	}
}

func TestChain_SamePackageTwiceIsTakenOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	wp := pkg(t, b.chain, 1, ledger.Hash{}, 1, b.tx(t))
	submit(t, b.chain, wp)
	submit(t, b.chain, wp)
	b.advance(2)
	if s := b.chain.Stats(); s.Taken != 1 || s.Resubmitted != 1 || s.Guaranteed != 1 || s.Duplicates != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestChain_SameSeedSameFaults(t *testing.T) {
	t.Parallel()
	run := func() jam.Stats {
		b := setup(t, jam.Config{Seed: 7, NoGuarantee: 0.2, LateGuarantee: 0.2, LostResponse: 0.2, TransientError: 0.2})
		for v := 1; v <= 50; v++ {
			_ = b.chain.SubmitWorkPackage(ctx, pkg(t, b.chain, 1, ledger.Hash{}, v, signTx(t, b.key, 0)))
		}
		b.advance(10)
		return b.chain.Stats()
	}
	a, c := run(), run()
	if a != c {
		t.Fatalf("same seed, different runs:\n%+v\n%+v", a, c)
	}
	if a.Faults.Transient == 0 || a.Faults.LostResponse == 0 || a.Faults.NoGuarantee == 0 || a.Faults.LateGuarantee == 0 {
		t.Fatalf("faults = %+v, want each kind drawn", a.Faults)
	}
}

func TestChain_ConcurrentUseIsSafe(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	txs := make([][]byte, 8)
	for i := range txs {
		txs[i] = b.tx(t)
	}
	anchor := head(t, b.chain)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = b.chain.SubmitWorkPackage(ctx, ledger.WorkPackage{Number: uint64(i + 1), Version: 1, Anchor: anchor, Txs: txs[i : i+1]})
			_, _ = b.chain.Blocks(ctx, 0, 10)
			b.clock.Advance(slot)
			_ = b.chain.Stats()
		}()
	}
	wg.Wait()
	if s := b.chain.Stats(); s.Taken != 8 {
		t.Fatalf("taken = %d, want 8", s.Taken)
	}
}

func TestChain_KeepsAtLeastTheNewestMaxBlocks(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{MaxBlocks: 10})
	b.advance(25)
	bs, err := b.chain.Blocks(ctx, 0, 0)
	if err != nil || len(bs) < 10 || len(bs) >= 20 || bs[len(bs)-1].Slot != 25 {
		t.Fatalf("Blocks(0) = %d blocks ending at %d, %v; want 10 to 19 ending at 25", len(bs), bs[len(bs)-1].Slot, err)
	}
	if recent, _ := b.chain.RecentBlocks(ctx); len(recent) != ledger.RecentHistorySize || recent[0].Number != 18 {
		t.Fatalf("recent = %v, want slots 18..25", recent)
	}
	submit(t, b.chain, pkg(t, b.chain, 1, ledger.Hash{}, 1, b.tx(t)))
}

func TestChain_TransactionTheEVMRefusesIsSkippedWithGethsReason(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	b.advance(2)
	poor, _ := crypto.ToECDSA(common.LeftPadBytes([]byte{0x44}, 32))
	wp := pkg(t, b.chain, 1, ledger.Hash{}, 1, signTx(t, poor, 0), b.tx(t))
	submit(t, b.chain, wp)
	b.advance(2)
	ex := b.chain.Executions()
	if len(ex) != 1 || len(ex[0].TxHashes) != 2 || len(ex[0].Skipped) != 1 || ex[0].Skipped[0].Hash != ex[0].TxHashes[0] ||
		!strings.HasPrefix(ex[0].Skipped[0].Reason, "insufficient funds for gas * price + value") {
		t.Fatalf("executions = %+v; want block 1 with the unfunded transaction skipped for insufficient funds", ex)
	}
	for k, want := range map[*ecdsa.PrivateKey]uint64{poor: 0, key: 1} {
		if n, err := b.chain.NonceAt(ctx, ledger.Address(crypto.PubkeyToAddress(k.PublicKey))); err != nil || n != want {
			t.Errorf("NonceAt = %d, %v; want %d", n, err, want)
		}
	}
	if s := b.chain.Stats(); s.Executed != 1 || s.Skipped != 1 || s.NonceGaps != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

// The JAM block that accumulates a package names the transactions the EVM
// left out of it, with geth's reason, and says which were nonce gaps
// (geth's core.ErrNonceTooHigh): the builder lane reads them there. Over
// HTTP they arrive the same.
func TestChain_TheBlockThatAccumulatesAPackageListsTheTransactionsItSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	c := serve(t, b)
	b.advance(2)
	poor, _ := crypto.ToECDSA(common.LeftPadBytes([]byte{0x45}, 32))
	unfunded := signTx(t, poor, 0)
	gap := signTx(t, other, 1) // other's nonce 0 never came
	wp := pkg(t, b.chain, 1, ledger.Hash{}, 1, unfunded, b.tx(t), gap)
	_, h := hashes(t, wp)
	submit(t, b.chain, wp)
	b.advance(2)
	var got *ledger.JAMBlock
	blocks, err := b.chain.Blocks(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range blocks {
		if len(blocks[i].Accumulations) > 0 {
			got = &blocks[i]
		}
	}
	if got == nil {
		t.Fatal("no block accumulated the package")
	}
	if len(got.Skipped) != 2 {
		t.Fatalf("skipped = %+v; want the unfunded one and the gapped one", got.Skipped)
	}
	want := []ledger.SkippedTx{
		{Package: h, Tx: ledger.TxHashOf(unfunded), Reason: got.Skipped[0].Reason},
		{Package: h, Tx: ledger.TxHashOf(gap), Reason: got.Skipped[1].Reason, NonceGap: true},
	}
	if got.Skipped[0] != want[0] || got.Skipped[1] != want[1] ||
		!strings.HasPrefix(got.Skipped[0].Reason, "insufficient funds for gas * price + value") ||
		!strings.HasPrefix(got.Skipped[1].Reason, "nonce too high") {
		t.Fatalf("skipped = %+v; want the unfunded one and the gapped one (a nonce gap)", got.Skipped)
	}
	for _, o := range blocks {
		if o.Slot != got.Slot && len(o.Skipped) > 0 {
			t.Fatalf("block %d lists skipped transactions of a package it did not accumulate: %+v", o.Slot, o.Skipped)
		}
	}
	over := blockAt(t, c, got.Slot)
	if len(over.Skipped) != 2 || over.Skipped[0] != got.Skipped[0] || over.Skipped[1] != got.Skipped[1] {
		t.Fatalf("skipped over HTTP = %+v, want %+v", over.Skipped, got.Skipped)
	}
}
