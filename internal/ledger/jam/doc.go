// Package jam is the simulated JAM chain behind the builder lane
// (docs/design.md, "The builder lane"): timeslots, recent blocks for anchors,
// cores, work-package submission with JAM's G15 anchor rule, guarantees (E_G)
// and accumulations (E_A) per block, and the builder service that executes
// EVM blocks strictly in block-number order, each once, and records every
// execution so a test can prove each transaction ran exactly once.
//
// It runs in-process (Chain implements ledger.BundleLedger) or over HTTP
// (NewHandler serves a Chain; Client implements ledger.BundleLedger against
// it), so the builder lane is tested the same way in both.
//
// # Determinism
//
// A run is deterministic for a given Config.Seed and call order: every random
// choice is drawn from one seeded source under the chain's mutex, and time is
// the injected clock's. Blocks are produced lazily: every call first produces
// the blocks whose slot has begun (one per slot, slot 0 is genesis), so moving
// a clock.Fake forward and calling is enough. Nothing sleeps.
//
// # Rules
//
//   - A package is refused (Deterministic) for a core outside [0, Cores), no
//     transactions, an undecodable transaction, or an anchor that is not one
//     of the RecentHistorySize newest blocks (slot and hash): the reason of the
//     last starts with ledger.AnchorNotRecent.
//   - A taken package is guaranteed in the block GuaranteeDelaySlots after the
//     slot it was submitted in (LateSlots for the late-guarantee fault), unless
//     ledger.AnchorExpired says its anchor has left the recent history by then:
//     then it is never guaranteed. Guarantors do not compare packages, so two
//     versions of one EVM block may both be guaranteed.
//   - A guaranteed package is accumulated AccumulateDelaySlots later. The
//     service executes it when its Number is the next one and its Parent is
//     the last executed block's hash; holds it while its predecessor has not
//     executed (and executes it, in the same block, once that one does);
//     refuses it as "duplicate" when its number already executed and as
//     "parent_mismatch" when its parent is not the executed block. Only
//     executed packages are listed in a block's Accumulations.
//   - Per sender, a transaction whose nonce is not the sender's next one is
//     counted as a nonce gap (and still executed).
//   - The same package (same package hash) submitted again is taken once: the
//     second call answers success and changes nothing.
//
// # Faults
//
// Rates are fractions in [0, 1], drawn on every submit: TransientError (not
// taken; over HTTP a 503), LostResponse (taken, but the caller gets an
// Indeterminate error; over HTTP the connection is cut), NoGuarantee (taken,
// never guaranteed), LateGuarantee (taken, guaranteed LateSlots slots later,
// still under the anchor rule).
//
// # HTTP
//
// Hashes and transactions are 0x-prefixed hex strings.
//
//	GET  /info              {"genesis":RFC3339Nano,"slot_length_ms":6000,"cores":2,"head":slot,
//	                         "executed":{"number":n,"hash":"0x…"}}
//	GET  /recent            [{"slot":s,"hash":"0x…"}, …]   (oldest first, at most 8)
//	POST /work-packages     {"number":n,"parent":"0x…","version":v,"core":c,
//	                         "anchor":{"slot":s,"hash":"0x…"},"txs":["0x…", …]}
//	                        200 {"package_hash":"0x…"}: taken
//	                        422 {"reason":…,"message":…}: refused (Deterministic)
//	                        400 {"reason":…,"message":…}: malformed body (Deterministic)
//	                        503 {"reason":…,"message":…}: not taken (Transient)
//	                        lost response: taken, then the connection is cut
//	GET  /blocks?after=s&limit=n   [{"slot":s,"hash":"0x…","guarantees":["0x…"],"accumulations":["0x…"]}, …]
//	                        blocks with slot > after, oldest first; limit 1..MaxBlocksPage
//	                        (absent, 0 or larger: MaxBlocksPage)
//	GET  /debug/log         {"executions":[Execution…],"refusals":[Execution…]}
//	GET  /debug/stats       Stats
//
// Client classifies a failed POST /work-packages: a transport error after the
// request was written (including a timeout) or a 5xx other than 503 is
// Indeterminate; before it was written, or a 503, 429 or other unexpected
// status, Transient; 422 and 400 Deterministic with the chain's reason. A
// failed GET is Transient.
package jam
