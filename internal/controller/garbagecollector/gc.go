// Package garbagecollector is the garbage collector kube-controller-manager
// runs on a cluster, over every resource crdserver serves.
package garbagecollector

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// Collector keeps an index of ownerReferences over every cached resource
// and
//   - deletes dependents whose owners are all gone (background
//     propagation), and drops references to gone owners otherwise;
//   - for an owner deleted in the foreground (finalizer foregroundDeletion)
//     deletes its dependents, then removes the finalizer once none that
//     blocks owner deletion is left;
//   - for an owner deleted with orphan propagation (finalizer orphan)
//     removes the references to it from its dependents, then the finalizer.
//
// It works from the watch caches, so it survives restarts: on start every
// object is checked.
type Collector struct {
	reader  controller.Reader
	dynamic dynamic.Interface
	log     *slog.Logger
	queue   controller.Queue

	mu        sync.Mutex
	following map[*store.Cache]func()    // what stops observing each cache
	ended     bool                       // the term is over: observe nothing more
	crdCaches map[string]*store.Cache    // the followed cache of each CRD, by name
	dependent map[string]map[string]bool // owner uid → dependent keys
	items     map[string]*store.Item     // key → item, for objects with owners or GC finalizers
}

// New returns the garbage collector; it writes through dyn.
func New(reader controller.Reader, dyn dynamic.Interface, log *slog.Logger) *Collector {
	return &Collector{reader: reader, dynamic: dyn, log: log, queue: controller.NewQueue("garbage-collector"),
		following: map[*store.Cache]func(){}, dependent: map[string]map[string]bool{}, items: map[string]*store.Item{}}
}

// Name implements controller.Controller.
func (g *Collector) Name() string { return "garbage-collector" }

// Run implements controller.Controller: it follows the caches of every
// served resource and works the queue.
func (g *Collector) Run(ctx context.Context) {
	first := true
	g.reader.Subscribe(func(ix *registry.Index) {
		if ctx.Err() != nil {
			return // a term that ended
		}
		if first || ix.Changed == nil {
			first = false
			g.followAll(ix)
			return
		}
		g.followChanged(ix)
	})
	controller.Work(ctx, g.Name(), g.queue, 2, g.log, g.process)
	g.mu.Lock()
	g.ended = true
	var stop []func()
	for c, end := range g.following {
		stop = append(stop, end)
		delete(g.following, c)
	}
	g.mu.Unlock()
	for _, end := range stop {
		end()
	}
}

// followAll starts following new caches and stops following gone ones. It
// runs under the registry lock: it must not block.
func (g *Collector) followAll(ix *registry.Index) {
	want := map[*store.Cache]bool{}
	for _, res := range ix.Resources {
		if res.Cache != nil {
			want[res.Cache] = true
		}
	}
	var start []*store.Cache
	var stop []func()
	g.mu.Lock()
	for c := range want {
		if _, ok := g.following[c]; !ok {
			start = append(start, c)
		}
	}
	for c, end := range g.following {
		if !want[c] {
			stop = append(stop, end)
			delete(g.following, c)
		}
	}
	g.crdCaches = map[string]*store.Cache{}
	for name, res := range ix.CRDResources {
		if res.Cache != nil {
			g.crdCaches[name] = res.Cache
		}
	}
	g.mu.Unlock()
	g.apply(start, stop)
}

// followChanged follows the caches of the CRDs that changed since the
// last Index.
func (g *Collector) followChanged(ix *registry.Index) {
	var start []*store.Cache
	var stop []func()
	g.mu.Lock()
	for _, name := range ix.Changed {
		var now *store.Cache
		if res := ix.CRDResources[name]; res != nil {
			now = res.Cache
		}
		before := g.crdCaches[name]
		if before == now {
			continue
		}
		if before != nil {
			if end, ok := g.following[before]; ok {
				stop = append(stop, end)
				delete(g.following, before)
			}
			delete(g.crdCaches, name)
		}
		if now != nil {
			if _, ok := g.following[now]; !ok {
				start = append(start, now)
			}
			g.crdCaches[name] = now
		}
	}
	g.mu.Unlock()
	g.apply(start, stop)
}

// apply stops and starts observing caches. The observers run under a
// cache's lock and take g.mu: a cache is observed without holding g.mu.
func (g *Collector) apply(start []*store.Cache, stop []func()) {
	for _, end := range stop {
		end()
	}
	for _, c := range start {
		end := c.Observe(func(items []*store.Item, _ int64) {
			for _, it := range items {
				g.observe(it, false)
			}
		}, func(ev store.Event) {
			g.observe(ev.Item, ev.Type == store.Deleted)
		})
		g.mu.Lock()
		if g.ended {
			g.mu.Unlock()
			end()
			continue
		}
		g.following[c] = end
		g.mu.Unlock()
	}
}

// observe updates the index with one object and queues what it affects.
func (g *Collector) observe(it *store.Item, deleted bool) {
	g.mu.Lock()
	old := g.items[it.Key]
	if old != nil {
		for _, o := range resource.LifecycleOf(old).Owners {
			if deps := g.dependent[o.UID]; deps != nil {
				delete(deps, it.Key)
				if len(deps) == 0 {
					delete(g.dependent, o.UID)
				}
			}
		}
		delete(g.items, it.Key)
	}
	lc := resource.LifecycleOf(it)
	gcFinalizer := slices.Contains(lc.Finalizers, metav1.FinalizerOrphanDependents) || slices.Contains(lc.Finalizers, metav1.FinalizerDeleteDependents)
	if !deleted && (len(lc.Owners) > 0 || gcFinalizer) {
		g.items[it.Key] = it
		for _, o := range resource.LifecycleOf(it).Owners {
			if g.dependent[o.UID] == nil {
				g.dependent[o.UID] = map[string]bool{}
			}
			g.dependent[o.UID][it.Key] = true
		}
	}
	var wake []string
	if deleted || resource.LifecycleOf(it).Deleting {
		// Its dependents may now be orphans, or waiting owners may go on.
		for dep := range g.dependent[it.UID] {
			wake = append(wake, dep)
		}
		for _, o := range resource.LifecycleOf(it).Owners {
			for owner, oit := range g.items {
				if oit.UID == o.UID {
					wake = append(wake, owner)
				}
			}
		}
	}
	g.mu.Unlock()
	if !deleted && (len(resource.LifecycleOf(it).Owners) > 0 || (resource.LifecycleOf(it).Deleting && gcFinalizer)) {
		g.queue.Add(it.Key)
	}
	for _, k := range wake {
		g.queue.Add(k)
	}
}

// resourceFor finds the served resource of a key, and of an owner
// reference.
func (g *Collector) resourceForKey(key string) *resource.Resource {
	var best *resource.Resource
	for _, res := range g.reader.Index().Resources {
		if res.KeyPrefix != "" && len(key) > len(res.KeyPrefix) && key[:len(res.KeyPrefix)] == res.KeyPrefix && (best == nil || len(res.KeyPrefix) > len(best.KeyPrefix)) {
			best = res
		}
	}
	return best
}

func (g *Collector) resourceForOwner(o resource.Owner) *resource.Resource {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return nil
	}
	for _, res := range g.reader.Index().Resources {
		if res.Group == gv.Group && res.Kind == o.Kind && res.Cache != nil {
			return res
		}
	}
	return nil
}

// ownerState says whether an owner exists (with that uid) and whether it
// is being deleted in the foreground. An owner missing from the cache is
// looked up live before it is called gone, as the cache may lag behind;
// an owner of a kind that is not served is never called gone.
func (g *Collector) ownerState(ctx context.Context, o resource.Owner, namespace string) (exists, foreground bool, err error) {
	res := g.resourceForOwner(o)
	if res == nil || len(res.Versions) == 0 {
		return true, false, nil
	}
	ns := ""
	if res.Namespaced {
		ns = namespace
	}
	it, _ := res.Cache.Get(res.Key(ns, o.Name))
	if it != nil && it.UID == o.UID {
		return true, resource.LifecycleOf(it).Deleting && slices.Contains(resource.LifecycleOf(it).Finalizers, metav1.FinalizerDeleteDependents), nil
	}
	live, err := g.dynamic.Resource(gvrOf(res)).Namespace(ns).Get(ctx, o.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, false, nil
	case err != nil:
		return false, false, err
	case string(live.GetUID()) != o.UID:
		return false, false, nil
	}
	return true, live.GetDeletionTimestamp() != nil && slices.Contains(live.GetFinalizers(), metav1.FinalizerDeleteDependents), nil
}

// gvrOf is where the collector reaches a resource's objects: its storage
// version, which needs no conversion.
func gvrOf(res *resource.Resource) schema.GroupVersionResource { return controller.StorageGVR(res) }

// process looks at one object: as a dependent, and as an owner that is
// being deleted with orphan or foreground propagation.
func (g *Collector) process(ctx context.Context, key string) error {
	res := g.resourceForKey(key)
	if res == nil || len(res.Versions) == 0 {
		return nil
	}
	it, _ := res.Cache.Get(key)
	if it == nil {
		return nil
	}
	client := g.dynamic.Resource(gvrOf(res)).Namespace(it.Namespace)
	if !res.Namespaced {
		client = g.dynamic.Resource(gvrOf(res)).Namespace("")
	}
	uid := types.UID(it.UID)

	// As an owner.
	if resource.LifecycleOf(it).Deleting {
		switch {
		case slices.Contains(resource.LifecycleOf(it).Finalizers, metav1.FinalizerOrphanDependents):
			if err := g.orphan(ctx, it); err != nil {
				return err
			}
			return g.removeFinalizer(ctx, client, it, metav1.FinalizerOrphanDependents)
		case slices.Contains(resource.LifecycleOf(it).Finalizers, metav1.FinalizerDeleteDependents):
			blocking, err := g.deleteDependents(ctx, it)
			if err != nil || blocking {
				return err
			}
			return g.removeFinalizer(ctx, client, it, metav1.FinalizerDeleteDependents)
		}
	}

	// As a dependent.
	if len(resource.LifecycleOf(it).Owners) == 0 || resource.LifecycleOf(it).Deleting {
		return nil
	}
	var gone []string
	solid, waiting := 0, false
	for _, o := range resource.LifecycleOf(it).Owners {
		exists, fg, err := g.ownerState(ctx, o, it.Namespace)
		switch {
		case err != nil:
			return err
		case !exists:
			gone = append(gone, o.UID)
		case fg:
			waiting = true
		default:
			solid++
		}
	}
	switch {
	case solid == 0 && waiting:
		// An owner is deleted in the foreground: so is this.
		fg := metav1.DeletePropagationForeground
		return g.delete(ctx, client, it.Name, uid, &fg)
	case solid == 0 && len(gone) > 0:
		bg := metav1.DeletePropagationBackground
		return g.delete(ctx, client, it.Name, uid, &bg)
	case len(gone) > 0:
		return g.dropOwners(ctx, client, it, gone)
	}
	return nil
}

func (g *Collector) delete(ctx context.Context, client dynamic.ResourceInterface, name string, uid types.UID, policy *metav1.DeletionPropagation) error {
	err := client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: policy})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// dependentsOf returns the cached dependents of an owner.
func (g *Collector) dependentsOf(uid string) []*store.Item {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*store.Item
	for key := range g.dependent[uid] {
		if it := g.items[key]; it != nil {
			out = append(out, it)
		}
	}
	return out
}

// deleteDependents deletes an owner's dependents and reports whether any
// that blocks the owner's deletion is still there.
func (g *Collector) deleteDependents(ctx context.Context, owner *store.Item) (bool, error) {
	blocking := false
	for _, dep := range g.dependentsOf(owner.UID) {
		res := g.resourceForKey(dep.Key)
		if res == nil || len(res.Versions) == 0 {
			continue
		}
		for _, o := range resource.LifecycleOf(dep).Owners {
			if o.UID == owner.UID && o.BlockOwnerDeletion {
				blocking = true
			}
		}
		if resource.LifecycleOf(dep).Deleting {
			continue
		}
		fg := metav1.DeletePropagationForeground
		if err := g.delete(ctx, g.dynamic.Resource(gvrOf(res)).Namespace(dep.Namespace), dep.Name, types.UID(dep.UID), &fg); err != nil {
			return true, err
		}
	}
	return blocking, nil
}

// orphan removes the references to an owner from its dependents.
func (g *Collector) orphan(ctx context.Context, owner *store.Item) error {
	for _, dep := range g.dependentsOf(owner.UID) {
		res := g.resourceForKey(dep.Key)
		if res == nil || len(res.Versions) == 0 {
			continue
		}
		if err := g.dropOwners(ctx, g.dynamic.Resource(gvrOf(res)).Namespace(dep.Namespace), dep, []string{owner.UID}); err != nil {
			return err
		}
	}
	return nil
}

// dropOwners removes ownerReferences by uid, guarded by the object's uid.
func (g *Collector) dropOwners(ctx context.Context, client dynamic.ResourceInterface, it *store.Item, uids []string) error {
	var refs []map[string]any
	for _, o := range resource.LifecycleOf(it).Owners {
		if slices.Contains(uids, o.UID) {
			continue
		}
		ref := map[string]any{"apiVersion": o.APIVersion, "kind": o.Kind, "name": o.Name, "uid": o.UID}
		if o.BlockOwnerDeletion {
			ref["blockOwnerDeletion"] = true
		}
		refs = append(refs, ref)
	}
	// Guarded by uid and resourceVersion: a conflict reads the object
	// again.
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": it.UID, "resourceVersion": strconv.FormatInt(it.Rev, 10), "ownerReferences": refs}})
	_, err := client.Patch(ctx, it.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "garbage-collector"})
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}

func (g *Collector) removeFinalizer(ctx context.Context, client dynamic.ResourceInterface, it *store.Item, finalizer string) error {
	var keep []string
	for _, f := range resource.LifecycleOf(it).Finalizers {
		if f != finalizer {
			keep = append(keep, f)
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": it.UID, "resourceVersion": strconv.FormatInt(it.Rev, 10), "finalizers": keep}})
	_, err := client.Patch(ctx, it.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "garbage-collector"})
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}
