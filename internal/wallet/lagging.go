package wallet

import "time"

// A node a few blocks behind the others (one backend of a load balancer,
// one of a chain's nodes) answers reads as of an older block: an older
// head, an older nonce, no receipt yet for a mined transaction, no block
// yet at a height the others have. Its answers are true of the past, and a
// decision made on them takes back what the chain still holds. So the lane
// remembers, per chain in this process, the highest head it has seen
// (headWatch), and per wallet the highest chain nonce it has read and the
// head it was read with (nonceSeen); a cycle whose head read is below the
// best is lagging and decides nothing, and a nonce read below one already
// seen is not believed while the head has not gone back.
//
// A chain that truly went back (a node restored from an older state, geth's
// debug_setHead, a crash that loses the last blocks) shows the same lower
// head on every node: the best head then decays to the head answered once
// no answer has reached it for Config.RewindAfter, and the lane follows the
// shorter chain. The memory is the process's own: a restarted process
// starts from its first answers, and believes a block missing above its
// head only after it has watched the chain for RewindAfter (HeadSettled).

// headWatch is the best head seen on one chain.
type headWatch struct {
	// best is the highest head answered; bestAt when an answer last
	// reached it; since when the watch began.
	best          uint64
	bestAt, since time.Time
}

// observe records a head answered at now and reports whether it is
// behind the best within window: lagging. A lower head is believed (the
// best decays to it) once no answer has reached the best for window.
func (w *headWatch) observe(head uint64, now time.Time, window time.Duration) (lagging bool) {
	switch {
	case w.since.IsZero():
		w.best, w.bestAt, w.since = head, now, now
	case head >= w.best:
		w.best, w.bestAt = head, now
	case now.Sub(w.bestAt) < window:
		return true
	default:
		w.best, w.bestAt = head, now
	}
	return false
}

// saw raises the best head to a block the chain was shown to hold at now.
func (w *headWatch) saw(number uint64, now time.Time) {
	switch {
	case w.since.IsZero():
		w.best, w.bestAt, w.since = number, now, now
	case number >= w.best:
		w.best, w.bestAt = number, now
	}
}

// nonceSeen is the highest chain nonce read for a wallet in this process,
// the head of the cycle that first read it, and when a read last reached it.
type nonceSeen struct {
	nonce, head uint64
	at          time.Time
}

// ObserveHead records the head a read of the wallet's chain answered and
// reports whether it is lagging: below the highest head this process has
// seen on the chain within Config.RewindAfter. A lagging cycle decides
// nothing: it records nothing and the run asks again later.
func (s *Shard) ObserveHead(head uint64) (lagging bool) {
	j := s.job
	now := j.cfg.Clock.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	w := j.headWatchOf(s.ChainID())
	lagging = w.observe(head, now, j.cfg.RewindAfter)
	if lagging {
		j.cfg.Logger.Debug("wallet: a read answered from a node behind the best head, deciding nothing on it",
			"shard", s.Claim.Key, "head", head, "best_head", w.best)
	}
	return lagging
}

// SawBlock records that a read showed the chain holding block number (a
// receipt in it): the chain's best head is at least number. A node's
// receipts can be ahead of every head read (the receipt from a caught-up
// node, the heads from one behind), and a block above the best head is
// otherwise taken as gone once the head is settled (HeadSettled); with it
// the head reads below the block are lagging ones until one reaches it or
// RewindAfter passes without any.
func (s *Shard) SawBlock(number uint64) {
	j := s.job
	now := j.cfg.Clock.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	j.headWatchOf(s.ChainID()).saw(number, now)
}

// headWatchOf is the head watch of a chain, new at its first use; j.mu is
// held.
func (j *Job) headWatchOf(chainID int64) *headWatch {
	w := j.heads[chainID]
	if w == nil {
		w = &headWatch{}
		j.heads[chainID] = w
	}
	return w
}

// HeadSettled reports whether the lane has watched the wallet's chain for
// at least Config.RewindAfter in this process and head is its best head: a
// block missing above head is then missing from the chain, not only from
// the node that answered first after a restart.
func (s *Shard) HeadSettled(head uint64) bool {
	j := s.job
	now := j.cfg.Clock.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	w := j.heads[s.ChainID()]
	return w != nil && head >= w.best && now.Sub(w.since) >= j.cfg.RewindAfter
}

// TrustChainNonce returns the chain nonce the run may act on, given nonce
// read by a cycle whose head read (head) was not lagging: nonce, unless it
// is below a nonce already read for the wallet while the head has not gone
// below the head that one was read with: a node behind the others answered
// it, and the higher one is returned with lagging true. A nonce is never
// lower on a chain that did not go back, so only a head that went back (the
// best head decayed to it, ObserveHead) makes a lower nonce believed at
// once; a reorganisation to a longer chain without the wallet's
// transactions shows itself otherwise (a block at a height the lane
// recorded, with another hash), and ForgetChainNonce then lets the next
// read be believed. Like the head, a lower nonce is also believed once no
// read has reached the higher one for Config.RewindAfter (another process
// followed such a reorganisation, say).
func (s *Shard) TrustChainNonce(nonce, head uint64) (trusted uint64, lagging bool) {
	j := s.job
	now := j.cfg.Clock.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	seen, ok := j.nonces[s.Claim.Key]
	switch {
	case ok && nonce < seen.nonce && head >= seen.head && now.Sub(seen.at) < j.cfg.RewindAfter:
		return seen.nonce, true
	case ok && nonce == seen.nonce:
		seen.at = now
	default:
		seen = nonceSeen{nonce: nonce, head: head, at: now}
	}
	j.nonces[s.Claim.Key] = seen
	return nonce, false
}

// ForgetChainNonce forgets the wallet's highest chain nonce read: the
// chain was seen to have lost blocks the lane recorded, so the next nonce
// read, lower or not, is believed.
func (s *Shard) ForgetChainNonce() {
	j := s.job
	j.mu.Lock()
	delete(j.nonces, s.Claim.Key)
	j.mu.Unlock()
}
