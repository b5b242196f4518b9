// Package crashpoint lets an end-to-end test kill a real ledgerq process at an
// exact point of its work (issue 9's crash-point tests): between two steps
// whose order the crash-safety argument depends on, such as "the attempt is
// stored" and "the attempt is broadcast".
//
// It is off unless the environment variable LEDGERQ_CRASH_AT names a point,
// optionally with how many times the point is passed first:
//
//	LEDGERQ_CRASH_AT=wallet.stored       # SIGKILL the process the first time
//	LEDGERQ_CRASH_AT=wallet.broadcast:3  # ... the third time
//
// The process then kills itself with SIGKILL, so nothing runs after it: no
// deferred function, no rollback, no shutdown — as a power cut or the OOM
// killer would stop it. Off, Hit costs one atomic load.
package crashpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Env is the environment variable that arms a crash point.
const Env = "LEDGERQ_CRASH_AT"

var (
	armed atomic.Bool
	mu    sync.Mutex
	point string
	left  int
	// kill ends the process; tests replace it.
	kill = func() {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not delivered synchronously on every platform
	}
)

func init() {
	if err := Arm(os.Getenv(Env)); err != nil {
		fmt.Fprintf(os.Stderr, "ledgerq: %s: %v\n", Env, err)
		os.Exit(2)
	}
}

// Arm sets the crash point from a spec "name[:n]"; "" disarms it.
func Arm(spec string) error {
	mu.Lock()
	defer mu.Unlock()
	if spec == "" {
		armed.Store(false)
		return nil
	}
	name, count, found := strings.Cut(spec, ":")
	n := 1
	if found {
		var err error
		if n, err = strconv.Atoi(count); err != nil || n < 1 {
			return fmt.Errorf("%q: the count after ':' must be a whole number of at least 1", spec)
		}
	}
	if name == "" {
		return fmt.Errorf("%q: no point named", spec)
	}
	point, left = name, n
	armed.Store(true)
	return nil
}

// Hit marks that the process passed the named point; when that point is
// armed and this is its n-th pass, the process dies there.
func Hit(name string) {
	if !armed.Load() {
		return
	}
	mu.Lock()
	if name != point {
		mu.Unlock()
		return
	}
	left--
	die := left == 0
	if die {
		armed.Store(false)
	}
	mu.Unlock()
	if die {
		fmt.Fprintf(os.Stderr, "ledgerq: crash point %s reached: SIGKILL\n", name)
		kill()
	}
}
