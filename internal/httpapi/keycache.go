package httpapi

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/ledgerq/ledgerq/internal/store"
)

// keyCache keeps the API keys authenticate looked up, by their token's
// SHA-256, for AccessConfig.KeyCache: a request with a key seen lately reads
// nothing from the database, which was a round trip per request. A key
// revoked or changed in the database (ledgerq keys revoke, plain SQL) is
// forgotten when the change is notified (ledgerq_api_keys, sent by a trigger
// on the table, which Deps.KeyChanges delivers; a reconnect of the listener
// delivers it too, for what it may have missed), and otherwise after
// KeyCache at the latest: behind a pooler that drops notifications, a
// revoked key opens the API for at most that long. Only keys found are kept:
// an unknown token is looked up every time, as before.
type keyCache struct {
	ttl     time.Duration
	changes <-chan struct{}
	mu      sync.Mutex
	// gen counts forgets: a lookup that began before one stores nothing,
	// so a key read before its revocation is not kept after it.
	gen  uint64
	keys map[[32]byte]cachedKey
}

type cachedKey struct {
	key store.APIKey
	at  time.Time
}

// maxCachedKeys bounds the cache; past it, it starts again empty.
const maxCachedKeys = 10_000

func newKeyCache(ttl time.Duration, changes <-chan struct{}) *keyCache {
	return &keyCache{ttl: ttl, changes: changes, keys: map[[32]byte]cachedKey{}}
}

// get returns the key of token if it was looked up less than ttl ago and no
// change was notified since; else the generation a lookup must hand to put.
func (k *keyCache) get(token string, now time.Time) (store.APIKey, bool, uint64) {
	if k.ttl <= 0 {
		return store.APIKey{}, false, 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	select {
	case <-k.changes:
		k.forgetLocked()
	default:
	}
	c, ok := k.keys[sha256.Sum256([]byte(token))]
	if !ok || now.Sub(c.at) >= k.ttl || now.Before(c.at) {
		return store.APIKey{}, false, k.gen
	}
	return c.key, true, k.gen
}

// put keeps key, looked up for token at now, unless a change was notified
// since the lookup began (gen).
func (k *keyCache) put(token string, key store.APIKey, now time.Time, gen uint64) {
	if k.ttl <= 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if gen != k.gen {
		return
	}
	if len(k.keys) >= maxCachedKeys {
		k.keys = map[[32]byte]cachedKey{}
	}
	k.keys[sha256.Sum256([]byte(token))] = cachedKey{key: key, at: now}
}

// forgetLocked drops every key (a change was notified); k.mu is held.
func (k *keyCache) forgetLocked() {
	k.gen++
	clear(k.keys)
}
