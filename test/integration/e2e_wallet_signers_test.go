//go:build cgo

package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/signers/awskms"
	"github.com/ledgerq/ledgerq/internal/signers/awskms/localkmstest"
	"github.com/ledgerq/ledgerq/internal/signers/clef/cleftest"
	"github.com/ledgerq/ledgerq/internal/signers/pkcs11"
	"github.com/ledgerq/ledgerq/internal/signers/pkcs11/softhsmtest"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testgeth"
)

// TestE2E_WalletsWhoseKeysAreInAnHSMAKMSAndClefSendEveryTaskOnceThroughKills
// is the wallet lane's chain-side check with keys that never enter ledgerq:
// on a real geth --dev, a keystore wallet beside one whose key is in
// SoftHSM2 (made with pkcs11-tool, the PIN from a file), one whose key is in
// local-kms (made through the KMS API) and one signed for by clef, all
// declared with --wallet-signer; and a second KMS key added as a wallet at
// run time through POST /v1/wallets on one serve process and used through
// the other within seconds. Tasks stream in while the serve processes are
// SIGKILLed at random moments and restarted, and local-kms and clef are
// each killed for a few seconds: their wallets wait, then finish. The
// verdict reads every block: each task mined exactly once, nonces
// contiguous, nothing sent twice; and no signature request is left pinned
// in ledgerq.wallet_sign_requests.
//
// SoftHSM2's configuration is the test's environment (softhsmtest), so the
// test does not run in parallel. LEDGERQ_E2E_WALLET_TASKS sets the tasks
// per wallet (default 20); LEDGERQ_E2E_FAULT_SEED the random choices.
func TestE2E_WalletsWhoseKeysAreInAnHSMAKMSAndClefSendEveryTaskOnceThroughKills(t *testing.T) {
	perWallet := 20
	if s := os.Getenv("LEDGERQ_E2E_WALLET_TASKS"); s != "" {
		var err error
		perWallet, err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("LEDGERQ_E2E_FAULT_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
	}
	rnd := rand.New(rand.NewPCG(uint64(seed), 40))
	t.Logf("seed %d (LEDGERQ_E2E_FAULT_SEED), %d tasks per wallet", seed, perWallet)

	s := setupSigners(t)
	c := s.chainRun(t)
	c.createKey()
	c.token = createKey(t, c.db, "admin") // the run also posts to the wallet it adds

	c.startServes(2)
	// A quarter of the tasks, with a serve killed.
	quarter := perWallet / 4
	c.postEach(quarter)
	time.Sleep(time.Duration(200+rnd.IntN(1500)) * time.Millisecond) // the kill lands at a random moment: the chaos is the point
	c.killAServe(rnd)

	// A wallet added at run time on one process is used through the other.
	added := s.kms.CreateKey(t, kmstypes.KeySpecEccSecgP256k1)
	addedAddr := kmsAddress(t, s.kms, added)
	c.adoptWallet("kms-added", s.node, addedAddr)
	c.mu.Lock()
	onA, onB := c.apis[0], c.apis[1]
	c.mu.Unlock()
	res := postJSON(t, onA+"/v1/wallets", fmt.Appendf(nil, `{"name":"kms-added","backend":"awskms","key":%q,"address":%q}`, added, addedAddr.Hex()), c.token)
	require.Equal(t, http.StatusCreated, res.StatusCode, res.Body)
	began := time.Now()
	eventually(t, 15*time.Second, "the other serve process to load the wallet added at run time", func() bool {
		return walletLoaded(t, onB, c.token, "kms-added")
	})
	t.Logf("the other serve process loaded the wallet added at run time after %s", time.Since(began).Round(time.Millisecond))
	res = getJSON(t, onB+"/v1/wallets/kms-added", c.token)
	require.Equal(t, http.StatusOK, res.StatusCode, res.Body)
	w := len(c.wallets) - 1
	for range quarter {
		c.postVia(w, 1)
	}

	// Tasks stream in with serves killed; local-kms and clef are each down
	// for a few seconds.
	for round := range 3 {
		c.postEach(quarter / 2)
		switch round {
		case 0:
			s.kms.Kill()
			c.postEach(2)
			time.Sleep(4 * time.Second) // local-kms stays down this long: the outage is the point
			requireWaiting(t, c, 2, "kms", "kms-added")
			s.kms.Restart(t)
			t.Log("local-kms down for 4 s")
		case 1:
			s.clef.Kill()
			c.postEach(2)
			time.Sleep(4 * time.Second) // clef stays down this long: the outage is the point
			requireWaiting(t, c, 2, "clef")
			s.clef.Restart(t)
			t.Log("clef down for 4 s")
		}
		time.Sleep(time.Duration(200+rnd.IntN(1500)) * time.Millisecond) // the kill lands at a random moment: the chaos is the point
		c.killAServe(rnd)
	}
	if rest := perWallet - quarter - 3*(quarter/2) - 4; rest > 0 {
		c.postEach(rest)
	}
	c.awaitEnded(3 * time.Minute)

	// Every wallet still sends.
	c.postEach(1)
	c.awaitEnded(time.Minute)
	c.stopServes()
	c.faults = "local-kms and clef each down for 4 s"
	c.checkBlocks()
	require.Zero(t, signRequests(t, c.db), "signature requests left pinned in ledgerq.wallet_sign_requests")
}

// signersRun is a geth --dev with a key in each signer backend: a SoftHSM2
// token's, a local-kms's and a clef's.
type signersRun struct {
	geth *testgeth.Node
	node *testNode
	tok  *softhsmtest.Token
	kms  *localkmstest.Server
	clef *cleftest.Server

	hsmLabel, kmsKey string
	hsmAddr, kmsAddr common.Address
	awsAccessKey     string
	awsSecretKey     string
	// passphrase locks the keystore wallet's file, keyfile
	// (chainRunPassphrase unless the test sets another).
	passphrase string
	keyfile    string
}

// setupSigners starts geth, a SoftHSM2 token with a secp256k1 key made by
// pkcs11-tool, local-kms with a secp256k1 key made through the KMS API,
// and clef with one account, signing for geth's chain.
func setupSigners(t *testing.T) *signersRun {
	t.Helper()
	g := testgeth.Start(t)
	s := &signersRun{geth: g, node: gethNode(g), hsmLabel: "wallet-hsm",
		awsAccessKey: "AKIDLEDGERQE2E", awsSecretKey: "local-kms-e2e-secret"}
	s.tok = softhsmtest.New(t, "ledgerq-e2e")
	s.tok.NewKey(t, "secp256k1", s.hsmLabel, []byte{0x01})
	s.kms = localkmstest.Start(t)
	s.kmsKey = s.kms.CreateKey(t, kmstypes.KeySpecEccSecgP256k1)
	s.clef = cleftest.Start(t, g.ChainID)
	s.hsmAddr = hsmAddress(t, s.tok, s.hsmLabel)
	s.kmsAddr = kmsAddress(t, s.kms, s.kmsKey)
	return s
}

// chainRun is a run on the geth with a keystore wallet ("keyfile") and one
// wallet per signer backend ("hsm", "kms", "clef"), declared with
// --wallet-signer; createKey is left to the test. Tasks go to a recipient
// clef's rules approve.
func (s *signersRun) chainRun(t *testing.T) *chainRun {
	t.Helper()
	c := newEmptyChainRun(t, "--wallet-ledger-url", s.geth.URL)
	c.to = "0x000000000000000000000000000000000000bEEF"
	addr, file, _ := newKeystoreWallet(t, c.dir, cmp.Or(s.passphrase, chainRunPassphrase))
	s.keyfile = file
	c.addWallet("keyfile", s.node, common.Address(addr), file)
	c.addSignerWallet("hsm", s.node, "pkcs11", s.hsmLabel, s.hsmAddr)
	c.addSignerWallet("kms", s.node, "awskms", s.kmsKey, s.kmsAddr)
	c.addSignerWallet("clef", s.node, "clef", "", s.clef.Address)
	pinFile := filepath.Join(c.dir, "pkcs11-pin")
	require.NoError(t, os.WriteFile(pinFile, []byte(s.tok.PIN+"\n"), 0o600))
	c.args = append(c.args,
		"--wallet-pkcs11-module", s.tok.Module, "--wallet-pkcs11-token", s.tok.Label, "--wallet-pkcs11-pin-file", pinFile,
		"--wallet-kms-region", localkmstest.Region, "--wallet-kms-endpoint", s.kms.URL,
		"--wallet-clef-url", s.clef.URL)
	c.env = append(c.env, "SOFTHSM2_CONF="+os.Getenv("SOFTHSM2_CONF"),
		"AWS_ACCESS_KEY_ID="+s.awsAccessKey, "AWS_SECRET_ACCESS_KEY="+s.awsSecretKey, "AWS_EC2_METADATA_DISABLED=true")
	return c
}

// hsmAddress is the address of the token's key labelled label.
func hsmAddress(t *testing.T, tok *softhsmtest.Token, label string) common.Address {
	t.Helper()
	s, err := pkcs11.Open(ctxT(t, 30*time.Second), pkcs11.Config{Module: tok.Module, Token: tok.Label, Label: label, PIN: tok.PIN})
	require.NoError(t, err)
	defer s.Close() // the test's own process must let go of the module
	return common.Address(s.Address())
}

// kmsAddress is the address of the KMS key key.
func kmsAddress(t *testing.T, srv *localkmstest.Server, key string) common.Address {
	t.Helper()
	s, err := awskms.Open(ctxT(t, 30*time.Second), awskms.Config{KeyID: key, Region: localkmstest.Region, Endpoint: srv.URL, Credentials: localkmstest.Credentials()})
	require.NoError(t, err)
	return common.Address(s.Address())
}

// requireWaiting checks that the last n tasks of each of the wallets have
// not ended: their signer is down, and they wait for it.
func requireWaiting(t *testing.T, c *chainRun, n int, wallets ...string) {
	t.Helper()
	st, err := store.OpenPool(ctxT(t, 10*time.Second), c.db, 0)
	require.NoError(t, err)
	defer st.Close()
	for _, name := range wallets {
		ids := c.ids[slices.Index(c.names, name)]
		for _, id := range ids[len(ids)-n:] {
			task, err := st.TaskGet(ctxT(t, 10*time.Second), name, id)
			require.NoError(t, err)
			require.False(t, task.Status.Terminal(), "task %s of %s ended (%s) while its signer was down", id, name, task.Status)
		}
	}
}

// walletLoaded reports whether the serve process at api lists the wallet
// name as loaded (its signer open) in GET /v1/wallets.
func walletLoaded(t *testing.T, api, token, name string) bool {
	t.Helper()
	res := getJSON(t, api+"/v1/wallets", token)
	require.Equal(t, http.StatusOK, res.StatusCode, res.Body)
	var out struct {
		Wallets []struct {
			Wallet string `json:"wallet"`
			Loaded bool   `json:"loaded"`
		} `json:"wallets"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Body), &out))
	for _, w := range out.Wallets {
		if w.Wallet == name {
			return w.Loaded
		}
	}
	return false
}

// signRequests counts the rows of ledgerq.wallet_sign_requests.
func signRequests(t *testing.T, db string) int {
	t.Helper()
	st, err := store.OpenPool(ctxT(t, 10*time.Second), db, 0)
	require.NoError(t, err)
	defer st.Close()
	var n int
	require.NoError(t, st.Conns().QueryRow(context.Background(), `SELECT count(*) FROM ledgerq.wallet_sign_requests`).Scan(&n))
	return n
}
