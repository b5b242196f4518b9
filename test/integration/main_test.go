// Package integration holds ledgerq's end-to-end tests: they build the real
// binary, start it as processes (dev, serve, once, migrate, simledger) and
// talk to them over HTTP, as an operator or a cron job would. Rule tests live
// beside the code they test. The server comes from package testdb
// (LEDGERQ_TEST_DATABASE_URL, testcontainers, or the local PostgreSQL
// binaries); each test gets its own database.
package integration

import (
	"bytes"
	"context"
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

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// ledgerqBinary builds cmd/ledgerq once per test run and returns its path.
func ledgerqBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ledgerq-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "ledgerq")
		cmd := exec.Command("go", "build", "-race", "-o", binPath, "github.com/ledgerq/ledgerq/cmd/ledgerq")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// proc is a ledgerq process started by a test.
type proc struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startProc starts the ledgerq binary with args and env (added to a clean
// environment that keeps PATH and HOME). The process is killed when t ends if
// it is still running.
func startProc(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(ledgerqBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	p := &proc{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	require.NoError(t, cmd.Start())
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
			t.Logf("ledgerq %s stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), p.stdout, p.stderr)
		}
	})
	return p
}

// startReady starts the ledgerq binary as startProc does, with --http-addr
// on a free port added to args, waits until its /readyz answers 200, and
// returns it with its base URL.
func startReady(t *testing.T, dir string, env []string, args ...string) (*proc, string) {
	t.Helper()
	addr := freeAddr(t)
	p := startProc(t, dir, env, append(append([]string(nil), args...), "--http-addr", addr)...)
	waitHTTPWhile(t, p, "http://"+addr+"/readyz", http.StatusOK, time.Minute)
	return p, "http://" + addr
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("process did not exit within %s; stderr:\n%s", timeout, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// freeAddr returns a loopback address with a free port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// waitHTTP polls url until it answers want or the deadline passes.
func waitHTTP(t *testing.T, url string, want int, timeout time.Duration) {
	t.Helper()
	waitHTTPWhile(t, nil, url, want, timeout)
}

// waitHTTPWhile is waitHTTP that gives up as soon as p exits.
func waitHTTPWhile(t *testing.T, p *proc, url string, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		if p != nil {
			select {
			case <-p.done:
				t.Fatalf("process exited (%v) while waiting for %s to answer %d; stderr:\n%s", p.err, url, want, p.stderr)
			default:
			}
		}
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond) // the poll interval of this wait on a condition
	}
	t.Fatalf("%s did not answer %d within %s; last: %s", url, want, timeout, last)
}

// eventually polls cond every 20 ms until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond) // the poll interval of this wait on a condition
	}
}

// reachableTempDir returns a new temporary directory that other users can
// enter: run as root, ledgerq dev runs PostgreSQL as an unprivileged user, and
// t.TempDir's parent is private to root.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ledgerq-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
