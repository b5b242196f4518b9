package signers_test

import (
	"context"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/signers"
	"github.com/ledgerq/ledgerq/internal/signers/awskms/localkmstest"
	"github.com/ledgerq/ledgerq/internal/signers/clef/cleftest"
	"github.com/ledgerq/ledgerq/internal/signers/pkcs11/softhsmtest"
)

func TestDecl_ParsesEveryBackendAndRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	d, err := signers.ParseDecl("name=hot,chain=main,backend=pkcs11,key=id:0a0b,address=0x5B38Da6a701c568545dCfcB03FcB875f56beddC4")
	require.NoError(t, err)
	require.Equal(t, signers.Decl{Name: "hot", Chain: "main", Backend: "pkcs11", Key: "id:0a0b",
		Address: common.HexToAddress("0x5B38Da6a701c568545dCfcB03FcB875f56beddC4")}, d)
	again, err := signers.ParseDecl(d.String())
	require.NoError(t, err)
	require.Equal(t, d, again, "String is what the flag takes")

	for _, tc := range []struct{ decl, want string }{
		{"name=a,backend=hsm,key=x", `backend "hsm": want one of keystore, pkcs11, awskms, clef`},
		{"name=a,backend=clef", "a clef wallet names its account"},
		{"name=a,backend=clef,key=x,address=0x5B38Da6a701c568545dCfcB03FcB875f56beddC4", "a clef wallet has no key"},
		{"name=a,backend=awskms", "backend awskms needs key="},
		{"name=a,backend=pkcs11,key=id:zz", "id:HEX wants hexadecimal digits"},
		{"name=-a,backend=awskms,key=k", "a name is 1 to 64"},
		{"name=a,backend=awskms,key=k,colour=red", `unknown key "colour"`},
		{"name=a,backend=awskms,key=k,address=0x12", "not a hex address"},
	} {
		_, err := signers.ParseDecl(tc.decl)
		require.ErrorContains(t, err, tc.want, tc.decl)
	}
	var l signers.Decls
	require.NoError(t, l.Set("name=a,backend=awskms,key=k;name=b,backend=awskms,key=k2"))
	require.Len(t, l, 2)
	require.NoError(t, l.Validate())
	require.NoError(t, l.Set("name=a,backend=awskms,key=k3"))
	require.ErrorContains(t, l.Validate(), "wallet a is declared twice")

	api := signers.Decl{Name: "a", Backend: "keystore", Key: "../etc/key.json", Declared: true}
	require.ErrorContains(t, api.Validate(), "names a file in --wallet-keystore-dir, not a path")
	api.Key = "key.json"
	require.NoError(t, api.Validate())
}

// Every backend opens the key its declaration names, derives the key's
// address, signs for it, and refuses the key when the declaration names
// another address.
func TestOpener_EveryBackendOpensItsKeyAndRefusesAKeyOfAnotherAddress(t *testing.T) {
	ctx := t.Context()
	chainID := big.NewInt(1337)
	other := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	check := func(t *testing.T, o *signers.Opener, d signers.Decl) {
		t.Helper()
		s, err := o.Open(ctx, d)
		require.NoError(t, err)
		addr := common.Address(s.Address())
		tx := types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: 7, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(2), Gas: 21000, To: &other, Value: big.NewInt(3)})
		signed, err := s.SignTx(ctx, tx, chainID)
		require.NoError(t, err)
		from, err := types.Sender(types.LatestSignerForChainID(chainID), signed)
		require.NoError(t, err)
		require.Equal(t, addr, from)
		if c, ok := s.(interface{ Close() }); ok {
			c.Close()
		}

		d.Address = addr
		s, err = o.Open(ctx, d)
		require.NoError(t, err, "the declared address is the key's")
		if c, ok := s.(interface{ Close() }); ok {
			c.Close()
		}
		d.Address = other
		_, err = o.Open(ctx, d)
		var refused *signers.RefusedError
		require.ErrorAs(t, err, &refused, "a key of another address")
		require.ErrorContains(t, err, addr.Hex())
	}

	t.Run("keystore", func(t *testing.T) {
		dir := t.TempDir()
		_, path, err := keystore.NewKeystore(dir, "pass-word", keystore.LightScrypt)
		require.NoError(t, err)
		t.Setenv(keystore.PassphraseEnv("hot"), "pass-word")
		o := signers.NewOpener(signers.Config{KeystoreDir: dir}, keystore.PassphraseFiles{}, nil)
		check(t, o, signers.Decl{Name: "hot", Backend: "keystore", Key: filepath.Base(path), Declared: true})
		check(t, o, signers.Decl{Name: "hot", Backend: "keystore", Key: path})

		t.Setenv(keystore.PassphraseEnv("hot"), "xyzzy-not-it")
		_, err = o.Open(ctx, signers.Decl{Name: "hot", Backend: "keystore", Key: path})
		var refused *signers.RefusedError
		require.ErrorAs(t, err, &refused)
		require.NotContains(t, err.Error(), "xyzzy", "no passphrase in an error")
	})
	t.Run("pkcs11", func(t *testing.T) {
		tok := softhsmtest.New(t, "ledgerq-signers")
		tok.NewKey(t, "secp256k1", "hot-key", []byte{0x0a, 0x0b})
		pinFile := filepath.Join(t.TempDir(), "pin")
		require.NoError(t, os.WriteFile(pinFile, []byte(tok.PIN+"\n"), 0o600))
		o := signers.NewOpener(signers.Config{PKCS11Module: tok.Module, PKCS11Token: tok.Label, PKCS11PINFile: pinFile}, keystore.PassphraseFiles{}, nil)
		check(t, o, signers.Decl{Name: "hot", Backend: "pkcs11", Key: "hot-key"})
		check(t, o, signers.Decl{Name: "hot", Backend: "pkcs11", Key: "id:0a0b"})
		_, err := o.Open(ctx, signers.Decl{Name: "hot", Backend: "pkcs11", Key: "no-such-key"})
		var refused *signers.RefusedError
		require.ErrorAs(t, err, &refused)
	})
	t.Run("awskms", func(t *testing.T) {
		kms := localkmstest.Start(t)
		id := kms.CreateKey(t, kmstypes.KeySpecEccSecgP256k1)
		t.Setenv("AWS_ACCESS_KEY_ID", "AKIDLOCALKMSTEST")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "local-kms-test-secret")
		o := signers.NewOpener(signers.Config{KMSRegion: localkmstest.Region, KMSEndpoint: kms.URL}, keystore.PassphraseFiles{}, nil)
		check(t, o, signers.Decl{Name: "hot", Backend: "awskms", Key: id})
	})
	t.Run("clef", func(t *testing.T) {
		c := cleftest.Start(t, big.NewInt(1337))
		o := signers.NewOpener(signers.Config{ClefURL: c.URL}, keystore.PassphraseFiles{}, nil)
		s, err := o.Open(ctx, signers.Decl{Name: "hot", Backend: "clef", Address: c.Address})
		require.NoError(t, err)
		tx := types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: 7, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(2), Gas: 21000, To: &other, Value: big.NewInt(3)})
		signed, err := s.SignTx(ctx, tx, chainID)
		require.NoError(t, err)
		from, err := types.Sender(types.LatestSignerForChainID(chainID), signed)
		require.NoError(t, err)
		require.Equal(t, c.Address, from)
		_, err = o.Open(ctx, signers.Decl{Name: "hot", Backend: "clef", Address: other})
		require.Error(t, err, "clef does not list the address")
	})
	t.Run("unconfigured", func(t *testing.T) {
		o := signers.NewOpener(signers.Config{}, keystore.PassphraseFiles{}, nil)
		for _, d := range []signers.Decl{
			{Name: "a", Backend: "pkcs11", Key: "k"},
			{Name: "a", Backend: "clef", Address: other},
			{Name: "a", Backend: "keystore", Key: "k.json", Declared: true},
		} {
			_, err := o.Open(context.Background(), d)
			var refused *signers.RefusedError
			require.True(t, errors.As(err, &refused), "%s: %v", d.Backend, err)
		}
	})
}
