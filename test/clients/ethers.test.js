// ethers v6's default flows against ledgerq's /rpc, as a dApp developer
// writes them: nothing filled in by hand.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Wallet, parseUnits, isError } from "ethers";
import { devKey, provider, recipient, withTimeout } from "./lib.js";

test("ethers: sendTransaction({to, value}) then wait() gives a successful receipt", async () => {
  const p = provider();
  const w = new Wallet(devKey(0), p);
  const before = await p.getBalance(recipient);
  const tx = await w.sendTransaction({ to: recipient, value: 12345n });
  const receipt = await withTimeout(tx.wait(), 120_000, "tx.wait");
  assert.equal(receipt.status, 1);
  assert.equal(receipt.hash, tx.hash);
  assert.equal(receipt.from, w.address);
  assert.ok(receipt.blockNumber > 0);
  assert.equal(receipt.gasUsed, 21000n);
  const block = await p.getBlock(receipt.blockNumber);
  assert.equal(block.hash, receipt.blockHash);
  assert.ok(block.transactions.includes(tx.hash));
  assert.ok((await p.getBalance(recipient)) - before >= 12345n);
  p.destroy();
});

test("ethers: a replacement at the same fees is REPLACEMENT_UNDERPRICED, a spent nonce NONCE_EXPIRED", async () => {
  const p = provider();
  const w = new Wallet(devKey(2), p);
  const next = await p.getTransactionCount(w.address, "pending");
  const fees = { maxFeePerGas: parseUnits("100", "gwei"), maxPriorityFeePerGas: parseUnits("2", "gwei"), gasLimit: 21000n };
  // Nonce next+1 waits behind the gap at next, so it stays in the pool.
  await w.sendTransaction({ to: recipient, value: 1n, nonce: next + 1, ...fees });
  await assert.rejects(
    w.sendTransaction({ to: recipient, value: 2n, nonce: next + 1, ...fees }),
    (err) => isError(err, "REPLACEMENT_UNDERPRICED"),
  );
  // Fill the gap; both run.
  const filler = await w.sendTransaction({ to: recipient, value: 3n, nonce: next, ...fees });
  await withTimeout(filler.wait(), 120_000, "filler.wait");
  await assert.rejects(
    w.sendTransaction({ to: recipient, value: 4n, nonce: next, ...fees }),
    (err) => isError(err, "NONCE_EXPIRED"),
  );
  p.destroy();
});
