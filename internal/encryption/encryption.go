// Package encryption encrypts stored objects at rest as kube-apiserver
// does, from the same EncryptionConfiguration file
// (apiserver.config.k8s.io/v1, --encryption-provider-config): identity,
// aescbc, aesgcm, secretbox and KMS providers, per resource, with the first
// provider writing and every provider reading, so that keys can be rotated.
// The providers are Kubernetes' own (k8s.io/apiserver); what crdserver adds
// is the mapping from an etcd key to the resource it holds. Data written
// with a provider is readable by kube-apiserver with the same file and
// layout, and the other way round: the authenticated data is the etcd key.
package encryption

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	"k8s.io/apiserver/pkg/storage/value"

	"github.com/crdserver/crdserver/internal/store"
)

// Resolver says which resource an etcd key belongs to; keys of no resource
// (crdserver's own bookkeeping) are stored as they are.
type Resolver func(key string) (schema.GroupResource, bool)

// Load reads an EncryptionConfiguration file and returns the transformer
// of the store. ctx bounds the KMS plugins' connections, if any.
func Load(ctx context.Context, file string, resolve Resolver) (store.Transformer, error) {
	cfg, err := encryptionconfig.LoadEncryptionConfig(ctx, file, false, "crdserver")
	if err != nil {
		return nil, fmt.Errorf("encryption provider config %s: %w", file, err)
	}
	return &transformer{all: encryptionconfig.StaticTransformers(cfg.Transformers), resolve: resolve}, nil
}

type transformer struct {
	all     value.ResourceTransformers
	resolve Resolver
}

func (t *transformer) ToStorage(ctx context.Context, key string, v []byte) ([]byte, error) {
	gr, ok := t.resolve(key)
	if !ok {
		return v, nil
	}
	return t.all.TransformerForResource(gr).TransformToStorage(ctx, v, value.DefaultContext(key))
}

func (t *transformer) FromStorage(ctx context.Context, key string, stored []byte) ([]byte, error) {
	gr, ok := t.resolve(key)
	if !ok {
		return stored, nil
	}
	out, _, err := t.all.TransformerForResource(gr).TransformFromStorage(ctx, stored, value.DefaultContext(key))
	return out, err
}
