package testgeth

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stopTimeout bounds how long geth may take to stop cleanly on SIGINT (well
// under a second on an idle machine).
const stopTimeout = 60 * time.Second

// Crashable runs the node so that it can crash and lose blocks the way a
// real node does: Kill SIGKILLs geth, and Restart starts it again on the
// same data directory and URL, where it comes back at the head of its last
// Checkpoint. The blocks mined since then are gone, with their transactions
// (no receipt; each sender's nonce back where it was), and so is the
// transaction pool; geth does not send any of them again by itself. What was
// mined up to the checkpoint stays, and so do the chain id and the funded,
// unlocked dev account. Start makes the first checkpoint once the node has
// mined block 1 (2–5 s more than a plain Start).
//
// Why, with geth 1.17.8 (observed, and read in its source):
//
//   - With the path state scheme (--state.scheme path, the default, pinned
//     here), the state of recent blocks is kept in memory: 128 diff layers
//     over a 64 MiB write buffer (--cache 256) that a dev chain never
//     fills. Only a clean shutdown writes it, as a journal
//     (data/geth/triedb/merkle.journal, "Persisting dirty state"); SIGKILL
//     loses it.
//   - Blocks, receipts and the head markers go to pebble, which geth opens
//     with asynchronous writes: its write-ahead log reaches the file only in
//     whole 32 KiB blocks, so SIGKILL loses the latest writes outright
//     (observed: all 4 blocks mined in the 5 s after a checkpoint; 1 of the
//     61 mined in the minute after one). Blocks that did reach the disk are
//     rewound on restart ("Head state missing, repairing", "Rewound to
//     block with available state", "SetHead invalidated finalized block"),
//     for geth cannot run a head without its state.
//   - On restart geth loads the journal of the last clean shutdown: it does
//     not delete it, and it still matches the state on disk (the genesis
//     state, never flushed since). So geth comes back at the head of the
//     last clean shutdown, after every crash since.
//   - Without any clean shutdown the only state on disk is the genesis
//     block's: geth rewinds to block 0, takes the node for an unfinished
//     snap sync ("Switching from full-sync to snap-sync") and never mines
//     again ("empty system contract"). Hence the checkpoint at block 1 or
//     later that Start makes.
//   - Without --txpool.nolocals geth tracks each transaction sent to it over
//     RPC as local and journals it to data/geth/transactions.rlp (plain file
//     writes, which SIGKILL does not lose); 10 s after a restart it sends
//     them all again, and the lost transactions are mined again with no
//     client resending them. --txpool.nolocals turns that tracker off.
//   - --dev on an existing data directory keeps its chain (the genesis is
//     read from the database, not made anew) and its dev account (the key
//     geth put into data/keystore on the first start), unlocked again.
//
// Kill and Restart take 0.1 s and 1–5 s; Checkpoint 2–7 s.
func Crashable() Option {
	return func(o *options) { o.crashable = true }
}

// Checkpoint stops geth cleanly (SIGINT), which writes its state to disk,
// and starts it again on the same data directory and URL. It returns the
// head geth saved: a later Kill and Restart comes back there. Meanwhile
// (2–7 s) geth is down, and clients get connection errors as while it is
// killed: checkpoint while they are idle, e.g. after funding the accounts a
// test will send from, which a crash must not take back. Only for a
// Crashable node.
func (n *Node) Checkpoint(t testing.TB) uint64 {
	t.Helper()
	n.requireCrashable(t, "Checkpoint")
	p := n.current()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatalf("testgeth: Checkpoint: interrupting geth pid %d: %v", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		p.kill()
		t.Fatalf("testgeth: Checkpoint: geth pid %d did not stop within %s of SIGINT; last lines of %s:\n%s", p.cmd.Process.Pid, stopTimeout, p.logPath, p.logTail(25))
	}
	if !p.cmd.ProcessState.Success() {
		t.Fatalf("testgeth: Checkpoint: geth pid %d stopped with %v, its state maybe not saved; last lines of %s:\n%s", p.cmd.Process.Pid, p.cmd.ProcessState, p.logPath, p.logTail(25))
	}
	return n.relaunch(t, "restarted after a clean stop (a checkpoint)")
}

// Kill SIGKILLs geth and waits until it is gone: the node is down, and
// clients get connection errors, until Restart.
func (n *Node) Kill() {
	n.current().kill()
}

// Restart starts geth again after Kill, on the same data directory and HTTP
// port (URL stays valid, and clients dialed before keep working), waits
// until it answers and has mined two blocks, and returns the head it came
// back with: the head of the last Checkpoint. Only for a Crashable node.
func (n *Node) Restart(t testing.TB) uint64 {
	t.Helper()
	n.requireCrashable(t, "Restart")
	p := n.current()
	select {
	case <-p.exited:
	default:
		t.Fatalf("testgeth: Restart: geth pid %d is running; Kill it first", p.cmd.Process.Pid)
	}
	return n.relaunch(t, "restarted after SIGKILL")
}

func (n *Node) requireCrashable(t testing.TB, method string) {
	t.Helper()
	if !n.crashable {
		t.Fatalf("testgeth: %s needs a node started with testgeth.Crashable(): without a clean shutdown since its first block, a killed geth comes back at block 0 and never mines again", method)
	}
	n.mu.Lock()
	stopped := n.stopped
	n.mu.Unlock()
	if stopped {
		t.Fatalf("testgeth: %s: the node was stopped", method)
	}
}

// relaunch starts a geth process on the node's data directory after the
// last one exited, logs the line CI shows, and waits until the new process
// mines two blocks. It returns the head geth loaded from its data directory.
func (n *Node) relaunch(t testing.TB, what string) uint64 {
	t.Helper()
	var (
		p   *process
		err error
	)
	// The HTTP port was free for a moment: another process may have bound
	// it, most likely a test finding a free port, which closes it at once.
	for attempt := 1; attempt <= portAttempts; attempt++ {
		if p, err = n.run(); !errors.Is(err, errPortTaken) {
			break
		}
		time.Sleep(time.Second) // another process's port: nothing to wait on
	}
	if err != nil {
		t.Fatalf("testgeth: restarting geth at %s: %v", n.URL, err)
	}
	if p.dev != n.Dev {
		t.Fatalf("testgeth: geth restarted with dev account %s; it had %s", p.dev.Hex(), n.Dev.Hex())
	}
	head, snapSync, err := p.loadedHead()
	if err != nil {
		t.Fatalf("testgeth: restarted geth: %v", err)
	}
	if snapSync {
		t.Fatalf("testgeth: geth restarted at head %d without the state to mine on: it switched to snap sync and will not make blocks (see Crashable); log %s", head, p.logPath)
	}
	n.logStarted(t, p, fmt.Sprintf("%s, loaded head %d", what, head))
	// A node that answers but cannot mine is no use (see Crashable). Two
	// blocks: one rewound to block 0 still mines block 1 before it turns to
	// snap sync and stops.
	n.WaitHead(t, head+2)
	return head
}

// loadedHeadLine is what geth logs about the head block it loaded from its
// data directory: once on opening it, and again after rewinding it to the
// newest block whose state it has.
var loadedHeadLine = regexp.MustCompile(`Loaded most recent local block +number=([0-9,]+)`)

// loadedHead reads from p's log the head block geth loaded from its data
// directory: the last such line before it answered. The head that RPC
// reports can already be a block further, mined before the first call.
// snapSync says whether geth then turned to snap sync, which a dev node
// never finishes: it has not the state of the head.
func (p *process) loadedHead() (head uint64, snapSync bool, err error) {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return 0, false, err
	}
	all := loadedHeadLine.FindAllSubmatch(b, -1)
	if len(all) == 0 {
		return 0, false, fmt.Errorf("%s has no line %q (has geth's log changed?)", p.logPath, "Loaded most recent local block")
	}
	head, err = strconv.ParseUint(strings.ReplaceAll(string(all[len(all)-1][1]), ",", ""), 10, 64)
	return head, bytes.Contains(b, []byte("Switching from full-sync to snap-sync")), err
}
