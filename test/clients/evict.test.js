// What a client must do when the pool evicts a transaction it accepted:
// resend what ledgerq_txStatus reports dropped (lib.js's resendDropped).
// The eviction is provoked with the pool's default limits: a sender's
// queue holds 64 nonce-gapped transactions; nonces next+2..next+65 fill
// it, then next+1, a lower nonce, evicts the highest queued one
// (next+65), as geth truncates an account's queue from the top.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Wallet, keccak256, parseUnits } from "ethers";
import { devKey, provider, recipient, resendDropped } from "./lib.js";

const accountQueue = 64;

test("evict: an evicted transaction is dropped with reason evicted, and resent it runs", { timeout: 300_000 }, async () => {
  const p = provider();
  const w = new Wallet(devKey(3), p);
  const { chainId } = await p.getNetwork();
  const next = await p.getTransactionCount(w.address, "pending");
  const fees = { maxFeePerGas: parseUnits("100", "gwei"), maxPriorityFeePerGas: parseUnits("1", "gwei"), gasLimit: 21000n };
  const sign = (nonce) => w.signTransaction({ to: recipient, value: BigInt(nonce + 1), nonce, chainId, type: 2, ...fees });
  const raws = [];
  for (let i = 0; i < accountQueue + 2; i++) raws.push(await sign(next + i));
  const top = raws[accountQueue + 1];

  // The queue fills behind the missing next and next+1.
  await Promise.all(raws.slice(2).map((raw) => p.broadcastTransaction(raw)));
  assert.equal((await p.send("ledgerq_txStatus", [keccak256(top)])).state, "queued");
  // A lower nonce: the highest queued one makes room for it.
  await p.broadcastTransaction(raws[1]);
  const evicted = await p.send("ledgerq_txStatus", [keccak256(top)]);
  assert.equal(evicted.state, "dropped");
  assert.equal(evicted.drop_reason, "evicted");
  assert.equal(await p.getTransaction(keccak256(top)), null, "an evicted transaction is not in the pool");
  // The gap closes.
  await p.broadcastTransaction(raws[0]);

  const { dropped, resent } = await resendDropped(p, raws);
  assert.deepEqual([...dropped], [[keccak256(top), "evicted"]], "the one evicted, reported dropped, evicted");
  assert.equal(resent, 1);
  assert.equal(await p.getTransactionCount(w.address, "latest"), next + raws.length, "every nonce ran");
  for (const raw of raws) {
    assert.equal((await p.getTransactionReceipt(keccak256(raw)))?.status, 1);
  }
  p.destroy();
});
