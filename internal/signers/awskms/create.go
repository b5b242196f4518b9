package awskms

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/ethereum/go-ethereum/common"
)

// AliasPrefix starts every KMS alias name.
const AliasPrefix = "alias/"

// Create makes a key for a wallet in KMS (CreateKey: ECC_SECG_P256K1,
// SIGN_VERIFY, with description), names it alias when that is set
// (CreateAlias; AliasPrefix is added when alias lacks it), and returns the
// key's id and the address that Open derives from its public key, as every
// signer of the key will. cfg.KeyID and cfg.Address are not read.
//
// A key that was made but could not be named or opened is returned with
// the error: it exists (and KMS bills it) whatever happened next.
func Create(ctx context.Context, cfg Config, description, alias string) (keyID string, addr common.Address, err error) {
	client, err := newClient(ctx, cfg, "creating a key")
	if err != nil {
		return "", common.Address{}, err
	}
	in := &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecEccSecgP256k1, KeyUsage: kmstypes.KeyUsageTypeSignVerify}
	if description != "" {
		in.Description = aws.String(description)
	}
	out, err := client.CreateKey(ctx, in)
	if err != nil {
		return "", common.Address{}, fmt.Errorf("awskms: CreateKey: %w", classify(err))
	}
	keyID = aws.ToString(out.KeyMetadata.KeyId)
	if alias != "" {
		if !strings.HasPrefix(alias, AliasPrefix) {
			alias = AliasPrefix + alias
		}
		if _, err := client.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(keyID)}); err != nil {
			return keyID, common.Address{}, fmt.Errorf("awskms: key %s was made, but naming it %s failed (name it with CreateAlias, or use the key id): %w", keyID, alias, classify(err))
		}
	}
	cfg.KeyID, cfg.Address = keyID, common.Address{}
	s, err := Open(ctx, cfg)
	if err != nil {
		return keyID, common.Address{}, fmt.Errorf("awskms: key %s was made, but opening it failed: %w", keyID, err)
	}
	return keyID, s.addr, nil
}
