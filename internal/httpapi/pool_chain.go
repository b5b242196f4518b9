package httpapi

import (
	"context"
	"sync"

	"github.com/ethereum/go-ethereum/common"
)

// MemoryPoolChain is a PoolChain held in memory: a sender's nonce is what
// SetNonce last said, 0 before. It stands in for the JAM chain until its
// adapter exists (ledgerq dev, bench) and is the tests' chain.
type MemoryPoolChain struct {
	mu     sync.Mutex
	nonces map[common.Address]uint64
	err    error
}

var _ PoolChain = (*MemoryPoolChain)(nil)

// NewMemoryPoolChain returns a chain on which every nonce is 0.
func NewMemoryPoolChain() *MemoryPoolChain {
	return &MemoryPoolChain{nonces: make(map[common.Address]uint64)}
}

// SetNonce sets sender's nonce.
func (c *MemoryPoolChain) SetNonce(sender common.Address, nonce uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nonces[sender] = nonce
}

// SetError makes NonceAt fail with err until it is set back to nil.
func (c *MemoryPoolChain) SetError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

// NonceAt returns sender's nonce.
func (c *MemoryPoolChain) NonceAt(ctx context.Context, sender common.Address) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	return c.nonces[sender], nil
}
