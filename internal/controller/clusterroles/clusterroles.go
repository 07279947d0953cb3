// Package clusterroles is the controller of the default RBAC policy: at
// start it creates the default cluster roles and bindings, or brings stored
// ones up to date, as kube-apiserver's RBAC bootstrap does; then it gives
// every ClusterRole with an aggregationRule the rules of the roles it
// selects, as kube-controller-manager's clusterrole-aggregation controller
// does.
package clusterroles

import (
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/crdserver/crdserver/internal/auth/rbac"
	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/store"
)

const bootstrapManager = "crdserver-rbac-bootstrap"

// Controller bootstraps the default policy and aggregates cluster roles.
type Controller struct {
	clusterRoles *store.Cache
	dynamic      dynamic.Interface
	log          *slog.Logger
	queue        controller.Queue
	ready        atomic.Bool

	mu    sync.Mutex
	roles map[string]*rbacv1.ClusterRole // as the cache has them, by name
}

// New returns the controller of the clusterroles cache; it writes through
// dyn.
func New(clusterRoles *store.Cache, dyn dynamic.Interface, log *slog.Logger) *Controller {
	return &Controller{clusterRoles: clusterRoles, dynamic: dyn, log: log, queue: controller.NewQueue("clusterrole-aggregation"), roles: map[string]*rbacv1.ClusterRole{}}
}

// Name implements controller.Controller.
func (c *Controller) Name() string { return "clusterroles" }

// Ready reports whether the default roles and bindings are in place.
func (c *Controller) Ready() bool { return c.ready.Load() }

// aggregateKey is the one key of the queue: aggregation looks at every
// role at once.
const aggregateKey = "aggregate"

// Run implements controller.Controller.
func (c *Controller) Run(ctx context.Context) {
	go store.Follow(ctx, c.clusterRoles, func(items []*store.Item, _ int64) {
		c.mu.Lock()
		c.roles = map[string]*rbacv1.ClusterRole{}
		for _, it := range items {
			c.setLocked(it, false)
		}
		c.mu.Unlock()
		c.queue.Add(aggregateKey)
	}, func(ev store.Event) {
		c.mu.Lock()
		c.setLocked(ev.Item, ev.Type == store.Deleted)
		c.mu.Unlock()
		c.queue.Add(aggregateKey)
	})
	for ctx.Err() == nil {
		err := c.bootstrap(ctx)
		if err == nil {
			break
		}
		c.log.Warn("rbac bootstrap", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	// One pass of aggregation before the server says it is ready, on the
	// defaults as the cache has them.
	for ctx.Err() == nil && !c.hasDefaults() {
		time.Sleep(10 * time.Millisecond)
	}
	c.aggregate(ctx)
	c.ready.Store(true)
	controller.Work(ctx, c.Name(), c.queue, 1, c.log, func(ctx context.Context, _ string) error {
		c.aggregate(ctx)
		return nil
	})
}

// hasDefaults reports whether the cache has shown every default role.
func (c *Controller) hasDefaults() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rbac.DefaultClusterRoles() {
		if c.roles[r.Name] == nil {
			return false
		}
	}
	return true
}

func (c *Controller) setLocked(it *store.Item, deleted bool) {
	if deleted {
		delete(c.roles, it.Name)
		return
	}
	role := &rbacv1.ClusterRole{}
	if err := json.Unmarshal(it.Raw, role); err != nil {
		c.log.Warn("clusterrole aggregation", "role", it.Name, "err", err)
		return
	}
	c.roles[it.Name] = role
}

// bootstrap creates the default cluster roles and bindings, or brings
// stored ones up to date.
func (c *Controller) bootstrap(ctx context.Context) error {
	roles := c.dynamic.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
	for _, want := range rbac.DefaultClusterRoles() {
		want.TypeMeta = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: rbac.KindClusterRole}
		have := &rbacv1.ClusterRole{}
		err := reconcile(ctx, roles, want.Name, &want, have, func() (any, bool) { return rbac.ReconcileClusterRole(have, want) })
		if err != nil {
			return err
		}
	}
	bindings := c.dynamic.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"))
	for _, want := range rbac.DefaultClusterRoleBindings() {
		want.TypeMeta = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: rbac.KindClusterRoleBinding}
		have := &rbacv1.ClusterRoleBinding{}
		err := reconcile(ctx, bindings, want.Name, &want, have, func() (any, bool) { return rbac.ReconcileClusterRoleBinding(have, want) })
		if err != nil {
			return err
		}
	}
	return nil
}

// reconcile creates want if name does not exist; otherwise it reads it into
// have and writes what merge returns, if merge says it changed.
func reconcile(ctx context.Context, client dynamic.NamespaceableResourceInterface, name string, want, have any, merge func() (any, bool)) error {
	u, err := client.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
		if err != nil {
			return err
		}
		if _, err := client.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: bootstrapManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
	if err != nil {
		return err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, have); err != nil {
		return err
	}
	out, changed := merge()
	if !changed {
		return nil
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
	if err != nil {
		return err
	}
	_, err = client.Update(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{FieldManager: bootstrapManager})
	return err
}

// aggregate gives every ClusterRole with an aggregationRule the rules of
// the roles it selects. Roles that feed each other settle over a few
// passes (each write queues another pass).
func (c *Controller) aggregate(ctx context.Context) {
	c.mu.Lock()
	all := make([]*rbacv1.ClusterRole, 0, len(c.roles))
	for _, r := range c.roles {
		all = append(all, r)
	}
	c.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	roles := c.dynamic.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
	for _, role := range all {
		if role.AggregationRule == nil {
			continue
		}
		rules, ok := rbac.AggregatedRules(role, all)
		if !ok || apiequality.Semantic.DeepEqual(rules, role.Rules) || (len(rules) == 0 && len(role.Rules) == 0) {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": role.ResourceVersion}, "rules": rules})
		if _, err := roles.Patch(ctx, role.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "clusterrole-aggregation-controller"}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			c.log.Warn("clusterrole aggregation", "role", role.Name, "err", err)
		}
	}
}
