// Package testnode holds what the tests' real nodes (internal/testgeth's
// geth, internal/testanvil's anvil) and signers (clef, local-kms) do alike
// as processes: finding their binary, a free port, a
// process group the test can kill and the kernel kills when the test binary
// dies, polling a node until it answers, the end of a node's log, and
// whether the run is CI's (where a missing node fails instead of skipping).
package testnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Poll asks every interval, each call bounded by callTimeout, until done
// takes the answer, for at most within. It returns the last answer, whether
// done took it, and the last call's error.
func Poll[T any](ask func(context.Context) (T, error), done func(T, error) bool, interval, callTimeout, within time.Duration) (T, bool, error) {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		v, err := ask(ctx)
		cancel()
		if done(v, err) {
			return v, true, err
		}
		if time.Now().After(deadline) {
			return v, false, err
		}
		<-tick.C
	}
}

// LogTail is the last lines of the log file at path, for a failure's
// message.
func LogTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// FreePort is a loopback port free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// InCI reports whether CI is true in the environment.
func InCI() bool {
	ci, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && ci
}

// Kill sends SIGKILL to p's process group and waits until exited is
// closed (the process reaped); what names it if it outlives 30 s, which
// short of a kernel problem cannot happen: said rather than hung on.
func Kill(p *os.Process, exited <-chan struct{}, what string) {
	_ = KillGroup(p)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		fmt.Fprintf(os.Stderr, "%s pid %d still running 30s after SIGKILL\n", what, p.Pid)
	}
}

// Binary returns the path of the test component named name (geth, clef,
// local-kms): the environment variable env, else name on PATH. Without one
// it skips t, or fails it under CI=true, where every component must run;
// install says how to get it. who prefixes the messages (the helper
// package's name).
func Binary(t testing.TB, who, name, env, install string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		if InCI() {
			t.Fatalf("%s: CI=true and no %s binary: %s is unset and %s is not on PATH (.ci/run installs it with %s)", who, name, env, name, install)
		}
		t.Skipf("%s: skipped: no %s binary (set %s=/path/to/%s, or put %s on PATH; install with %s)", who, name, env, name, name, install)
	}
	return p
}
