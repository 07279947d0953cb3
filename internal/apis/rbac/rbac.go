package rbac

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/crdserver/crdserver/internal/auth"
	rbacpolicy "github.com/crdserver/crdserver/internal/auth/rbac"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// rbacKind describes one of the four RBAC resources.
type rbacKind struct {
	kind, plural, singular string
	namespaced             bool
	prefix                 string
}

// Where the RBAC objects live in etcd.
const (
	ClusterRolePrefix        = "/registry/clusterroles/"
	RolePrefix               = "/registry/roles/"
	ClusterRoleBindingPrefix = "/registry/clusterrolebindings/"
	RoleBindingPrefix        = "/registry/rolebindings/"
)

var (
	clusterRoleKind        = rbacKind{rbacpolicy.KindClusterRole, "clusterroles", "clusterrole", false, ClusterRolePrefix}
	roleKind               = rbacKind{rbacpolicy.KindRole, "roles", "role", true, RolePrefix}
	clusterRoleBindingKind = rbacKind{rbacpolicy.KindClusterRoleBinding, "clusterrolebindings", "clusterrolebinding", false, ClusterRoleBindingPrefix}
	roleBindingKind        = rbacKind{rbacpolicy.KindRoleBinding, "rolebindings", "rolebinding", true, RoleBindingPrefix}
	rbacKinds              = []rbacKind{clusterRoleKind, roleKind, clusterRoleBindingKind, roleBindingKind}
)

func (k rbacKind) binding() bool { return strings.HasSuffix(k.kind, "Binding") }

// goType is the kind's Go type, for strategic merge patch.
func (k rbacKind) goType() any {
	switch k.kind {
	case rbacpolicy.KindClusterRole:
		return &rbacv1.ClusterRole{}
	case rbacpolicy.KindRole:
		return &rbacv1.Role{}
	case rbacpolicy.KindClusterRoleBinding:
		return &rbacv1.ClusterRoleBinding{}
	default:
		return &rbacv1.RoleBinding{}
	}
}

// resourceFor serves one RBAC resource from the same engine as every other.
func resourceFor(k rbacKind, cache *store.Cache, st *rbacpolicy.Store) *resource.Resource {
	return &resource.Resource{
		Group:                    rbacv1.GroupName,
		Plural:                   k.plural,
		Singular:                 k.singular,
		Kind:                     k.kind,
		ListKind:                 k.kind + "List",
		Namespaced:               k.namespaced,
		Versions:                 []*resource.Version{{Name: "v1"}},
		StorageVersion:           "v1",
		KeyPrefix:                k.prefix,
		Cache:                    cache,
		Strategy:                 rbacStrategy{k: k, store: st},
		Converter:                conversion.None{},
		StrategicMergeType:       k.goType(),
		Table:                    rbacTable{binding: k.binding()},
		FieldManagers:            resource.BuiltinFieldManagers(rbacv1.GroupName, k.kind, false),
		AllowUnconditionalUpdate: true,
		Protobuf:                 true,
		ValidateName:             validatePathSegmentName,
		Verbs:                    []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	}
}

// rbacStrategy holds Kubernetes' rules for roles and bindings, and its
// escalation checks.
type rbacStrategy struct {
	k     rbacKind
	store *rbacpolicy.Store
}

func (s rbacStrategy) typed() any {
	switch s.k.kind {
	case rbacpolicy.KindClusterRole:
		return &rbacv1.ClusterRole{}
	case rbacpolicy.KindRole:
		return &rbacv1.Role{}
	case rbacpolicy.KindClusterRoleBinding:
		return &rbacv1.ClusterRoleBinding{}
	}
	return &rbacv1.RoleBinding{}
}

// decode reads an object into its RBAC type.
func (s rbacStrategy) decode(obj *resource.Object) (any, error) {
	t := s.typed()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.ToUnstructured(), t); err != nil {
		return nil, err
	}
	return t, nil
}

// Normalize decodes a body through its RBAC type.
func (s rbacStrategy) Normalize(obj *resource.Object) ([]error, error) {
	t := s.typed()
	strict, err := resource.DecodeStrict(obj, t)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version \"v1\" cannot be handled as a %s: %v", s.k.kind, s.k.kind, err))
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(t)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	meta, _ := u["metadata"].(map[string]any)
	delete(u, "metadata")
	obj.Content = u
	var om metav1.ObjectMeta
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(meta, &om); err == nil {
		obj.Meta = om
	}
	return strict, nil
}

func (rbacStrategy) PrepareForCreate(context.Context, *resource.Object)            {}
func (rbacStrategy) PrepareForUpdate(_ context.Context, obj, old *resource.Object) {}

func (s rbacStrategy) Validate(_ context.Context, obj *resource.Object) field.ErrorList {
	t, err := s.decode(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	switch o := t.(type) {
	case *rbacv1.ClusterRole:
		errs := validateRules(o.Rules, false)
		if o.AggregationRule != nil {
			p := field.NewPath("aggregationRule", "clusterRoleSelectors")
			if len(o.AggregationRule.ClusterRoleSelectors) == 0 {
				errs = append(errs, field.Required(p, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
			}
			for i := range o.AggregationRule.ClusterRoleSelectors {
				errs = append(errs, metav1validation.ValidateLabelSelector(&o.AggregationRule.ClusterRoleSelectors[i], metav1validation.LabelSelectorValidationOptions{}, p.Index(i))...)
			}
		}
		return errs
	case *rbacv1.Role:
		return validateRules(o.Rules, true)
	case *rbacv1.ClusterRoleBinding:
		return validateBinding(o.RoleRef, o.Subjects, false)
	case *rbacv1.RoleBinding:
		return validateBinding(o.RoleRef, o.Subjects, true)
	}
	return nil
}

func (s rbacStrategy) ValidateUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	errs := s.Validate(ctx, obj)
	if s.k.binding() {
		ref, _, _ := unstructured.NestedMap(obj.Content, "roleRef")
		oldRef, _, _ := unstructured.NestedMap(old.Content, "roleRef")
		if !apiequality.Semantic.DeepEqual(ref, oldRef) {
			errs = append(errs, field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef"))
		}
	}
	return errs
}

func validateRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, r := range rules {
		p := field.NewPath("rules").Index(i)
		if len(r.Verbs) == 0 {
			errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(r.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(r.APIGroups) == 0 {
			errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(r.Resources) == 0 {
			errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}

func validateBinding(ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(p.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{rbacpolicy.KindClusterRole}
	if namespaced {
		kinds = []string{rbacpolicy.KindRole, rbacpolicy.KindClusterRole}
	}
	if !slices.Contains(kinds, ref.Kind) {
		errs = append(errs, field.NotSupported(p.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range validatePathSegmentName(ref.Name, false) {
			errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
		}
	}
	for i, sub := range subjects {
		sp := field.NewPath("subjects").Index(i)
		if sub.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), ""))
		}
		switch sub.Kind {
		case rbacv1.ServiceAccountKind:
			if sub.APIGroup != "" {
				errs = append(errs, field.NotSupported(sp.Child("apiGroup"), sub.APIGroup, []string{""}))
			}
			if !namespaced && sub.Namespace == "" {
				errs = append(errs, field.Required(sp.Child("namespace"), ""))
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if sub.APIGroup != rbacv1.GroupName {
				errs = append(errs, field.NotSupported(sp.Child("apiGroup"), sub.APIGroup, []string{rbacv1.GroupName}))
			}
		default:
			errs = append(errs, field.NotSupported(sp.Child("kind"), sub.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
		}
	}
	return errs
}

// fullAuthority is cluster-admin's rules: what an aggregationRule may
// gather.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// Admit refuses, as Kubernetes does, a role that grants what its writer
// does not hold (without the escalate verb) and a binding to a role whose
// permissions its writer does not hold (without the bind verb).
func (s rbacStrategy) Admit(ctx context.Context, obj, old *resource.Object) error {
	u, ok := auth.UserFrom(ctx)
	if !ok || slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return nil
	}
	gr := schema.GroupResource{Group: rbacv1.GroupName, Resource: s.k.plural}
	t, err := s.decode(obj)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	ns := obj.Meta.Namespace
	authz := auth.AuthorizerFrom(ctx, auth.DefaultChain(s.store))
	allowed := func(verb, resource, name string) bool {
		d, _, _ := authz.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: rbacv1.GroupName, APIVersion: "v1",
			Resource: resource, Name: name, Namespace: ns, ResourceRequest: true})
		return d == authorizer.DecisionAllow
	}
	var oldT any
	if old != nil {
		if oldT, err = s.decode(old); err != nil {
			return apierrors.NewInternalError(err)
		}
	}
	switch o := t.(type) {
	case *rbacv1.ClusterRole:
		var before *rbacv1.ClusterRole
		if oldT != nil {
			before = oldT.(*rbacv1.ClusterRole)
		}
		if allowed("escalate", s.k.plural, o.Name) {
			return nil
		}
		if before == nil || !apiequality.Semantic.DeepEqual(before.Rules, o.Rules) {
			if err := s.store.ConfirmNoEscalation(u, "", o.Rules); err != nil {
				return apierrors.NewForbidden(gr, o.Name, err)
			}
		}
		if o.AggregationRule != nil && (before == nil || !apiequality.Semantic.DeepEqual(before.AggregationRule, o.AggregationRule)) {
			if err := s.store.ConfirmNoEscalation(u, "", fullAuthority); err != nil {
				return apierrors.NewForbidden(gr, o.Name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
			}
		}
	case *rbacv1.Role:
		if allowed("escalate", s.k.plural, o.Name) {
			return nil
		}
		if oldT != nil && apiequality.Semantic.DeepEqual(oldT.(*rbacv1.Role).Rules, o.Rules) {
			return nil
		}
		if err := s.store.ConfirmNoEscalation(u, ns, o.Rules); err != nil {
			return apierrors.NewForbidden(gr, o.Name, err)
		}
	case *rbacv1.ClusterRoleBinding:
		if oldT != nil && onlyGCFields(obj, old) {
			return nil
		}
		return s.admitBinding(u, gr, o.Name, o.RoleRef, "", allowed)
	case *rbacv1.RoleBinding:
		if oldT != nil && onlyGCFields(obj, old) {
			return nil
		}
		return s.admitBinding(u, gr, o.Name, o.RoleRef, ns, allowed)
	}
	return nil
}

func (s rbacStrategy) admitBinding(u user.Info, gr schema.GroupResource, name string, ref rbacv1.RoleRef, ns string, allowed func(verb, resource, name string) bool) error {
	refResource := "clusterroles"
	if ref.Kind == rbacpolicy.KindRole {
		refResource = "roles"
	}
	if allowed("bind", refResource, ref.Name) {
		return nil
	}
	rules, err := s.store.RoleRules(ref, ns)
	if err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	if err := s.store.ConfirmNoEscalation(u, ns, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	return nil
}

// onlyGCFields reports whether an update changes nothing but what the
// garbage collector changes (owner references, finalizers).
func onlyGCFields(obj, old *resource.Object) bool {
	a, b := obj.DeepCopy(), old.DeepCopy()
	for _, o := range []*resource.Object{a, b} {
		o.Meta.OwnerReferences, o.Meta.Finalizers, o.Meta.ManagedFields, o.Meta.ResourceVersion = nil, nil, nil, ""
	}
	return apiequality.Semantic.DeepEqual(a.Meta, b.Meta) && apiequality.Semantic.DeepEqual(a.Content, b.Content)
}

// rbacTable is kubectl's table of roles (Name, Created At) and bindings
// (Name, Role, Age; wide: Users, Groups, ServiceAccounts).
type rbacTable struct{ binding bool }

func (t rbacTable) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	tbl := &metav1.Table{}
	md := metav1.ObjectMeta{}.SwaggerDoc()
	if !noHeaders {
		tbl.ColumnDefinitions = []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name", Description: md["name"]}}
		if t.binding {
			tbl.ColumnDefinitions = append(tbl.ColumnDefinitions,
				metav1.TableColumnDefinition{Name: "Role", Type: "string", Description: rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]},
				metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: md["creationTimestamp"]},
				metav1.TableColumnDefinition{Name: "Users", Type: "string", Priority: 1, Description: "Users in the roleBinding"},
				metav1.TableColumnDefinition{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the roleBinding"},
				metav1.TableColumnDefinition{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the roleBinding"})
		} else {
			tbl.ColumnDefinitions = append(tbl.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Created At", Type: "date", Description: md["creationTimestamp"]})
		}
	}
	for _, o := range objs {
		if !t.binding {
			tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: []any{o.GetName(), o.GetCreationTimestamp().UTC().Format(time.RFC3339)}})
			continue
		}
		b := &rbacv1.RoleBinding{}
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, b)
		var users, groups, sas []string
		for _, s := range b.Subjects {
			switch s.Kind {
			case rbacv1.UserKind:
				users = append(users, s.Name)
			case rbacv1.GroupKind:
				groups = append(groups, s.Name)
			case rbacv1.ServiceAccountKind:
				ns := s.Namespace
				if ns == "" {
					ns = o.GetNamespace()
				}
				sas = append(sas, ns+"/"+s.Name)
			}
		}
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: []any{o.GetName(), b.RoleRef.Kind + "/" + b.RoleRef.Name, resource.Age(o.GetCreationTimestamp()),
			strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}})
	}
	return tbl, nil
}

// Resources are the four RBAC resources — ClusterRoles, Roles,
// ClusterRoleBindings and RoleBindings, in that order — each served from
// the cache newCache makes for its key prefix. Writes are checked for
// escalation against the roles and bindings in st.
func Resources(newCache func(prefix string) *store.Cache, st *rbacpolicy.Store) []*resource.Resource {
	out := make([]*resource.Resource, len(rbacKinds))
	for i, k := range rbacKinds {
		out[i] = resourceFor(k, newCache(k.prefix), st)
	}
	return out
}

// validatePathSegmentName checks that a name can be a path segment, as
// Kubernetes checks RBAC names.
func validatePathSegmentName(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}
