package corekinds

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	netutils "k8s.io/utils/net"
)

var servicesGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}

// KubernetesService is the Service kube-apiserver creates for itself:
// default/kubernetes, the first IP of the primary range, https 443 to
// the server's port.
func KubernetesService(ranges []*net.IPNet, port int) (*unstructured.Unstructured, error) {
	if len(ranges) == 0 {
		ranges = []*net.IPNet{DefaultServiceClusterIPRange}
	}
	ip, err := netutils.GetIndexedIP(ranges[0], 1)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{
			"name": "kubernetes", "namespace": metav1.NamespaceDefault,
			"labels": map[string]any{"provider": "kubernetes", "component": "apiserver"},
		},
		"spec": map[string]any{
			"ports":           []any{map[string]any{"name": "https", "port": int64(443), "protocol": "TCP", "targetPort": int64(port)}},
			"clusterIP":       ip.String(),
			"sessionAffinity": "None",
			"type":            "ClusterIP",
		},
	}}, nil
}

// EnsureKubernetesService creates svc (KubernetesService) unless it
// exists, as every kube-apiserver does; replicas race for it, and the one
// that loses (its IP taken, or the name) finds it created. It tries every
// retry for attempts at most, while the namespace or the other replica's
// create is under way.
func EnsureKubernetesService(ctx context.Context, dyn dynamic.Interface, svc *unstructured.Unstructured, retry time.Duration, attempts int, log *slog.Logger) error {
	services := dyn.Resource(servicesGVR).Namespace(metav1.NamespaceDefault)
	var err error
	for range attempts {
		if _, err = services.Get(ctx, svc.GetName(), metav1.GetOptions{}); err == nil {
			return nil
		}
		if _, err = services.Create(ctx, svc, metav1.CreateOptions{}); err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retry):
		}
	}
	log.Warn("the kubernetes Service was not created", "err", err)
	return fmt.Errorf("create the kubernetes Service: %w", err)
}
