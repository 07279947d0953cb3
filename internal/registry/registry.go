package registry

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdserver/crdserver/internal/apis/apiextensions"
	rulesv1alpha1 "github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
	"github.com/crdserver/crdserver/internal/budget"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	crschema "github.com/crdserver/crdserver/internal/schema"
	"github.com/crdserver/crdserver/internal/store"
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
	// storage finds a resource by group/version/resource in its storage
	// version, served or not (see LookupStorage).
	storage map[schema.GroupVersionResource]*resource.Resource
	// Resources is every served resource, built-in ones first.
	Resources []*resource.Resource
	// CRDs is every stored CustomResourceDefinition, by name, without
	// its schemas and managedFields (FullCRD decodes it whole).
	CRDs map[string]*apiextensionsv1.CustomResourceDefinition
	// items are the stored CRDs as the watch cache holds them, by name.
	items map[string]*store.Item
	// CRDResources is the resource of each CRD whose resource is served,
	// by CRD name.
	CRDResources map[string]*resource.Resource
	// Established says which of the CRDs are Established.
	Established map[string]bool
	// Discoverable says which resources discovery lists: built-in ones and
	// those of Established CRDs.
	Discoverable map[*resource.Resource]bool
	// Builtin marks the built-in resources.
	Builtin map[*resource.Resource]bool
	// Groups are the names of the CRDs of each group, sorted.
	Groups map[string][]string
	// Changed are the names of the CRDs that changed (or went) since the
	// Index published before this one, sorted; nil: any may have.
	Changed []string
}

// FullCRD decodes the stored CRD of a name whole (nil if there is none):
// the Index's CRDs lack their schemas. (An Index made by hand, as tests
// make them, holds whole CRDs, which it returns as they are.)
func (ix *Index) FullCRD(name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	it, ok := ix.items[name]
	if !ok {
		return ix.CRDs[name], nil
	}
	return apiextensions.Decode(it.Bytes())
}

// CRDSource returns what decodes the CRD of a name whole, as stored now
// (nil, nil once there is none): it holds the stored bytes, not the Index.
func (ix *Index) CRDSource(name string) func() (*apiextensionsv1.CustomResourceDefinition, error) {
	it, ok := ix.items[name]
	if !ok {
		crd := ix.CRDs[name] // an Index made by hand holds whole CRDs
		return func() (*apiextensionsv1.CustomResourceDefinition, error) { return crd, nil }
	}
	return func() (*apiextensionsv1.CustomResourceDefinition, error) { return apiextensions.Decode(it.Bytes()) }
}

// VersionSource returns what decodes the CRD of a name with the schema of
// one version only (the others have none): what a document of that version
// is built from, without decoding the other versions' schemas.
func (ix *Index) VersionSource(name, version string) func() (*apiextensionsv1.CustomResourceDefinition, error) {
	slim := ix.CRDs[name]
	it, ok := ix.items[name]
	if !ok {
		return func() (*apiextensionsv1.CustomResourceDefinition, error) { return slim, nil }
	}
	return versionSource(slim, it, version)
}

// versionSource decodes the CRD of item with the schema of one version
// only, slim being the rest of it (apiextensions.DecodeSlim).
func versionSource(slim *apiextensionsv1.CustomResourceDefinition, it *store.Item, version string) func() (*apiextensionsv1.CustomResourceDefinition, error) {
	return func() (*apiextensionsv1.CustomResourceDefinition, error) {
		val, _, err := apiextensions.VersionSchema(it.Bytes(), version)
		if err != nil {
			return nil, err
		}
		crd := slim.DeepCopy()
		for i := range crd.Spec.Versions {
			if crd.Spec.Versions[i].Name == version {
				crd.Spec.Versions[i].Schema = val
			}
		}
		return crd, nil
	}
}

// Lookup returns the resource and version a request path names.
func (ix *Index) Lookup(group, ver, plural string) (*resource.Resource, *resource.Version) {
	s, ok := ix.byGVR[schema.GroupVersionResource{Group: group, Version: ver, Resource: plural}]
	if !ok {
		return nil, nil
	}
	return s.res, s.ver
}

// LookupStorage returns a resource in its storage version, also when that
// version is not served: crdserver's own controllers reach objects there
// (a CRD whose versions are all unserved still has objects to delete).
func (ix *Index) LookupStorage(group, ver, plural string) (*resource.Resource, *resource.Version) {
	res := ix.storage[schema.GroupVersionResource{Group: group, Version: ver, Resource: plural}]
	if res == nil {
		return nil, nil
	}
	if v := res.Version(ver); v != nil {
		return res, v
	}
	return res, &resource.Version{Name: ver}
}

// Options configure a Registry.
type Options struct {
	// Storage answers the current revision (CatchUp).
	Storage store.Interface
	// NewCache makes the watch cache of a custom resource's key prefix.
	NewCache func(prefix string) *store.Cache
	// Builtins are the built-in resources, in discovery order; CRDs is the
	// one among them whose objects define the custom resources, and
	// ConversionRules (optional) the one whose objects replace a CRD's
	// conversion by declarative rules.
	Builtins        []*resource.Resource
	CRDs            *resource.Resource
	ConversionRules *resource.Resource
	// Conversion tunes webhook conversion.
	Conversion conversion.Options
	// Budget holds what is built for a CRD when a request first needs it
	// (compiled schemas, type converters) within a bound on their memory;
	// nil holds everything once built.
	Budget *budget.Pool
	Log    *slog.Logger
}

// Registry knows every resource crdserver serves: the built-in ones and
// one per CRD whose names are accepted. It follows the stored CRDs and owns
// the watch caches of custom resources.
type Registry struct {
	opts Options
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the CRD follower ends

	mu          sync.Mutex
	subscribers []func(*Index)
	index       atomic.Pointer[Index]
	caches      map[string]*store.Cache // custom resource caches by key prefix
	defs        map[string]*crdEntry    // by CRD name
	rules       map[string]*ruleEntry   // declarative conversion rules, by CRD name
	synced      atomic.Bool
	// dirty: a CRD changed since the last Index was published; changed
	// are their names.
	dirty   bool
	changed map[string]bool
	// applied is the revision of the last CRD change the Index reflects.
	applied   atomic.Int64
	appliedCh atomic.Pointer[chan struct{}]
	// hurry tells followCRDs that a request waits for the Index: the
	// events it holds back for a batch are published at once.
	hurry chan struct{}
}

// crdEntry is what the registry derived from one CRD.
type crdEntry struct {
	// crd is the CRD without its schemas (apiextensions.DecodeSlim); item
	// is the whole CRD as the watch cache holds it.
	crd  *apiextensionsv1.CustomResourceDefinition
	item *store.Item
	// established: crd is Established.
	established bool
	res         *resource.Resource // nil while not served
	// resSchemaRev is the schemaRev res was built with.
	resSchemaRev int64
	// schemas are made once per CRD generation (and uid), and compiled
	// when first needed; schemaRev is the revision of the CRD write that
	// brought them, schemaItem that write's CRD.
	schemas    map[string]*crschema.Version
	schemaGen  int64
	schemaUID  types.UID
	schemaRev  int64
	schemaItem *store.Item
	// conv converts between versions; kept while the schemas and
	// spec.conversion stay the same, so that webhook clients and shared
	// conversions survive status changes.
	conv     conversion.Converter
	convSpec *apiextensionsv1.CustomResourceConversion
	// convRules is the rule set conv was built from (nil: the CRD's
	// strategy).
	convRules *ruleEntry
	// strategies are the strategies' converters (a webhook client) made
	// for this CRD, newest first: one is used again, with the answers
	// its objects remember, when the schemas change but spec.conversion,
	// group and kind do not, or when spec.conversion goes back to one of
	// them.
	strategies []strategyEntry
}

// maxStrategies is how many strategy converters a CRD keeps.
const maxStrategies = 3

// strategyEntry is a strategy converter and what it was made from.
type strategyEntry struct {
	spec        *apiextensionsv1.CustomResourceConversion
	group, kind string
	conv        conversion.Converter
}

// ruleEntry is one stored ConversionRules.
type ruleEntry struct {
	spec rulesv1alpha1.RuleSet
	rev  int64
}

// New creates a registry that serves the built-in resources. Start makes
// it follow the CRDs.
func New(opts Options) *Registry {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	r := &Registry{
		opts:    opts,
		log:     opts.Log,
		caches:  map[string]*store.Cache{},
		defs:    map[string]*crdEntry{},
		rules:   map[string]*ruleEntry{},
		changed: map[string]bool{},
		hurry:   make(chan struct{}, 1),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	ch := make(chan struct{})
	r.appliedCh.Store(&ch)
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
	cur, err := r.opts.Storage.CurrentRevision(ctx)
	if err != nil {
		return err
	}
	crds := r.opts.CRDs.Cache
	if err := crds.WaitFresh(ctx, cur); err != nil {
		return err
	}
	return r.WaitApplied(ctx, crds.LastEventRevision())
}

// WaitApplied waits (up to 3 seconds) until the Index reflects every CRD
// change up to revision rev: a controller that wrote a CRD reads its own
// write afterwards. The Index is published at once for a waiter, not
// when the batch of CRD events it is part of ends (followCRDs).
func (r *Registry) WaitApplied(ctx context.Context, rev int64) error {
	if r.applied.Load() >= rev {
		return nil
	}
	timeout := time.NewTimer(3 * time.Second)
	defer timeout.Stop()
	for {
		ch := r.appliedCh.Load()
		if r.applied.Load() >= rev {
			return nil
		}
		select {
		case r.hurry <- struct{}{}:
		default:
		}
		select {
		case <-*ch:
		case <-timeout.C:
			return fmt.Errorf("registry did not reach revision %d", rev)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// publishIfDirty publishes a new Index if a CRD changed since the last.
func (r *Registry) publishIfDirty() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dirty {
		r.publish()
	}
}

// publish builds and installs a new Index from the built-ins and the CRD
// entries. Callers hold r.mu (or are the constructor). When few CRDs
// changed since the last Index, the new one is the last one's maps
// copied with those CRDs' entries replaced: a change among thousands of
// CRDs does not rebuild every entry.
func (r *Registry) publish() {
	r.dirty = false
	prev := r.index.Load()
	changed := r.changed
	r.changed = map[string]bool{}
	var ix *Index
	if prev == nil || len(changed) > len(r.defs)/4+16 {
		ix = r.fullIndex()
	} else {
		ix = r.patchedIndex(prev, changed)
	}
	r.index.Store(ix)
	for _, f := range r.subscribers {
		f(ix)
	}
}

// fullIndex builds an Index from every entry.
func (r *Registry) fullIndex() *Index {
	n := len(r.defs)
	ix := &Index{
		byGVR:        make(map[schema.GroupVersionResource]served, 2*n+len(r.opts.Builtins)),
		storage:      make(map[schema.GroupVersionResource]*resource.Resource, n+len(r.opts.Builtins)),
		CRDs:         make(map[string]*apiextensionsv1.CustomResourceDefinition, n),
		items:        make(map[string]*store.Item, n),
		CRDResources: make(map[string]*resource.Resource, n),
		Established:  make(map[string]bool, n),
		Discoverable: make(map[*resource.Resource]bool, n+len(r.opts.Builtins)),
		Builtin:      make(map[*resource.Resource]bool, len(r.opts.Builtins)),
		Groups:       map[string][]string{},
	}
	for _, b := range r.opts.Builtins {
		ix.addServed(b)
		ix.Discoverable[b] = true
		ix.Builtin[b] = true
	}
	for _, name := range r.sortedNames() {
		ix.addCRD(name, r.defs[name])
	}
	ix.Resources = r.resources(ix)
	return ix
}

// patchedIndex is prev with the entries of the changed CRDs replaced.
func (r *Registry) patchedIndex(prev *Index, changed map[string]bool) *Index {
	ix := &Index{
		byGVR:        maps.Clone(prev.byGVR),
		storage:      maps.Clone(prev.storage),
		CRDs:         maps.Clone(prev.CRDs),
		items:        maps.Clone(prev.items),
		CRDResources: maps.Clone(prev.CRDResources),
		Established:  maps.Clone(prev.Established),
		Discoverable: maps.Clone(prev.Discoverable),
		Builtin:      prev.Builtin,
		Groups:       maps.Clone(prev.Groups),
		Changed:      make([]string, 0, len(changed)),
	}
	for name := range changed {
		ix.Changed = append(ix.Changed, name)
		if old := prev.CRDs[name]; old != nil {
			ix.Groups[old.Spec.Group] = slices.DeleteFunc(slices.Clone(ix.Groups[old.Spec.Group]), func(n string) bool { return n == name })
			if len(ix.Groups[old.Spec.Group]) == 0 {
				delete(ix.Groups, old.Spec.Group)
			}
		}
		if res := prev.CRDResources[name]; res != nil {
			ix.removeServed(res)
			delete(ix.Discoverable, res)
		}
		delete(ix.CRDs, name)
		delete(ix.items, name)
		delete(ix.CRDResources, name)
		delete(ix.Established, name)
		if e := r.defs[name]; e != nil {
			ix.addCRD(name, e)
		}
	}
	sort.Strings(ix.Changed)
	ix.Resources = r.resources(ix)
	return ix
}

// addCRD adds a CRD's entries.
func (ix *Index) addCRD(name string, e *crdEntry) {
	ix.CRDs[name] = e.crd
	ix.items[name] = e.item
	ix.Established[name] = e.established
	group := e.crd.Spec.Group
	at, _ := slices.BinarySearch(ix.Groups[group], name)
	ix.Groups[group] = slices.Insert(slices.Clone(ix.Groups[group]), at, name)
	if e.res == nil {
		return
	}
	ix.addServed(e.res)
	ix.CRDResources[name] = e.res
	ix.Discoverable[e.res] = e.established
}

// addServed adds what a resource serves, unless another holds it.
func (ix *Index) addServed(res *resource.Resource) {
	for _, v := range res.Versions {
		gvr := schema.GroupVersionResource{Group: res.Group, Version: v.Name, Resource: res.Plural}
		if _, taken := ix.byGVR[gvr]; !taken {
			ix.byGVR[gvr] = served{res, v}
		}
	}
	if res.Cache != nil {
		gvr := schema.GroupVersionResource{Group: res.Group, Version: res.StorageVersion, Resource: res.Plural}
		if _, taken := ix.storage[gvr]; !taken {
			ix.storage[gvr] = res
		}
	}
}

// removeServed removes what a resource serves.
func (ix *Index) removeServed(res *resource.Resource) {
	for _, v := range res.Versions {
		gvr := schema.GroupVersionResource{Group: res.Group, Version: v.Name, Resource: res.Plural}
		if ix.byGVR[gvr].res == res {
			delete(ix.byGVR, gvr)
		}
	}
	gvr := schema.GroupVersionResource{Group: res.Group, Version: res.StorageVersion, Resource: res.Plural}
	if ix.storage[gvr] == res {
		delete(ix.storage, gvr)
	}
}

// sortedNames are the CRD names, sorted.
func (r *Registry) sortedNames() []string {
	names := make([]string, 0, len(r.defs))
	for n := range r.defs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// resources are the built-in resources, then those of the CRDs by name.
func (r *Registry) resources(ix *Index) []*resource.Resource {
	out := make([]*resource.Resource, 0, len(r.opts.Builtins)+len(ix.CRDResources))
	out = append(out, r.opts.Builtins...)
	names := make([]string, 0, len(ix.CRDResources))
	for n := range ix.CRDResources {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, ix.CRDResources[n])
	}
	return out
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

// Stop stops following the CRDs, and every watch cache.
func (r *Registry) Stop() {
	r.cancel()
	if r.done != nil {
		<-r.done
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.opts.Builtins {
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
	for _, b := range r.opts.Builtins {
		if b.Cache == nil {
			continue
		}
		if err := b.Cache.WaitReady(ctx); err != nil {
			return err
		}
	}
	return nil
}
