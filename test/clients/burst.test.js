// 20 senders × 25 transactions sent in one burst through ethers (which
// batches them into JSON-RPC batches of up to 100), as a busy dApp backend
// sends them: the pool's back-pressure (account limit, full pool) is
// answered by sending the refused ones again. Every transaction must run
// exactly once, judged by the chain's blocks, and no sender may be left
// behind its own nonce gap.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Wallet, parseUnits, isError } from "ethers";
import { devKey, provider, recipient } from "./lib.js";

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

  // The burst: every transaction at once. Back-pressure answers are sent
  // again until taken.
  let pending = signed;
  const hashes = new Map();
  let retries = 0;
  const deadline = Date.now() + 300_000;
  while (pending.length > 0) {
    const results = await Promise.allSettled(pending.map((t) => p.broadcastTransaction(t.raw)));
    const again = [];
    results.forEach((r, i) => {
      const t = pending[i];
      if (r.status === "fulfilled") {
        hashes.set(r.value.hash, t);
        return;
      }
      const msg = String(r.reason?.error?.message ?? r.reason?.shortMessage ?? r.reason);
      if (/account limit exceeded|txpool is full/.test(msg) || isError(r.reason, "UNKNOWN_ERROR") && /limit|full/.test(msg)) {
        again.push(t);
        return;
      }
      throw new Error(`sender ${t.sender} nonce ${t.nonce}: ${msg}`);
    });
    pending = again;
    retries += again.length;
    if (pending.length > 0) {
      assert.ok(Date.now() < deadline, `${pending.length} transactions still refused after 300 s`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  console.log(`burst: ${signed.length} accepted, ${retries} sent again after back-pressure`);

  // Every receipt, successful.
  const receipts = await Promise.all([...hashes.keys()].map((h) => p.waitForTransaction(h, 1, 300_000)));
  for (const r of receipts) {
    assert.ok(r, "a receipt");
    assert.equal(r.status, 1, `${r.hash} failed`);
  }
  // No sender stranded: each one's nonce on the chain moved past its burst.
  for (let s = 0; s < senders; s++) {
    assert.equal(await p.getTransactionCount(wallets[s].address, "latest"), finalNonce[s], `sender ${s}`);
  }
  // The chain's blocks hold each transaction exactly once.
  const end = Math.max(...receipts.map((r) => r.blockNumber));
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
