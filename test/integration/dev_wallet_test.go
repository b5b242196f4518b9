package integration

import (
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testproc"
)

// printedCommands returns the curl commands ledgerq dev printed, in order.
func printedCommands(t *testing.T, stdout string) []string {
	t.Helper()
	var cmds []string
	for _, line := range strings.Split(stdout, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "curl ") {
			cmds = append(cmds, l)
		}
	}
	return cmds
}

// shell runs a printed command as a user pastes it into a shell.
func shell(t *testing.T, command string) string {
	t.Helper()
	out, err := exec.Command("sh", "-c", command).CombinedOutput()
	require.NoError(t, err, "%s\n%s", command, out)
	return string(out)
}

// TestDev_PrintsADevWalletWhoseCurlSendsATransactionToDone runs the commands
// ledgerq dev prints, as a user would (curl, a client that is not ledgerq's):
// the waiting send answers with the task done and its hash, the fire-and-forget
// send's task reaches the Hathor status route's Done; after a restart the same
// wallet, key and chain go on (the next nonce is the chain's). The second
// chain's wallet sends too, and the chains route lists both chains.
func TestDev_PrintsADevWalletWhoseCurlSendsATransactionToDone(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	dev := newDevRun(t)
	start := func() *testproc.Proc {
		p := dev.start()
		eventually(t, 10*time.Second, "the dev wallet printed", func() bool { return len(printedCommands(t, p.Stdout.String())) == 5 })
		return p
	}
	done := regexp.MustCompile(`"status":"done","code":3,"tx_hash":"0x[0-9a-f]{64}"`)
	taskID := regexp.MustCompile(`"id":"([0-9a-f-]{36})"`)
	seedDone := regexp.MustCompile(`^\{"success":true,"code":3,"status":"Done","txId":"0x[0-9a-f]{64}"\}$`)

	for run := range 2 {
		p := start()
		cmds := printedCommands(t, p.Stdout.String())
		require.Regexp(t, done, shell(t, cmds[0]), "run %d: the waiting send answers with the task done", run+1)
		m := taskID.FindStringSubmatch(shell(t, cmds[1]))
		require.NotNil(t, m, "run %d: the fire-and-forget send answers with the task id", run+1)
		poll := strings.Replace(cmds[2], "TASK_ID", m[1], 1)
		eventually(t, 30*time.Second, "the Hathor status route says Done", func() bool {
			return seedDone.MatchString(strings.TrimSpace(shell(t, poll)))
		})
		chains := shell(t, cmds[3])
		require.Contains(t, chains, `"name":"dev","chain_id":1337`, "run %d: the chains route lists the first chain", run+1)
		require.Contains(t, chains, `"name":"dev-b","chain_id":31337`, "run %d: and the second", run+1)
		require.Regexp(t, done, shell(t, cmds[4]), "run %d: the second chain's wallet sends to done", run+1)
		p.Signal(t, syscall.SIGTERM)
		require.Equal(t, 0, p.Wait(t, time.Minute))
	}
}
