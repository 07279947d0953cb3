package discovery

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/apis/discovery"
	_ "k8s.io/kubernetes/pkg/apis/discovery/install" // discovery's defaults and conversions in legacyscheme
	"k8s.io/kubernetes/pkg/registry/discovery/endpointslice"

	"github.com/crdserver/crdserver/internal/apis/kuberegistry"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// EndpointSlicePrefix is the etcd key of EndpointSlices (kube-apiserver's).
const EndpointSlicePrefix = "/registry/endpointslices/"

// AddToScheme registers the discovery.k8s.io/v1 Go types (for protobuf
// and the built-in type converter).
var AddToScheme = discoveryv1.AddToScheme

// Resources are the discovery.k8s.io/v1 resources, each served from the
// cache newCache makes for its key prefix.
func Resources(newCache func(prefix string) *store.Cache) []*resource.Resource {
	return []*resource.Resource{EndpointSlices(newCache(EndpointSlicePrefix))}
}

// EndpointSlices is the endpointslices resource.
func EndpointSlices(cache *store.Cache) *resource.Resource {
	return kuberegistry.Kind[discoveryv1.EndpointSlice, discovery.EndpointSlice]{
		Group: discoveryv1.GroupName, Version: "v1", Plural: "endpointslices", Kind: "EndpointSlice", Namespaced: true, Prefix: EndpointSlicePrefix,
		Kube: endpointslice.Strategy,
		List: func(items []discovery.EndpointSlice) runtime.Object {
			return &discovery.EndpointSliceList{Items: items}
		},
	}.Resource(cache)
}
