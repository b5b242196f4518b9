// 20 senders × 25 transactions sent in one burst through one ethers
// provider (which batches them into JSON-RPC batches of up to 100, so a
// sender's nonces arrive out of order), each sent ONCE, with no retry: the
// pool's limits (geth's: 16 executable slots and a queue of 64 per account)
// hold such a burst, so every transaction must be accepted, none dropped,
// and each must end finalized exactly once, judged from the chain's blocks.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Wallet, keccak256, parseUnits, toQuantity } from "ethers";
import { devKey, provider, recipient } from "./lib.js";

const senders = Number(process.env.LEDGERQ_BURST_SENDERS ?? 20);
const perSender = Number(process.env.LEDGERQ_BURST_TXS ?? 25);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test(`burst: ${senders} senders × ${perSender} sent once each, all accepted, none dropped, each finalized exactly once`, { timeout: 600_000 }, async () => {
  const p = provider();
  const { chainId } = await p.getNetwork();
  const start = await p.getBlockNumber();
  const fees = { maxFeePerGas: parseUnits("100", "gwei"), maxPriorityFeePerGas: parseUnits("1", "gwei"), gasLimit: 21000n };
  const signed = [];
  const wallets = [];
  const base = [];
  for (let s = 0; s < senders; s++) {
    const w = new Wallet(devKey(s), p);
    wallets.push(w);
    base.push(await p.getTransactionCount(w.address, "pending"));
    for (let i = 0; i < perSender; i++) {
      const raw = await w.signTransaction({ to: recipient, value: BigInt(s * 1000 + i + 1), nonce: base[s] + i, chainId, type: 2, ...fees });
      signed.push({ sender: s, nonce: base[s] + i, raw, hash: keccak256(raw) });
    }
  }

  // The burst: every transaction at once, once.
  const sent = await Promise.allSettled(signed.map((t) => p.broadcastTransaction(t.raw)));
  const refused = sent.flatMap((r, i) => r.status === "rejected"
    ? [`sender ${signed[i].sender} nonce ${signed[i].nonce}: ${r.reason?.error?.message ?? r.reason?.shortMessage ?? r.reason}`] : []);
  assert.deepEqual(refused, [], "every transaction of the burst is accepted");

  // Wait until each sender's nonce on the chain is past its burst; a
  // transaction the pool dropped would never run: fail on it at once.
  const deadline = Date.now() + 400_000;
  for (;;) {
    const latest = await Promise.all(wallets.map((w) => p.getTransactionCount(w.address, "latest")));
    if (latest.every((n, s) => n >= base[s] + perSender)) break;
    assert.ok(Date.now() < deadline, `nonces on the chain ${latest} short of ${base.map((b) => b + perSender)} after 400 s`);
    const waiting = signed.filter((t) => t.nonce >= latest[t.sender]);
    const statuses = await Promise.all(waiting.map((t) => p.send("ledgerq_txStatus", [t.hash])));
    statuses.forEach((st, i) => {
      assert.notEqual(st?.state, "dropped", `sender ${waiting[i].sender} nonce ${waiting[i].nonce} dropped (${st?.drop_reason})`);
    });
    await sleep(500);
  }
  // Every one has a receipt; the last block to scan is the newest of them.
  let receipts;
  for (;;) {
    receipts = await Promise.all(signed.map((t) => p.getTransactionReceipt(t.hash)));
    if (receipts.every((r) => r)) break;
    assert.ok(Date.now() < deadline, `${receipts.filter((r) => !r).length} transactions without a receipt after 400 s`);
    await sleep(250);
  }
  receipts.forEach((r, i) => assert.equal(r.status, 1, `sender ${signed[i].sender} nonce ${signed[i].nonce}`));
  const end = Math.max(...receipts.map((r) => r.blockNumber));

  // The chain's blocks, with their transactions: each of the burst's once,
  // each sender's nonces once each.
  const ours = new Map(signed.map((t) => [t.hash, t]));
  const seen = new Map();
  const nonces = wallets.map(() => new Map());
  for (let n = start + 1; n <= end; n++) {
    const b = await p.send("eth_getBlockByNumber", [toQuantity(n), true]);
    for (const tx of b.transactions) {
      const t = ours.get(tx.hash);
      if (!t) continue;
      seen.set(tx.hash, (seen.get(tx.hash) ?? 0) + 1);
      assert.equal(tx.from.toLowerCase(), wallets[t.sender].address.toLowerCase());
      const nonce = Number(tx.nonce);
      nonces[t.sender].set(nonce, (nonces[t.sender].get(nonce) ?? 0) + 1);
    }
  }
  for (const t of signed) {
    assert.equal(seen.get(t.hash), 1, `sender ${t.sender} nonce ${t.nonce}: in ${seen.get(t.hash) ?? 0} blocks`);
  }
  for (let s = 0; s < senders; s++) {
    for (let i = 0; i < perSender; i++) {
      assert.equal(nonces[s].get(base[s] + i), 1, `sender ${s} nonce ${base[s] + i}`);
    }
  }

  // And they finalize.
  const finalDeadline = Date.now() + 120_000;
  while ((await p.getBlock("finalized")).number < end) {
    assert.ok(Date.now() < finalDeadline, "the burst's blocks did not finalize within 120 s");
    await sleep(250);
  }
  console.log(`burst: ${signed.length} transactions sent once each, in blocks ${start + 1}..${end}, each once, finalized`);
  p.destroy();
});
