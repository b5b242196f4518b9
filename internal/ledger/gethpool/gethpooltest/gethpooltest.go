// Package gethpooltest holds the replacements at the edges of geth's
// replacement rule (gethpool.Replaces) that every place applying the rule
// is tested on: the builder lane's pool and the simulated EVM chain, so
// that they are held to the same cases as the function itself.
package gethpooltest

// Case is a replacement of a transaction with fees (OldFeeCap, OldTip), in
// wei, by one with fees (FeeCap, Tip) at geth's default 10 % price bump.
type Case struct {
	Name              string
	OldFeeCap, OldTip int64
	FeeCap, Tip       int64
	// Replaces is geth's answer: a replacement, or "replacement
	// transaction underpriced".
	Replaces bool
}

// Edges are the cases where a percentage alone misleads: fee cap and tip
// each strictly above the old ones and at least old × 110 / 100 in integer
// division (core/txpool/legacypool/list.go), so 111 replaces 101 (the
// threshold 111.1 rounds down) and a zero tip never replaces a zero tip.
var Edges = []Case{
	{"tip 101 to 111: the threshold rounds down", 1010, 101, 1111, 111, true},
	{"fee cap 1001 to 1101: the threshold rounds down", 1001, 100, 1101, 110, true},
	{"tip 101 to 110: below the threshold", 1010, 101, 1111, 110, false},
	{"equal zero tips", 1000, 0, 1100, 0, false},
	{"a zero tip raised by one wei", 1000, 0, 1100, 1, true},
	{"equal fee caps, the tip doubled", 1000, 100, 1000, 200, false},
	{"fee cap 9 to 10: one wei over the rounded threshold", 9, 9, 10, 10, true},
	{"fee cap 9 to 9: the rounded threshold but not above the old", 9, 5, 9, 6, false},
	{"zero fee cap and tip raised by one wei", 0, 0, 1, 1, true},
}
