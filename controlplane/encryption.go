package controlplane

import (
	"context"
	"fmt"

	"k8s.io/apiserver/pkg/server/options/encryptionconfig"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// encryptAtRest wraps s so that the resources of the encryption
// configuration file (upstream's EncryptionConfiguration, read by
// upstream's loader: aescbc, aesgcm, secretbox, identity and KMS
// providers; the first provider of a resource writes, all of them read)
// are encrypted in the store. No file: s unchanged.
func (c *ControlPlane) encryptAtRest(ctx context.Context, s storage.Store) (storage.Store, error) {
	if c.cfg.EncryptionProviderConfig == "" {
		return s, nil
	}
	cfg, err := encryptionconfig.LoadEncryptionConfig(ctx, c.cfg.EncryptionProviderConfig, false, "nodelet-controlplane")
	if err != nil {
		return nil, fmt.Errorf("encryption provider config %s: %w", c.cfg.EncryptionProviderConfig, err)
	}
	return storage.NewTransforming(s, cfg.Transformers), nil
}
