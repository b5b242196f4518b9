package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// chromiumPath returns the browser the console's tests drive: Debian's
// chromium (or another Chrome on PATH). Without one the test is skipped,
// except in CI (CI=true), which installs it: there a missing browser fails.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium on PATH: CI must run the console's browser tests (.ci/run installs Debian's chromium)")
	}
	t.Skip("no Chromium on PATH (apt-get install chromium): the console's browser tests need it")
	return ""
}

// screenshotDir is where the browser tests save their screenshots:
// $LEDGERQ_SCREENSHOTS_DIR (make screenshots sets docs/img), else a
// directory under the system's temporary directory, kept after the test.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LEDGERQ_SCREENSHOTS_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "ledgerq-console-screenshots")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("console screenshots in %s", dir)
	return dir
}

// newBrowser starts a headless Chromium at 1280×900 for the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
		cancelAlloc()
	})
	return ctx
}

// TestConsole_InABrowserAnOperatorFollowsEveryLaneAndActs drives the
// console of ledgerq dev in headless Chromium as an operator would: logs in
// with the admin key dev prints, watches the batch lane's count move while
// batches flow (without reloading), finds a batch by id, reads a task's
// attempts, pauses the wallet, cancels a task that waits behind the pause,
// resumes the wallet, and finds each action in the audit. It saves a
// screenshot of each page (the README's pictures: make screenshots).
func TestConsole_InABrowserAnOperatorFollowsEveryLaneAndActs(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	shots := screenshotDir(t)
	db := testdb.New(t)
	dev := newDevRun(t)
	addr := dev.addr
	p := dev.start("--database-url", db.URL)
	printed := regexp.MustCompile(`console at (http://\S+/ui/) \(log in with the admin key (lq_\S+)\)`)
	eventually(t, 10*time.Second, "dev prints the console", func() bool { return printed.MatchString(p.Stdout.String()) })
	m := printed.FindStringSubmatch(p.Stdout.String())
	consoleURL, key := m[1], m[2]
	base := "http://" + addr

	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name), png, 0o644))
	}
	text := func(css string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
		require.NoError(t, err)
		return strings.TrimSpace(s)
	}
	// onTheWalletPage clicks the wallet page's action button, confirms it
	// and waits for the element with id after.
	onTheWalletPage := func(button, after string) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Navigate(consoleURL+"wallets/dev"),
			chromedp.Click(chromedp.ID(button)),
			chromedp.WaitVisible(chromedp.ID("confirm")),
			chromedp.Click(chromedp.ID("confirm")),
			chromedp.WaitVisible(chromedp.ID(after)),
		))
	}

	// Log in: the console sends a browser without a session to its login page.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(consoleURL),
		chromedp.WaitVisible(chromedp.ID("key")),
	))
	shot("console-login.png")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("key"), key),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("lane-batch")),
		chromedp.WaitVisible(chromedp.ID("lane-builder")),
		chromedp.WaitVisible(chromedp.ID("lane-wallet")),
	))

	// Work flows: the committed count of the batch lane moves on the open
	// page, refreshed by its script.
	before := text("#count-batch-committed")
	var batchIDs []string
	for range 5 {
		id, body := signedBatchJSON(t, "console-e2e")
		res := postJSON(t, base+"/v1/batches", []byte("["+string(body)+"]"), key)
		require.Less(t, res.StatusCode, 300, res.Body)
		batchIDs = append(batchIDs, id)
	}
	eventually(t, time.Minute, "the overview's committed count to move without a reload", func() bool {
		n, err := strconv.Atoi(text("#count-batch-committed"))
		return err == nil && strconv.Itoa(n) != before && n >= 5
	})

	// The builder lane: a transaction through /rpc, cut into a bundle.
	chainID := regexp.MustCompile(`/rpc \(chain id (\d+)\)`).FindStringSubmatch(p.Stdout.String())
	require.NotNil(t, chainID, "dev prints the builder lane's chain id")
	sendDevPoolTx(t, base+"/rpc", chainID[1])

	// A wallet task, sent and mined: its page lists its attempts.
	res := postJSON(t, base+"/v1/wallets/dev/send-tx", []byte(`{"to":"0x000000000000000000000000000000000000dEaD","value":"1"}`), key)
	require.Equal(t, http.StatusOK, res.StatusCode, res.Body)
	doneTask := taskIDOf(t, res.Body)

	// Find a batch by its id from the search box.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("q"), batchIDs[0]),
		chromedp.Submit(chromedp.ID("q")),
		chromedp.WaitVisible(chromedp.ID("batch-state")),
	))
	require.Contains(t, text("h1"), batchIDs[0])
	require.Contains(t, text("#batch-state"), "committed")
	shot("console-batch.png")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(consoleURL+"wallets/dev/tasks/"+doneTask),
		chromedp.WaitVisible(chromedp.ID("attempts")),
	))
	require.Contains(t, text("#task-status"), "Done")
	require.Regexp(t, `0x[0-9a-f]{64}`, text("#attempts"))
	shot("console-task.png")

	// Pause the wallet, confirmed on its page.
	onTheWalletPage("hold", "paused")

	// A task sent now waits behind the pause; cancel it from its page.
	res = postJSON(t, base+"/v1/wallets/dev/send-tx?task=true", []byte(`{"to":"0x000000000000000000000000000000000000dEaD","value":"2"}`), key)
	require.Less(t, res.StatusCode, 300, res.Body)
	waiting := taskIDOf(t, res.Body)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(consoleURL+"wallets/dev"),
		chromedp.WaitVisible(chromedp.CSS(`a[data-task="`+waiting+`"]`)),
	))
	require.Regexp(t, `^keystore: ok since \d{4}-`, text("#signer"), "the wallet's signer signed its task")
	shot("console-wallet.png")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`a[data-task="`+waiting+`"]`)),
		chromedp.WaitVisible(chromedp.ID("cancel-task")),
		chromedp.Click(chromedp.ID("cancel-task")),
		chromedp.WaitVisible(chromedp.ID("confirm")),
	))
	shot("console-confirm.png")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("confirm")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	))
	require.Contains(t, text("#task-status"), "Error")
	require.Contains(t, text(".notice"), "The task was cancelled")

	// Resume the wallet.
	onTheWalletPage("release", "hold")

	// The audit has the three actions, by the dev key, newest first.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(consoleURL+"audit"),
		chromedp.WaitVisible(chromedp.ID("audit")),
	))
	audit := text("#audit")
	for _, want := range []string{"wallet.release", "task.cancel", "wallet/dev/task/" + waiting, "wallet.hold", "ledgerq dev"} {
		require.Contains(t, audit, want)
	}
	require.Less(t, strings.Index(audit, "wallet.release"), strings.Index(audit, "task.cancel"), "newest first")
	shot("console-audit.png")

	// The overview after the work: every lane, the charts, at 1280 px and
	// at 390 px.
	eventually(t, time.Minute, "the bundle to be finalized", func() bool {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(consoleURL)))
		return text("#count-bundle-finalized") != "0"
	})
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("svg.chart"))))
	shot("console-overview.png")
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), chromedp.Navigate(consoleURL)))
	width, err := chromedp.Run(ctx, chromedp.Evaluate[int]("document.documentElement.scrollWidth"))
	require.NoError(t, err)
	require.LessOrEqual(t, width, 390, "no sideways scrolling at 390 px")
	shot("console-overview-390.png")
}

// taskIDOf reads a send-tx answer's task id.
func taskIDOf(t *testing.T, body string) string {
	t.Helper()
	var got struct {
		ID   string `json:"id"`
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &got), body)
	id := got.ID
	if id == "" {
		id = got.Task.ID
	}
	require.NotEmpty(t, id, body)
	return id
}

// sendDevPoolTx sends 1 wei from the development mnemonic's first account
// through the builder lane's /rpc.
func sendDevPoolTx(t *testing.T, rpcURL, chain string) {
	t.Helper()
	cl, err := ethclient.Dial(rpcURL)
	require.NoError(t, err)
	defer cl.Close()
	id, ok := new(big.Int).SetString(chain, 10)
	require.True(t, ok)
	acct := jam.DevAccounts()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nonce, err := cl.PendingNonceAt(ctx, acct.Address)
	require.NoError(t, err)
	to := common.HexToAddress("0x000000000000000000000000000000000000dEaD")
	tx, err := types.SignNewTx(acct.Key, types.LatestSignerForChainID(id), &types.DynamicFeeTx{
		ChainID: id, Nonce: nonce, GasTipCap: big.NewInt(2e9), GasFeeCap: big.NewInt(100e9), Gas: 21_000, To: &to, Value: big.NewInt(1),
	})
	require.NoError(t, err)
	require.NoError(t, cl.SendTransaction(ctx, tx), fmt.Sprintf("sending %s", tx.Hash().Hex()))
}
