package corekinds

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	svcstorage "k8s.io/kubernetes/pkg/registry/core/service/storage"

	"github.com/crdserver/crdserver/internal/apis/kuberegistry"
	"github.com/crdserver/crdserver/internal/resource"
)

// serviceStrategy is kube's Service strategy with the allocation of
// cluster IPs and node ports of kube's Service REST (its BeginCreate,
// BeginUpdate and AfterDelete hooks: the defaults of ipFamilies,
// ipFamilyPolicy and clusterIPs, the allocation, its checks and
// messages), on allocators kept in the store.
type serviceStrategy struct {
	kuberegistry.TypedStrategy[corev1.Service, api.Service]
	alloc *ServiceAllocation
}

var _ resource.Allocator = serviceStrategy{}

// noStorage is the RESTOptionsGetter kube's Service REST is made with: it
// is used for its allocation hooks alone, never to store.
type noStorage struct{}

func (noStorage) GetRESTOptions(schema.GroupResource, runtime.Object) (generic.RESTOptions, error) {
	return generic.RESTOptions{
		StorageConfig:  &storagebackend.ConfigForResource{},
		ResourcePrefix: "services/specs",
		Decorator: func(*storagebackend.ConfigForResource, string, func(runtime.Object) (string, error), func() runtime.Object, func() runtime.Object,
			storage.AttrFunc, storage.IndexerFuncs, *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
			return nil, func() {}, nil
		},
	}, nil
}

// rest is kube's Service REST allocating for the Service o from the
// store, through ctx.
func (s serviceStrategy) rest(ctx context.Context, o owner) (*svcstorage.REST, error) {
	if s.alloc == nil {
		return nil, errors.New("services: no allocation configured")
	}
	ips := s.alloc.ipAllocators(ctx, o)
	ports := &portAllocator{ctx: ctx, st: s.alloc.Store, r: s.alloc.NodePorts, owner: o}
	r, _, _, err := svcstorage.NewREST(noStorage{}, family(s.alloc.ClusterIPRanges[0]), ips, ports, nil, nil, nil)
	return r, err
}

// internal is obj, defaulted, as kube's internal Service.
func internal(obj *resource.Object) (*api.Service, error) {
	v, err := resource.Typed[corev1.Service](obj)
	if err != nil {
		return nil, err
	}
	legacyscheme.Scheme.Default(v)
	in := &api.Service{}
	if err := legacyscheme.Scheme.Convert(v, in, nil); err != nil {
		return nil, err
	}
	return in, nil
}

// Allocate runs kube's BeginCreate (old nil) or BeginUpdate on the
// Service, which defaults its IP family fields and takes its cluster IPs
// and node ports; obj gets what they set.
func (s serviceStrategy) Allocate(ctx context.Context, obj, old *resource.Object, dry bool) (func(bool), error) {
	svc, err := internal(obj)
	if err != nil {
		// Validation reports what does not decode.
		return func(bool) {}, nil //nolint:nilerr // reported by validation
	}
	ctx = genericapirequest.WithNamespace(ctx, obj.Meta.Namespace)
	r, err := s.rest(ctx, owner{namespace: obj.Meta.Namespace, name: obj.Meta.Name})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var dryRun []string
	if dry {
		dryRun = []string{metav1.DryRunAll}
	}
	var finish func(context.Context, bool)
	if old == nil {
		finish, err = r.BeginCreate(ctx, svc, &metav1.CreateOptions{DryRun: dryRun})
	} else {
		var prev *api.Service
		if prev, err = internal(old); err != nil {
			return func(bool) {}, nil //nolint:nilerr // the stored object is left as it is
		}
		finish, err = r.BeginUpdate(ctx, svc, prev, &metav1.UpdateOptions{DryRun: dryRun})
	}
	if err != nil {
		return nil, err
	}
	if err := kuberegistry.External[corev1.Service](svc, obj); err != nil {
		finish(ctx, false)
		return nil, apierrors.NewInternalError(err)
	}
	return func(ok bool) { finish(ctx, ok) }, nil
}

// Release runs kube's AfterDelete: the deleted Service's cluster IPs and
// node ports are given back.
func (s serviceStrategy) Release(ctx context.Context, obj *resource.Object) {
	svc, err := internal(obj)
	if err != nil {
		return
	}
	r, err := s.rest(ctx, owner{namespace: obj.Meta.Namespace, name: obj.Meta.Name})
	if err != nil {
		return
	}
	r.AfterDelete(svc, &metav1.DeleteOptions{})
}
