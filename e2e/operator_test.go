package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// This file runs an operator as people write them with controller-runtime:
// a manager with its defaults (leader election on a Lease, an event
// recorder), whose controller reconciles CronTabs into a ConfigMap and a
// Secret it owns. A second instance waits for the lead and takes over when
// the first stops; deleting a CronTab garbage-collects what it owned.

// opReconciler keeps, for every CronTab, a ConfigMap and a Secret named
// after it, owned by it, holding its image; it records an Event through
// both Event APIs each time it writes them.
type opReconciler struct {
	client   client.Client
	scheme   *runtime.Scheme
	identity string
	legacy   record.EventRecorder   // core v1 Events
	events   recorder.EventRecorder // events.k8s.io/v1 Events
}

func (r *opReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var ct crtCronTab
	if err := r.client.Get(ctx, req.NamespacedName, &ct); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ct.Namespace, Name: ct.Name + "-config"}}
	cmResult, err := controllerutil.CreateOrUpdate(ctx, r.client, cm, func() error {
		cm.Data = map[string]string{"image": ct.Spec.Image, "reconciler": r.identity}
		return controllerutil.SetControllerReference(&ct, cm, r.scheme)
	})
	if err != nil {
		return reconcile.Result{}, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ct.Namespace, Name: ct.Name + "-secret"}}
	secretResult, err := controllerutil.CreateOrUpdate(ctx, r.client, secret, func() error {
		secret.StringData = map[string]string{"token": "for-" + ct.Spec.Image}
		return controllerutil.SetControllerReference(&ct, secret, r.scheme)
	})
	if err != nil {
		return reconcile.Result{}, err
	}
	if cmResult != controllerutil.OperationResultNone || secretResult != controllerutil.OperationResultNone {
		r.legacy.Eventf(&ct, corev1.EventTypeNormal, "Synced", "config %s, secret %s by %s", cmResult, secretResult, r.identity)
		r.events.Eventf(&ct, cm, corev1.EventTypeNormal, "Synced", "Reconcile", "config %s by %s", cmResult, r.identity)
	}
	return reconcile.Result{}, nil
}

// opInstance is one running instance of the operator.
type opInstance struct {
	mgr      manager.Manager
	cancel   context.CancelFunc
	stopped  chan error
	stopOnce sync.Once
}

// startOperator starts an instance of the operator that leads on the Lease
// default/crt-operator with short, test-sized durations.
func startOperator(t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, identity string) *opInstance {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              "crt-operator",
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: false, // a stopped leader is replaced when its lease expires
		LeaseDuration:                 ptr.To(4 * time.Second),
		RenewDeadline:                 ptr.To(3 * time.Second),
		RetryPeriod:                   ptr.To(500 * time.Millisecond),
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("new manager %s: %v", identity, err)
	}
	rec := &opReconciler{client: mgr.GetClient(), scheme: scheme, identity: identity,
		legacy: mgr.GetEventRecorderFor("crt-operator"), events: mgr.GetEventRecorder("crt-operator")} //nolint:staticcheck // the old API is what most operators still use
	if err := builder.ControllerManagedBy(mgr).For(&crtCronTab{}).
		Owns(&corev1.ConfigMap{}).Owns(&corev1.Secret{}).
		Named("crt-operator").Complete(rec); err != nil {
		t.Fatalf("build the controller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	op := &opInstance{mgr: mgr, cancel: cancel, stopped: make(chan error, 1)}
	go func() { op.stopped <- mgr.Start(ctx) }()
	t.Cleanup(op.stop)
	return op
}

// stop stops the instance and waits (a minute at most) for its manager
// to return.
func (op *opInstance) stop() {
	op.stopOnce.Do(func() {
		op.cancel()
		select {
		case <-op.stopped:
		case <-time.After(time.Minute):
		}
	})
}

func (op *opInstance) leads() bool {
	select {
	case <-op.mgr.Elected():
		return true
	default:
		return false
	}
}

func TestOperator(t *testing.T) {
	crtSetLogger(t)
	srv := startServer(t)
	cfg := srv.restConfig(t)
	cfg.QPS = -1
	scheme := crtScheme(t)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := c.Create(ctx, readCRD(t)); err != nil {
		t.Fatalf("create the CRD: %v", err)
	}
	waitEstablished(t, cfg)
	const ns = "operator"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	// The first instance takes the lead, the second waits.
	a := startOperator(t, cfg, scheme, "a")
	crtEventually(t, "instance a leads", func(context.Context) (bool, error) { return a.leads(), nil }, func() string { return "" })
	b := startOperator(t, cfg, scheme, "b")
	var lease coordinationv1.Lease
	if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "crt-operator"}, &lease); err != nil {
		t.Fatalf("the manager's Lease: %v", err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") == "" || ptr.Deref(lease.Spec.LeaseDurationSeconds, 0) != 4 {
		t.Fatalf("lease %+v", lease.Spec)
	}

	// A CronTab gets its ConfigMap and Secret, owned by it, and Events.
	one := &crtCronTab{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one"}, Spec: crtCronTabSpec{CronSpec: "* * * * *", Image: "img-1"}}
	if err := c.Create(ctx, one); err != nil {
		t.Fatal(err)
	}
	opWaitOwned(t, c, ns, "one", "img-1", "a")
	if b.leads() {
		t.Fatal("both instances lead")
	}
	// Both Event APIs hold the recorder's Events about it: the ones it
	// wrote through each, seen through both.
	crtEventually(t, "Events about the CronTab", func(ctx context.Context) (bool, error) {
		var legacy corev1.EventList
		if err := c.List(ctx, &legacy, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": "one", "involvedObject.kind": "CronTab"}); err != nil {
			return false, err
		}
		var modern eventsv1.EventList
		if err := c.List(ctx, &modern, client.InNamespace(ns), client.MatchingFields{"regarding.name": "one"}); err != nil {
			return false, err
		}
		reporters := map[string]bool{}
		for _, e := range modern.Items {
			if e.Reason == "Synced" {
				reporters[e.ReportingController+"|"+e.Action] = true
			}
		}
		return len(legacy.Items) >= 2 && reporters["crt-operator|Reconcile"] && len(modern.Items) == len(legacy.Items), nil
	}, func() string { return "" })

	// What it owns is kept: a deleted ConfigMap comes back (Owns).
	if err := c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one-config"}}); err != nil {
		t.Fatal(err)
	}
	opWaitOwned(t, c, ns, "one", "img-1", "a")

	// The leader stops without releasing its Lease: the other takes over
	// once the lease expires, and its controller works.
	stoppedAt := time.Now()
	a.stop()
	crtEventually(t, "instance b leads", func(context.Context) (bool, error) { return b.leads(), nil }, func() string { return "" })
	t.Logf("the second instance leads %v after the first stopped (lease duration 4 s)", time.Since(stoppedAt).Round(10*time.Millisecond))
	two := &crtCronTab{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two"}, Spec: crtCronTabSpec{CronSpec: "* * * * *", Image: "img-2"}}
	if err := c.Create(ctx, two); err != nil {
		t.Fatal(err)
	}
	opWaitOwned(t, c, ns, "two", "img-2", "b")

	// Deleting a CronTab garbage-collects its ConfigMap and Secret.
	if err := c.Delete(ctx, one); err != nil {
		t.Fatal(err)
	}
	crtEventually(t, "the CronTab's ConfigMap and Secret collected", func(ctx context.Context) (bool, error) {
		cmErr := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "one-config"}, &corev1.ConfigMap{})
		secErr := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "one-secret"}, &corev1.Secret{})
		return apierrors.IsNotFound(cmErr) && apierrors.IsNotFound(secErr), nil
	}, func() string { return "" })
	// two's are untouched.
	opWaitOwned(t, c, ns, "two", "img-2", "b")
}

// opWaitOwned waits until the CronTab's ConfigMap and Secret hold image,
// written by the instance named reconciler, with the CronTab as their
// controller owner.
func opWaitOwned(t *testing.T, c client.Client, ns, name, image, reconciler string) {
	t.Helper()
	var last string
	crtEventually(t, "the ConfigMap and Secret of "+name, func(ctx context.Context) (bool, error) {
		var ct crtCronTab
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ct); err != nil {
			return false, err
		}
		var cm corev1.ConfigMap
		var secret corev1.Secret
		err := errors.Join(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-config"}, &cm),
			c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-secret"}, &secret))
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("configmap %v owners %v; secret %v owners %v", cm.Data, cm.OwnerReferences, secret.Data, secret.OwnerReferences)
		owned := func(refs []metav1.OwnerReference) bool {
			return len(refs) == 1 && refs[0].UID == ct.UID && refs[0].Kind == "CronTab" && ptr.Deref(refs[0].Controller, false)
		}
		return cm.Data["image"] == image && cm.Data["reconciler"] == reconciler && owned(cm.OwnerReferences) &&
			string(secret.Data["token"]) == "for-"+image && secret.Type == corev1.SecretTypeOpaque && owned(secret.OwnerReferences), nil
	}, func() string { return last })
}
