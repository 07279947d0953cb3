package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crdserver/crdserver/crdtest"
)

// TestCrdtestWithControllerRuntime is the README's "Testing controllers":
// a test's own crdserver from crdtest.Start, with the CRDs of a directory,
// and a controller-runtime manager whose reconciler gives every CronTab a
// ConfigMap it owns.
func TestCrdtestWithControllerRuntime(t *testing.T) {
	crtSetLogger(t)
	srv := crdtest.Start(t, crdtest.Options{CRDPaths: []string{crdFile}})
	cronTab := schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "CronTab"}

	mgr, err := ctrl.NewManager(srv.Config, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	ct := &unstructured.Unstructured{}
	ct.SetGroupVersionKind(cronTab)
	err = ctrl.NewControllerManagedBy(mgr).For(ct).Owns(&corev1.ConfigMap{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(cronTab)
			if err := mgr.GetClient().Get(ctx, req.NamespacedName, obj); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			image, _, _ := unstructured.NestedString(obj.Object, "spec", "image")
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: req.Name + "-config", Namespace: req.Namespace}}
			_, err := ctrl.CreateOrUpdate(ctx, mgr.GetClient(), cm, func() error {
				cm.Data = map[string]string{"image": image}
				return ctrl.SetControllerReference(obj, cm, mgr.GetScheme())
			})
			return reconcile.Result{}, err
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if err := mgr.Start(ctx); err != nil {
			t.Error(err)
		}
	}()

	c, err := client.New(srv.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "nightly", "namespace": "default"},
		"spec":     map[string]any{"cronSpec": "0 3 * * *", "image": "backup:1"},
	}}
	obj.SetGroupVersionKind(cronTab)
	if err := c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "nightly-config"}, cm)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("no ConfigMap from the reconciler: %v", err)
	}
	if cm.Data["image"] != "backup:1" || len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].Name != "nightly" {
		t.Fatalf("ConfigMap %+v", cm)
	}
}
