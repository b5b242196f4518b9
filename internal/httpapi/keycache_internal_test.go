package httpapi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
)

// A key is kept for the cache's time and no longer; a notified change
// forgets every key; a lookup that began before the change stores nothing;
// a cache of 0 keeps nothing.
func TestKeyCache_KeepsAKeyForItsTimeAndForgetsItOnAChange(t *testing.T) {
	t.Parallel()
	changes := make(chan struct{}, 1)
	k := newKeyCache(time.Second, changes)
	t0 := time.Unix(1_000_000, 0)
	key := store.APIKey{ID: "k1", Name: "app"}

	_, ok, gen := k.get("lq_a", t0)
	require.False(t, ok)
	k.put("lq_a", key, t0, gen)
	got, ok, _ := k.get("lq_a", t0.Add(999*time.Millisecond))
	require.True(t, ok)
	require.Equal(t, key, got)
	_, ok, _ = k.get("lq_b", t0)
	require.False(t, ok, "another token")
	_, ok, _ = k.get("lq_a", t0.Add(time.Second))
	require.False(t, ok, "past its time")

	k.put("lq_a", key, t0, gen)
	changes <- struct{}{}
	_, ok, gen = k.get("lq_a", t0)
	require.False(t, ok, "a change was notified")

	// A lookup in flight across a change: what it read may be the key
	// before the change, and is not kept.
	changes <- struct{}{}
	_, _, _ = k.get("lq_other", t0)
	k.put("lq_a", key, t0, gen)
	_, ok, _ = k.get("lq_a", t0)
	require.False(t, ok, "stored by a lookup older than the change")

	off := newKeyCache(0, nil)
	_, _, gen = off.get("lq_a", t0)
	off.put("lq_a", key, t0, gen)
	_, ok, _ = off.get("lq_a", t0)
	require.False(t, ok)
}
