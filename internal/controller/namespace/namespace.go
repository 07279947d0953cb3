// Package namespace is the namespace controller: it creates the system
// namespaces, and empties a deleted namespace — every namespaced object in
// it deleted through the API, their finalizers honoured — before removing
// the kubernetes finalizer so that the namespace goes, as
// kube-controller-manager's namespace controller does.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
}

// New returns the controller of the namespaces resource; it writes through
// dyn.
func New(reader controller.Reader, namespaces *resource.Resource, dyn dynamic.Interface, log *slog.Logger) *Controller {
	return &Controller{reader: reader, namespaces: namespaces, dynamic: dyn, log: log, queue: controller.NewQueue("namespace")}
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

// sync takes one step of a namespace's deletion: delete what is in it, and
// once nothing is, finalize it.
func (c *Controller) sync(ctx context.Context, name string) error {
	it, _ := c.namespaces.Cache.Get(c.namespaces.Key("", name))
	if it == nil || !resource.LifecycleOf(it).Deleting {
		return nil
	}
	var failed error
	left := 0
	seen := map[*store.Cache]bool{}
	for _, res := range c.reader.Index().Resources {
		// Resources that share their objects (both Event APIs) are
		// emptied once.
		if !res.Namespaced || res.Cache == nil || seen[res.Cache] {
			continue
		}
		seen[res.Cache] = true
		n, err := controller.DeleteAll(ctx, c.dynamic, res, name)
		left += n
		failed = errors.Join(failed, err)
	}
	if failed != nil {
		return failed
	}
	if left > 0 {
		return controller.Requeue()
	}
	nsr := c.dynamic.Resource(namespacesGVR)
	ns, err := nsr.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_ = unstructured.SetNestedStringSlice(ns.Object, []string{}, "spec", "finalizers")
	if _, err := nsr.Update(ctx, ns, metav1.UpdateOptions{}, "finalize"); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
