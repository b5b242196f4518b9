// Package localkmstest runs local-kms (github.com/nsmithuk/local-kms), a
// server that speaks AWS KMS's API offline and keeps secp256k1 keys, for a
// test: on a free port with a data directory of the test's own, killed when
// the test ends, and killable and restartable on the same port and data
// (its keys kept) for a test of an unreachable signer. Keys are made
// through the KMS API, as an operator would, never by ledgerq's code.
// Without the binary a test is skipped, or fails when CI is true.
package localkmstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/ledgerq/ledgerq/internal/testnode"
)

// EnvBinary names the environment variable holding local-kms's path.
const EnvBinary = "LEDGERQ_TEST_LOCAL_KMS"

// InstallCommand installs the local-kms the tests are written against.
const InstallCommand = "go install github.com/nsmithuk/local-kms@v0.0.0-20260228092603-2a5e92d09ab6"

// Region and AccountID are local-kms's: its keys' ARNs carry them.
const (
	Region    = "eu-west-2"
	AccountID = "111122223333"
)

const readyTimeout = 30 * time.Second

// Credentials are dummy static credentials: local-kms checks none, and the
// SDK must not look for real ones (environment, files, IMDS) in a test.
func Credentials() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider("AKIDLOCALKMSTEST", "local-kms-test-secret", "")
}

// Server is a running local-kms.
type Server struct {
	// URL is its endpoint, http://127.0.0.1:<port>.
	URL string
	// Binary is the path of the local-kms that runs.
	Binary string

	dir    string
	port   int
	client *kms.Client

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	runs    int
	logPath string
	stopped bool
}

// Binary returns local-kms's path: $LEDGERQ_TEST_LOCAL_KMS, else local-kms
// on PATH; without one t is skipped, or fails when CI is true.
func Binary(t testing.TB) string {
	t.Helper()
	return testnode.Binary(t, "localkmstest", "local-kms", EnvBinary, InstallCommand)
}

// Start runs local-kms for t and returns once it answers. It is killed
// when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	port, err := testnode.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Binary: bin, dir: dir, port: port}
	s.client = kms.New(kms.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.URL),
		Credentials:  Credentials(),
		Retryer:      aws.NopRetryer{},
	})
	t.Cleanup(s.Stop)
	s.run(t)
	return s
}

// Client is a KMS client of the server, for a test's own calls (creating
// keys).
func (s *Server) Client() *kms.Client { return s.client }

// run starts a local-kms process on the server's port and data directory
// and waits until it answers.
func (s *Server) run(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	s.runs++
	logPath := filepath.Join(s.dir, fmt.Sprintf("local-kms-%d.log", s.runs))
	s.mu.Unlock()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(s.Binary)
	cmd.Env = append(os.Environ(),
		"PORT="+strconv.Itoa(s.port),
		"KMS_REGION="+Region,
		"KMS_ACCOUNT_ID="+AccountID,
		"KMS_DATA_PATH="+filepath.Join(s.dir, "data"),
		"KMS_SEED_PATH="+filepath.Join(s.dir, "no-seed.yaml"),
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = testnode.SysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("localkmstest: running %s: %v", s.Binary, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.logPath = cmd, exited, logPath
	s.mu.Unlock()
	began := time.Now()
	_, ok, err := testnode.Poll(func(ctx context.Context) (*kms.ListKeysOutput, error) {
		select {
		case <-exited:
			return nil, fmt.Errorf("local-kms exited (%v)", cmd.ProcessState)
		default:
		}
		return s.client.ListKeys(ctx, &kms.ListKeysInput{})
	}, func(_ *kms.ListKeysOutput, err error) bool {
		select {
		case <-exited:
			return true // no use waiting
		default:
			return err == nil
		}
	}, 50*time.Millisecond, time.Second, readyTimeout)
	if !ok || err != nil {
		s.kill()
		t.Fatalf("localkmstest: local-kms at %s did not answer within %s: %v; last lines of %s:\n%s", s.URL, readyTimeout, err, logPath, testnode.LogTail(logPath, 25))
	}
	t.Logf("localkmstest: local-kms answers at %s for %s after %s (binary %s, pid %d, log %s)", s.URL, t.Name(), time.Since(began).Round(time.Millisecond), s.Binary, cmd.Process.Pid, logPath)
}

// Kill SIGKILLs local-kms and waits until it is gone: calls to URL fail
// until Restart.
func (s *Server) Kill() { s.kill() }

func (s *Server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd != nil {
		testnode.Kill(cmd.Process, exited, "localkmstest: local-kms")
	}
}

// Restart starts local-kms again after Kill, on the same port and data
// directory: URL and the keys stay valid.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	exited, stopped := s.exited, s.stopped
	s.mu.Unlock()
	if stopped {
		t.Fatal("localkmstest: Restart: the server was stopped")
	}
	select {
	case <-exited:
	default:
		t.Fatal("localkmstest: Restart: local-kms is running; Kill it first")
	}
	s.run(t)
}

// Stop kills local-kms for good; safe to call twice.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.kill()
}

// CreateKey makes a signing key of spec (kmstypes.KeySpecEccSecgP256k1 for
// a wallet) through the KMS API and returns its id.
func (s *Server) CreateKey(t testing.TB, spec kmstypes.KeySpec) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := s.client.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: spec, KeyUsage: kmstypes.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatalf("localkmstest: CreateKey %s: %v", spec, err)
	}
	return aws.ToString(out.KeyMetadata.KeyId)
}
