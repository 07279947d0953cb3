// Package serviceaccounts is the service account controller: every active
// namespace has a ServiceAccount named "default", made again if it is
// deleted, as kube-controller-manager's serviceaccount controller does.
package serviceaccounts

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// DefaultName is the ServiceAccount every namespace has.
const DefaultName = "default"

var serviceAccountsGVR = corev1.SchemeGroupVersion.WithResource("serviceaccounts")

// Controller keeps a default ServiceAccount in every namespace.
type Controller struct {
	namespaces, serviceAccounts *resource.Resource
	dynamic                     dynamic.Interface
	log                         *slog.Logger
	queue                       controller.Queue
}

// New returns the controller; it reads the caches of namespaces and
// serviceAccounts and writes through dyn.
func New(namespaces, serviceAccounts *resource.Resource, dyn dynamic.Interface, log *slog.Logger) *Controller {
	return &Controller{namespaces: namespaces, serviceAccounts: serviceAccounts, dynamic: dyn, log: log, queue: controller.NewQueue("serviceaccounts")}
}

// Name implements controller.Controller.
func (c *Controller) Name() string { return "serviceaccounts" }

// Run implements controller.Controller.
func (c *Controller) Run(ctx context.Context) {
	go store.Follow(ctx, c.namespaces.Cache, func(items []*store.Item, _ int64) {
		for _, it := range items {
			c.queue.Add(it.Name)
		}
	}, func(ev store.Event) {
		if ev.Type == store.Added {
			c.queue.Add(ev.Item.Name)
		}
	})
	go store.Follow(ctx, c.serviceAccounts.Cache, func([]*store.Item, int64) {}, func(ev store.Event) {
		if ev.Type == store.Deleted && ev.Item.Name == DefaultName {
			c.queue.Add(ev.Item.Namespace)
		}
	})
	controller.Work(ctx, c.Name(), c.queue, 1, c.log, c.sync)
}

// sync makes the default ServiceAccount of namespace ns if it is missing
// and the namespace is active.
func (c *Controller) sync(ctx context.Context, ns string) error {
	it, _ := c.namespaces.Cache.Get(c.namespaces.Key("", ns))
	if it == nil || resource.LifecycleOf(it).Deleting {
		return nil
	}
	if sa, _ := c.serviceAccounts.Cache.Get(c.serviceAccounts.Key(ns, DefaultName)); sa != nil {
		return nil
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"name": DefaultName, "namespace": ns},
	}}
	_, err := c.dynamic.Resource(serviceAccountsGVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		// Made meanwhile, or the namespace is going or gone.
		return nil
	}
	return err
}
