package jam_test

import (
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
)

// reopen opens a chain on e's journal and clock, served like evmSetup's.
func (e *evmBundle) reopen(t *testing.T, cfg jam.Config) *evmBundle {
	t.Helper()
	cfg.Clock = e.clock
	c, err := jam.Open(withTestAlloc(cfg))
	if err != nil {
		t.Fatalf("Open on the journal: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	again := evmServe(t, &bundle{chain: c, clock: e.clock, key: e.key})
	again.nonces = e.nonces
	return again
}

func journalConfig(t *testing.T) jam.Config {
	t.Helper()
	return jam.Config{Journal: filepath.Join(t.TempDir(), "jam.journal"), FundDevAccounts: true}
}

func TestJournal_ReopenedChainAnswersAsBeforeAndExecutesTheNextBundle(t *testing.T) {
	t.Parallel()
	cfg := journalConfig(t)
	e := evmSetup(t, cfg)
	e.advance(3)
	to := common.Address{0x06}
	transfer := e.send(t, dev(0).Key, &to, big.NewInt(1e15), 21_000, nil)
	deploy := e.send(t, dev(1).Key, nil, nil, 200_000, common.FromHex(storeInit))
	e.execute(t, transfer)
	e.execute(t, deploy, e.send(t, dev(0).Key, &to, big.NewInt(1), 21_000, nil))
	before := e.snapshot(t, transfer, deploy)
	info, _ := e.chain.Info(ctx)
	jamBlocks, _ := e.chain.Blocks(ctx, 0, 0)
	if err := e.chain.Close(); err != nil {
		t.Fatal(err)
	}

	// Down for ten slots; the clock goes on.
	e.advance(10)
	cfg.Genesis = time.Time{}
	again := e.reopen(t, cfg)
	if got := again.snapshot(t, transfer, deploy); !reflect.DeepEqual(got, before) {
		t.Fatalf("after reopening:\n%+v\nbefore:\n%+v", got, before)
	}
	reinfo, _ := again.chain.Info(ctx)
	if !reinfo.Genesis.Equal(t0) || reinfo.Executed != info.Executed || reinfo.Slot(e.clock.Now()) != 17 {
		t.Fatalf("Info after reopening = %+v at slot %d; want genesis %s, executed %+v, slot 17", reinfo, reinfo.Slot(e.clock.Now()), t0, info.Executed)
	}
	reblocks, _ := again.chain.Blocks(ctx, 0, 0)
	for i, b := range jamBlocks {
		if reblocks[i].Slot != b.Slot || reblocks[i].Hash != b.Hash {
			t.Fatalf("JAM block of slot %d: %s after reopening, %s before", b.Slot, reblocks[i].Hash.Hex(), b.Hash.Hex())
		}
	}
	if ex := again.chain.Executions(); len(ex) != 2 || ex[1].Number != 2 {
		t.Fatalf("log after reopening = %+v, want bundles 1 and 2", ex)
	}

	next := again.send(t, dev(0).Key, &to, big.NewInt(1), 21_000, nil)
	ex := again.execute(t, next)
	if ex.Number != 3 || again.receipt(t, next).Status != types.ReceiptStatusSuccessful {
		t.Fatalf("bundle 3 after reopening: %+v", ex)
	}
}

// chainSnapshot is what the EVM answers about the test's transactions.
type chainSnapshot struct {
	Blocks   []common.Hash
	Balances []*big.Int
	Nonces   []uint64
	Receipts []*types.Receipt
	Code     []byte
}

func (e *evmBundle) snapshot(t *testing.T, txs ...*types.Transaction) chainSnapshot {
	t.Helper()
	var s chainSnapshot
	for n := int64(0); n <= 2; n++ {
		h, err := e.eth.HeaderByNumber(ctx, big.NewInt(n))
		if err != nil {
			t.Fatal(err)
		}
		s.Blocks = append(s.Blocks, h.Hash())
	}
	for _, a := range []common.Address{dev(0).Address, dev(1).Address, {0x06}} {
		s.Balances = append(s.Balances, e.balance(t, a, nil))
		n, err := e.chain.NonceAt(ctx, ledger.Address(a))
		if err != nil {
			t.Fatal(err)
		}
		s.Nonces = append(s.Nonces, n)
	}
	for _, tx := range txs {
		s.Receipts = append(s.Receipts, e.receipt(t, tx))
	}
	code, err := e.eth.CodeAt(ctx, crypto.CreateAddress(dev(1).Address, 0), nil)
	if err != nil || len(code) == 0 {
		t.Fatalf("contract code = %x, %v", code, err)
	}
	s.Code = code
	return s
}

func TestJournal_TornLastLineIsDroppedAndTheRestKept(t *testing.T) {
	t.Parallel()
	cfg := journalConfig(t)
	e := evmSetup(t, cfg)
	to := common.Address{0x07}
	first := e.send(t, dev(0).Key, &to, big.NewInt(1), 21_000, nil)
	e.execute(t, first)
	e.execute(t, e.send(t, dev(0).Key, &to, big.NewInt(1), 21_000, nil))
	_ = e.chain.Close()
	// A crash in the middle of bundle 2's line.
	whole, err := os.ReadFile(cfg.Journal)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(whole), "\n")
	if len(lines) != 4 || lines[3] != "" {
		t.Fatalf("journal has %d lines, want a header and 2 bundles:\n%s", len(lines)-1, whole)
	}
	torn := lines[0] + lines[1] + lines[2][:len(lines[2])/2]
	if err := os.WriteFile(cfg.Journal, []byte(torn), 0o644); err != nil {
		t.Fatal(err)
	}

	again := e.reopen(t, cfg)
	info, _ := again.chain.Info(ctx)
	if info.Executed.Number != 1 || again.receipt(t, first).Status != types.ReceiptStatusSuccessful {
		t.Fatalf("executed after a torn bundle 2 = %+v, want bundle 1 with its receipt", info.Executed)
	}
	if n, _ := again.chain.NonceAt(ctx, ledger.Address(dev(0).Address)); n != 1 {
		t.Fatalf("nonce = %d, want 1 (bundle 2 is gone)", n)
	}
	// Bundle 2 again, then a third opening reads every line whole.
	again.nonces[dev(0).Address] = 1
	again.execute(t, again.send(t, dev(0).Key, &to, big.NewInt(1), 21_000, nil))
	_ = again.chain.Close()
	third := again.reopen(t, cfg)
	if info, _ := third.chain.Info(ctx); info.Executed.Number != 2 {
		t.Fatalf("third opening executed %d, want 2", info.Executed.Number)
	}
}

func TestJournal_IsRefusedForAnotherGenesisOrWithABadLine(t *testing.T) {
	t.Parallel()
	cfg := journalConfig(t)
	e := evmSetup(t, cfg)
	to := common.Address{0x08}
	e.execute(t, e.send(t, dev(0).Key, &to, big.NewInt(1), 21_000, nil))
	e.execute(t, e.send(t, dev(0).Key, &to, big.NewInt(1), 21_000, nil))
	_ = e.chain.Close()

	for name, edit := range map[string]func(*jam.Config){
		"no dev accounts":  func(c *jam.Config) { c.FundDevAccounts = false },
		"another alloc":    func(c *jam.Config) { c.Alloc[common.Address{0x09}] = big.NewInt(1) },
		"another chain id": func(c *jam.Config) { c.ChainID = 5 },
		"another genesis":  func(c *jam.Config) { c.Genesis = t0.Add(time.Hour) },
	} {
		c := withTestAlloc(cfg)
		c.Clock = e.clock
		edit(&c)
		if ch, err := jam.Open(c); err == nil {
			_ = ch.Close()
			t.Errorf("%s: the journal was replayed", name)
		}
	}
	whole, _ := os.ReadFile(cfg.Journal)
	lines := strings.SplitAfter(string(whole), "\n")
	bad := filepath.Join(t.TempDir(), "bad.journal")
	if err := os.WriteFile(bad, []byte(lines[0]+"{\"number\":\n"+lines[1]+lines[2]), 0o644); err != nil {
		t.Fatal(err)
	}
	c := withTestAlloc(cfg)
	c.Journal, c.Clock = bad, e.clock
	if ch, err := jam.Open(c); err == nil {
		_ = ch.Close()
		t.Fatal("a journal with a bad line before its last was replayed")
	}
}
