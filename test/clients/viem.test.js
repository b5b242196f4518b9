// viem's default flows against ledgerq's /rpc.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createPublicClient, createWalletClient, defineChain, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { devKey, rpcURL, recipient } from "./lib.js";

async function chain() {
  const probe = createPublicClient({ transport: http(rpcURL) });
  const id = await probe.getChainId();
  return defineChain({
    id, name: "ledgerq", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcURL] } },
  });
}

test("viem: sendTransaction({to, value}) then waitForTransactionReceipt gives success", async () => {
  const c = await chain();
  const account = privateKeyToAccount(devKey(1));
  const wallet = createWalletClient({ account, chain: c, transport: http(rpcURL) });
  const pub = createPublicClient({ chain: c, transport: http(rpcURL), pollingInterval: 250 });
  const hash = await wallet.sendTransaction({ to: recipient, value: 777n });
  const receipt = await pub.waitForTransactionReceipt({ hash, timeout: 120_000 });
  assert.equal(receipt.status, "success");
  assert.equal(receipt.transactionHash, hash);
  assert.equal(receipt.from.toLowerCase(), account.address.toLowerCase());
  const tx = await pub.getTransaction({ hash });
  assert.equal(tx.blockNumber, receipt.blockNumber);
  assert.equal(tx.value, 777n);
});
