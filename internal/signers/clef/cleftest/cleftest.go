// Package cleftest runs clef, go-ethereum's remote signer, for a test, set
// up as an operator sets it up to sign unattended: in a directory of the
// test's own, a master seed (clef init), a fresh account (clef newaccount),
// its password stored in clef's encrypted credential store (clef setpw),
// and a rules file (Rules) whose sha256 is attested (clef attest), so that
// clef, started with --rules, answers every request itself. clef's prompts
// read lines from stdin when it is not a terminal; each command is given
// its passwords that way (Setup lists the exact commands).
//
// The server is killed when the test ends, and can be killed and restarted
// on the same port and directory (its account kept) for a test of an
// unreachable signer. Without the binary a test is skipped, or fails when
// CI is true.
package cleftest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ledgerq/ledgerq/internal/testnode"
)

// EnvBinary names the environment variable holding clef's path.
const EnvBinary = "LEDGERQ_TEST_CLEF"

// InstallCommand installs the clef the tests are written against.
const InstallCommand = "go install github.com/ethereum/go-ethereum/cmd/clef@v1.16.7"

// The test passwords: the master seed's (at least 10 characters, clef's
// rule) and the account's keystore file's.
const (
	MasterPassword  = "cleftest-master-password"
	AccountPassword = "cleftest-account-password"
)

// DeniedRecipient is the one recipient Rules rejects a transaction to: a
// test sends to it to see clef refuse ("request denied").
var DeniedRecipient = common.HexToAddress("0x000000000000000000000000000000000000dEaD")

// Rules is the rules file the test clef runs: it approves the listing of
// accounts and every transaction except one to DeniedRecipient. Functions
// it leaves out fall to clef's command-line UI, which would wait on stdin.
const Rules = `// cleftest's rules: approve listing the accounts and signing any
// transaction, except one to 0x...dEaD (a test of a refusal).
function ApproveListing(req) { return "Approve" }
function ApproveTx(req) {
	var to = req.transaction.to
	if (to && to.toLowerCase() == "0x000000000000000000000000000000000000dead") { return "Reject" }
	return "Approve"
}
function OnSignerStartup(info) {}
function OnApprovedTx(tx) {}
`

const (
	readyTimeout = 60 * time.Second // clef loads its 4byte database first: seconds on a busy machine
	cmdTimeout   = 60 * time.Second
	portAttempts = 3
)

// Server is a running clef with one account.
type Server struct {
	// URL is its HTTP endpoint, http://127.0.0.1:<port>.
	URL string
	// Address is its account.
	Address common.Address
	// ChainID is the chain it signs for (--chainid).
	ChainID *big.Int
	// Binary is the path of the clef that runs.
	Binary string

	dir  string
	port int

	mu      sync.Mutex
	cmd     *exec.Cmd
	stdin   io.Closer
	exited  chan struct{}
	runs    int
	logPath string
	stopped bool
}

// Binary returns clef's path: $LEDGERQ_TEST_CLEF, else clef on PATH;
// without one t is skipped, or fails when CI is true.
func Binary(t testing.TB) string {
	t.Helper()
	return testnode.Binary(t, "cleftest", "clef", EnvBinary, InstallCommand)
}

// Start sets clef up in a directory of t's own (Setup), runs it signing
// for chainID and returns once it answers. It is killed when t ends.
func Start(t testing.TB, chainID *big.Int) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	s := &Server{Binary: bin, dir: dir, ChainID: new(big.Int).Set(chainID)}
	s.Address = Setup(t, bin, dir)
	t.Cleanup(s.Stop)
	var err error
	for attempt := 1; attempt <= portAttempts; attempt++ {
		if s.port, err = testnode.FreePort(); err != nil {
			t.Fatal(err)
		}
		s.URL = fmt.Sprintf("http://127.0.0.1:%d", s.port)
		if err = s.run(t); err == nil {
			return s
		}
		t.Logf("cleftest: attempt %d: %v", attempt, err)
	}
	t.Fatalf("cleftest: clef did not start: %v", err)
	return nil
}

// Setup makes what clef needs to sign unattended in dir, with bin, and
// returns the account's address. The commands, run in dir with their
// passwords on stdin, one a line:
//
//	clef --suppress-bootwarn --lightkdf --configdir config init        (master password, twice)
//	clef --suppress-bootwarn --lightkdf --keystore keystore newaccount (account password)
//	clef --suppress-bootwarn --configdir config setpw ADDRESS           (account password twice, master password)
//	clef --suppress-bootwarn --configdir config attest SHA256(rules.js) (master password)
//
// --lightkdf makes the master seed and the key files quick to open (test
// passwords protect nothing); an operator leaves it out.
func Setup(t testing.TB, bin, dir string) common.Address {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "rules.js"), []byte(Rules), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(Rules))
	runClef(t, bin, dir, lines(MasterPassword, MasterPassword), "--suppress-bootwarn", "--lightkdf", "--configdir", "config", "init")
	runClef(t, bin, dir, lines(AccountPassword), "--suppress-bootwarn", "--lightkdf", "--keystore", "keystore", "newaccount")
	addr := keystoreAddress(t, filepath.Join(dir, "keystore"))
	runClef(t, bin, dir, lines(AccountPassword, AccountPassword, MasterPassword), "--suppress-bootwarn", "--configdir", "config", "setpw", addr.Hex())
	runClef(t, bin, dir, lines(MasterPassword), "--suppress-bootwarn", "--configdir", "config", "attest", hex.EncodeToString(sum[:]))
	return addr
}

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// runClef runs one of clef's set-up commands in dir with stdin, and fails
// t with its output when it fails.
func runClef(t testing.TB, bin, dir, stdin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cleftest: clef %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// keystoreAddress reads the address of the one key file in dir.
func keystoreAddress(t testing.TB, dir string) common.Address {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("cleftest: want one key file in %s: %d entries, %v", dir, len(entries), err)
	}
	b, err := os.ReadFile(filepath.Join(dir, entries[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	var key struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal(b, &key); err != nil || !common.IsHexAddress(key.Address) {
		t.Fatalf("cleftest: reading the address of %s: %q, %v", entries[0].Name(), key.Address, err)
	}
	return common.HexToAddress(key.Address)
}

// Args are the arguments clef runs with: unattended (the attested rules, no
// boot warning), over HTTP on loopback only, no IPC socket and no USB
// wallets, its audit log and 4byte database in the directory. --advanced
// hands clef's warnings about a request to the rules instead of refusing
// it: without it clef refuses any call data it cannot match to an ABI it
// knows ("Transaction data is not valid ABI"), which a wallet's contract
// calls often are.
func (s *Server) Args() []string {
	return []string{
		"--suppress-bootwarn",
		"--configdir", "config",
		"--keystore", "keystore",
		"--chainid", s.ChainID.String(),
		"--rules", "rules.js",
		"--advanced",
		"--http", "--http.addr", "127.0.0.1", "--http.port", strconv.Itoa(s.port),
		"--ipcdisable", "--nousb",
		"--auditlog", "audit.log",
		"--4bytedb-custom", "4byte-custom.json",
	}
}

// run starts clef on the server's port and directory, gives it the master
// password on stdin (kept open: a prompt that the rules do not answer
// waits, and is never answered), and waits until it answers account_list.
func (s *Server) run(t testing.TB) error {
	t.Helper()
	s.mu.Lock()
	s.runs++
	logPath := filepath.Join(s.dir, fmt.Sprintf("clef-%d.log", s.runs))
	s.mu.Unlock()
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(s.Binary, s.Args()...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = testnode.SysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("running %s: %w", s.Binary, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.stdin, s.exited, s.logPath = cmd, stdin, exited, logPath
	s.mu.Unlock()
	if _, err := io.WriteString(stdin, lines(MasterPassword)); err != nil {
		s.kill()
		return fmt.Errorf("giving clef its master password: %w; last lines of %s:\n%s", err, logPath, testnode.LogTail(logPath, 25))
	}
	began := time.Now()
	client, err := rpc.Dial(s.URL)
	if err != nil {
		s.kill()
		return err
	}
	defer client.Close()
	var accounts []common.Address
	_, ok, err := testnode.Poll(func(ctx context.Context) ([]common.Address, error) {
		select {
		case <-exited:
			return nil, fmt.Errorf("clef exited (%v)", cmd.ProcessState)
		default:
		}
		err := client.CallContext(ctx, &accounts, "account_list")
		return accounts, err
	}, func(_ []common.Address, err error) bool {
		select {
		case <-exited:
			return true // no use waiting
		default:
			return err == nil
		}
	}, 50*time.Millisecond, time.Second, readyTimeout)
	if !ok || err != nil {
		s.kill()
		return fmt.Errorf("clef at %s did not answer within %s: %v; last lines of %s:\n%s", s.URL, readyTimeout, err, logPath, testnode.LogTail(logPath, 25))
	}
	if len(accounts) != 1 || accounts[0] != s.Address {
		s.kill()
		return fmt.Errorf("clef at %s lists %v, not its one account %s", s.URL, accounts, s.Address.Hex())
	}
	t.Logf("cleftest: clef answers at %s for %s after %s (binary %s, pid %d, account %s, log %s)", s.URL, t.Name(), time.Since(began).Round(time.Millisecond), s.Binary, cmd.Process.Pid, s.Address.Hex(), logPath)
	return nil
}

// Kill SIGKILLs clef and waits until it is gone: calls to URL fail until
// Restart.
func (s *Server) Kill() { s.kill() }

func (s *Server) kill() {
	s.mu.Lock()
	cmd, stdin, exited := s.cmd, s.stdin, s.exited
	s.mu.Unlock()
	if cmd != nil {
		testnode.Kill(cmd.Process, exited, "cleftest: clef")
		_ = stdin.Close()
	}
}

// Restart starts clef again after Kill, on the same port and directory:
// URL and the account stay valid.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	exited, stopped := s.exited, s.stopped
	s.mu.Unlock()
	if stopped {
		t.Fatal("cleftest: Restart: the server was stopped")
	}
	select {
	case <-exited:
	default:
		t.Fatal("cleftest: Restart: clef is running; Kill it first")
	}
	if err := s.run(t); err != nil {
		t.Fatalf("cleftest: Restart: %v", err)
	}
}

// Stop kills clef for good; safe to call twice.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.kill()
}

// LogPath is the log of the clef process running now, or the last one.
func (s *Server) LogPath() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logPath
}
