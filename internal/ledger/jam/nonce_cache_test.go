package jam

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

func TestNonceCache_OneHeadKeepsAtMostMaxCachedNoncesSenders(t *testing.T) {
	funded := common.Address{0xf0}
	e, err := newEVMChain(1337, map[common.Address]*big.Int{funded: big.NewInt(1)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	for i := range maxCachedNonces + 10 {
		var a common.Address
		a[0], a[1], a[2] = byte(i>>16), byte(i>>8), byte(i)
		if n, err := e.nonce(a); err != nil || n != 0 {
			t.Fatalf("nonce of %s = %d, %v; want 0", a.Hex(), n, err)
		}
		if len(e.nonces) > maxCachedNonces {
			t.Fatalf("after %d senders the cache holds %d, more than %d", i+1, len(e.nonces), maxCachedNonces)
		}
	}
	if len(e.nonces) != 10 {
		t.Fatalf("the cache holds %d senders after starting over, want the 10 read since", len(e.nonces))
	}
}
