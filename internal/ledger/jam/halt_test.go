package jam

import (
	"context"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
)

func TestChain_UnwritableJournalHaltsExecutionWithThePackageHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c, err := Open(Config{Clock: clk, FundDevAccounts: true, Journal: filepath.Join(t.TempDir(), "jam.journal")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	to := common.Address{0x01}
	id := big.NewInt(DefaultChainID)
	tx, err := types.SignNewTx(DevAccounts()[0].Key, types.LatestSignerForChainID(id), &types.DynamicFeeTx{
		ChainID: id, GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(2e9), Gas: 21_000, To: &to, Value: big.NewInt(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tx.MarshalBinary()
	recent, _ := c.RecentBlocks(ctx)
	wp := ledger.WorkPackage{Number: 1, Version: 1, Anchor: recent[len(recent)-1], Txs: [][]byte{raw}}
	if err := c.SubmitWorkPackage(ctx, wp); err != nil {
		t.Fatal(err)
	}
	// The disk goes away under the chain.
	_ = c.journal.f.Close()
	clk.Advance(2 * DefaultSlotLength)

	s := c.Stats()
	if s.Executed != 0 || s.Held != 1 || !strings.Contains(s.Halted, "writing journal") {
		t.Fatalf("stats = %+v; want nothing executed, the package held, halted on the journal", s)
	}
	if info, _ := c.Info(ctx); info.Executed.Number != 0 {
		t.Fatalf("executed %d with no journal line", info.Executed.Number)
	}
	if head := c.evm.head().Number.Uint64(); head != 0 {
		t.Fatalf("EVM head = %d, want the genesis", head)
	}
}
