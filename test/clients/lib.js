// Shared set-up of the client tests: where ledgerq's /rpc is and which
// funded accounts to send from. The tests run against any ledgerq whose
// builder lane executes on a chain that funds the development mnemonic's
// accounts (the simulated JAM chain does): `ledgerq dev`, or
// `ledgerq serve --builder` beside `ledgerq simledger --kind jam`.
import { HDNodeWallet, JsonRpcProvider, Mnemonic } from "ethers";

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
