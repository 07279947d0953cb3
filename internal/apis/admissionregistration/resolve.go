package admissionregistration

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdserver/crdserver/internal/apis/apiextensions"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// Resolver finds the resource of a kind among the built-in resources
// builtins returns and the served versions of the established CRDs in
// crds (a watch cache of CRDs), as Kubernetes' discovery-based resolver
// finds the resource of a paramKind.
func Resolver(builtins func() []*resource.Resource, crds *store.Cache) func(schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	return func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
		for _, r := range builtins() {
			if r.Group == gvk.Group && r.Kind == gvk.Kind && r.Version(gvk.Version) != nil {
				return gvk.GroupVersion().WithResource(r.Plural), nil
			}
		}
		if crds != nil {
			for _, it := range crds.List(store.ListOptions{}).Items {
				crd, err := apiextensions.Decode(it.Bytes())
				if err != nil || crd.Spec.Group != gvk.Group || crd.Spec.Names.Kind != gvk.Kind || !apiextensions.IsEstablished(crd) {
					continue
				}
				for _, v := range crd.Spec.Versions {
					if v.Name == gvk.Version && v.Served {
						return gvk.GroupVersion().WithResource(crd.Spec.Names.Plural), nil
					}
				}
			}
		}
		return schema.GroupVersionResource{}, fmt.Errorf("no matches for kind %q in version %q", gvk.Kind, gvk.GroupVersion().String())
	}
}
