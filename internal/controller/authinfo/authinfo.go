// Package authinfo publishes the ConfigMap
// kube-system/extension-apiserver-authentication: the CAs whose client
// certificates this server trusts, which servers that delegate
// authentication to it (aggregated API servers, kube-rbac-proxy, the
// k8s.io/apiserver delegating options) read, as kube-apiserver's
// cluster-authentication-trust controller does. Certificates already
// listed there (another server's) are kept, and the server's own added:
// servers of one cluster may trust different CAs.
package authinfo

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	certutil "k8s.io/client-go/util/cert"

	"github.com/crdserver/crdserver/internal/auth/rbac"
	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// ClientCAKey is the ConfigMap's key for the client CA bundle.
const ClientCAKey = "client-ca-file"

var configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")

// Controller keeps the authentication ConfigMap listing the client CAs.
type Controller struct {
	configMaps *resource.Resource
	clientCA   []byte
	dynamic    dynamic.Interface
	log        *slog.Logger
	queue      controller.Queue
}

// New returns the controller publishing clientCA (PEM certificates); it
// reads the ConfigMaps' cache and writes through dyn.
func New(configMaps *resource.Resource, clientCA []byte, dyn dynamic.Interface, log *slog.Logger) *Controller {
	return &Controller{configMaps: configMaps, clientCA: clientCA, dynamic: dyn, log: log, queue: controller.NewQueue("cluster-authentication-trust")}
}

// Name implements controller.Controller.
func (c *Controller) Name() string { return "cluster-authentication-trust" }

// Run implements controller.Controller.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Add(rbac.AuthenticationConfigMap)
	go store.Follow(ctx, c.configMaps.Cache, func([]*store.Item, int64) {}, func(ev store.Event) {
		if ev.Item.Namespace == metav1.NamespaceSystem && ev.Item.Name == rbac.AuthenticationConfigMap {
			c.queue.Add(rbac.AuthenticationConfigMap)
		}
	})
	controller.Work(ctx, c.Name(), c.queue, 1, c.log, c.sync)
}

func (c *Controller) sync(ctx context.Context, _ string) error {
	cms := c.dynamic.Resource(configMapsGVR).Namespace(metav1.NamespaceSystem)
	cur, _ := c.configMaps.Cache.Get(c.configMaps.Key(metav1.NamespaceSystem, rbac.AuthenticationConfigMap))
	if cur == nil {
		bundle, err := Combine(nil, c.clientCA)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": rbac.AuthenticationConfigMap, "namespace": metav1.NamespaceSystem},
			"data":     map[string]any{ClientCAKey: string(bundle)},
		}}
		if _, err := cms.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
	obj, err := resource.DecodeObject(cur.Bytes())
	if err != nil {
		return err
	}
	data, _ := obj.Content["data"].(map[string]any)
	have, _ := data[ClientCAKey].(string)
	bundle, err := Combine([]byte(have), c.clientCA)
	if err != nil {
		// What is stored is not PEM: the server's own CAs replace it.
		c.log.Warn("the authentication ConfigMap's client CAs do not parse; replacing them", "err", err)
		if bundle, err = Combine(nil, c.clientCA); err != nil {
			return err
		}
	}
	if have == string(bundle) {
		return nil
	}
	u := &unstructured.Unstructured{Object: obj.ToUnstructured()}
	if err := unstructured.SetNestedField(u.Object, string(bundle), "data", ClientCAKey); err != nil {
		return err
	}
	_, err = cms.Update(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		c.queue.Add(rbac.AuthenticationConfigMap)
		return nil
	}
	return err
}

// Combine returns the certificates of have, then those of add that have
// lacks, as one PEM bundle.
func Combine(have, add []byte) ([]byte, error) {
	var out bytes.Buffer
	seen := map[string]bool{}
	for _, pem := range [][]byte{have, add} {
		if len(bytes.TrimSpace(pem)) == 0 {
			continue
		}
		certs, err := certutil.ParseCertsPEM(pem)
		if err != nil {
			return nil, fmt.Errorf("client CA bundle: %w", err)
		}
		for _, cert := range certs {
			if seen[string(cert.Raw)] {
				continue
			}
			seen[string(cert.Raw)] = true
			b, err := certutil.EncodeCertificates(cert)
			if err != nil {
				return nil, err
			}
			out.Write(b)
		}
	}
	return out.Bytes(), nil
}
