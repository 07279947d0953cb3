// Package clusterroles holds the default RBAC policy's upkeep: Bootstrap
// creates the default cluster roles and bindings, or brings stored ones up
// to date, as kube-apiserver's RBAC bootstrap does on every replica; the
// Aggregator controller gives every ClusterRole with an aggregationRule the
// rules of the roles it selects, as kube-controller-manager's
// clusterrole-aggregation controller does (on the elected replica).
package clusterroles

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"sync"
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

// Aggregator aggregates cluster roles.
type Aggregator struct {
	clusterRoles *store.Cache
	dynamic      dynamic.Interface
	log          *slog.Logger
	queue        controller.Queue

	mu    sync.Mutex
	roles map[string]*rbacv1.ClusterRole // as the cache has them, by name
}

// NewAggregator returns the aggregation controller of the clusterroles
// cache; it writes through dyn.
func NewAggregator(clusterRoles *store.Cache, dyn dynamic.Interface, log *slog.Logger) *Aggregator {
	return &Aggregator{clusterRoles: clusterRoles, dynamic: dyn, log: log, queue: controller.NewQueue("clusterrole-aggregation"), roles: map[string]*rbacv1.ClusterRole{}}
}

// Name implements controller.Controller.
func (c *Aggregator) Name() string { return "clusterrole-aggregation" }

// aggregateKey is the one key of the queue: aggregation looks at every
// role at once.
const aggregateKey = "aggregate"

// Run implements controller.Controller.
func (c *Aggregator) Run(ctx context.Context) {
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
	controller.Work(ctx, c.Name(), c.queue, 1, c.log, func(ctx context.Context, _ string) error {
		c.aggregate(ctx)
		return nil
	})
}

func (c *Aggregator) setLocked(it *store.Item, deleted bool) {
	if deleted {
		delete(c.roles, it.Name)
		return
	}
	role := &rbacv1.ClusterRole{}
	if err := json.Unmarshal(it.Bytes(), role); err != nil {
		c.log.Warn("clusterrole aggregation", "role", it.Name, "err", err)
		return
	}
	c.roles[it.Name] = role
}

// settle returns copies of roles in which every role with an
// aggregationRule has the rules aggregation gives it, passes repeated
// until no role changes (at most one pass per role, which a chain of
// aggregations needs at worst). A role whose selectors do not parse keeps
// its rules.
func settle(roles []*rbacv1.ClusterRole) []*rbacv1.ClusterRole {
	out := make([]*rbacv1.ClusterRole, len(roles))
	for i, r := range roles {
		cp := *r
		out[i] = &cp
	}
	for range len(out) {
		changed := false
		for _, role := range out {
			if role.AggregationRule == nil {
				continue
			}
			rules, ok := rbac.AggregatedRules(role, out)
			if !ok || apiequality.Semantic.DeepEqual(rules, role.Rules) {
				continue
			}
			role.Rules, changed = rules, true
		}
		if !changed {
			break
		}
	}
	return out
}

// Bootstrap creates the default cluster roles and bindings, or brings
// stored ones up to date, trying again until it succeeds or ctx ends. Every
// replica runs it at start: the writes it needs are the same everywhere.
func Bootstrap(ctx context.Context, dyn dynamic.Interface, log *slog.Logger) error {
	return retry(ctx, log, func() error { return bootstrap(ctx, dyn) })
}

// BootstrapRoles is Bootstrap for the default roles and bindings in
// kube-system, once that namespace exists.
func BootstrapRoles(ctx context.Context, dyn dynamic.Interface, log *slog.Logger) error {
	return retry(ctx, log, func() error { return bootstrapRoles(ctx, dyn) })
}

func retry(ctx context.Context, log *slog.Logger, f func() error) error {
	for {
		err := f()
		if err == nil || ctx.Err() != nil {
			return err
		}
		log.Warn("rbac bootstrap", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func bootstrap(ctx context.Context, dyn dynamic.Interface) error {
	// Every role and binding at once: concurrent writes share etcd's
	// commits and disk syncs, so a new server's defaults (a write each)
	// are in place in a few of them rather than one after the other.
	var g group
	// What is stored already, in one list each (not a GET per role).
	roles := dyn.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
	storedRoles, err := byName(ctx, roles)
	if err != nil {
		return err
	}
	bindings := dyn.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"))
	storedBindings, err := byName(ctx, bindings)
	if err != nil {
		return err
	}
	defaults := rbac.DefaultClusterRoles()
	aggregated := aggregatedAtCreate(storedRoles, defaults)
	for _, want := range defaults {
		if rules, ok := aggregated[want.Name]; ok {
			want.Rules = rules
		}
		g.do(func() error {
			want.TypeMeta = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: rbac.KindClusterRole}
			have := &rbacv1.ClusterRole{}
			return reconcile(ctx, roles, storedRoles[want.Name], &want, have, func() (any, bool) { return rbac.ReconcileClusterRole(have, want) })
		})
	}
	for _, want := range rbac.DefaultClusterRoleBindings() {
		g.do(func() error {
			want.TypeMeta = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: rbac.KindClusterRoleBinding}
			have := &rbacv1.ClusterRoleBinding{}
			return reconcile(ctx, bindings, storedBindings[want.Name], &want, have, func() (any, bool) { return rbac.ReconcileClusterRoleBinding(have, want) })
		})
	}
	return g.wait()
}

// group runs functions at once and joins their errors.
type group struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

func (g *group) do(f func() error) {
	g.wg.Go(func() {
		if err := f(); err != nil {
			g.mu.Lock()
			g.errs = append(g.errs, err)
			g.mu.Unlock()
		}
	})
}

func (g *group) wait() error {
	g.wg.Wait()
	return errors.Join(g.errs...)
}

// aggregatedAtCreate are the rules of each default role with an
// aggregationRule that is not stored yet: what aggregation gives it from
// the roles stored and the defaults about to be created. They are created
// with them, as the aggregation controller would write them a moment later
// (it then finds nothing to change): readiness, which waits for the
// aggregated defaults to have their rules, does not wait for the elected
// replica's controller and three more writes. A stored role that does not
// decode is left out, as the controller leaves it out.
func aggregatedAtCreate(stored map[string]*unstructured.Unstructured, defaults []rbacv1.ClusterRole) map[string][]rbacv1.PolicyRule {
	missing := false
	for i := range defaults {
		missing = missing || (defaults[i].AggregationRule != nil && stored[defaults[i].Name] == nil)
	}
	if !missing {
		return nil // a server started before: nothing to create
	}
	all := make([]*rbacv1.ClusterRole, 0, len(stored)+len(defaults))
	for _, u := range stored {
		role := &rbacv1.ClusterRole{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, role); err == nil {
			all = append(all, role)
		}
	}
	for i := range defaults {
		if stored[defaults[i].Name] == nil {
			all = append(all, &defaults[i])
		}
	}
	// In the aggregation controller's order, for the same rules.
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	out := map[string][]rbacv1.PolicyRule{}
	for _, role := range settle(all) {
		if role.AggregationRule != nil && stored[role.Name] == nil {
			out[role.Name] = role.Rules
		}
	}
	return out
}

// bootstrapRoles writes the default roles and bindings of kube-system (a
// GET each: they are few), all at once.
func bootstrapRoles(ctx context.Context, dyn dynamic.Interface) error {
	var g group
	for _, want := range rbac.DefaultRoles() {
		g.do(func() error {
			want.TypeMeta = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: rbac.KindRole}
			client := dyn.Resource(rbacv1.SchemeGroupVersion.WithResource("roles"))
			stored, err := getStored(ctx, client, want.Namespace, want.Name)
			if err != nil {
				return err
			}
			have := &rbacv1.Role{}
			return reconcile(ctx, client.Namespace(want.Namespace), stored, &want, have, func() (any, bool) { return rbac.ReconcileRole(have, want) })
		})
	}
	for _, want := range rbac.DefaultRoleBindings() {
		g.do(func() error {
			want.TypeMeta = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: rbac.KindRoleBinding}
			client := dyn.Resource(rbacv1.SchemeGroupVersion.WithResource("rolebindings"))
			stored, err := getStored(ctx, client, want.Namespace, want.Name)
			if err != nil {
				return err
			}
			have := &rbacv1.RoleBinding{}
			return reconcile(ctx, client.Namespace(want.Namespace), stored, &want, have, func() (any, bool) { return rbac.ReconcileRoleBinding(have, want) })
		})
	}
	return g.wait()
}

// getStored reads one namespaced object; nil if there is none.
func getStored(ctx context.Context, client dynamic.NamespaceableResourceInterface, ns, name string) (*unstructured.Unstructured, error) {
	u, err := client.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return u, err
}

// byName lists a resource's objects, by name.
func byName(ctx context.Context, client dynamic.NamespaceableResourceInterface) (map[string]*unstructured.Unstructured, error) {
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].GetName()] = &list.Items[i]
	}
	return out, nil
}

// reconcile creates want if it is not stored (u is nil); otherwise it
// reads u into have and writes what merge returns, if merge says it
// changed. Another replica may create it meanwhile: that is as good.
func reconcile(ctx context.Context, client dynamic.ResourceInterface, u *unstructured.Unstructured, want, have any, merge func() (any, bool)) error {
	if u == nil {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
		if err != nil {
			return err
		}
		if _, err := client.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: bootstrapManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
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
// the roles it selects. Roles that feed each other (admin aggregates edit,
// which aggregates view) settle first in memory, so that each role is
// written once with its final rules rather than once per pass.
func (c *Aggregator) aggregate(ctx context.Context) {
	c.mu.Lock()
	stored := make([]*rbacv1.ClusterRole, 0, len(c.roles))
	for _, r := range c.roles {
		stored = append(stored, r)
	}
	c.mu.Unlock()
	sort.Slice(stored, func(i, j int) bool { return stored[i].Name < stored[j].Name })
	settled := settle(stored)
	roles := c.dynamic.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
	// The roles are written at once (readiness waits for the default
	// ones): each patch names the revision it was computed from.
	var wg sync.WaitGroup
	for i, role := range stored {
		rules := settled[i].Rules
		if role.AggregationRule == nil || apiequality.Semantic.DeepEqual(rules, role.Rules) || (len(rules) == 0 && len(role.Rules) == 0) {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": role.ResourceVersion}, "rules": rules})
		wg.Go(func() {
			if _, err := roles.Patch(ctx, role.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "clusterrole-aggregation-controller"}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				c.log.Warn("clusterrole aggregation", "role", role.Name, "err", err)
			}
		})
	}
	wg.Wait()
}
