package jam_test

import (
	"math/big"
	"reflect"
	"testing"

	"github.com/ledgerq/ledgerq/internal/ledger/jam"
)

// The EVM's rules are every fork up to Osaka and none after, and every fork
// named by a block number is at genesis: a block's rules depend on its time
// alone, which lets the pool's intake judge the block a transaction lands
// in without asking the chain for its number.
func TestEVMChainConfig_ABlocksRulesDependOnItsTimeAlone(t *testing.T) {
	t.Parallel()
	cfg := jam.EVMChainConfig(4242)
	if cfg.ChainID.Int64() != 4242 {
		t.Fatalf("chain id %v, want 4242", cfg.ChainID)
	}
	for _, at := range []uint64{0, 1_767_225_600, 1 << 40} {
		first := cfg.Rules(big.NewInt(1), true, at)
		if !first.IsPrague || !first.IsOsaka || first.IsAmsterdam {
			t.Fatalf("at time %d: Prague %v, Osaka %v, Amsterdam %v; want Prague and Osaka only", at,
				first.IsPrague, first.IsOsaka, first.IsAmsterdam)
		}
		for _, n := range []int64{0, 2, 1 << 40} {
			if got := cfg.Rules(big.NewInt(n), true, at); !reflect.DeepEqual(got, first) {
				t.Fatalf("at time %d block %d's rules %+v differ from block 1's %+v", at, n, got, first)
			}
		}
	}
	cfg.ChainID.SetInt64(1)
	if again := jam.EVMChainConfig(4242); again.ChainID.Int64() != 4242 {
		t.Fatalf("changing one config changed the next: chain id %v", again.ChainID)
	}
}
