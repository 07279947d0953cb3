package apiservice

import (
	"context"
	"log/slog"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/crdserver/crdserver/internal/aggregator"
	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// ManagedLabel marks the APIServices this server manages, with how:
// "onstart" (made when the controller starts) or "true" (kept while the
// group/version is served), as kube-aggregator's autoregister controller
// marks them.
const ManagedLabel = "kube-aggregator.kubernetes.io/automanaged"

const (
	manageOnStart      = "onstart"
	manageContinuously = "true"
)

// Priority is an APIService's groupPriorityMinimum and versionPriority.
type Priority struct{ Group, Version int32 }

// BuiltinPriorities are the priorities of the built-in group/versions,
// kube-apiserver's (DefaultGenericAPIServicePriorities) for the groups
// crdserver serves, and crdserver's own group after them. Group/versions
// not listed get no APIService, as in kube-apiserver.
var BuiltinPriorities = map[schema.GroupVersion]Priority{
	{Group: "", Version: "v1"}:                                   {18000, 1},
	{Group: "events.k8s.io", Version: "v1"}:                      {17750, 15},
	{Group: "authentication.k8s.io", Version: "v1"}:              {17700, 15},
	{Group: "authorization.k8s.io", Version: "v1"}:               {17600, 15},
	{Group: "rbac.authorization.k8s.io", Version: "v1"}:          {17000, 15},
	{Group: "apiextensions.k8s.io", Version: "v1"}:               {16700, 15},
	{Group: "admissionregistration.k8s.io", Version: "v1"}:       {16700, 15},
	{Group: "admissionregistration.k8s.io", Version: "v1beta1"}:  {16700, 12},
	{Group: "admissionregistration.k8s.io", Version: "v1alpha1"}: {16700, 9},
	{Group: "coordination.k8s.io", Version: "v1"}:                {16500, 15},
	{Group: "storagemigration.k8s.io", Version: "v1"}:            {15800, 15},
	{Group: "storagemigration.k8s.io", Version: "v1beta1"}:       {15800, 9},
	{Group: "conversion.crdserver.io", Version: "v1alpha1"}:      {15700, 9},
}

// CRDPriority is the priority of a CRD's group/version, kube-apiserver's.
var CRDPriority = Priority{Group: 1000, Version: 100}

// syncKey is the one key of Local's queue: it syncs every APIService.
const syncKey = "all"

// Local keeps an APIService for every group/version this server serves.
type Local struct {
	reg         controller.Reader
	apiServices *resource.Resource
	dynamic     dynamic.Interface
	log         *slog.Logger
	queue       controller.Queue

	// agg holds the stored APIServices decoded (decoded again only when
	// written).
	agg *aggregator.Aggregator

	mu sync.Mutex
	// onStart are the "onstart" APIServices synced in this term.
	onStart map[string]bool
}

// NewLocal returns the controller; it reads what reg serves, follows the
// APIServices' cache, reads them decoded from agg, and writes through dyn.
func NewLocal(reg controller.Reader, apiServices *resource.Resource, agg *aggregator.Aggregator, dyn dynamic.Interface, log *slog.Logger) *Local {
	return &Local{reg: reg, apiServices: apiServices, agg: agg, dynamic: dyn, log: log, queue: controller.NewQueue("apiservice-local"), onStart: map[string]bool{}}
}

// Name implements controller.Controller.
func (c *Local) Name() string { return "apiservice-local" }

// Run implements controller.Controller.
func (c *Local) Run(ctx context.Context) {
	c.queue.Add(syncKey)
	c.reg.Subscribe(func(*registry.Index) { c.queue.Add(syncKey) })
	go store.Follow(ctx, c.apiServices.Cache, func([]*store.Item, int64) { c.queue.Add(syncKey) }, func(store.Event) { c.queue.Add(syncKey) })
	controller.Work(ctx, c.Name(), c.queue, 1, c.log, c.sync)
}

// Desired returns the APIServices of what ix serves, by name.
func Desired(ix *registry.Index) map[string]*apiregistrationv1.APIService {
	out := map[string]*apiregistrationv1.APIService{}
	for _, res := range ix.Resources {
		builtin := ix.Builtin[res]
		for _, v := range res.Versions {
			gv := schema.GroupVersion{Group: res.Group, Version: v.Name}
			p, how := CRDPriority, manageContinuously
			if builtin {
				var ok bool
				if p, ok = BuiltinPriorities[gv]; !ok {
					continue
				}
				how = manageOnStart
			}
			name := gv.Version + "." + gv.Group
			out[name] = &apiregistrationv1.APIService{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ManagedLabel: how}},
				Spec:       apiregistrationv1.APIServiceSpec{Group: gv.Group, Version: gv.Version, GroupPriorityMinimum: p.Group, VersionPriority: p.Version},
			}
		}
	}
	return out
}

func (c *Local) sync(ctx context.Context, _ string) error {
	desired := Desired(c.reg.Index())
	current := c.agg.APIServices()
	client := c.dynamic.Resource(apiServicesGVR)
	var errs []error
	for name, want := range desired {
		have := current[name]
		onStart := want.Labels[ManagedLabel] == manageOnStart
		c.mu.Lock()
		done := onStart && c.onStart[name]
		c.mu.Unlock()
		switch {
		case done:
			continue
		case have == nil:
			if _, err := client.Create(ctx, toUnstructured(want), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, err)
				continue
			}
		case have.Labels[ManagedLabel] == "":
			// Not this server's to manage.
		case !equality.Semantic.DeepEqual(have.Spec, want.Spec):
			next := have.DeepCopy()
			next.Spec = want.Spec
			if _, err := client.Update(ctx, toUnstructured(next), metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
				continue
			}
		}
		if onStart {
			c.mu.Lock()
			c.onStart[name] = true
			c.mu.Unlock()
		}
	}
	for name, have := range current {
		if desired[name] != nil || have.Labels[ManagedLabel] != manageContinuously {
			continue
		}
		// A CRD version that is no longer served.
		uid := have.UID
		err := client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

func toUnstructured(api *apiregistrationv1.APIService) *unstructured.Unstructured {
	u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(api)
	uo := &unstructured.Unstructured{Object: u}
	uo.SetAPIVersion(apiregistrationv1.SchemeGroupVersion.String())
	uo.SetKind("APIService")
	return uo
}
