// Package testanvil runs a real anvil (Foundry's development node) for
// tests: a chain of its own, id 31337 unless told otherwise, that makes a
// block every second (or one per transaction), with ten funded developer
// accounts whose keys the test gets, and HTTP JSON-RPC on a free port of
// 127.0.0.1. It is the second client the wallet lane's tests run against
// besides geth (internal/testgeth): anvil answers JSON-RPC errors with other
// codes and texts than geth, and can reorganise its chain and drop its pool
// on request (Reorg, DropAllTransactions).
//
// The binary is LEDGERQ_TEST_ANVIL, else the one npm installs from the
// pinned @foundry-rs/anvil package in test/clients (`cd test/clients && npm
// ci`), found from the module's root. Without one the test is skipped with a
// message saying how to install it, except under CI=true, where a missing
// anvil fails the test: CI (.ci/run) installs it so that the tests that need
// it run for real.
//
// Start ties the node to a test: it is killed (its whole process group) when
// the test ends, and dies with the test binary if that exits first. The node
// dumps its chain to a state file every second and loads it when it starts,
// so Kill and Restart behave like a crash of a real node: it comes back on
// the same URL with the chain it had at its last dump (at most a second
// behind the kill), without its transaction pool; Interrupt stops it cleanly
// first, and Restart then brings back the whole chain.
//
//	n := testanvil.Start(t, testanvil.ChainID(31338))
//	key := n.Keys[0] // a funded developer account
//	// ... transactions sent to n.URL ...
//	n.Reorg(t, 2)    // the last two blocks replaced by empty ones
//	n.Kill()
//	n.Restart(t)     // same URL, the chain as at its last dump
//
// Only tests import this package.
package testanvil
