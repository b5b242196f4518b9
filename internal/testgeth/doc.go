// Package testgeth runs a real go-ethereum node for tests: `geth --dev
// --dev.period 1` (a single-node proof-of-stake chain, id 1337, that makes a
// block every second and funds one unlocked developer account), with a
// private data directory and HTTP JSON-RPC on a free port of 127.0.0.1.
//
// The binary is LEDGERQ_TEST_GETH, else `geth` on PATH. Without one the test
// is skipped with a message saying how to install it, except under CI=true,
// where a missing geth fails the test: CI (.ci/run) installs geth so that the
// tests that need it run for real.
//
// Start ties the node to a test: it is killed (its whole process group) when
// the test ends, and dies with the test binary if that exits first. MinedFrom
// reads a chain back the way any client would, for end-to-end checks that
// every task's transaction was mined exactly once.
//
// ChainID(id) runs the node on another chain id (geth --dev keeps a data
// directory's genesis, so Start writes one with that id first): several
// nodes are then several chains.
//
// A Crashable node can crash and lose blocks as a real one does: Kill
// SIGKILLs geth, and Restart brings it back behind the same URL at the head
// of its last Checkpoint, without the blocks mined since and their
// transactions:
//
//	n := testgeth.Start(t, testgeth.Crashable())
//	n.Fund(t, sender, wei)
//	saved := n.Checkpoint(t) // what a crash will not take back
//	// ... transactions from sender mined in blocks after saved ...
//	n.Kill()
//	head := n.Restart(t) // == saved; sender's nonce as it was at saved
//
// Only tests import this package.
package testgeth
