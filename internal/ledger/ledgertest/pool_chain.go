package ledgertest

import (
	"context"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// PoolChain is a ledger.PoolChain held in memory: a sender's nonce is what
// SetNonce last said, 0 before; SetError makes every read fail.
type PoolChain struct {
	mu     sync.Mutex
	nonces map[common.Address]uint64
	err    error
	delay  time.Duration
}

var _ ledger.PoolChain = (*PoolChain)(nil)

// NewPoolChain returns a chain on which every nonce is 0.
func NewPoolChain() *PoolChain {
	return &PoolChain{nonces: make(map[common.Address]uint64)}
}

// SetNonce sets sender's nonce.
func (c *PoolChain) SetNonce(sender common.Address, nonce uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nonces[sender] = nonce
}

// SetError makes NonceAt fail with err until it is set back to nil.
func (c *PoolChain) SetError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

// SetDelay makes every NonceAt take d first (a node far away, or busy).
func (c *PoolChain) SetDelay(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.delay = d
}

// NonceAt returns sender's nonce.
func (c *PoolChain) NonceAt(ctx context.Context, sender ledger.Address) (uint64, error) {
	c.mu.Lock()
	delay := c.delay
	c.mu.Unlock()
	if delay > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	return c.nonces[common.Address(sender)], nil
}
