package main

import (
	"context"
	"math/big"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evm"
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

func TestSimLedger_RefusesUnknownKindAndBadAlloc(t *testing.T) {
	if _, err := parseSimLedger([]string{"--kind", "bitcoin"}); err == nil {
		t.Error("--kind bitcoin accepted")
	}
	s, err := parseSimLedger([]string{"--kind", "evm", "--evm-alloc", "0x12=5"})
	if err == nil {
		_, err = s.handler(clock.Real{}, nil)
	}
	if err == nil {
		t.Error("--evm-alloc 0x12=5 accepted")
	}
}
