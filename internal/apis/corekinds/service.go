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
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
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

// serviceREST is kube's Service REST on allocators it binds to one
// Service at a time.
type serviceREST struct {
	rest  *svcstorage.REST
	ips   []*ipAllocator
	ports *portAllocator
}

// bind makes the allocators work for the Service o, through ctx.
func (r *serviceREST) bind(ctx context.Context, o owner) {
	for _, a := range r.ips {
		a.ctx, a.owner = ctx, o
	}
	r.ports.ctx, r.ports.owner = ctx, o
}

// newREST makes kube's Service REST on allocators of a's ranges (about a
// millisecond of work: a's pool keeps them).
func (a *ServiceAllocation) newREST() (*serviceREST, error) {
	r := &serviceREST{ports: &portAllocator{st: a.Store, r: a.NodePorts}}
	ips := map[api.IPFamily]ipallocator.Interface{}
	for _, cidr := range a.ClusterIPRanges {
		ip := &ipAllocator{st: a.Store, r: newIPRange(cidr)}
		r.ips = append(r.ips, ip)
		ips[ip.r.family] = ip
	}
	var err error
	r.rest, _, _, err = svcstorage.NewREST(noStorage{}, family(a.ClusterIPRanges[0]), ips, r.ports, nil, nil, nil)
	return r, err
}

// rest is kube's Service REST allocating for the Service o from the
// store, through ctx; done gives it back once its allocation finished.
func (s serviceStrategy) rest(ctx context.Context, o owner) (r *serviceREST, done func(), err error) {
	if s.alloc == nil {
		return nil, nil, errors.New("services: no allocation configured")
	}
	if pooled, ok := s.alloc.pool.Get().(*serviceREST); ok {
		r = pooled
	} else if r, err = s.alloc.newREST(); err != nil {
		return nil, nil, err
	}
	r.bind(ctx, o)
	return r, func() {
		r.bind(context.Background(), owner{})
		s.alloc.pool.Put(r)
	}, nil
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
	r, done, err := s.rest(ctx, owner{namespace: obj.Meta.Namespace, name: obj.Meta.Name})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var dryRun []string
	if dry {
		dryRun = []string{metav1.DryRunAll}
	}
	var finish func(context.Context, bool)
	if old == nil {
		finish, err = r.rest.BeginCreate(ctx, svc, &metav1.CreateOptions{DryRun: dryRun})
	} else {
		var prev *api.Service
		if prev, err = internal(old); err != nil {
			done()
			return func(bool) {}, nil //nolint:nilerr // the stored object is left as it is
		}
		finish, err = r.rest.BeginUpdate(ctx, svc, prev, &metav1.UpdateOptions{DryRun: dryRun})
	}
	if err != nil {
		done()
		return nil, err
	}
	if err := kuberegistry.External[corev1.Service](svc, obj); err != nil {
		finish(ctx, false)
		done()
		return nil, apierrors.NewInternalError(err)
	}
	return func(ok bool) {
		finish(ctx, ok)
		done()
	}, nil
}

// Release runs kube's AfterDelete: the deleted Service's cluster IPs and
// node ports are given back.
func (s serviceStrategy) Release(ctx context.Context, obj *resource.Object) {
	svc, err := internal(obj)
	if err != nil {
		return
	}
	r, done, err := s.rest(ctx, owner{namespace: obj.Meta.Namespace, name: obj.Meta.Name})
	if err != nil {
		return
	}
	defer done()
	r.rest.AfterDelete(svc, &metav1.DeleteOptions{})
}
