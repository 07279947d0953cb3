package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var gadgetGVK = schema.GroupVersionKind{Group: "envtest.example.com", Version: "v1", Kind: "Gadget"}

// TestEnvtestExistingCluster runs an envtest suite against crdserver, as
// the README tells users to: envtest.Environment with UseExistingCluster
// and KUBECONFIG set to crdserver's admin kubeconfig. envtest installs the
// CRDs of a directory and waits for them; a reconciler then works against
// the server.
func TestEnvtestExistingCluster(t *testing.T) {
	crtSetLogger(t)
	srv := startServer(t)
	t.Setenv("KUBECONFIG", srv.kubeconfig)

	env := &envtest.Environment{
		UseExistingCluster:    ptr.To(true),
		CRDDirectoryPaths:     []string{"testdata/envtest-crds"},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest start: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("envtest stop: %v", err)
		}
	})
	if len(env.CRDs) != 1 || env.CRDs[0].Name != "gadgets.envtest.example.com" {
		t.Fatalf("installed CRDs: %v", env.CRDs)
	}
	runGadgetReconciler(t, cfg)
}

// runGadgetReconciler runs a controller-runtime manager whose reconciler
// writes status.doubled = 2 * spec.size of the envtest-crds Gadgets, and
// checks it does, and that the CRD's schema is enforced. The manager
// stops when the test ends.
func runGadgetReconciler(t *testing.T, cfg *rest.Config) {
	t.Helper()
	mgr, err := manager.New(cfg, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	gadget := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gadgetGVK)
		return u
	}
	// The reconciler writes status.doubled = 2 * spec.size.
	err = builder.ControllerManagedBy(mgr).For(gadget()).Named("gadgets").Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		g := gadget()
		if err := mgr.GetClient().Get(ctx, req.NamespacedName, g); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		size, _, _ := unstructured.NestedInt64(g.Object, "spec", "size")
		if err := unstructured.SetNestedField(g.Object, 2*size, "status", "doubled"); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, mgr.GetClient().Status().Update(ctx, g)
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(time.Minute):
		}
	})

	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := gadget()
	g.SetNamespace("default")
	g.SetName("g1")
	_ = unstructured.SetNestedField(g.Object, int64(21), "spec", "size")
	if err := c.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	crtEventually(t, "the reconciler's status", func(ctx context.Context) (bool, error) {
		got := gadget()
		if err := c.Get(ctx, client.ObjectKeyFromObject(g), got); err != nil {
			return false, err
		}
		d, _, _ := unstructured.NestedInt64(got.Object, "status", "doubled")
		return d == 42, nil
	}, func() string { return "" })
	// The CRD's schema is enforced, as on any cluster.
	bad := gadget()
	bad.SetNamespace("default")
	bad.SetName("g2")
	_ = unstructured.SetNestedField(bad.Object, int64(0), "spec", "size")
	if err := c.Create(t.Context(), bad, &client.CreateOptions{Raw: &metav1.CreateOptions{}}); err == nil {
		t.Fatal("a gadget of size 0 was accepted")
	}
}
