package ledger

import "testing"

func TestAnchorOffset_FollowsTheBuildersOffsetTable(t *testing.T) {
	// jamduna's dynamic anchor offset table for 2 cores: 0-1 ahead → 6, 2-3 →
	// 5, 4-5 → 4, 10+ → 1.
	for _, c := range []struct{ ahead, want int }{{0, 6}, {1, 6}, {2, 5}, {3, 5}, {4, 4}, {5, 4}, {10, 1}, {100, 1}} {
		if got := AnchorOffset(c.ahead, 2); got != c.want {
			t.Errorf("AnchorOffset(%d, 2) = %d, want %d", c.ahead, got, c.want)
		}
	}
}

func TestAnchorStale_OlderThanSixSlots(t *testing.T) {
	if AnchorStale(10, 16) {
		t.Error("an anchor 6 slots old is not stale")
	}
	if !AnchorStale(10, 17) {
		t.Error("an anchor 7 slots old is stale")
	}
	if AnchorStale(10, 9) {
		t.Error("an anchor ahead of the head is not stale")
	}
}

func TestAnchorExpired_LeavesRecentHistoryAfterEightSlots(t *testing.T) {
	if AnchorExpired(10, 17) {
		t.Error("an anchor 7 slots old is still recent")
	}
	if !AnchorExpired(10, 18) {
		t.Error("an anchor 8 slots old has left the 8 recent blocks")
	}
}

func TestPickAnchor_OffsetBehindTheHead(t *testing.T) {
	recent := []BlockRef{{Number: 1}, {Number: 2}, {Number: 3}, {Number: 4}}
	if a, _ := PickAnchor(recent, 1); a.Number != 3 {
		t.Errorf("offset 1 picked %d, want 3", a.Number)
	}
	if a, _ := PickAnchor(recent, 6); a.Number != 1 {
		t.Errorf("offset past the oldest picked %d, want 1", a.Number)
	}
	if _, ok := PickAnchor(nil, 1); ok {
		t.Error("no recent blocks gives no anchor")
	}
}

func TestPackageHash_DiffersPerVersionNotBlockHash(t *testing.T) {
	b := BundleHash(Hash{}, 1, []Hash{{1}, {2}})
	if b == BundleHash(Hash{}, 1, []Hash{{2}, {1}}) {
		t.Error("the block hash depends on the transactions' order")
	}
	a := BlockRef{Number: 5, Hash: Hash{9}}
	if PackageHash(b, 1, 0, a) == PackageHash(b, 2, 0, a) {
		t.Error("two versions share a package hash")
	}
}

func TestWorkPackageHash_IsPackageHashOverKeccakOfEachTx(t *testing.T) {
	raw := [][]byte{{0xc0}, {0x02, 0xc0}}
	wp := WorkPackage{Number: 3, Parent: Hash{7}, Version: 2, Core: 1, Anchor: BlockRef{Number: 9, Hash: Hash{4}}, Txs: raw}
	// Keccak-256 of the empty RLP list 0xc0 is a well-known constant.
	if got := TxHashOf([]byte{0xc0}).Hex(); got != "0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347" {
		t.Fatalf("keccak(0xc0) = %s", got)
	}
	want := PackageHash(BundleHash(Hash{7}, 3, []Hash{TxHashOf(raw[0]), TxHashOf(raw[1])}), 2, 1, wp.Anchor)
	if wp.Hash() != want {
		t.Error("WorkPackage.Hash is not PackageHash over BundleHash of the transactions' hashes")
	}
}
