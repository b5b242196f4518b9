package ledgertest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
)

func TestBundleLedger_ZeroValueIsAChainWithoutBlocksThatTakesEveryPackage(t *testing.T) {
	t.Parallel()
	var l ledgertest.BundleLedger
	info, err := l.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, ledger.ChainInfo{}, info)
	recent, err := l.RecentBlocks(t.Context())
	require.NoError(t, err)
	require.Empty(t, recent)
	blocks, err := l.Blocks(t.Context(), 0, 10)
	require.NoError(t, err)
	require.Empty(t, blocks)
	wp := ledger.WorkPackage{Number: 1, Version: 1, Txs: [][]byte{{1}}}
	require.NoError(t, l.SubmitWorkPackage(t.Context(), wp))
	require.Equal(t, []ledger.WorkPackage{wp}, l.Submitted())
}

func TestBundleLedger_AnswersTheBlocksAndInfoTheTestGaveIt(t *testing.T) {
	t.Parallel()
	l := &ledgertest.BundleLedger{}
	info := ledger.ChainInfo{Genesis: time.Unix(0, 0), SlotLength: time.Second, Cores: 2, Executed: ledger.BlockRef{Number: 4, Hash: ledger.Hash{4}}}
	l.SetInfo(info)
	got, err := l.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, info, got)

	g := ledger.Hash{0xaa}
	first := l.AddBlock(ledger.JAMBlock{Guarantees: []ledger.Hash{g}})
	require.Equal(t, uint64(1), first.Slot, "the first block's slot")
	require.Equal(t, ledgertest.BlockHash(1), first.Hash)
	gap := l.AddBlock(ledger.JAMBlock{Slot: 5, Hash: ledger.Hash{5}, Accumulations: []ledger.Hash{g}})
	require.Equal(t, ledger.Hash{5}, gap.Hash)
	for range 8 {
		l.AddBlock(ledger.JAMBlock{})
	}
	require.Panics(t, func() { l.AddBlock(ledger.JAMBlock{Slot: 13}) }, "slot 13 is the newest already")

	recent, err := l.RecentBlocks(t.Context())
	require.NoError(t, err)
	require.Len(t, recent, ledger.RecentHistorySize)
	require.Equal(t, ledger.BlockRef{Number: 6, Hash: ledgertest.BlockHash(6)}, recent[0], "the newest eight, oldest first")
	require.Equal(t, uint64(13), recent[7].Number)

	blocks, err := l.Blocks(t.Context(), 0, 2)
	require.NoError(t, err)
	require.Equal(t, []ledger.JAMBlock{first, gap}, blocks)
	blocks, err = l.Blocks(t.Context(), 5, 100)
	require.NoError(t, err)
	require.Len(t, blocks, 8)
	require.Equal(t, uint64(6), blocks[0].Slot)
	blocks[0].Guarantees = append(blocks[0].Guarantees, g)
	again, err := l.Blocks(t.Context(), 5, 1)
	require.NoError(t, err)
	require.Empty(t, again[0].Guarantees, "Blocks returns copies")
}

func TestBundleLedger_SubmitAnswersAsScriptedAndReadsFailWithSetError(t *testing.T) {
	t.Parallel()
	l := &ledgertest.BundleLedger{}
	refused := ledger.NewError(ledger.Deterministic, ledger.AnchorNotRecent, nil)
	l.Submit = func(wp ledger.WorkPackage) error {
		// The script may ask the ledger back without deadlocking it.
		require.Len(t, l.Submitted(), wp.Version)
		if wp.Version == 1 {
			return refused
		}
		return nil
	}
	require.ErrorIs(t, l.SubmitWorkPackage(t.Context(), ledger.WorkPackage{Number: 1, Version: 1}), refused)
	require.NoError(t, l.SubmitWorkPackage(t.Context(), ledger.WorkPackage{Number: 1, Version: 2}))
	require.Len(t, l.Submitted(), 2, "refused packages are recorded too")

	down := errors.New("connection refused")
	l.SetError(down)
	_, err := l.Info(t.Context())
	require.ErrorIs(t, err, down)
	_, err = l.RecentBlocks(t.Context())
	require.ErrorIs(t, err, down)
	_, err = l.Blocks(t.Context(), 0, 1)
	require.ErrorIs(t, err, down)
	l.SetError(nil)
	_, err = l.Blocks(t.Context(), 0, 1)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, l.SubmitWorkPackage(ctx, ledger.WorkPackage{}), context.Canceled)
	require.Len(t, l.Submitted(), 2, "a cancelled call records nothing")
}
