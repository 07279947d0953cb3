package registry

import (
	"context"
	"encoding/json"
	"time"

	"github.com/crdserver/crdserver/internal/rbac"
	"github.com/crdserver/crdserver/internal/store"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// followRBAC keeps the RBAC store in step with the four watch caches, and
// wakes the aggregation controller on ClusterRole changes.
func (r *Registry) followRBAC(ctx context.Context, aggregate chan<- struct{}) {
	for _, k := range rbacKinds {
		k := k
		res := r.rbacResources[k.kind]
		wake := func() {
			if k.kind == rbac.KindClusterRole {
				select {
				case aggregate <- struct{}{}:
				default:
				}
			}
		}
		go follow(ctx, res.Cache, func(items []*store.Item, _ int64) {
			r.rbac.Reset(k.kind)
			for _, it := range items {
				if err := r.rbac.Set(k.kind, it.Raw, false); err != nil {
					r.log.Warn("rbac", "object", it.Key, "err", err)
				}
			}
			wake()
		}, func(ev store.Event) {
			if err := r.rbac.Set(k.kind, ev.Item.Raw, ev.Type == store.Deleted); err != nil {
				r.log.Warn("rbac", "object", ev.Item.Key, "err", err)
			}
			wake()
		})
	}
}

// ensureRBACDefaults creates the default cluster roles and bindings, or
// brings stored ones up to date, as kube-apiserver does at start.
func (r *Registry) ensureRBACDefaults(ctx context.Context) error {
	roles := r.dyn.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
	for _, want := range rbac.DefaultClusterRoles() {
		want.TypeMeta = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: rbac.KindClusterRole}
		u, err := roles.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			obj, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&want)
			if _, err := roles.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: "crdserver-rbac-bootstrap"}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		have := &rbacv1.ClusterRole{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, have); err != nil {
			return err
		}
		if out, changed := rbac.ReconcileClusterRole(have, want); changed {
			obj, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
			if _, err := roles.Update(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{FieldManager: "crdserver-rbac-bootstrap"}); err != nil {
				return err
			}
		}
	}
	bindings := r.dyn.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"))
	for _, want := range rbac.DefaultClusterRoleBindings() {
		want.TypeMeta = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: rbac.KindClusterRoleBinding}
		u, err := bindings.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			obj, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&want)
			if _, err := bindings.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: "crdserver-rbac-bootstrap"}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		have := &rbacv1.ClusterRoleBinding{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, have); err != nil {
			return err
		}
		if out, changed := rbac.ReconcileClusterRoleBinding(have, want); changed {
			obj, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
			if _, err := bindings.Update(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{FieldManager: "crdserver-rbac-bootstrap"}); err != nil {
				return err
			}
		}
	}
	return nil
}

// runRBAC bootstraps the default policy (retrying until it is in place),
// then aggregates ClusterRoles whenever one changes.
func (r *Registry) runRBAC(ctx context.Context) {
	aggregate := make(chan struct{}, 1)
	r.followRBAC(ctx, aggregate)
	for ctx.Err() == nil {
		err := r.ensureRBACDefaults(ctx)
		if err == nil {
			break
		}
		r.log.Warn("rbac bootstrap", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	r.aggregateClusterRoles(ctx)
	r.rbacReady.Store(true)
	for {
		select {
		case <-ctx.Done():
			return
		case <-aggregate:
			r.aggregateClusterRoles(ctx)
		}
	}
}

// aggregateClusterRoles gives every ClusterRole with an aggregationRule
// the rules of the roles it selects, as kube-controller-manager's
// clusterrole-aggregation controller does. Roles that feed each other
// settle over a few passes (each write wakes the controller again).
func (r *Registry) aggregateClusterRoles(ctx context.Context) {
	all := r.rbac.ClusterRoles()
	roles := r.dyn.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
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
			r.log.Warn("clusterrole aggregation", "role", role.Name, "err", err)
		}
	}
}
