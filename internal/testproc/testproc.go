// Package testproc runs the ledgerq binary as processes for end-to-end
// tests: it builds cmd/ledgerq once per test binary, starts it with a clean
// environment, waits for its HTTP API, and kills it when the test ends.
//
// Only tests import this package.
package testproc

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pollInterval paces the waits on a condition.
const pollInterval = 50 * time.Millisecond

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/ledgerq once per test binary, with the race detector,
// and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ledgerq-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "ledgerq")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, "github.com/ledgerq/ledgerq/cmd/ledgerq").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Proc is a ledgerq process started by a test.
type Proc struct {
	Cmd    *exec.Cmd
	Stdout *Buffer
	Stderr *Buffer
	done   chan struct{}
	err    error
}

// Buffer is an output buffer safe for the process's writes and the test's
// reads at once.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail returns the last n bytes of b, from a line start.
func (b *Buffer) tail(n int) string {
	s := b.String()
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return "…\n" + s
}

// logTail bounds what a failed test prints of a process's output.
const logTail = 64 << 10

// command is the ledgerq binary with args in dir, with env added to a clean
// environment that keeps PATH and HOME.
func command(t testing.TB, dir string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	return cmd
}

// Start starts the ledgerq binary with args in dir, with env added to a
// clean environment that keeps PATH and HOME. The process is killed when t
// ends if it is still running; if t failed, the end of its output is logged.
func Start(t testing.TB, dir string, env []string, args ...string) *Proc {
	t.Helper()
	cmd := command(t, dir, env, args...)
	p := &Proc{Cmd: cmd, Stdout: &Buffer{}, Stderr: &Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting ledgerq %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("ledgerq %s stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), p.Stdout.tail(logTail), p.Stderr.tail(logTail))
		}
	})
	return p
}

// StartReady starts the ledgerq binary as Start does, with --api-addr on a
// free port added to args, waits until its /readyz answers 200, and returns
// it with its base URL.
//
// A free port is free only until something binds it: between FreeAddr and
// the process's listen (seconds, when it first decrypts its wallets' keys),
// another socket on the machine can take it, an outgoing connection's
// ephemeral port among them. A process that exits because its address is
// in use is started again on another port, up to bindAttempts times.
func StartReady(t testing.TB, dir string, env []string, args ...string) (*Proc, string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addr := freeAddr(t)
		p := Start(t, dir, env, append(append([]string(nil), args...), "--api-addr", addr)...)
		err := waitHTTP(p, "http://"+addr+"/readyz", http.StatusOK, time.Minute)
		if err == nil {
			return p, "http://" + addr
		}
		if attempt < bindAttempts && p.exited() && strings.Contains(p.Stderr.String(), "address already in use") {
			t.Logf("testproc: %s was taken before ledgerq listened on it; starting it again on another port", addr)
			continue
		}
		t.Fatal(err)
	}
}

// freeAddr picks StartReady's address (a test replaces it).
var freeAddr = FreeAddr

// bindAttempts bounds StartReady's starts of one process.
const bindAttempts = 5

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process exited (cmd.Wait's error); read it once Done is
// closed.
func (p *Proc) Err() error { return p.err }

// Signal sends sig to the process.
func (p *Proc) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signalling %v: %v", sig, err)
	}
}

// Wait waits for the process to exit and returns its exit code.
func (p *Proc) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("process did not exit within %s; stderr:\n%s", timeout, p.Stderr.tail(logTail))
	}
	return p.Cmd.ProcessState.ExitCode()
}

// FreeAddr returns a loopback address with a free port.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// WaitHTTP polls url until it answers want or timeout passes; with p set, it
// gives up as soon as p exits.
func WaitHTTP(t testing.TB, p *Proc, url string, want int, timeout time.Duration) {
	t.Helper()
	if err := waitHTTP(p, url, want, timeout); err != nil {
		t.Fatal(err)
	}
}

func waitHTTP(p *Proc, url string, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		if p != nil && p.exited() {
			return fmt.Errorf("process exited (%v) while waiting for %s to answer %d; stderr:\n%s", p.err, url, want, p.Stderr.tail(logTail))
		}
		resp, err := probe.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(pollInterval) // the poll interval of this wait on a condition
	}
	return fmt.Errorf("%s did not answer %d within %s; last: %s", url, want, timeout, last)
}

// probe is waitHTTP's client: an address that takes the connection and
// never answers (another socket on a port thought free) must not hold the
// wait past its deadline.
var probe = &http.Client{Timeout: 5 * time.Second}

// exited reports whether the process has exited.
func (p *Proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Run runs the ledgerq binary with args to its end, with env added to a
// clean environment as Start does, and returns its standard output; a
// failure fails t with its standard error.
func Run(t testing.TB, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := command(t, dir, env, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ledgerq %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
