package store_test

import (
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
)

func runtimeWallet(name string) store.WalletDecl {
	return store.WalletDecl{Name: name, Chain: "main", ChainID: taskChain, Address: taskSender, Backend: "pkcs11", KeyRef: "hot-1", CreatedBy: "ops"}
}

// A wallet added at run time is a row that references its key, audited;
// a name or a sender taken is refused, and disabling is recorded once.
func TestWallets_AddDisableAndRemoveAreStoredAndAudited(t *testing.T) {
	t.Parallel()
	st, clk, _ := txRows(t)
	ctx := t.Context()
	audit := &store.AuditEntry{KeyName: "ops", Via: "api"}

	added, err := st.WalletsAdd(ctx, runtimeWallet("hot"), clk.Now(), audit)
	require.NoError(t, err)
	require.Equal(t, "hot", added.Name)
	require.Equal(t, taskSender, added.Address, "stored lower-case")
	require.False(t, added.Disabled)

	_, err = st.WalletsAdd(ctx, runtimeWallet("hot"), clk.Now(), audit)
	require.ErrorIs(t, err, store.ErrWalletTaken, "the same name")
	_, err = st.WalletsAdd(ctx, runtimeWallet("other"), clk.Now(), audit)
	require.ErrorIs(t, err, store.ErrWalletTaken, "the same chain and address")

	d, changed, err := st.WalletsSetDisabled(ctx, "hot", true, clk.Now(), audit)
	require.NoError(t, err)
	require.True(t, changed)
	require.True(t, d.Disabled)
	_, changed, err = st.WalletsSetDisabled(ctx, "hot", true, clk.Now(), audit)
	require.NoError(t, err)
	require.False(t, changed, "disabling a disabled wallet changes nothing")
	_, _, err = st.WalletsSetDisabled(ctx, "nope", true, clk.Now(), audit)
	require.ErrorIs(t, err, store.ErrNotFound)

	// Its policy set through the API goes with it: a wallet added again
	// under its name starts unrestricted, not with a policy it never had.
	_, err = st.WalletPolicyPut(ctx, store.WalletPolicyPutParams{Now: clk.Now(), Wallet: "hot", Policy: store.WalletPolicy{MaxValuePerTx: big.NewInt(1)}, Audit: audit})
	require.NoError(t, err)
	require.NoError(t, st.WalletsRemove(ctx, "hot", clk.Now(), audit))
	require.ErrorIs(t, st.WalletsRemove(ctx, "hot", clk.Now(), audit), store.ErrNotFound)
	_, err = st.WalletPolicyGet(ctx, "hot")
	require.ErrorIs(t, err, store.ErrNotFound, "the removed wallet's policy")
	list, err := st.WalletsList(ctx)
	require.NoError(t, err)
	require.Empty(t, list)

	records, err := st.AuditList(ctx, 0, 10)
	require.NoError(t, err)
	var actions []string
	for _, r := range records {
		require.Contains(t, []string{"wallet/hot", "wallet/hot/policy"}, r.Target)
		require.Equal(t, "ops", r.KeyName)
		actions = append(actions, r.Action)
	}
	require.Equal(t, []string{"wallet.remove", "policy.put", "wallet.disable", "wallet.add"}, actions, "newest first, one row per change")
}

// A wallet whose tasks have not ended cannot be removed, only disabled; a
// disabled wallet takes no new task but answers a replay of one it took.
func TestWallets_AWalletWithTasksInFlightCannotBeRemovedOnlyDisabled(t *testing.T) {
	t.Parallel()
	st, clk, _ := txRows(t)
	ctx := t.Context()
	_, err := st.WalletsAdd(ctx, runtimeWallet("main"), clk.Now(), nil)
	require.NoError(t, err)

	p := newTask(clk.Now(), 0, "k1")
	p.Declared = true
	task := insertTask(t, st, p)

	err = st.WalletsRemove(ctx, "main", clk.Now(), nil)
	require.ErrorIs(t, err, store.ErrWalletBusy)

	_, _, err = st.WalletsSetDisabled(ctx, "main", true, clk.Now(), nil)
	require.NoError(t, err)
	again, created, err := st.TaskInsert(ctx, p)
	require.NoError(t, err, "a replay is answered with the task it stored")
	require.False(t, created)
	require.Equal(t, task.ID, again.ID)
	_, _, err = st.TaskInsert(ctx, newTask(clk.Now(), 0, "k2"))
	require.NoError(t, err, "a wallet the process does not mark as added at run time is not checked")
	q := newTask(clk.Now(), 0, "k3")
	q.Declared = true
	_, _, err = st.TaskInsert(ctx, q)
	require.ErrorIs(t, err, store.ErrWalletDisabled)

	tasks, err := st.TaskList(ctx, store.TaskListParams{Wallet: "main", Limit: 10})
	require.NoError(t, err)
	for _, tk := range tasks {
		if !tk.Status.Terminal() {
			_, _, err := st.TaskCancel(ctx, store.TaskCancelParams{Now: clk.Now(), Wallet: "main", ID: tk.ID})
			require.NoError(t, err)
		}
	}
	require.NoError(t, st.WalletsRemove(ctx, "main", clk.Now(), nil), "every task has ended")
	_, _, err = st.TaskInsert(ctx, q)
	require.ErrorIs(t, err, store.ErrWalletGone)
}

// A removal and a task's insert of the same wallet never both succeed with
// the task left behind: the insert holds the wallet's row, the removal
// locks it and then counts the tasks.
func TestWallets_ARemovalRacingATaskInsertNeverLeavesATaskOfARemovedWallet(t *testing.T) {
	t.Parallel()
	db, clk, _ := committedRows(t)
	st := db.Store
	ctx := t.Context()
	for round := range 20 {
		_, err := st.WalletsAdd(ctx, runtimeWallet("main"), clk.Now(), nil)
		require.NoError(t, err)
		p := newTask(clk.Now(), 0, "")
		p.Declared = true
		var (
			wg                sync.WaitGroup
			insErr, removeErr error
			task              store.Task
		)
		wg.Go(func() { task, _, insErr = st.TaskInsert(ctx, p) })
		wg.Go(func() { removeErr = st.WalletsRemove(ctx, "main", clk.Now(), nil) })
		wg.Wait()
		switch {
		case insErr == nil && removeErr == nil:
			t.Fatalf("round %d: task %s stored and its wallet removed", round, task.ID)
		case insErr == nil:
			require.ErrorIs(t, removeErr, store.ErrWalletBusy, "round %d", round)
			_, _, err := st.TaskCancel(ctx, store.TaskCancelParams{Now: clk.Now(), Wallet: "main", ID: task.ID})
			require.NoError(t, err)
			require.NoError(t, st.WalletsRemove(ctx, "main", clk.Now(), nil))
		default:
			require.ErrorIs(t, insErr, store.ErrWalletGone, "round %d", round)
			require.NoError(t, removeErr)
		}
		clk.Advance(time.Second)
	}
}

// The wallet directory holds the configuration's wallets as the last
// serve wrote them and the runtime wallets as the wallets table has them.
func TestWalletDirectory_HoldsTheConfigurationsWalletsAndFollowsTheWalletsTable(t *testing.T) {
	t.Parallel()
	st, clk, _ := txRows(t)
	ctx := t.Context()
	a := store.DirectoryWallet{Wallet: "a", ChainID: 1, Sender: "0x00000000000000000000000000000000000000AA"}
	b := store.DirectoryWallet{Wallet: "b", ChainID: 2, Sender: "0x00000000000000000000000000000000000000bb"}
	require.NoError(t, st.WalletDirectorySyncConfig(ctx, clk.Now(), []store.DirectoryWallet{b, a}))
	_, err := st.WalletsAdd(ctx, runtimeWallet("hot"), clk.Now(), &store.AuditEntry{KeyName: "ops", Via: "api"})
	require.NoError(t, err)
	dir, err := st.WalletDirectoryList(ctx)
	require.NoError(t, err)
	require.Equal(t, []store.DirectoryWallet{
		{Wallet: "a", ChainID: 1, Sender: "0x00000000000000000000000000000000000000aa", Source: "config"},
		{Wallet: "b", ChainID: 2, Sender: b.Sender, Source: "config"},
		{Wallet: "hot", ChainID: taskChain, Sender: taskSender, Source: "runtime"},
	}, dir)

	// The next start declares b alone: a goes, the runtime wallet stays.
	require.NoError(t, st.WalletDirectorySyncConfig(ctx, clk.Now(), []store.DirectoryWallet{b}))
	_, _, err = st.WalletsSetDisabled(ctx, "hot", true, clk.Now(), &store.AuditEntry{KeyName: "ops", Via: "api"})
	require.NoError(t, err)
	dir, err = st.WalletDirectoryList(ctx)
	require.NoError(t, err)
	require.Equal(t, []store.DirectoryWallet{
		{Wallet: "b", ChainID: 2, Sender: b.Sender, Source: "config"},
		{Wallet: "hot", ChainID: taskChain, Sender: taskSender, Source: "runtime", Disabled: true},
	}, dir)
	require.NoError(t, st.WalletsRemove(ctx, "hot", clk.Now(), &store.AuditEntry{KeyName: "ops", Via: "api"}))
	dir, err = st.WalletDirectoryList(ctx)
	require.NoError(t, err)
	require.Equal(t, []store.DirectoryWallet{{Wallet: "b", ChainID: 2, Sender: b.Sender, Source: "config"}}, dir)
}
