package keystore_test

import (
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

func newSigner(t *testing.T) *keystore.KeySigner {
	t.Helper()
	return testfactory.NewSigner(t)
}

func TestRegistry_FindsWalletsByNameAndBySender(t *testing.T) {
	t.Parallel()
	a, b := newSigner(t), newSigner(t)
	r, err := keystore.NewRegistry(keystore.Wallet{ID: "hot", ChainID: 1337, Signer: a}, keystore.Wallet{ID: "cold", ChainID: 1337, Signer: b})
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := r.ByID("hot"); !ok || w.Address() != a.Address() {
		t.Fatalf("ByID(hot) = %v, %v", w, ok)
	}
	if w, ok := r.BySender(1337, b.Address()); !ok || w.ID != "cold" {
		t.Fatalf("BySender = %v, %v", w, ok)
	}
	if _, ok := r.BySender(1, b.Address()); ok {
		t.Fatal("BySender found a wallet on another chain")
	}
	if got := r.All(); len(got) != 2 || got[0].ID != "cold" || got[1].ID != "hot" {
		t.Fatalf("All = %v", got)
	}
}

func TestRegistry_RefusesBadNamesDuplicatesAndSharedSenders(t *testing.T) {
	t.Parallel()
	a := newSigner(t)
	for name, ws := range map[string][]keystore.Wallet{
		"bad name":      {{ID: "a/b", ChainID: 1, Signer: a}},
		"empty name":    {{ID: "", ChainID: 1, Signer: a}},
		"chain":         {{ID: "a", ChainID: 0, Signer: a}},
		"no signer":     {{ID: "a", ChainID: 1}},
		"same name":     {{ID: "a", ChainID: 1, Signer: a}, {ID: "a", ChainID: 2, Signer: newSigner(t)}},
		"shared sender": {{ID: "a", ChainID: 1, Signer: a}, {ID: "b", ChainID: 1, Signer: a}},
	} {
		if _, err := keystore.NewRegistry(ws...); err == nil {
			t.Errorf("%s: NewRegistry accepted %v", name, ws)
		}
	}
}

func TestKeySigner_SignsForItsAddressAndNeverPrintsTheKey(t *testing.T) {
	t.Parallel()
	s := newSigner(t)
	to := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(1337), Nonce: 3, To: &to, Gas: 21000, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(2)})
	signed, err := s.SignTx(t.Context(), tx, big.NewInt(1337))
	if err != nil {
		t.Fatal(err)
	}
	from, err := types.Sender(types.LatestSignerForChainID(big.NewInt(1337)), signed)
	if err != nil || from != common.Address(s.Address()) {
		t.Fatalf("sender = %v, %v; want %v", from, err, s.Address())
	}
	if str := s.String(); !strings.Contains(str, s.Address().Hex()) || len(str) > 64 {
		t.Fatalf("String() = %q", str)
	}
}
