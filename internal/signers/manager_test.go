package signers_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/signers"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// process is one serve process's view of the wallets: its registry and
// manager, woken by its own listener.
type process struct {
	reg *keystore.Registry
	m   *signers.Manager
}

func startProcess(t *testing.T, db *testdb.DB, cfg signers.Config, configured map[string]signers.Decl, interval time.Duration) *process {
	t.Helper()
	reg, err := keystore.NewRegistry()
	require.NoError(t, err)
	l := notify.NewListener(db.URL, slog.New(slog.DiscardHandler))
	wake := l.Subscribe(notify.Wallets)
	require.NoError(t, l.Start(t.Context()))
	<-l.Connected()
	t.Cleanup(l.Stop)
	m, err := signers.NewManager(signers.ManagerConfig{
		Store: db.Store, Opener: signers.NewOpener(cfg, keystore.PassphraseFiles{}, nil), Registry: reg,
		Chains: []signers.Chain{{Name: "main", ID: 1337}}, Configured: configured, Interval: interval, Wake: wake,
	})
	require.NoError(t, err)
	require.NoError(t, m.Sync(t.Context()))
	require.NoError(t, m.Start(t.Context()))
	t.Cleanup(m.Stop)
	return &process{reg: reg, m: m}
}

// A wallet added at run time in one process is in every process within
// seconds, by NOTIFY (the poll here is an hour, so only the notification
// can bring it); disabling and removing it follow the same way.
func TestManager_AWalletAddedInOneProcessReachesEveryProcessWithinSeconds(t *testing.T) {
	db := testdb.New(t)
	dir := t.TempDir()
	addr, path, err := keystore.NewKeystore(dir, "pw", keystore.LightScrypt)
	require.NoError(t, err)
	t.Setenv(keystore.PassphraseEnvAll, "pw")
	cfg := signers.Config{KeystoreDir: dir}
	a := startProcess(t, db, cfg, map[string]signers.Decl{"cfg": {Name: "cfg", Backend: "keystore", Key: "/etc/x.json"}}, time.Hour)
	b := startProcess(t, db, cfg, nil, time.Hour)
	ctx := t.Context()
	audit := &store.AuditEntry{KeyName: "ops"}

	e, err := a.m.Add(ctx, signers.Decl{Name: "hot", Backend: "keystore", Key: filepath.Base(path)}, false, audit)
	require.NoError(t, err)
	require.Equal(t, common.Address(addr).Hex(), e.Address, "the address is derived from the key")
	require.Equal(t, "main", e.Chain, "the only chain")
	require.True(t, e.Loaded)
	w, ok := a.reg.ByID("hot")
	require.True(t, ok, "in the adding process at once")
	require.True(t, w.Declared)

	require.Eventually(t, func() bool { _, ok := b.reg.ByID("hot"); return ok }, 10*time.Second, 20*time.Millisecond, "the other process opens it")

	_, err = a.m.SetDisabled(ctx, "hot", true, audit)
	require.NoError(t, err)
	require.Eventually(t, func() bool { w, _ := b.reg.ByID("hot"); return w.Disabled }, 10*time.Second, 20*time.Millisecond)

	require.NoError(t, a.m.Remove(ctx, "hot", audit))
	_, ok = a.reg.ByID("hot")
	require.False(t, ok)
	require.Eventually(t, func() bool { _, ok := b.reg.ByID("hot"); return !ok }, 10*time.Second, 20*time.Millisecond)

	_, err = a.m.Add(ctx, signers.Decl{Name: "cfg", Backend: "keystore", Key: filepath.Base(path)}, false, audit)
	require.ErrorIs(t, err, signers.ErrConfigured)
	_, err = a.m.Add(ctx, signers.Decl{Name: "x", Chain: "other", Backend: "keystore", Key: filepath.Base(path)}, false, audit)
	require.ErrorIs(t, err, signers.ErrInvalid)
	_, err = a.m.Add(ctx, signers.Decl{Name: "x", Backend: "keystore", Key: filepath.Base(path), Address: common.HexToAddress("0x01")}, false, audit)
	var refused *signers.RefusedError
	require.ErrorAs(t, err, &refused, "a key of another address")
	_, err = a.m.Add(ctx, signers.Decl{Name: "x", Backend: "keystore", Key: filepath.Base(path)}, false, audit)
	require.NoError(t, err)
	_, err = a.m.Add(ctx, signers.Decl{Name: "y", Backend: "keystore", Key: filepath.Base(path)}, false, audit)
	require.ErrorIs(t, err, signers.ErrTaken, "one wallet per sender")
	list, err := db.Store.WalletsList(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1, "nothing refused was stored")
}

// A process that cannot open a wallet's key (its file is not in this
// process's directory) lists it with the reason and keeps the others; once
// the key is there, the next reading opens it.
func TestManager_AWalletAProcessCannotOpenIsListedWithWhyAndRetried(t *testing.T) {
	db := testdb.New(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	_, path, err := keystore.NewKeystore(dirA, "pw", keystore.LightScrypt)
	require.NoError(t, err)
	t.Setenv(keystore.PassphraseEnvAll, "pw")
	a := startProcess(t, db, signers.Config{KeystoreDir: dirA}, nil, time.Hour)
	b := startProcess(t, db, signers.Config{KeystoreDir: dirB}, nil, 100*time.Millisecond)
	_, err = a.m.Add(t.Context(), signers.Decl{Name: "hot", Backend: "keystore", Key: filepath.Base(path)}, false, nil)
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		e, err := b.m.Entry("hot")
		return err == nil && !e.Loaded && e.LoadError != ""
	}, 10*time.Second, 20*time.Millisecond)
	e, _ := b.m.Entry("hot")
	require.Contains(t, e.LoadError, "hot")
	_, ok := b.reg.ByID("hot")
	require.False(t, ok)

	require.NoError(t, copyFile(path, filepath.Join(dirB, filepath.Base(path))))
	require.Eventually(t, func() bool { _, ok := b.reg.ByID("hot"); return ok }, 10*time.Second, 20*time.Millisecond, "retried")
	e, _ = b.m.Entry("hot")
	require.True(t, e.Loaded)
	require.Empty(t, e.LoadError)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}
