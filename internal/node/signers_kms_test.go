package node_test

import (
	"context"
	"log/slog"
	"math/big"
	"strings"
	"testing"
	"time"

	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/signers"
	"github.com/ledgerq/ledgerq/internal/signers/awskms/localkmstest"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// A process whose declared KMS wallet's KMS is away when it starts
// starts anyway: the wallet takes tasks, which wait while its signer is
// unavailable (shown on the wallet), and are mined once the KMS is back.
func TestWalletSigners_AProcessStartsWhileAWalletsKMSIsAwayAndItsTasksWaitForIt(t *testing.T) {
	kms := localkmstest.Start(t)
	id := kms.CreateKey(t, kmstypes.KeySpecEccSecgP256k1)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDLOCALKMSTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local-kms-test-secret")
	sc := signers.Config{KMSRegion: localkmstest.Region, KMSEndpoint: kms.URL, ClefTimeout: 10 * time.Second}
	s, err := signers.NewOpener(sc, keystore.PassphraseFiles{}, nil).Open(t.Context(), signers.Decl{Name: "w", Backend: "awskms", Key: id})
	require.NoError(t, err)
	addr := common.Address(s.Address())
	chain := evmsim.New(evmsim.Config{ChainID: 1337, BlockPeriod: 100 * time.Millisecond,
		Alloc: map[common.Address]*big.Int{addr: new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e18))}})
	kms.Kill()

	db := testdb.New(t)
	cfg := node.Defaults()
	cfg.DatabaseURL = db.URL
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Loops.PollInterval = 100 * time.Millisecond
	cfg.Wallet.Chains = wallet.Chains{{Name: "main", ChainID: 1337, Instance: chain}}
	cfg.Wallet.Lane.FollowInterval = 100 * time.Millisecond
	cfg.Wallet.Signers = sc
	cfg.Wallet.Signers.Wallets = signers.Decls{{Name: "w", Backend: "awskms", Key: id, Address: addr}}
	cfg.API.TaskMaxWait = 0
	n, srv := openServed(t, t.Context(), cfg)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	_, key, err := n.Store().APIKeyCreate(t.Context(), store.APIKeyCreateParams{Now: time.Now(), Name: "ops", Scopes: []store.Scope{store.ScopeAdmin}})
	require.NoError(t, err)
	w := &walletAPI{t: t, url: srv.URL, key: key}

	task := w.taskAnswer(202, "POST", "/v1/wallets/w/send-tx?task=true", `{"to":"0x000000000000000000000000000000000000bEEF","value":"7"}`)
	require.Eventually(t, func() bool {
		_, info := w.do("GET", "/v1/wallets/w", "")
		return containsAll(info, `"status":"signer_unavailable"`, `"backend":"awskms","state":"unavailable"`)
	}, 20*time.Second, 50*time.Millisecond, "the wallet says its signer is unavailable")
	_, list := w.do("GET", "/v1/wallets", "")
	require.Contains(t, list, `"loaded":false,"load_error":`, "and the listing why it is not open")
	require.Equal(t, "waiting", w.taskAnswer(200, "GET", "/v1/wallets/w/tasks/"+task.ID, "").Status, "its task waits")

	kms.Restart(t)
	require.Eventually(t, func() bool {
		return w.taskAnswer(200, "GET", "/v1/wallets/w/tasks/"+task.ID, "").Status == "done"
	}, 60*time.Second, 100*time.Millisecond, "mined once the KMS is back")
	_, info := w.do("GET", "/v1/wallets/w", "")
	require.Contains(t, info, `"backend":"awskms","state":"ok"`)
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
