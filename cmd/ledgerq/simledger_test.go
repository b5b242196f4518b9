package main

import (
	"context"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evm"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
)

func TestSimLedger_DefaultKindIsSawtooth(t *testing.T) {
	s, err := parseSimLedger(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.kind != simKindSawtooth || s.addr != "127.0.0.1:8008" {
		t.Fatalf("default = kind %q addr %q, want sawtooth on 127.0.0.1:8008", s.kind, s.addr)
	}
}

func TestSimLedger_KindEVMServesJSONRPCWithFundedAccounts(t *testing.T) {
	const funded = "0x00000000000000000000000000000000000000f1"
	s, err := parseSimLedger([]string{"--kind", "evm", "--evm-chain-id", "31337", "--evm-alloc", funded + "=5000"})
	if err != nil {
		t.Fatal(err)
	}
	if s.addr != "127.0.0.1:8545" {
		t.Fatalf("evm default addr = %q, want 127.0.0.1:8545", s.addr)
	}
	h, err := s.handler(clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	l, err := evm.Dial(context.Background(), srv.URL, evm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if id, err := l.ChainID(context.Background()); err != nil || id.Int64() != 31337 {
		t.Fatalf("ChainID = %v, %v; want 31337", id, err)
	}
	var a ledger.Address
	a[19] = 0xf1
	if b, err := l.BalanceAt(context.Background(), a); err != nil || b.Cmp(big.NewInt(5000)) != 0 {
		t.Fatalf("BalanceAt = %v, %v; want 5000", b, err)
	}
}

func TestSimLedger_KindJAMServesTheBuilderLanesChain(t *testing.T) {
	s, err := parseSimLedger([]string{"--kind", "jam", "--jam-slot-length", "2s", "--jam-cores", "3",
		"--jam-transient-rate", "1", "--jam-late-slots", "5", "--sim-seed", "9"})
	if err != nil {
		t.Fatal(err)
	}
	if s.addr != "127.0.0.1:19800" {
		t.Fatalf("jam default addr = %q, want 127.0.0.1:19800", s.addr)
	}
	want := jam.Config{Seed: 9, SlotLength: 2 * time.Second, Cores: 3, TransientError: 1, LateSlots: 5,
		GuaranteeDelaySlots: 1, AccumulateDelaySlots: 1, ChainID: 1337, FundDevAccounts: true}
	if got := s.jam.config(s.sim.Seed, nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("jam config = %+v, want %+v", got, want)
	}
	c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h, err := s.handler(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	cl := jam.NewClient(srv.URL, srv.Client())
	c.Advance(5 * time.Second)
	info, err := cl.Info(context.Background())
	if err != nil || info.SlotLength != 2*time.Second || info.Cores != 3 || info.Slot(c.Now()) != 2 {
		t.Fatalf("Info = %+v, %v; want 2 s slots, 3 cores, slot 2", info, err)
	}
	recent, err := cl.RecentBlocks(context.Background())
	if err != nil || len(recent) != 3 {
		t.Fatalf("RecentBlocks = %v, %v; want slots 0..2", recent, err)
	}
	err = cl.SubmitWorkPackage(context.Background(), ledger.WorkPackage{Number: 1, Version: 1, Anchor: recent[2], Txs: [][]byte{{0x01}}})
	if ledger.ClassOf(err) != ledger.Transient {
		t.Fatalf("submit with --jam-transient-rate 1 = %v, want a transient error", err)
	}
}

func TestSimLedger_KindJAMServesItsEVMWithTheDevAccountsFundedAndKeepsAJournal(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "jam.journal")
	s, err := parseSimLedger([]string{"--kind", "jam", "--jam-journal", journal, "--jam-chain-id", "31337"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s.jam.config(s.sim.Seed, nil); cfg.Journal != journal || !cfg.FundDevAccounts || cfg.ChainID != 31337 {
		t.Fatalf("jam config = %+v, want the journal, chain id 31337 and the dev accounts funded by default", cfg)
	}
	h, err := s.handler(clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	eth, err := ethclient.Dial(srv.URL + "/evm")
	if err != nil {
		t.Fatal(err)
	}
	defer eth.Close()
	if id, err := eth.ChainID(context.Background()); err != nil || id.Int64() != 31337 {
		t.Fatalf("eth_chainId = %v, %v; want 31337", id, err)
	}
	first := common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266")
	tenThousand, _ := new(big.Int).SetString("10000000000000000000000", 10)
	if b, err := eth.BalanceAt(context.Background(), first, nil); err != nil || b.Cmp(tenThousand) != 0 {
		t.Fatalf("dev account 0 balance = %v, %v; want 10000 ether", b, err)
	}
	if raw, err := os.ReadFile(journal); err != nil || !strings.Contains(string(raw), `"chain_id":31337`) {
		t.Fatalf("journal = %q, %v; want its header", raw, err)
	}

	s, err = parseSimLedger([]string{"--kind", "jam", "--jam-fund-dev-accounts=false"})
	if err != nil {
		t.Fatal(err)
	}
	if s.jam.config(s.sim.Seed, nil).FundDevAccounts {
		t.Fatal("--jam-fund-dev-accounts=false still funds them")
	}
}

func TestSimLedger_RefusesUnknownKindAndBadAlloc(t *testing.T) {
	if _, err := parseSimLedger([]string{"--kind", "bitcoin"}); err == nil {
		t.Error("--kind bitcoin accepted")
	}
	if _, err := parseSimLedger([]string{"--kind", "jam", "--jam-cores", "0"}); err == nil {
		t.Error("--jam-cores 0 accepted")
	}
	if _, err := parseSimLedger([]string{"--kind", "jam", "--jam-chain-id", "0"}); err == nil {
		t.Error("--jam-chain-id 0 accepted")
	}
	s, err := parseSimLedger([]string{"--kind", "evm", "--evm-alloc", "0x12=5"})
	if err == nil {
		_, err = s.handler(clock.Real{}, nil)
	}
	if err == nil {
		t.Error("--evm-alloc 0x12=5 accepted")
	}
}

func TestSimLedger_KindEVMTakesLostTransactionAndReorgFaultsAndRefusesThemOutOfRange(t *testing.T) {
	s, err := parseSimLedger([]string{"--kind", "evm", "--sim-seed", "4", "--evm-lost-tx-rate", "0.05",
		"--evm-reorg-rate", "0.1", "--evm-reorg-depth", "2", "--evm-reorg-drop-rate", "0.5"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := s.evm.config(s.sim.Seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Seed != 4 || cfg.LostTxRate != 0.05 || cfg.ReorgRate != 0.1 || cfg.ReorgDepth != 2 || cfg.ReorgDropRate != 0.5 {
		t.Fatalf("evm config = %+v, want seed 4, lost-tx 0.05, reorg 0.1 depth 2 drop 0.5", cfg)
	}
	for _, bad := range [][]string{
		{"--evm-lost-tx-rate", "1.5"}, {"--evm-reorg-rate", "1"}, {"--evm-reorg-depth", "0"}, {"--evm-reorg-drop-rate", "-0.1"},
	} {
		if _, err := parseSimLedger(append([]string{"--kind", "evm"}, bad...)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
