package registry

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Start runs the registry's controllers with a client of the server's own
// API (a loopback config): the CRD controllers (names, established,
// cleanup on delete) and the namespace controller. It creates the system
// namespaces (ctx bounds that) and returns; the controllers run until Stop.
func (r *Registry) Start(ctx context.Context, cfg *rest.Config) error {
	var err error
	if r.crdClient, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return err
	}
	if r.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	r.queue = newQueue()
	r.running = map[string]bool{}
	if err := r.WaitReady(ctx); err != nil {
		return err
	}
	if err := r.ensureSystemNamespaces(ctx); err != nil {
		return err
	}
	go r.followCRDs(r.ctx)
	go r.followNamespaces(r.ctx)
	go r.followMigrations(r.ctx)
	go r.crdWorker(r.ctx)
	go newCollector(r).run(r.ctx)
	go r.runRBAC(r.ctx)
	return nil
}

func (r *Registry) ensureSystemNamespaces(ctx context.Context) error {
	nsr := r.dyn.Resource(corev1.SchemeGroupVersion.WithResource("namespaces"))
	for _, name := range systemNamespaces {
		if it, _ := r.namespaces.Cache.Get(r.namespaces.Key("", name)); it != nil {
			continue
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name},
		}}
		if _, err := nsr.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}

// follow calls sync with the whole state of a cache, then event for every
// change, and starts over (sync again) whenever the cache ends the watch,
// until ctx ends.
func follow(ctx context.Context, c *store.Cache, sync func(items []*store.Item, rev int64), event func(store.Event)) {
	for ctx.Err() == nil {
		w, initial, _, rev, err := c.Watch(ctx, store.WatchOptions{FromState: true})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		sync(initial, rev)
	events:
		for {
			select {
			case <-ctx.Done():
				w.Stop()
				return
			case <-w.Done():
				break events
			case ev := <-w.Events():
				event(ev)
			}
		}
	}
}

// followCRDs keeps the registry in step with the stored CRDs.
func (r *Registry) followCRDs(ctx context.Context) {
	follow(ctx, r.crds.Cache, func(items []*store.Item, rev int64) {
		seen := sets.New[string]()
		for _, it := range items {
			seen.Insert(it.Name)
			r.applyCRD(it)
		}
		r.mu.Lock()
		var gone []string
		for name := range r.defs {
			if !seen.Has(name) {
				gone = append(gone, name)
			}
		}
		r.mu.Unlock()
		for _, name := range gone {
			r.removeCRD(name)
		}
		r.markApplied(rev)
		r.synced.Store(true)
	}, func(ev store.Event) {
		switch ev.Type {
		case store.Added, store.Modified:
			r.applyCRD(ev.Item)
		case store.Deleted:
			r.removeCRD(ev.Item.Name)
		}
		r.markApplied(ev.Rev)
	})
}

func (r *Registry) applyCRD(it *store.Item) {
	crd, err := decodeCRD(it.Raw)
	if err != nil {
		r.log.Error("undecodable CRD", "name", it.Name, "err", err)
		return
	}
	r.mu.Lock()
	e := r.defs[crd.Name]
	if e == nil {
		e = &crdEntry{}
		r.defs[crd.Name] = e
	}
	e.crd = crd
	old := e.res
	e.res = nil
	if servable(crd) && !r.builtinOverlap(crd) {
		prefix := crPrefix(crd)
		cache := r.caches[prefix]
		if cache == nil {
			cache = store.NewCache(r.store, prefix, resource.DecodeItem, r.cacheOpts, r.log)
			r.caches[prefix] = cache
		}
		if e.schemas == nil || e.schemaGen != crd.Generation {
			schemas, err := compileSchemas(crd)
			if err != nil {
				// CRD validation refuses what does not compile; log it.
				r.log.Error("CRD schema", "crd", crd.Name, "err", err)
			}
			e.schemas, e.schemaGen, e.schemaRev = schemas, crd.Generation, it.Rev
			e.conv = nil
		}
		if e.conv == nil || !apiequality.Semantic.DeepEqual(e.convSpec, crd.Spec.Conversion) {
			conv, err := conversion.ForCRD(crd, r.conversion)
			if err != nil {
				// Served without conversion between versions: reads in another
				// version fail with the reason.
				r.log.Warn("CRD conversion", "crd", crd.Name, "err", err)
				conv = failingConverter{err}
			}
			e.conv = &schemaConverter{inner: conv, schemas: e.schemas, schemaRev: e.schemaRev}
			e.convSpec = crd.Spec.Conversion.DeepCopy()
		}
		e.res = customResourceFor(crd, cache, e.conv, e.schemas)
	}
	if old != nil && old.Converter != nil && (e.res == nil || old.Converter != e.res.Converter) {
		if c, ok := old.Converter.(interface{ Close() }); ok {
			// Requests in flight may still use it: close idle connections only.
			c.Close()
		}
	}
	r.publish()
	r.mu.Unlock()
	r.queue.add(crd.Name)
}

// builtinOverlap: a CRD may not take over a built-in resource.
func (r *Registry) builtinOverlap(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, b := range r.builtins {
		if b.Group == crd.Spec.Group && b.Plural == crd.Status.AcceptedNames.Plural {
			return true
		}
	}
	return false
}

func (r *Registry) removeCRD(name string) {
	r.mu.Lock()
	e := r.defs[name]
	delete(r.defs, name)
	var stop *store.Cache
	var group string
	if e != nil {
		group = e.crd.Spec.Group
		prefix := crPrefix(e.crd)
		if c := r.caches[prefix]; c != nil {
			stop = c
			delete(r.caches, prefix)
		}
	}
	r.publish()
	var others []string
	for n, o := range r.defs {
		if o.crd.Spec.Group == group {
			others = append(others, n)
		}
	}
	r.mu.Unlock()
	if stop != nil {
		go stop.Stop()
	}
	// Names the CRD held are free again.
	for _, n := range others {
		r.queue.add(n)
	}
}

func (r *Registry) crdWorker(ctx context.Context) {
	for {
		name, ok := r.queue.get(ctx)
		if !ok {
			return
		}
		if err := r.syncCRD(ctx, name); err != nil {
			if ctx.Err() != nil {
				return
			}
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				r.log.Warn("CRD controller", "crd", name, "err", err)
			}
			go func() {
				time.Sleep(200 * time.Millisecond)
				r.queue.add(name)
			}()
		}
	}
}

func (r *Registry) currentCRD(name string) *apiextensionsv1.CustomResourceDefinition {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.defs[name]; e != nil {
		return e.crd.DeepCopy()
	}
	return nil
}

// syncCRD drives one CRD: names accepted, then established; cleanup once
// it is deleted.
func (r *Registry) syncCRD(ctx context.Context, name string) error {
	crd := r.currentCRD(name)
	if crd == nil {
		return nil
	}
	if crd.DeletionTimestamp != nil {
		if apihelpers.CRDHasFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer) {
			r.startOnce("crd/"+name, func() { r.cleanupCRD(ctx, name) })
		}
		return nil
	}
	names, namesCond, estCond := r.acceptNames(crd)
	if !reflect.DeepEqual(names, crd.Status.AcceptedNames) ||
		!apihelpers.IsCRDConditionEquivalent(&namesCond, apihelpers.FindCRDCondition(crd, apiextensionsv1.NamesAccepted)) ||
		!apihelpers.IsCRDConditionEquivalent(&estCond, apihelpers.FindCRDCondition(crd, apiextensionsv1.Established)) {
		crd.Status.AcceptedNames = names
		apihelpers.SetCRDCondition(crd, namesCond)
		apihelpers.SetCRDCondition(crd, estCond)
		_, err := r.crdClient.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		return err
	}
	// The registry serves the resource from the moment its names were
	// accepted (this worker runs after the registry applied that state):
	// it is established.
	if namesCond.Status == apiextensionsv1.ConditionTrue && !isEstablished(crd) {
		apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
			Type:    apiextensionsv1.Established,
			Status:  apiextensionsv1.ConditionTrue,
			Reason:  "InitialNamesAccepted",
			Message: "the initial names have been accepted",
		})
		_, err := r.crdClient.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		return err
	}
	return nil
}

// acceptNames decides which of a CRD's requested names it may have: a name
// another CRD of the group already holds is refused, as Kubernetes' naming
// controller does, and the CRD keeps the names it had.
func (r *Registry) acceptNames(crd *apiextensionsv1.CustomResourceDefinition) (apiextensionsv1.CustomResourceDefinitionNames, apiextensionsv1.CustomResourceDefinitionCondition, apiextensionsv1.CustomResourceDefinitionCondition) {
	usedResources, usedKinds := sets.New[string](), sets.New[string]()
	r.mu.Lock()
	for n, e := range r.defs {
		if n == crd.Name || e.crd.Spec.Group != crd.Spec.Group {
			continue
		}
		an := e.crd.Status.AcceptedNames
		usedResources.Insert(an.Plural, an.Singular)
		usedResources.Insert(an.ShortNames...)
		usedKinds.Insert(an.Kind, an.ListKind)
	}
	r.mu.Unlock()
	for _, b := range r.builtins {
		if b.Group == crd.Spec.Group {
			usedResources.Insert(b.Plural, b.Singular)
			usedResources.Insert(b.ShortNames...)
			usedKinds.Insert(b.Kind, b.ListKind)
		}
	}

	cond := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue, Reason: "NoConflicts", Message: "no conflicts found"}
	conflict := func(reason, name string) {
		cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionFalse, reason, fmt.Sprintf("%q is already in use", name)
	}
	want, have := crd.Spec.Names, crd.Status.AcceptedNames
	out := have
	free := func(name, held string, used sets.Set[string]) bool {
		return name == held || !used.Has(name)
	}
	if free(want.Plural, have.Plural, usedResources) {
		out.Plural = want.Plural
	} else {
		conflict("PluralConflict", want.Plural)
	}
	if free(want.Singular, have.Singular, usedResources) {
		out.Singular = want.Singular
	} else {
		conflict("SingularConflict", want.Singular)
	}
	if !reflect.DeepEqual(want.ShortNames, have.ShortNames) {
		var taken []string
		for _, s := range want.ShortNames {
			if !slices.Contains(have.ShortNames, s) && usedResources.Has(s) {
				taken = append(taken, fmt.Sprintf("%q is already in use", s))
			}
		}
		if len(taken) == 0 {
			out.ShortNames = want.ShortNames
		} else {
			cond.Status, cond.Reason = apiextensionsv1.ConditionFalse, "ShortNamesConflict"
			cond.Message = taken[0]
			if len(taken) > 1 {
				cond.Message = "[" + joinComma(taken) + "]"
			}
		}
	}
	if free(want.Kind, have.Kind, usedKinds) {
		out.Kind = want.Kind
	} else {
		conflict("KindConflict", want.Kind)
	}
	if free(want.ListKind, have.ListKind, usedKinds) {
		out.ListKind = want.ListKind
	} else {
		conflict("ListKindConflict", want.ListKind)
	}
	out.Categories = want.Categories

	est := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse, Reason: "NotAccepted", Message: "not all names are accepted"}
	if old := apihelpers.FindCRDCondition(crd, apiextensionsv1.Established); old != nil {
		est = *old
	}
	if est.Status != apiextensionsv1.ConditionTrue && cond.Status == apiextensionsv1.ConditionTrue {
		est = apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse, Reason: "Installing", Message: "the initial names have been accepted"}
	}
	return out, cond, est
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

// startOnce runs f in a goroutine unless one for key is running.
func (r *Registry) startOnce(key string, f func()) {
	r.mu.Lock()
	if r.running[key] {
		r.mu.Unlock()
		return
	}
	r.running[key] = true
	r.mu.Unlock()
	go func() {
		defer func() {
			r.mu.Lock()
			delete(r.running, key)
			r.mu.Unlock()
		}()
		f()
	}()
}

// cleanupCRD deletes every object of a deleted CRD, then removes the
// cleanup finalizer so that the CRD goes too.
func (r *Registry) cleanupCRD(ctx context.Context, name string) {
	crds := r.crdClient.ApiextensionsV1().CustomResourceDefinitions()
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			time.Sleep(min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second))
		}
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			continue
		}
		if crd.DeletionTimestamp == nil || !apihelpers.CRDHasFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer) {
			return
		}
		if !apihelpers.IsCRDConditionPresentAndEqual(crd, apiextensionsv1.Terminating, apiextensionsv1.ConditionTrue) ||
			apihelpers.FindCRDCondition(crd, apiextensionsv1.Terminating).Reason != "InstanceDeletionInProgress" {
			apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
				Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
				Reason: "InstanceDeletionInProgress", Message: "CustomResource deletion is in progress",
			})
			if crd, err = crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err != nil {
				continue
			}
		}
		var cond apiextensionsv1.CustomResourceDefinitionCondition
		if isEstablished(crd) || servable(crd) {
			if err := r.deleteInstances(ctx, crd); err != nil {
				apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
					Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
					Reason: "InstanceDeletionCheck", Message: fmt.Sprintf("could not confirm zero CustomResources remaining: %v", err),
				})
				_, _ = crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
				continue
			}
			cond = apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionFalse, Reason: "InstanceDeletionCompleted", Message: "removed all instances"}
		} else {
			cond = apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionFalse, Reason: "NeverEstablished", Message: "resource was never established"}
		}
		apihelpers.SetCRDCondition(crd, cond)
		apihelpers.CRDRemoveFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer)
		if _, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err == nil || apierrors.IsNotFound(err) {
			return
		}
	}
}

// deleteInstances deletes a CRD's objects through the API (so that their
// finalizers are honoured) and waits up to a minute for them to be gone.
func (r *Registry) deleteInstances(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	r.mu.Lock()
	var res *resource.Resource
	if e := r.defs[crd.Name]; e != nil {
		res = e.res
	}
	r.mu.Unlock()
	if res == nil {
		return errors.New("resource is not served")
	}
	if len(res.Versions) == 0 {
		// No served version to go through: delete from storage.
		return r.deleteStored(ctx, res.KeyPrefix)
	}
	gvr := schema.GroupVersionResource{Group: res.Group, Version: res.Versions[0].Name, Resource: res.Plural}
	return r.deleteAll(ctx, res, gvr, "")
}

// deleteAll deletes every object of res (in namespace ns, or everywhere)
// and waits for them to be gone.
func (r *Registry) deleteAll(ctx context.Context, res *resource.Resource, gvr schema.GroupVersionResource, ns string) error {
	client := r.dyn.Resource(gvr)
	deadline := time.Now().Add(time.Minute)
	for {
		l := res.Cache.List(store.ListOptions{Namespace: ns})
		if len(l.Items) == 0 {
			// Confirm with a consistent read.
			list, err := r.listFrom(ctx, client, res, ns)
			if err != nil {
				return err
			}
			if len(list) == 0 {
				return nil
			}
		}
		namespaces := sets.New[string]()
		for _, it := range l.Items {
			namespaces.Insert(it.Namespace)
		}
		for n := range namespaces {
			var err error
			if res.Namespaced {
				err = client.Namespace(n).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			} else {
				err = client.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d objects remain", len(l.Items))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *Registry) listFrom(ctx context.Context, client dynamic.NamespaceableResourceInterface, res *resource.Resource, ns string) ([]unstructured.Unstructured, error) {
	var l *unstructured.UnstructuredList
	var err error
	if res.Namespaced && ns != "" {
		l, err = client.Namespace(ns).List(ctx, metav1.ListOptions{})
	} else {
		l, err = client.List(ctx, metav1.ListOptions{})
	}
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (r *Registry) deleteStored(ctx context.Context, prefix string) error {
	_, err := r.store.Client().Delete(ctx, prefix, clientv3.WithPrefix())
	return err
}

// followNamespaces starts the cleanup of namespaces being deleted.
func (r *Registry) followNamespaces(ctx context.Context) {
	check := func(it *store.Item) {
		obj, err := resource.DecodeObject(it.Raw)
		if err == nil && obj.Meta.DeletionTimestamp != nil {
			name := it.Name
			r.startOnce("ns/"+name, func() { r.cleanupNamespace(ctx, name) })
		}
	}
	follow(ctx, r.namespaces.Cache, func(items []*store.Item, _ int64) {
		for _, it := range items {
			check(it)
		}
	}, func(ev store.Event) {
		if ev.Type != store.Deleted {
			check(ev.Item)
		}
	})
}

// cleanupNamespace deletes every object in a terminating namespace, then
// finalizes it.
func (r *Registry) cleanupNamespace(ctx context.Context, name string) {
	nsr := r.dyn.Resource(corev1.SchemeGroupVersion.WithResource("namespaces"))
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			time.Sleep(min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second))
		}
		var failed error
		for _, res := range r.Index().Resources {
			if !res.Namespaced || len(res.Versions) == 0 || res.Cache == nil {
				continue
			}
			gvr := schema.GroupVersionResource{Group: res.Group, Version: res.Versions[0].Name, Resource: res.Plural}
			if err := r.deleteAll(ctx, res, gvr, name); err != nil {
				failed = err
			}
		}
		if failed != nil {
			r.log.Info("namespace cleanup: objects remain", "namespace", name, "err", failed)
			continue
		}
		ns, err := nsr.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			continue
		}
		_ = unstructured.SetNestedStringSlice(ns.Object, []string{}, "spec", "finalizers")
		if _, err := nsr.Update(ctx, ns, metav1.UpdateOptions{}, "finalize"); err == nil || apierrors.IsNotFound(err) {
			return
		}
	}
}

// queue is a set of CRD names to sync, each queued at most once.
type queue struct {
	mu    sync.Mutex
	items []string
	set   sets.Set[string]
	ready chan struct{}
}

func newQueue() *queue { return &queue{set: sets.New[string](), ready: make(chan struct{}, 1)} }

func (q *queue) add(name string) {
	if q == nil {
		return
	}
	q.mu.Lock()
	if !q.set.Has(name) {
		q.set.Insert(name)
		q.items = append(q.items, name)
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *queue) get(ctx context.Context) (string, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			name := q.items[0]
			q.items = q.items[1:]
			q.set.Delete(name)
			q.mu.Unlock()
			return name, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			return "", false
		}
	}
}
