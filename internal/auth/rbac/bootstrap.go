package rbac

import (
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// Annotations and labels of the default policy, as Kubernetes sets them.
const (
	AutoUpdateAnnotation = "rbac.authorization.kubernetes.io/autoupdate"
	BootstrappingLabel   = "kubernetes.io/bootstrapping"
	AggregateToAdmin     = "rbac.authorization.k8s.io/aggregate-to-admin"
	AggregateToEdit      = "rbac.authorization.k8s.io/aggregate-to-edit"
	AggregateToView      = "rbac.authorization.k8s.io/aggregate-to-view"
)

// Verbs as Kubernetes' bootstrap policy groups them.
var (
	readWrite = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	read      = []string{"get", "list", "watch"}
	write     = []string{"create", "update", "patch", "delete", "deletecollection"}
)

func defaultMeta(name string, labels map[string]string) metav1.ObjectMeta {
	l := map[string]string{BootstrappingLabel: "rbac-defaults"}
	for k, v := range labels {
		l[k] = v
	}
	return metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{AutoUpdateAnnotation: "true"}}
}

func aggregation(label string) *rbacv1.AggregationRule {
	return &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{label: "true"}}}}
}

// DefaultClusterRoles are the cluster roles a client expects on a server:
// Kubernetes' user-facing roles (cluster-admin, admin, edit, view, the
// last three aggregated from roles labelled aggregate-to-*, so a CRD's
// author extends them to its resources) and the system roles for
// discovery, self reviews, health and metrics. Rules name only what
// crdserver serves.
func DefaultClusterRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		{
			ObjectMeta: defaultMeta("cluster-admin", nil),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
				{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}},
			},
		},
		{ObjectMeta: defaultMeta("admin", nil), AggregationRule: aggregation(AggregateToAdmin)},
		{ObjectMeta: defaultMeta("edit", map[string]string{AggregateToAdmin: "true"}), AggregationRule: aggregation(AggregateToEdit)},
		{ObjectMeta: defaultMeta("view", map[string]string{AggregateToEdit: "true"}), AggregationRule: aggregation(AggregateToView)},
		{
			ObjectMeta: defaultMeta("system:aggregate-to-admin", map[string]string{AggregateToAdmin: "true"}),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"localsubjectaccessreviews"}, Verbs: []string{"create"}},
				{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings", "roles"}, Verbs: readWrite},
			},
		},
		{
			ObjectMeta: defaultMeta("system:aggregate-to-edit", map[string]string{AggregateToEdit: "true"}),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: read},
				{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}},
				{APIGroups: []string{""}, Resources: []string{"serviceaccounts", "configmaps", "secrets"}, Verbs: write},
				{APIGroups: []string{""}, Resources: []string{"pods", "services", "persistentvolumeclaims"}, Verbs: write},
				{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}},
				{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: write},
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: readWrite},
				{APIGroups: []string{"apps"}, Resources: []string{"daemonsets", "deployments", "deployments/scale", "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"}, Verbs: write},
				{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: write},
				{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: write},
				{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: write},
				{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies", "ingresses"}, Verbs: write},
			},
		},
		{
			ObjectMeta: defaultMeta("system:aggregate-to-view", map[string]string{AggregateToView: "true"}),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"serviceaccounts", "configmaps"}, Verbs: read},
				{APIGroups: []string{""}, Resources: []string{
					"pods", "pods/status", "services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status",
				}, Verbs: read},
				{APIGroups: []string{""}, Resources: []string{"namespaces/status"}, Verbs: read},
				{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: read},
				{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: read},
				{APIGroups: []string{"apps"}, Resources: []string{
					"daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
					"replicasets", "replicasets/scale", "replicasets/status", "statefulsets", "statefulsets/scale", "statefulsets/status",
				}, Verbs: read},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
				{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers", "horizontalpodautoscalers/status"}, Verbs: read},
				{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs", "cronjobs/status", "jobs/status"}, Verbs: read},
				{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets", "poddisruptionbudgets/status"}, Verbs: read},
				{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies", "ingresses", "ingresses/status"}, Verbs: read},
			},
		},
		{
			ObjectMeta: defaultMeta("system:discovery", nil),
			Rules: []rbacv1.PolicyRule{{
				NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"},
				Verbs:           []string{"get"},
			}},
		},
		{
			ObjectMeta: defaultMeta("system:basic-user", nil),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}, Verbs: []string{"create"}},
				{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}, Verbs: []string{"create"}},
			},
		},
		{
			// For servers that delegate authentication and authorization
			// to this one (a webhook's, a metrics endpoint's); bound to
			// nobody by default.
			ObjectMeta: defaultMeta("system:auth-delegator", nil),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
				{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
			},
		},
		{
			ObjectMeta: defaultMeta("system:public-info-viewer", nil),
			Rules: []rbacv1.PolicyRule{{
				NonResourceURLs: []string{"/healthz", "/livez", "/readyz", "/version", "/version/"},
				Verbs:           []string{"get"},
			}},
		},
		{
			ObjectMeta: defaultMeta("system:service-account-issuer-discovery", nil),
			Rules: []rbacv1.PolicyRule{{
				NonResourceURLs: []string{"/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/"},
				Verbs:           []string{"get"},
			}},
		},
		{
			ObjectMeta: defaultMeta("system:monitoring", nil),
			Rules: []rbacv1.PolicyRule{
				{NonResourceURLs: []string{"/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*"}, Verbs: []string{"get"}},
			},
		},
	}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func binding(name string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{
		ObjectMeta: defaultMeta(name, nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: KindClusterRole, Name: name},
		Subjects:   subjects,
	}
}

// DefaultClusterRoleBindings bind the default roles as Kubernetes does.
func DefaultClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	return []rbacv1.ClusterRoleBinding{
		binding("cluster-admin", group(user.SystemPrivilegedGroup)),
		binding("system:basic-user", group(user.AllAuthenticated)),
		binding("system:discovery", group(user.AllAuthenticated)),
		binding("system:public-info-viewer", group(user.AllAuthenticated), group(user.AllUnauthenticated)),
		binding("system:monitoring", group(user.MonitoringGroup)),
		binding("system:service-account-issuer-discovery", group(serviceaccount.AllServiceAccountsGroup)),
	}
}

// AuthenticationConfigMap is the ConfigMap in kube-system that tells
// servers which delegate authentication to this one which client CAs it
// trusts, and ExtensionAuthenticationReader the Role that reads it.
const (
	AuthenticationConfigMap       = "extension-apiserver-authentication"
	ExtensionAuthenticationReader = "extension-apiserver-authentication-reader"
)

// DefaultRoles are Kubernetes' default roles in kube-system that crdserver
// has a use for: reading the authentication ConfigMap.
func DefaultRoles() []rbacv1.Role {
	meta := defaultMeta(ExtensionAuthenticationReader, nil)
	meta.Namespace = metav1.NamespaceSystem
	return []rbacv1.Role{{
		ObjectMeta: meta,
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{AuthenticationConfigMap}, Verbs: read}},
	}}
}

// DefaultRoleBindings bind the default roles as Kubernetes does (to the
// controller manager and scheduler users, should they connect).
func DefaultRoleBindings() []rbacv1.RoleBinding {
	meta := defaultMeta("system::"+ExtensionAuthenticationReader, nil)
	meta.Namespace = metav1.NamespaceSystem
	userSubject := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	return []rbacv1.RoleBinding{{
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: KindRole, Name: ExtensionAuthenticationReader},
		Subjects:   []rbacv1.Subject{userSubject(user.KubeControllerManager), userSubject(user.KubeScheduler)},
	}}
}

// autoUpdate says whether a stored default may be reconciled.
func autoUpdate(m metav1.ObjectMeta) bool {
	return m.Annotations[AutoUpdateAnnotation] != "false"
}

func mergeMaps(have, want map[string]string) (map[string]string, bool) {
	changed := false
	for k, v := range want {
		if _, ok := have[k]; !ok {
			if have == nil {
				have = map[string]string{}
			}
			have[k] = v
			changed = true
		}
	}
	return have, changed
}

// ReconcileClusterRole brings a stored default role up to date, as
// Kubernetes does at start: missing rules, aggregation selectors, labels
// and annotations are added, nothing is taken away; a role annotated
// autoupdate=false is left alone.
func ReconcileClusterRole(have *rbacv1.ClusterRole, want rbacv1.ClusterRole) (*rbacv1.ClusterRole, bool) {
	if !autoUpdate(have.ObjectMeta) {
		return have, false
	}
	out := have.DeepCopy()
	var c1, c2 bool
	out.Labels, c1 = mergeMaps(out.Labels, want.Labels)
	out.Annotations, c2 = mergeMaps(out.Annotations, want.Annotations)
	changed := c1 || c2
	if want.AggregationRule != nil {
		if out.AggregationRule == nil {
			out.AggregationRule = &rbacv1.AggregationRule{}
		}
		for _, sel := range want.AggregationRule.ClusterRoleSelectors {
			found := false
			for _, h := range out.AggregationRule.ClusterRoleSelectors {
				if apiequality.Semantic.DeepEqual(h, sel) {
					found = true
				}
			}
			if !found {
				out.AggregationRule.ClusterRoleSelectors = append(out.AggregationRule.ClusterRoleSelectors, sel)
				changed = true
			}
		}
	} else if ok, _ := validation.Covers(out.Rules, want.Rules); !ok {
		for _, r := range want.Rules {
			if ok, _ := validation.Covers(out.Rules, []rbacv1.PolicyRule{r}); !ok {
				out.Rules = append(out.Rules, r)
			}
		}
		changed = true
	}
	return out, changed
}

// ReconcileClusterRoleBinding adds the default subjects a stored default
// binding lacks.
func ReconcileClusterRoleBinding(have *rbacv1.ClusterRoleBinding, want rbacv1.ClusterRoleBinding) (*rbacv1.ClusterRoleBinding, bool) {
	if !autoUpdate(have.ObjectMeta) {
		return have, false
	}
	out := have.DeepCopy()
	var c1, c2 bool
	out.Labels, c1 = mergeMaps(out.Labels, want.Labels)
	out.Annotations, c2 = mergeMaps(out.Annotations, want.Annotations)
	changed := c1 || c2
	for _, s := range want.Subjects {
		found := false
		for _, h := range out.Subjects {
			if h.Kind == s.Kind && h.Name == s.Name && h.Namespace == s.Namespace {
				found = true
			}
		}
		if !found {
			out.Subjects = append(out.Subjects, s)
			changed = true
		}
	}
	return out, changed
}

// ReconcileRole is ReconcileClusterRole for a namespaced role.
func ReconcileRole(have *rbacv1.Role, want rbacv1.Role) (*rbacv1.Role, bool) {
	out, changed := ReconcileClusterRole(&rbacv1.ClusterRole{ObjectMeta: have.ObjectMeta, Rules: have.Rules}, rbacv1.ClusterRole{ObjectMeta: want.ObjectMeta, Rules: want.Rules})
	return &rbacv1.Role{TypeMeta: have.TypeMeta, ObjectMeta: out.ObjectMeta, Rules: out.Rules}, changed
}

// ReconcileRoleBinding is ReconcileClusterRoleBinding for a namespaced
// binding.
func ReconcileRoleBinding(have *rbacv1.RoleBinding, want rbacv1.RoleBinding) (*rbacv1.RoleBinding, bool) {
	out, changed := ReconcileClusterRoleBinding(&rbacv1.ClusterRoleBinding{ObjectMeta: have.ObjectMeta, RoleRef: have.RoleRef, Subjects: have.Subjects},
		rbacv1.ClusterRoleBinding{ObjectMeta: want.ObjectMeta, RoleRef: want.RoleRef, Subjects: want.Subjects})
	return &rbacv1.RoleBinding{TypeMeta: have.TypeMeta, ObjectMeta: out.ObjectMeta, RoleRef: out.RoleRef, Subjects: out.Subjects}, changed
}

// DefaultsInPlace reports whether the store holds every default cluster
// role and binding, and the aggregated defaults (admin, edit, view) have
// been aggregated: what readiness waits for, on every replica, whichever
// replica wrote them. Once it has, it stays true, as kube-apiserver's
// rbac/bootstrap-roles check does once its post-start hook has run.
func (s *Store) DefaultsInPlace() bool {
	if s.defaultsInPlace.Load() {
		return true
	}
	want := defaultNames()
	s.mu.RLock()
	defer s.mu.RUnlock()
	for name, aggregated := range want.clusterRoles {
		have := s.clusterRoles[name]
		if have == nil || (aggregated && len(have.Rules) == 0) {
			return false
		}
	}
	for _, name := range want.clusterRoleBindings {
		if s.clusterRoleBindings[name] == nil {
			return false
		}
	}
	for _, key := range want.roles {
		if s.roles[key] == nil {
			return false
		}
	}
	for _, b := range want.roleBindings {
		if s.roleBindings[b.Namespace][b.Name] == nil {
			return false
		}
	}
	s.defaultsInPlace.Store(true)
	return true
}

// defaults are the names of the default RBAC objects, made once: readiness
// asks for them every few milliseconds while a server starts.
type defaults struct {
	clusterRoles        map[string]bool // name → aggregated
	clusterRoleBindings []string
	roles               []string // namespace/name
	roleBindings        []types.NamespacedName
}

var defaultNames = sync.OnceValue(func() defaults {
	d := defaults{clusterRoles: map[string]bool{}}
	for _, r := range DefaultClusterRoles() {
		d.clusterRoles[r.Name] = r.AggregationRule != nil
	}
	for _, b := range DefaultClusterRoleBindings() {
		d.clusterRoleBindings = append(d.clusterRoleBindings, b.Name)
	}
	for _, r := range DefaultRoles() {
		d.roles = append(d.roles, r.Namespace+"/"+r.Name)
	}
	for _, b := range DefaultRoleBindings() {
		d.roleBindings = append(d.roleBindings, types.NamespacedName{Namespace: b.Namespace, Name: b.Name})
	}
	return d
})
