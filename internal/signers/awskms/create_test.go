package awskms_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/signers/awskms"
	"github.com/ledgerq/ledgerq/internal/signers/awskms/localkmstest"
)

func TestCreate_MakesASecp256k1SigningKeyWithItsAliasThatOpenSignsWith(t *testing.T) {
	t.Parallel()
	srv := localkmstest.Start(t)
	keyID, addr, err := awskms.Create(ctxFor(t, 10*time.Second), configFor(srv, ""), "ledgerq wallet hot", "hot-wallet")
	require.NoError(t, err)
	require.NotEmpty(t, keyID)
	require.NotEqual(t, common.Address{}, addr)

	desc, err := srv.Client().DescribeKey(ctxFor(t, 10*time.Second), &kms.DescribeKeyInput{KeyId: aws.String(keyID)})
	require.NoError(t, err)
	require.Equal(t, kmstypes.KeySpecEccSecgP256k1, desc.KeyMetadata.KeySpec)
	require.Equal(t, kmstypes.KeyUsageTypeSignVerify, desc.KeyMetadata.KeyUsage)
	require.Equal(t, "ledgerq wallet hot", aws.ToString(desc.KeyMetadata.Description))

	// By its id and by its alias, the same key: the sender recovers to the
	// address Create returned.
	for _, ref := range []string{keyID, "alias/hot-wallet"} {
		s, err := awskms.Open(ctxFor(t, 10*time.Second), configFor(srv, ref))
		require.NoError(t, err, ref)
		require.Equal(t, addr, common.Address(s.Address()), ref)
		id := big.NewInt(1337)
		signed, err := s.SignTx(ctxFor(t, 10*time.Second), txOf(types.DynamicFeeTxType, id, 0), id)
		require.NoError(t, err, ref)
		from, err := types.Sender(types.LatestSignerForChainID(id), signed)
		require.NoError(t, err)
		require.Equal(t, addr, from, ref)
	}
}

func TestCreate_AnAliasTakenAlreadyReturnsTheKeyItMadeWithTheError(t *testing.T) {
	t.Parallel()
	srv := localkmstest.Start(t)
	first, _, err := awskms.Create(ctxFor(t, 10*time.Second), configFor(srv, ""), "", "alias/taken")
	require.NoError(t, err)
	second, _, err := awskms.Create(ctxFor(t, 10*time.Second), configFor(srv, ""), "", "taken")
	require.Error(t, err)
	require.NotEmpty(t, second, "the key made before the alias failed")
	require.NotEqual(t, first, second)
	require.Contains(t, err.Error(), second)
	require.Contains(t, err.Error(), "alias/taken")

	// The alias still names the first key.
	s, err := awskms.Open(ctxFor(t, 10*time.Second), configFor(srv, "alias/taken"))
	require.NoError(t, err)
	firstSigner, err := awskms.Open(ctxFor(t, 10*time.Second), configFor(srv, first))
	require.NoError(t, err)
	require.Equal(t, firstSigner.Address(), s.Address())
}
