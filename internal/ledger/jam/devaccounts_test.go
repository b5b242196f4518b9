package jam_test

import (
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ledgerq/ledgerq/internal/ledger/jam"
)

func TestDevAccounts_AreTheWellKnownMnemonicsFirstTwenty(t *testing.T) {
	t.Parallel()
	accts := jam.DevAccounts()
	if len(accts) != jam.DevAccountCount {
		t.Fatalf("%d dev accounts, want %d", len(accts), jam.DevAccountCount)
	}
	// Hardhat's and anvil's accounts 0, 1 and 19, with their keys.
	for _, want := range []struct {
		i    int
		addr string
		key  string
	}{
		{0, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"},
		{1, "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"},
		{19, "0x8626f6940E2eb28930eFb4CeF49B2d1F2C9C1199", "df57089febbacf7ba0bc227dafbffa9fc08a93fdc68e1e42411a14efcf23656e"},
	} {
		a := accts[want.i]
		if a.Address != common.HexToAddress(want.addr) || a.Address.Hex() != want.addr {
			t.Errorf("account %d = %s, want %s", want.i, a.Address.Hex(), want.addr)
		}
		if got := common.Bytes2Hex(crypto.FromECDSA(a.Key)); got != want.key {
			t.Errorf("account %d key = %s, want %s", want.i, got, want.key)
		}
		if crypto.PubkeyToAddress(a.Key.PublicKey) != a.Address {
			t.Errorf("account %d: key and address disagree", want.i)
		}
	}
	// A copy: the caller cannot change the list.
	accts[0].Address = common.Address{}
	if jam.DevAccounts()[0].Address == (common.Address{}) {
		t.Fatal("DevAccounts handed out its own list")
	}
}
