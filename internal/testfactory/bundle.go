package testfactory

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"

	"github.com/ledgerq/ledgerq/internal/store"
)

// The builder lane's rows are made through the store, as the intake and the
// bundler make them: a pool transaction's state follows from its sender's
// other transactions, and a bundle's from the transactions it took.

// PoolChainID is the chain of the builder lane's rows that name none.
const PoolChainID = int64(4242)

// PoolSender is the address of test sender number i.
func PoolSender(i int) string { return fmt.Sprintf("0x%040x", 0xa000+i) }

// PoolTx is a dynamic-fee transfer of 1 wei to PoolSender(999) by test
// sender number sender (PoolSender(sender)) on PoolChainID, with nonce and
// fees in wei. Its hash and raw bytes follow from the arguments (and salt),
// so the same arguments are the same transaction and any other argument is
// another.
func PoolTx(sender int, nonce uint64, feeCap, tip int64, salt ...string) store.NewPoolTx {
	body := fmt.Sprintf("%d/%d/%d/%d/%v", sender, nonce, feeCap, tip, salt)
	sum := sha256.Sum256([]byte(body))
	return store.NewPoolTx{
		ChainID: PoolChainID, Hash: "0x" + hex.EncodeToString(sum[:]), Sender: PoolSender(sender), Nonce: nonce,
		Type: 2, To: PoolSender(999), GasFeeCap: big.NewInt(feeCap), GasTipCap: big.NewInt(tip), Gas: 21000,
		Value: big.NewInt(1), Raw: []byte(body),
	}
}

// AddPoolTxs adds txs to the pool in order through the store
// (store.PoolAdd), as the intake does, with the default limits and a chain
// on which every sender's nonce is 0. It returns each as the pool took it
// (pending, or queued behind a nonce gap) and fails the test if the pool
// refuses one.
func (f *Factory) AddPoolTxs(txs ...store.NewPoolTx) []store.PoolTx {
	f.tb.Helper()
	out := make([]store.PoolTx, len(txs))
	for i, tx := range txs {
		res, err := f.st.PoolAdd(f.tb.Context(), store.PoolAddParams{Now: f.clock.Now(), Tx: tx, Limits: store.DefaultPoolLimits()})
		if err != nil {
			f.tb.Fatalf("testfactory: adding nonce %d of %s to the pool: %v", tx.Nonce, tx.Sender, err)
		}
		out[i] = res.Tx
	}
	return out
}

// CutBundles cuts the pool's pending transactions into bundles through the
// store (store.BundleCut), as the bundler does, and returns the bundles cut.
// p's zero fields get defaults: ChainID PoolChainID, Size 1, MaxQueued and
// MaxBundles 10 (a zero queue would cut nothing), Cores 2, Now the clock's
// now; no Executed is the chain's first block, no Recent leaves the anchor
// to the claim. It fails the test if the cut fails.
func (f *Factory) CutBundles(p store.BundleCutParams) []store.Bundle {
	f.tb.Helper()
	if p.ChainID == 0 {
		p.ChainID = PoolChainID
	}
	if p.Size == 0 {
		p.Size = 1
	}
	if p.MaxQueued == 0 {
		p.MaxQueued = 10
	}
	if p.MaxBundles == 0 {
		p.MaxBundles = 10
	}
	if p.Cores == 0 {
		p.Cores = 2
	}
	if p.Now.IsZero() {
		p.Now = f.clock.Now()
	}
	bs, err := f.st.BundleCut(f.tb.Context(), p)
	if err != nil {
		f.tb.Fatalf("testfactory: cutting bundles of chain %d: %v", p.ChainID, err)
	}
	return bs
}
