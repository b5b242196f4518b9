package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"

	"github.com/ledgerq/ledgerq/internal/audit"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// A wallet whose chain holds nothing the database does not explain passes
// with exit status 0 and one line; once a transaction signed with its key
// outside ledgerq is mined, the audit lists it with what to do (text and
// --json) and exits with status 3.
func TestWalletAudit_ExitsZeroWithASummaryAndThreeWithEachException(t *testing.T) {
	db := testdb.New(t)
	dir := t.TempDir()
	addr, path, err := keystore.NewKeystore(dir, "pw", keystore.LightScrypt)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	chain := evmsim.New(evmsim.Config{Clock: clk, ChainID: 1337, BlockPeriod: time.Second,
		Alloc: map[common.Address]*big.Int{common.Address(addr): big.NewInt(params.Ether)}})
	srv := httptest.NewServer(evmsim.NewServer(chain, nil))
	t.Cleanup(srv.Close)
	clk.Advance(3 * time.Second)

	auditCmd := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		args = append([]string{"audit", "--database-url", db.URL, "--wallet-ledger-url", srv.URL, "--wallet-keystore", "hot=" + path}, args...)
		err := walletCommand(context.Background(), args, &out, &errOut, func(string) (string, bool) { return "", false })
		return out.String(), errOut.String(), err
	}
	out, _, err := auditCmd("--wallet", "hot")
	if err != nil {
		t.Fatalf("audit of a clean wallet: %v", err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1 || !strings.Contains(out, "no exception") || !strings.Contains(out, addr.Hex()) {
		t.Fatalf("audit of a clean wallet printed %q; want one line naming %s with no exception", out, addr.Hex())
	}

	signer, err := keystore.OpenKeystore(path, "pw")
	if err != nil {
		t.Fatal(err)
	}
	id := big.NewInt(1337)
	to := common.Address{0xee}
	tx, err := signer.SignTx(t.Context(), types.NewTx(&types.DynamicFeeTx{ChainID: id, Nonce: 0, GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(20 * params.GWei),
		Gas: params.TxGas, To: &to, Value: big.NewInt(1)}), id)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.SendRawTransaction(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)

	out, _, err = auditCmd("--wallet", addr.Hex(), "--from-block", "0")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 3 {
		t.Fatalf("audit with an unexplained transaction: %v; want exit status 3", err)
	}
	if !strings.Contains(out, "EXCEPTION unexplained_transaction") || !strings.Contains(out, strings.ToLower(tx.Hash().Hex())) || !strings.Contains(out, "to do: ") {
		t.Fatalf("audit printed %q; want the transaction %s as an exception with what to do", out, tx.Hash().Hex())
	}

	out, _, err = auditCmd("--wallet", "hot", "--json")
	if !errors.As(err, &ee) || ee.code != 3 {
		t.Fatalf("audit --json: %v; want exit status 3", err)
	}
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("audit --json printed %q: %v", out, err)
	}
	if len(rep.Exceptions) != 1 || rep.Exceptions[0].Kind != audit.Unexplained || rep.Exceptions[0].Fix == "" || rep.ChainNonce != 1 {
		t.Fatalf("audit --json = %+v; want one unexplained transaction with what to do, chain nonce 1", rep)
	}

	// The same wallet named as one added at run time, and as a
	// --wallet-signer declaring its address: the audit finds its address.
	if _, err := db.Store.WalletsAdd(t.Context(), store.WalletDecl{Name: "rt", Chain: "default", ChainID: 1337, Address: strings.ToLower(addr.Hex()),
		Backend: "keystore", KeyRef: "rt.json", CreatedBy: "test"}, clk.Now(), nil); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--wallet", "rt"}, {"--wallet", "hsm", "--wallet-signer", "name=hsm,backend=pkcs11,key=k,address=" + addr.Hex()}} {
		out, _, err = auditCmd(args...)
		if !errors.As(err, &ee) || ee.code != 3 || !strings.Contains(out, strings.ToLower(tx.Hash().Hex())) {
			t.Fatalf("audit %v: %v, printed %q; want exit status 3 naming %s", args, err, out, tx.Hash().Hex())
		}
	}
	if _, _, err := auditCmd("--wallet", "nokey", "--wallet-signer", "name=nokey,backend=pkcs11,key=k"); err == nil || !strings.Contains(err.Error(), "declares no address") {
		t.Fatalf("audit of a --wallet-signer without an address: %v; want an error saying it declares none", err)
	}

	if code := run(context.Background(), []string{"wallet", "audit", "--database-url", db.URL, "--wallet-ledger-url", srv.URL, "--wallet", addr.Hex()}); code != 3 {
		t.Fatalf("ledgerq wallet audit exited %d; want 3", code)
	}
	if _, _, err := auditCmd("--wallet", "cold"); err == nil || !strings.Contains(err.Error(), "hot") {
		t.Fatalf("audit of an unknown wallet name: %v; want an error naming the wallets there are", err)
	}
}
