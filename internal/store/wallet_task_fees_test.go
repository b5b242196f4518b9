package store

import (
	"encoding/hex"
	"math/big"
	"testing"
)

// A request without fees keeps the fingerprint it had before the fee fields
// existed (the value below is what the earlier code computed), so a replay
// under the same idempotency key after an upgrade still matches; fees change
// it.
func TestTaskRequestHash_ARequestWithoutFeesKeepsItsEarlierFingerprint(t *testing.T) {
	g := uint64(21000)
	p := TaskInsertParams{ChainID: 1337, Sender: "0x00000000000000000000000000000000000000aa", Priority: 3,
		Request: TaskRequest{To: "0x00000000000000000000000000000000000000bb", Value: big.NewInt(7), Data: []byte{1, 2}, GasLimit: &g}}
	if got := hex.EncodeToString(TaskRequestHash(p)); got != "7afc6c8d37797930855e8749882fbafd2b2786fe27ba4535ffca89873bd51a74" {
		t.Fatalf("fingerprint without fees changed: %s", got)
	}
	withTip := p
	withTip.Request.TipCap = big.NewInt(1)
	withCap := p
	withCap.Request.FeeCap = big.NewInt(1)
	a, b := string(TaskRequestHash(withTip)), string(TaskRequestHash(withCap))
	if a == string(TaskRequestHash(p)) || a == b {
		t.Fatal("a tip and a fee cap of the same amount, or none, share a fingerprint")
	}
}

// A request with a call has a fingerprint of its own, which its arguments,
// function and ABI change; one without keeps its earlier fingerprint (the
// test above).
func TestTaskRequestHash_TheCallIsPartOfTheFingerprint(t *testing.T) {
	p := TaskInsertParams{ChainID: 1337, Sender: "0x00000000000000000000000000000000000000aa",
		Request: TaskRequest{To: "0x00000000000000000000000000000000000000bb", Data: []byte{1, 2}}}
	seen := map[string]string{string(TaskRequestHash(p)): "no call"}
	for name, c := range map[string]TaskCall{
		"call":         {Function: "f(uint256)", Args: []byte(`["1"]`)},
		"other args":   {Function: "f(uint256)", Args: []byte(`["2"]`)},
		"other name":   {Function: "g(uint256)", Args: []byte(`["1"]`)},
		"by ABI":       {Function: "f(uint256)", Method: "f", ABI: []byte(`[{"type":"function","name":"f"}]`), Args: []byte(`["1"]`)},
		"by other ABI": {Function: "f(uint256)", Method: "f", ABI: []byte(`[]`), Args: []byte(`["1"]`)},
	} {
		q := p
		q.Request.Call = &c
		h := string(TaskRequestHash(q))
		if other, ok := seen[h]; ok {
			t.Fatalf("%s and %s share a fingerprint", name, other)
		}
		seen[h] = name
	}
}

// "preflight": false has a fingerprint of its own; the default (true) adds
// nothing, so a request stored before the field keeps its fingerprint (the
// first test above).
func TestTaskRequestHash_NoPreflightIsPartOfTheFingerprint(t *testing.T) {
	p := TaskInsertParams{ChainID: 1337, Sender: "0x00000000000000000000000000000000000000aa",
		Request: TaskRequest{To: "0x00000000000000000000000000000000000000bb", Data: []byte{1, 2}}}
	q := p
	q.Request.SkipPreflight = true
	if string(TaskRequestHash(p)) == string(TaskRequestHash(q)) {
		t.Fatal("a request with and without its preflight share a fingerprint")
	}
}
