package signers_test

import (
	"math/big"
	"testing"

	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/signers"
	"github.com/ledgerq/ledgerq/internal/signers/awskms/localkmstest"
)

// A wallet whose KMS is away when it is opened is not refused: with its
// address declared it gets a signer that answers unavailable (its tasks
// wait) until the KMS is back, and then signs with the KMS's key. Without
// a declared address it cannot be trusted to be that wallet: refused.
func TestLazy_AWalletWhoseKMSIsAwayWhenOpenedWaitsAndSignsOnceItIsBack(t *testing.T) {
	kms := localkmstest.Start(t)
	id := kms.CreateKey(t, kmstypes.KeySpecEccSecgP256k1)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDLOCALKMSTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local-kms-test-secret")
	o := signers.NewOpener(signers.Config{KMSRegion: localkmstest.Region, KMSEndpoint: kms.URL}, keystore.PassphraseFiles{}, nil)
	ctx := t.Context()
	s, err := o.Open(ctx, signers.Decl{Name: "w", Backend: "awskms", Key: id})
	require.NoError(t, err)
	addr := common.Address(s.Address())

	kms.Kill()
	_, _, err = o.OpenOrWait(ctx, signers.Decl{Name: "w", Backend: "awskms", Key: id})
	var un *keystore.UnavailableError
	require.ErrorAs(t, err, &un, "no declared address: nothing to wait as")

	lazy, waiting, err := o.OpenOrWait(ctx, signers.Decl{Name: "w", Backend: "awskms", Key: id, Address: addr})
	require.NoError(t, err)
	require.True(t, waiting)
	require.Equal(t, addr, common.Address(lazy.Address()))
	require.Equal(t, "awskms", keystore.BackendOf(lazy))
	chainID := big.NewInt(1337)
	to := common.HexToAddress("0xbeef")
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: 1, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(2), Gas: 21000, To: &to, Value: big.NewInt(1)})
	_, err = lazy.SignTx(ctx, tx, chainID)
	require.ErrorAs(t, err, &un, "still away: unavailable, the task waits")
	require.Error(t, lazy.(*signers.Lazy).Pending())

	kms.Restart(t)
	signed, err := lazy.SignTx(ctx, tx, chainID)
	require.NoError(t, err)
	from, err := types.Sender(types.LatestSignerForChainID(chainID), signed)
	require.NoError(t, err)
	require.Equal(t, addr, from)
	require.NoError(t, lazy.(*signers.Lazy).Pending())
}
