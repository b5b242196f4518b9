// Shared set-up of the client tests: where ledgerq's /rpc is and which
// funded accounts to send from. The tests run against any ledgerq whose
// builder lane executes on a chain that funds the development mnemonic's
// accounts (the simulated JAM chain does): `ledgerq dev`, or
// `ledgerq serve --builder` beside `ledgerq simledger --kind jam`.
import { HDNodeWallet, JsonRpcProvider, Mnemonic, keccak256 } from "ethers";

export const rpcURL = process.env.LEDGERQ_RPC_URL ?? "http://127.0.0.1:8080/rpc";

// The development mnemonic whose first 20 accounts hardhat, anvil and the
// simulated JAM chain fund.
export const devMnemonic = "test test test test test test test test test test test junk";

// devKey returns the private key of the mnemonic's account i
// (m/44'/60'/0'/0/i), derived here with ethers, not by ledgerq.
export function devKey(i) {
  const m = Mnemonic.fromPhrase(devMnemonic);
  return HDNodeWallet.fromMnemonic(m, `m/44'/60'/0'/0/${i}`).privateKey;
}

// provider returns an ethers provider for /rpc. ethers batches the calls
// it makes at once into JSON-RPC batches (up to 100 a request by default).
export function provider() {
  return new JsonRpcProvider(rpcURL, undefined, { pollingInterval: 250 });
}

// A recipient no test sends from.
export const recipient = "0x000000000000000000000000000000000000bEEF";

// withTimeout fails after ms.
export async function withTimeout(promise, ms, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, t]);
  } finally {
    clearTimeout(timer);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// resendDropped is what a client of ledgerq's pool must do after sending:
// the pool may drop a transaction it accepted (evicted to make room for a
// lower nonce of its sender at the sender's queue limit, or expired), and
// says so only through ledgerq_txStatus (state "dropped", drop_reason).
// Until every transaction of raws (signed, as sent) has a receipt, it asks
// ledgerq_txStatus about each and sends again, the same bytes, what it
// reports dropped. It returns the drops it saw (hash → reason) and how many
// times it sent again. A resend the pool refuses for room is tried again
// at the next poll; any other refusal fails.
export async function resendDropped(p, raws, { timeoutMs = 120_000, pollMs = 250 } = {}) {
  const byHash = new Map(raws.map((raw) => [keccak256(raw), raw]));
  const dropped = new Map();
  let resent = 0;
  const deadline = Date.now() + timeoutMs;
  let todo = [...byHash.keys()];
  while (todo.length > 0) {
    if (Date.now() > deadline) throw new Error(`resendDropped: ${todo.length} transactions without a receipt after ${timeoutMs} ms`);
    const next = [];
    await Promise.all(todo.map(async (hash) => {
      if (await p.getTransactionReceipt(hash)) return;
      next.push(hash);
      const status = await p.send("ledgerq_txStatus", [hash]);
      if (status?.state !== "dropped") return;
      dropped.set(hash, status.drop_reason);
      try {
        await p.broadcastTransaction(byHash.get(hash));
        resent++;
      } catch (err) {
        const msg = String(err?.error?.message ?? err?.shortMessage ?? err);
        if (!/account limit exceeded|txpool is full/.test(msg)) throw new Error(`resending ${hash}: ${msg}`);
      }
    }));
    todo = next;
    if (todo.length > 0) await sleep(pollMs);
  }
  return { dropped, resent };
}
