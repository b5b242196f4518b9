// Package ratelimit limits how often each key (an API key's id, or a client's
// IP address for a request without one) is served, with a token bucket per
// key.
//
// A bucket is kept as its theoretical arrival time (GCRA): the time at which
// it will be full again. One integer per key, no refill arithmetic, and a
// bucket whose time has passed is full, which is exactly what a key never
// seen before gets. Such buckets are dropped as the limiter goes (no
// goroutine to start or stop), and the keys tracked at once are capped: when
// a shard is at its share of the cap, its least recently used bucket makes
// room. That one may not be full yet, so under a flood of distinct keys a
// quiet key can get its burst back early; a key being refused is in use and
// stays. Memory is bounded whatever the clients send.
package ratelimit

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
)

// Config configures a Limiter.
type Config struct {
	// MaxKeys caps the keys tracked at once (100,000 by default: about
	// 7 MB with 20-byte keys). Each of the limiter's shards holds at most
	// its share, so the keys tracked can stay a little below it.
	MaxKeys int
	// Clock tells the time (the wall clock by default).
	Clock clock.Clock
}

const defaultMaxKeys = 100_000

// shardCount spreads the keys over locks so that concurrent requests for
// different keys rarely wait for each other.
const shardCount = 32

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	if c.MaxKeys < 0 {
		return fmt.Errorf("rate limit max keys must not be negative, got %d", c.MaxKeys)
	}
	return nil
}

// Limiter decides whether a key's request may be served now. It is safe for
// concurrent use.
type Limiter struct {
	clock clock.Clock
	// base is the clock's reading at New; buckets keep times as nanoseconds
	// since base.
	base time.Time
	// seed is the Limiter's own, so that no client can choose keys that all
	// land in one shard.
	seed   maphash.Seed
	shards []shard
}

// New returns a Limiter with cfg's settings, its zero values defaulted.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.MaxKeys = cmp.Or(cfg.MaxKeys, defaultMaxKeys)
	cfg.Clock = cmp.Or[clock.Clock](cfg.Clock, clock.Real{})
	n := min(shardCount, cfg.MaxKeys)
	l := &Limiter{clock: cfg.Clock, base: cfg.Clock.Now(), seed: maphash.MakeSeed(), shards: make([]shard, n)}
	for i := range l.shards {
		s := &l.shards[i]
		// The floor: the shards together never hold more than MaxKeys.
		s.max = cfg.MaxKeys / n
		s.buckets = make(map[string]*bucket)
		s.lru.prev, s.lru.next = &s.lru, &s.lru
	}
	return l, nil
}

// Allow takes one token from key's bucket at rate r. When the bucket is
// empty it refuses and says how long until a token is back. Allow always
// allows an unlimited rate, tracking nothing. Calls for one key may pass
// different rates (a key whose plan changed); the bucket carries over.
func (l *Limiter) Allow(key string, r Rate) (ok bool, retryAfter time.Duration) {
	if r.Unlimited() {
		return true, 0
	}
	interval, tolerance := r.gcra()
	now := int64(l.clock.Now().Sub(l.base))
	s := &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.touch(key, now)
	// A bucket is never more than a full burst and one token in debt: a
	// stored time beyond that means the clock went back (or the key's rate
	// went down), and the key must not be locked out for the difference.
	tat := min(max(b.tat, now), now+tolerance+interval)
	if wait := tat - now - tolerance; wait > 0 {
		b.tat = tat
		return false, time.Duration(wait)
	}
	b.tat = tat + interval
	s.dropFull(now)
	return true, 0
}

// Len returns the number of keys tracked now.
func (l *Limiter) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.buckets)
		s.mu.Unlock()
	}
	return n
}

// RetryAfterSeconds returns the Retry-After header's value for a 429 answer
// whose client may retry after d: whole seconds, rounded up, at least 1 (a
// client reads 0 as "now" and would come straight back).
func RetryAfterSeconds(d time.Duration) string {
	s := d / time.Second
	if d%time.Second > 0 {
		s++
	}
	return strconv.FormatInt(int64(max(s, 1)), 10)
}

type shard struct {
	mu      sync.Mutex
	max     int
	buckets map[string]*bucket
	// lru is the sentinel of a ring of the buckets, the most recently used
	// at lru.next, the least at lru.prev.
	lru bucket
}

type bucket struct {
	key string
	// tat is the theoretical arrival time in nanoseconds since the
	// Limiter's base: the bucket is full from then on.
	tat        int64
	prev, next *bucket
}

// touch returns key's bucket, moved to the front of the ring. A key without
// one gets a full bucket, in the place of the least recently used one when
// the shard is at its cap.
func (s *shard) touch(key string, now int64) *bucket {
	b := s.buckets[key]
	if b != nil {
		s.unlink(b)
	} else {
		if len(s.buckets) >= s.max {
			b = s.lru.prev
			s.unlink(b)
			delete(s.buckets, b.key)
		} else {
			b = new(bucket)
		}
		// A key cut from a larger string (a header) would keep all of it.
		b.key, b.tat = strings.Clone(key), now
		s.buckets[b.key] = b
	}
	b.prev, b.next = &s.lru, s.lru.next
	b.prev.next, b.next.prev = b, b
	return b
}

// dropFull drops up to two full buckets from the least recently used end:
// forgetting a full bucket changes nothing, and dropping two for the one a
// call may add keeps the shard near the keys in use, not at its cap.
func (s *shard) dropFull(now int64) {
	for range 2 {
		b := s.lru.prev
		if b == &s.lru || b.tat > now {
			return
		}
		s.unlink(b)
		delete(s.buckets, b.key)
	}
}

func (s *shard) unlink(b *bucket) {
	b.prev.next, b.next.prev = b.next, b.prev
	b.prev, b.next = nil, nil
}
