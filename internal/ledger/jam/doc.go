// Package jam is the simulated JAM chain behind the builder lane
// (docs/design.md, "The builder lane"): timeslots, recent blocks for anchors,
// cores, work-package submission with JAM's G15 anchor rule, guarantees (E_G)
// and accumulations (E_A) per block, and the builder service that executes
// EVM blocks strictly in block-number order, each once, and records every
// execution so a test can prove each transaction ran exactly once.
//
// The builder service's EVM is go-ethereum's, and the chain answers Ethereum
// JSON-RPC for the blocks it executed, so ledgerq can answer an Ethereum
// client's reads by asking it. It runs in-process (Chain implements
// ledger.BundleLedger; EVMHandler serves its JSON-RPC) or over HTTP
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
//   - The same package (same package hash) submitted again is taken once: the
//     second call answers success and changes nothing.
//
// # The EVM
//
// Executing bundle N runs its package's transactions, in the package's
// order, as EVM block N on the state after block N-1 (block 0 is the EVM
// genesis, so bundle numbers and EVM block numbers are the same). The EVM
// runs the protocol rules geth --dev runs, up to Osaka, with chain id
// Config.ChainID (1337 by default), a 30M block gas limit, EIP-1559 base fees
// from 1 gwei at genesis, and Config.Alloc (and, with FundDevAccounts, the
// 20 DevAccounts, 10000 ether each) funded at genesis. Block N is dated the
// start of the JAM slot it executed in (Unix seconds; its parent's time + 1
// when two bundles execute within a second) and carries the bundle's hash,
// ledger.BundleHash, as its extraData; its own header hash is the log
// entry's EVMHash.
//
//   - A transaction the EVM refuses (insufficient funds, a nonce not its
//     sender's next, a fee cap below the base fee, too little gas, a chain
//     id not the EVM's, the block's gas spent, a blob transaction) is left
//     out of the block, its effects undone, and listed in the log entry's
//     Skipped with geth's reason. There is no transaction pool: a skipped
//     transaction is never executed later unless a later package carries
//     it again. Skipped ones whose nonce was not their sender's next count
//     as nonce gaps. The JAM block that accumulates the package lists
//     them too (ledger.JAMBlock.Skipped, GET /blocks' "skipped"), each with
//     its reason and whether its nonce was above its sender's next
//     (NonceGap: geth's core.ErrNonceTooHigh), so that the builder lane
//     never reports one as executed.
//   - NonceAt is the sender's nonce in the state after the last executed
//     block.
//   - With Config.Journal every executed package (number, hash, parent,
//     slot, EVM block time and hash, raw transactions) is appended to the
//     journal file and synced before its execution is visible; the first
//     line holds the genesis time, chain id and EVM genesis hash. Open
//     replays the journal into a fresh EVM, checks each block comes out
//     with the hash it had, and continues: the same executed block, the
//     same genesis time (slot numbers go on with the clock, and a slot's
//     JAM block hash, which chains from slot 0, is what it was), the same
//     balances, receipts and blocks. A torn last line (a crash mid-write)
//     is dropped; another bad line, or a journal written for another
//     genesis, chain id or alloc, is an error.
//   - A journal that cannot be written (or an EVM failure) halts the
//     service: the package and every later one are held, none runs without
//     its journal line, and Stats.Halted says why.
//
// # EVM JSON-RPC
//
// POST /evm and EVMHandler serve JSON-RPC 2.0 with go-ethereum's own
// rpc.Server (its framing, parameter decoding and errors), single requests
// and batches (at most MaxEVMBatch; bodies over MaxEVMRequestBytes are
// answered 413, bodies not sent as application/json 415), for the executed
// blocks: rpc_modules, eth_chainId, net_version, web3_clientVersion,
// eth_syncing (false), eth_blockNumber, eth_getBlockByNumber,
// eth_getBlockByHash, eth_getTransactionByHash, eth_getTransactionReceipt,
// eth_getTransactionCount, eth_getBalance, eth_getCode, eth_getStorageAt,
// eth_call, eth_estimateGas, eth_gasPrice, eth_maxPriorityFeePerGas (geth's
// oracle over the executed blocks; 1 gwei until they hold a transaction),
// eth_feeHistory and eth_getLogs (at most MaxLogsBlockRange blocks). Answers
// and errors take geth's shapes, messages and codes, including code 3 with
// the revert data for a reverted call. Every other method is refused with -32601 "the method X does not
// exist/is not available"; transactions reach the chain only in work
// packages.
//
// Block tags: the chain knows only what it executed, so "latest", "safe",
// "finalized" and "pending" are all the last executed block ("earliest" is
// the genesis). Finality is ledgerq's business: it finalizes an accumulated
// bundle a number of JAM blocks later, and answers its own clients' tags
// from that. A request first produces the blocks whose slot has begun (and
// their executions) under the chain's mutex, then reads the EVM without it,
// so an eth_call never holds up slots or submissions.
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
//	                        blocks with slot > after, oldest first; limit 1..MaxBlocksPage;
//	                        a block whose accumulated packages had transactions left out also
//	                        has "skipped":[{"package_hash":"0x…","tx_hash":"0x…","reason":…,"nonce_gap":true}, …]
//	                        (absent: none)
//	                        (absent, 0 or larger: MaxBlocksPage)
//	GET  /nonce?address=0x… {"address":"0x…","nonce":n}   (NonceAt)
//	GET  /debug/log         {"executions":[Execution…],"refusals":[Execution…]}
//	GET  /debug/stats       Stats
//	POST /evm               Ethereum JSON-RPC 2.0 (see EVM JSON-RPC)
//
// Client classifies a failed POST /work-packages: a transport error after the
// request was written (including a timeout) or a 5xx other than 503 is
// Indeterminate; before it was written, or a 503, 429 or other unexpected
// status, Transient; 422 and 400 Deterministic with the chain's reason. A
// failed GET is Transient.
package jam
