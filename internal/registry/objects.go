package registry

import (
	"context"
	"encoding/json"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/store"
)

// MaxExistingObjects bounds how many stored objects ExistingObjects
// returns.
const MaxExistingObjects = 1000

// ExistingObjects returns (up to MaxExistingObjects of) a CRD's stored
// objects in a version, from its watch cache, for the compatibility checks
// of a change of the CRD. It is a consistent read, as a list is: every
// object written before the CRD change is among them (waiting at most 10
// seconds for the cache). None for a CRD without a cache, or objects that
// cannot be converted.
func (r *Registry) ExistingObjects(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, version string) []map[string]any {
	res := r.Index().CRDResources[crd.Name]
	if res == nil || res.Cache == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if rev, err := r.opts.Storage.CurrentRevision(ctx); err == nil {
		_ = res.Cache.WaitFresh(ctx, rev)
	}
	items := res.Cache.List(store.ListOptions{Limit: MaxExistingObjects}).Items
	raws, err := conversion.Items(ctx, res.Converter, items, res.APIVersion(version))
	if err != nil {
		return nil
	}
	out := make([]map[string]any, 0, len(raws))
	for _, raw := range raws {
		var obj map[string]any
		if json.Unmarshal(raw, &obj) == nil {
			out = append(out, obj)
		}
	}
	return out
}
