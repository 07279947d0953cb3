package registry

import (
	"context"
	"fmt"
	"github.com/crdserver/crdserver/internal/rbac"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	crschema "github.com/crdserver/crdserver/internal/schema"
	"github.com/crdserver/crdserver/internal/store"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/dynamic"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
)

// served is one version of one resource.
type served struct {
	res *resource.Resource
	ver *resource.Version
}

// Index is an immutable snapshot of everything served. A CRD change
// publishes a new Index; requests hold on to the one they started with.
type Index struct {
	byGVR map[schema.GroupVersionResource]served
	// Resources is every served resource, built-in ones first.
	Resources []*resource.Resource
	// CRDs are the CustomResourceDefinitions whose resources are served,
	// by name.
	CRDs map[string]*apiextensionsv1.CustomResourceDefinition
	// Established says which of the served CRDs are Established.
	Established map[string]bool
	// Discoverable says which resources discovery lists: built-in ones and
	// those of Established CRDs.
	Discoverable map[*resource.Resource]bool
	// Builtin marks the built-in resources.
	Builtin map[*resource.Resource]bool
}

// Lookup returns the resource and version a request path names.
func (ix *Index) Lookup(group, ver, plural string) (*resource.Resource, *resource.Version) {
	s, ok := ix.byGVR[schema.GroupVersionResource{Group: group, Version: ver, Resource: plural}]
	if !ok {
		return nil, nil
	}
	return s.res, s.ver
}

// Registry knows every resource crdserver serves: the built-in ones and
// one per CRD whose names are accepted. It owns the watch caches.
type Registry struct {
	store      *store.Store
	log        *slog.Logger
	cacheOpts  store.CacheOptions
	conversion conversion.Options

	builtins   []*resource.Resource
	crds       *resource.Resource
	namespaces *resource.Resource
	migrations *resource.Resource
	// rbac holds the roles and bindings authorization decides with;
	// rbacResources serve them.
	rbac          *rbac.Store
	rbacResources map[string]*resource.Resource // by kind
	rbacReady     atomic.Bool

	crdClient apiextensionsclient.Interface
	dyn       dynamic.Interface
	queue     *queue

	// ctx ends the controllers; Stop cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	mu          sync.Mutex
	running     map[string]bool
	subscribers []func(*Index)
	index       atomic.Pointer[Index]
	caches      map[string]*store.Cache // custom resource caches by key prefix
	defs        map[string]*crdEntry    // by CRD name
	synced      atomic.Bool
	// applied is the revision of the last CRD change the Index reflects.
	applied   atomic.Int64
	appliedCh atomic.Pointer[chan struct{}]
}

// crdEntry is what the registry derived from one CRD.
type crdEntry struct {
	crd *apiextensionsv1.CustomResourceDefinition
	res *resource.Resource // nil while not served
	// schemas are compiled once per CRD generation; schemaRev is the
	// revision of the CRD write that brought them.
	schemas   map[string]*crschema.Version
	schemaGen int64
	schemaRev int64
	// conv converts between versions; kept while the schemas and
	// spec.conversion stay the same, so that webhook clients and shared
	// conversions survive status changes.
	conv     *schemaConverter
	convSpec *apiextensionsv1.CustomResourceConversion
}

// Options configure a Registry.
type Options struct {
	// Cache tunes every watch cache.
	Cache store.CacheOptions
	// Conversion tunes webhook conversion.
	Conversion conversion.Options
}

// New creates the registry and the watch caches of the built-in resources.
func New(s *store.Store, opts Options, log *slog.Logger) *Registry {
	cacheOpts := opts.Cache
	r := &Registry{
		store:      s,
		log:        log,
		cacheOpts:  cacheOpts,
		conversion: opts.Conversion,
		caches:     map[string]*store.Cache{},
		defs:       map[string]*crdEntry{},
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	ch := make(chan struct{})
	r.appliedCh.Store(&ch)
	r.crds = crdResource(store.NewCache(s, crdPrefix, resource.DecodeItem, cacheOpts, log))
	r.namespaces = namespaceResource(store.NewCache(s, namespacePrefix, resource.DecodeItem, cacheOpts, log))
	r.migrations = migrationResource(store.NewCache(s, migrationPrefix, resource.DecodeItem, cacheOpts, log))
	// Built-in groups in kube-apiserver's order: core, authentication,
	// authorization, rbac, apiextensions, storagemigration.
	r.rbac = rbac.NewStore()
	r.builtins = append([]*resource.Resource{r.namespaces}, reviewResources(r.rbac)...)
	r.rbacResources = map[string]*resource.Resource{}
	for _, k := range rbacKinds {
		res := rbacResource(k, store.NewCache(s, k.prefix, resource.DecodeItem, cacheOpts, log), r.rbac)
		r.rbacResources[k.kind] = res
		r.builtins = append(r.builtins, res)
	}
	r.builtins = append(r.builtins, r.crds, r.migrations)
	r.publish()
	return r
}

// Index returns the current snapshot.
func (r *Registry) Index() *Index { return r.index.Load() }

// Synced reports whether the registry has loaded every CRD.
func (r *Registry) Synced() bool { return r.synced.Load() }

// markApplied records that the Index reflects every CRD change up to rev.
func (r *Registry) markApplied(rev int64) {
	if rev <= r.applied.Load() {
		return
	}
	r.applied.Store(rev)
	ch := make(chan struct{})
	if old := r.appliedCh.Swap(&ch); old != nil {
		close(*old)
	}
}

// CatchUp waits until the Index reflects every CRD stored before the call:
// a replica that has not yet seen a CRD another replica established serves
// it once caught up. Requests for unknown resources call it before they
// answer 404.
func (r *Registry) CatchUp(ctx context.Context) error {
	cur, err := r.store.CurrentRevision(ctx)
	if err != nil {
		return err
	}
	if err := r.crds.Cache.WaitFresh(ctx, cur); err != nil {
		return err
	}
	target := r.crds.Cache.LastEventRevision()
	timeout := time.NewTimer(3 * time.Second)
	defer timeout.Stop()
	for {
		ch := r.appliedCh.Load()
		if r.applied.Load() >= target {
			return nil
		}
		select {
		case <-*ch:
		case <-timeout.C:
			return fmt.Errorf("registry did not catch up with revision %d", target)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Namespaces returns the namespaces resource.
func (r *Registry) Namespaces() *resource.Resource { return r.namespaces }

// CRDs returns the customresourcedefinitions resource.
func (r *Registry) CRDs() *resource.Resource { return r.crds }

// publish builds and installs a new Index from the built-ins and the CRD
// entries. Callers hold r.mu (or are the constructor).
func (r *Registry) publish() {
	ix := &Index{
		byGVR:        map[schema.GroupVersionResource]served{},
		CRDs:         map[string]*apiextensionsv1.CustomResourceDefinition{},
		Established:  map[string]bool{},
		Discoverable: map[*resource.Resource]bool{},
		Builtin:      map[*resource.Resource]bool{},
	}
	add := func(res *resource.Resource) {
		for _, v := range res.Versions {
			gvr := schema.GroupVersionResource{Group: res.Group, Version: v.Name, Resource: res.Plural}
			if _, taken := ix.byGVR[gvr]; !taken {
				ix.byGVR[gvr] = served{res, v}
			}
		}
		ix.Resources = append(ix.Resources, res)
	}
	for _, b := range r.builtins {
		add(b)
		ix.Discoverable[b] = true
		ix.Builtin[b] = true
	}
	names := make([]string, 0, len(r.defs))
	for n := range r.defs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e := r.defs[n]
		if e.res == nil {
			continue
		}
		add(e.res)
		ix.CRDs[n] = e.crd
		ix.Established[n] = isEstablished(e.crd)
		ix.Discoverable[e.res] = ix.Established[n]
	}
	r.index.Store(ix)
	for _, f := range r.subscribers {
		f(ix)
	}
}

// Subscribe calls f with every new Index, starting with the current one.
// f runs with the registry locked: it must be quick and must not call back
// into the registry.
func (r *Registry) Subscribe(f func(*Index)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subscribers = append(r.subscribers, f)
	f(r.index.Load())
}

// Stop stops the controllers and every watch cache.
func (r *Registry) Stop() {
	r.cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.builtins {
		if b.Cache != nil {
			b.Cache.Stop()
		}
	}
	for _, c := range r.caches {
		c.Stop()
	}
}

// WaitReady waits until the built-in caches have loaded.
func (r *Registry) WaitReady(ctx context.Context) error {
	for _, b := range r.builtins {
		if b.Cache == nil {
			continue
		}
		if err := b.Cache.WaitReady(ctx); err != nil {
			return err
		}
	}
	return nil
}

// RBAC returns the roles and bindings authorization decides with.
func (r *Registry) RBAC() *rbac.Store { return r.rbac }

// RBACReady reports whether the default roles and bindings are in place.
func (r *Registry) RBACReady() bool { return r.rbacReady.Load() }

// SortVersions orders versions by Kubernetes' version priority: GA before
// beta before alpha, higher numbers first, then other names alphabetically.
func SortVersions(vs []string) {
	sort.SliceStable(vs, func(i, j int) bool {
		return version.CompareKubeAwareVersionStrings(vs[i], vs[j]) > 0
	})
}
