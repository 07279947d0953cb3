// Package namespace is the namespace controller: it creates the system
// namespaces, and empties a deleted namespace — every namespaced object in
// it deleted through the API, their finalizers honoured — before removing
// the kubernetes finalizer so that the namespace goes, as
// kube-controller-manager's namespace controller does. Meanwhile the
// namespace's status conditions say what is left in it, held by which
// finalizers, and what failed (NamespaceContentRemaining,
// NamespaceFinalizersRemaining, NamespaceDeletionContentFailure and the
// rest), worded as Kubernetes words them.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/crdserver/crdserver/internal/apis/core"
	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

var namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")

// Controller empties deleted namespaces.
type Controller struct {
	reader     controller.Reader
	namespaces *resource.Resource
	dynamic    dynamic.Interface
	log        *slog.Logger
	queue      controller.Queue
	// now is the time a condition is set at.
	now func() metav1.Time
}

// New returns the controller of the namespaces resource; it writes through
// dyn.
func New(reader controller.Reader, namespaces *resource.Resource, dyn dynamic.Interface, log *slog.Logger) *Controller {
	return &Controller{reader: reader, namespaces: namespaces, dynamic: dyn, log: log, queue: controller.NewQueue("namespace"), now: metav1.Now}
}

// Name implements controller.Controller.
func (c *Controller) Name() string { return "namespace" }

// EnsureSystemNamespaces creates default, kube-system, kube-public and
// kube-node-lease where they are missing.
func (c *Controller) EnsureSystemNamespaces(ctx context.Context) error {
	nsr := c.dynamic.Resource(namespacesGVR)
	// All at once: concurrent creates share etcd's commits and disk syncs.
	var wg sync.WaitGroup
	errs := make([]error, len(core.SystemNamespaces))
	for i, name := range core.SystemNamespaces {
		if it, _ := c.namespaces.Cache.Get(c.namespaces.Key("", name)); it != nil {
			continue
		}
		wg.Go(func() {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name},
			}}
			if _, err := nsr.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				errs[i] = fmt.Errorf("create namespace %s: %w", name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Run implements controller.Controller.
func (c *Controller) Run(ctx context.Context) {
	check := func(it *store.Item) {
		if resource.LifecycleOf(it).Deleting {
			c.queue.Add(it.Name)
		}
	}
	go store.Follow(ctx, c.namespaces.Cache, func(items []*store.Item, _ int64) {
		for _, it := range items {
			check(it)
		}
	}, func(ev store.Event) {
		if ev.Type != store.Deleted {
			check(ev.Item)
		}
	})
	controller.Work(ctx, c.Name(), c.queue, 2, c.log, c.sync)
}

// sync takes one step of a namespace's deletion, as
// kube-controller-manager's namespace controller does: delete what is in it,
// say in its status conditions what is left and why, and once nothing is,
// remove the kubernetes finalizer.
func (c *Controller) sync(ctx context.Context, name string) error {
	it, _ := c.namespaces.Cache.Get(c.namespaces.Key("", name))
	if it == nil || !resource.LifecycleOf(it).Deleting {
		return nil
	}
	nsr := c.dynamic.Resource(namespacesGVR)
	u, err := nsr.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var ns corev1.Namespace
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ns); err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil || len(ns.Spec.Finalizers) == 0 {
		return nil
	}

	found := c.deleteContent(ctx, name)

	now := c.now()
	changed := updateConditions(&ns.Status, found.conditions(now), now)
	if ns.Status.Phase != corev1.NamespaceTerminating {
		ns.Status.Phase = corev1.NamespaceTerminating
		changed = true
	}
	if changed {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ns)
		if err != nil {
			return err
		}
		updated, err := nsr.UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		u = updated
	}
	if len(found.errs) > 0 {
		return errors.Join(found.errs...)
	}
	if found.left() {
		return controller.Requeue()
	}
	return c.finalize(ctx, u)
}

// deleteContent asks the API to delete every object in namespace ns, and
// reports what is left: per resource, the objects a consistent list still
// finds after the deletion, with their finalizers. Resources that share
// their objects (both Event APIs) are emptied and listed once, and
// counted under each of their names, as the namespace controller of
// Kubernetes counts what discovery lists.
func (c *Controller) deleteContent(ctx context.Context, ns string) *content {
	found := newContent()
	type left struct {
		n          int
		finalizers map[string]int
		err        error
	}
	seen := map[*store.Cache]*left{}
	for _, res := range c.reader.Index().Resources {
		if !res.Namespaced || res.Cache == nil || !slices.Contains(res.Verbs, "delete") {
			continue
		}
		l := seen[res.Cache]
		if l == nil {
			l = &left{}
			l.n, l.finalizers, l.err = c.deleteResource(ctx, res, ns)
			seen[res.Cache] = l
			if l.err != nil {
				found.errs = append(found.errs, l.err)
			}
		}
		found.add(res.Plural, res.Group, l.n, l.finalizers)
	}
	return found
}

// deleteResource deletes the objects of res in namespace ns, and returns
// how many a consistent list still finds there and how many of those carry
// each finalizer. Where the watch cache holds none, a consistent list of
// one object confirms that before anything is deleted. Where every object
// the cache holds is already being deleted and waits on a finalizer, there
// is nothing to delete: they are counted as the cache has them (a namespace
// waiting on a finalizer is looked at again and again).
func (c *Controller) deleteResource(ctx context.Context, res *resource.Resource, ns string) (int, map[string]int, error) {
	gvr := controller.StorageGVR(res)
	rc := c.dynamic.Resource(gvr).Namespace(ns)
	cached := res.Cache.List(store.ListOptions{Namespace: ns}).Items
	if len(cached) == 0 {
		list, err := rc.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return 0, nil, err
		}
		if len(list.Items) == 0 {
			return 0, nil, nil
		}
	} else if finalizers := held(cached); finalizers != nil {
		return len(cached), finalizers, nil
	}
	// Background: the garbage collector is not to add the orphan finalizer.
	background := metav1.DeletePropagationBackground
	err := rc.DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &background}, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
		return 0, nil, err
	}
	list, err := rc.List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, nil, err
	}
	if len(list.Items) == 0 {
		return 0, nil, nil
	}
	finalizers := map[string]int{}
	for _, item := range list.Items {
		for _, f := range item.GetFinalizers() {
			finalizers[f]++
		}
	}
	if len(finalizers) == 0 {
		// Deleted objects without finalizers are gone: these are not.
		return len(list.Items), nil, fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", ns, preferredGVR(res))
	}
	return len(list.Items), finalizers, nil
}

// held counts the finalizers of items when every one of them is being
// deleted and has a finalizer; otherwise it returns nil.
func held(items []*store.Item) map[string]int {
	finalizers := map[string]int{}
	for _, it := range items {
		l := resource.LifecycleOf(it)
		if !l.Deleting || len(l.Finalizers) == 0 {
			return nil
		}
		for _, f := range l.Finalizers {
			finalizers[f]++
		}
	}
	return finalizers
}

// preferredGVR is res in its preferred version, as discovery lists it.
func preferredGVR(res *resource.Resource) schema.GroupVersionResource {
	v := res.StorageVersion
	if len(res.Versions) > 0 {
		v = res.Versions[0].Name
	}
	return schema.GroupVersionResource{Group: res.Group, Version: v, Resource: res.Plural}
}

// finalize removes the kubernetes finalizer from the namespace u, through
// its finalize subresource; the namespace goes once no finalizer is left.
func (c *Controller) finalize(ctx context.Context, u *unstructured.Unstructured) error {
	finalizers, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "finalizers")
	kept := []string{}
	for _, f := range finalizers {
		if f != string(corev1.FinalizerKubernetes) {
			kept = append(kept, f)
		}
	}
	if len(kept) == len(finalizers) {
		return nil
	}
	// The others stay, sorted and once each, as Kubernetes leaves them.
	slices.Sort(kept)
	kept = slices.Compact(kept)
	u = u.DeepCopy()
	_ = unstructured.SetNestedStringSlice(u.Object, kept, "spec", "finalizers")
	if _, err := c.dynamic.Resource(namespacesGVR).Update(ctx, u, metav1.UpdateOptions{}, "finalize"); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
