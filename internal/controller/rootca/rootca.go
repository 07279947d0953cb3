// Package rootca is the root CA publisher: every active namespace has a
// ConfigMap kube-root-ca.crt holding the CA that signs the server's
// certificate, kept in step if it is edited or deleted, as
// kube-controller-manager's root-ca-cert-publisher does.
package rootca

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

// Name is the ConfigMap's name, and DataKey its key.
const (
	Name    = "kube-root-ca.crt"
	DataKey = "ca.crt"
)

// descriptionAnnotation says what the ConfigMap is for.
const descriptionAnnotation = "kubernetes.io/description"

const description = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."

var configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")

// Controller publishes the CA bundle in every namespace.
type Controller struct {
	namespaces, configMaps *resource.Resource
	ca                     string
	dynamic                dynamic.Interface
	log                    *slog.Logger
	queue                  controller.Queue
}

// New returns the controller of the CA bundle ca (PEM); it reads the
// caches of namespaces and configMaps and writes through dyn.
func New(namespaces, configMaps *resource.Resource, ca []byte, dyn dynamic.Interface, log *slog.Logger) *Controller {
	return &Controller{namespaces: namespaces, configMaps: configMaps, ca: string(ca), dynamic: dyn, log: log, queue: controller.NewQueue("root-ca-cert-publisher")}
}

// Name implements controller.Controller.
func (c *Controller) Name() string { return "root-ca-cert-publisher" }

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
	go store.Follow(ctx, c.configMaps.Cache, func([]*store.Item, int64) {}, func(ev store.Event) {
		if ev.Item.Name == Name {
			c.queue.Add(ev.Item.Namespace)
		}
	})
	controller.Work(ctx, c.Name(), c.queue, 1, c.log, c.sync)
}

// sync makes namespace ns's bundle what it should be, if ns is active.
func (c *Controller) sync(ctx context.Context, ns string) error {
	it, _ := c.namespaces.Cache.Get(c.namespaces.Key("", ns))
	if it == nil || resource.LifecycleOf(it).Deleting {
		return nil
	}
	cms := c.dynamic.Resource(configMapsGVR).Namespace(ns)
	cur, _ := c.configMaps.Cache.Get(c.configMaps.Key(ns, Name))
	if cur == nil {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": Name, "namespace": ns, "annotations": map[string]any{descriptionAnnotation: description}},
			"data":     map[string]any{DataKey: c.ca},
		}}
		_, err := cms.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	obj, err := resource.DecodeObject(cur.Bytes())
	if err != nil {
		return err
	}
	data, _ := obj.Content["data"].(map[string]any)
	if len(data) == 1 && data[DataKey] == c.ca && obj.Meta.Annotations[descriptionAnnotation] == description {
		return nil
	}
	u := &unstructured.Unstructured{Object: obj.ToUnstructured()}
	u.Object["data"] = map[string]any{DataKey: c.ca}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[descriptionAnnotation] = description
	u.SetAnnotations(ann)
	_, err = cms.Update(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
