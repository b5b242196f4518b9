// 20 senders × 25 transactions sent in one burst through ethers (which
// batches them into JSON-RPC batches of up to 100), as a busy dApp backend
// sends them: the pool's back-pressure (account limit, full pool) is
// answered by sending the refused ones again. Every transaction must run
// exactly once, judged by the chain's blocks, and no sender may be left
// behind its own nonce gap.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Wallet, keccak256, parseUnits } from "ethers";
import { devKey, provider, recipient } from "./lib.js";

const keccakOf = (raw) => keccak256(raw);
const senders = Number(process.env.LEDGERQ_BURST_SENDERS ?? 20);
const perSender = Number(process.env.LEDGERQ_BURST_TXS ?? 25);

test(`burst: ${senders} senders × ${perSender} all run exactly once, none stranded`, { timeout: 600_000 }, async () => {
  const p = provider();
  const { chainId } = await p.getNetwork();
  const start = await p.getBlockNumber();
  const fees = { maxFeePerGas: parseUnits("100", "gwei"), maxPriorityFeePerGas: parseUnits("1", "gwei"), gasLimit: 21000n };
  const signed = [];
  const wallets = [];
  for (let s = 0; s < senders; s++) {
    const w = new Wallet(devKey(s), p);
    wallets.push(w);
    const base = await p.getTransactionCount(w.address, "pending");
    for (let i = 0; i < perSender; i++) {
      signed.push({ sender: s, nonce: base + i, raw: await w.signTransaction({ to: recipient, value: BigInt(s * 1000 + i + 1), nonce: base + i, chainId, type: 2, ...fees }) });
    }
  }
  const finalNonce = await Promise.all(wallets.map(async (w) => (await p.getTransactionCount(w.address, "pending")) + perSender));

  // The burst: every transaction at once. Then, as a client of any
  // Ethereum pool must: a transaction refused for back-pressure (account
  // limit, full pool) or later dropped from the pool (evicted to make room
  // for a lower nonce of its sender) is sent again, until every one has a
  // receipt.
  const hashes = new Map(signed.map((t) => [t.hash = keccakOf(t.raw), t]));
  const receipts = new Map();
  let sends = 0, resent = 0, refusedForRoom = 0, timedOut = 0;
  const deadline = Date.now() + 400_000;
  let todo = signed;
  for (let round = 0; todo.length > 0; round++) {
    assert.ok(Date.now() < deadline, `${todo.length} transactions without a receipt after 400 s`);
    const results = await Promise.allSettled(todo.map(async (t) => {
      if (round > 0) {
        const r = await p.getTransactionReceipt(t.hash);
        if (r) {
          receipts.set(t.hash, r);
          return;
        }
        if (await p.getTransaction(t.hash)) {
          return; // still in the pool
        }
        resent++;
      }
      sends++;
      try {
        await p.broadcastTransaction(t.raw);
      } catch (err) {
        const msg = String(err?.error?.message ?? err?.shortMessage ?? err);
        if (/account limit exceeded|txpool is full/.test(msg)) {
          refusedForRoom++;
          return;
        }
        if (/already known/.test(msg)) {
          return;
        }
        // A send that did not finish in the server's time (a loaded
        // machine: JSON-RPC -32002 "request timed out", or the database
        // out of reach) may or may not be in the pool: as with any node,
        // it is looked for in the next round and sent again if it is not.
        if (/request timed out|database unavailable/.test(msg)) {
          timedOut++;
          return;
        }
        throw new Error(`sender ${t.sender} nonce ${t.nonce}: ${msg}`);
      }
    }));
    for (const r of results) {
      if (r.status === "rejected") throw r.reason;
    }
    todo = signed.filter((t) => !receipts.has(t.hash));
    if (todo.length > 0) await new Promise((r) => setTimeout(r, 500));
  }
  console.log(`burst: ${signed.length} transactions, ${sends} sends (${refusedForRoom} refused for room, ${timedOut} timed out, ${resent} sent again after leaving the pool)`);
  for (const r of receipts.values()) {
    assert.equal(r.status, 1, `${r.hash} failed`);
  }
  // No sender stranded: each one's nonce on the chain moved past its burst.
  for (let s = 0; s < senders; s++) {
    assert.equal(await p.getTransactionCount(wallets[s].address, "latest"), finalNonce[s], `sender ${s}`);
  }
  // The chain's blocks hold each transaction exactly once.
  const end = Math.max(...[...receipts.values()].map((r) => r.blockNumber));
  const seen = new Map();
  for (let n = start + 1; n <= end; n++) {
    const b = await p.getBlock(n, false);
    for (const h of b.transactions) {
      seen.set(h, (seen.get(h) ?? 0) + 1);
    }
  }
  for (const h of hashes.keys()) {
    assert.equal(seen.get(h), 1, `${h} is in ${seen.get(h) ?? 0} blocks`);
  }
  // And they finalize.
  const finalDeadline = Date.now() + 120_000;
  while ((await p.getBlock("finalized")).number < end) {
    assert.ok(Date.now() < finalDeadline, "the burst's blocks did not finalize within 120 s");
    await new Promise((r) => setTimeout(r, 250));
  }
  console.log(`burst: ${hashes.size} transactions in blocks ${start + 1}..${end}, each once, finalized`);
  p.destroy();
});
