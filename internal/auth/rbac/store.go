package rbac

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Store holds the roles and bindings RBAC decides with, kept current from
// the watch caches of the four resources.
type Store struct {
	mu                  sync.RWMutex
	clusterRoles        map[string]*rbacv1.ClusterRole
	roles               map[string]*rbacv1.Role // namespace/name
	clusterRoleBindings map[string]*rbacv1.ClusterRoleBinding
	roleBindings        map[string]map[string]*rbacv1.RoleBinding // namespace → name
	// defaultsInPlace is set once DefaultsInPlace has seen the defaults.
	defaultsInPlace atomic.Bool
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{
		clusterRoles:        map[string]*rbacv1.ClusterRole{},
		roles:               map[string]*rbacv1.Role{},
		clusterRoleBindings: map[string]*rbacv1.ClusterRoleBinding{},
		roleBindings:        map[string]map[string]*rbacv1.RoleBinding{},
	}
}

// Kinds of objects the store holds.
const (
	KindClusterRole        = "ClusterRole"
	KindRole               = "Role"
	KindClusterRoleBinding = "ClusterRoleBinding"
	KindRoleBinding        = "RoleBinding"
)

// Set records an object of a kind from its JSON; deleted removes it.
func (s *Store) Set(kind string, raw []byte, deleted bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch kind {
	case KindClusterRole:
		o := &rbacv1.ClusterRole{}
		if err := json.Unmarshal(raw, o); err != nil {
			return err
		}
		if deleted {
			delete(s.clusterRoles, o.Name)
		} else {
			s.clusterRoles[o.Name] = o
		}
	case KindRole:
		o := &rbacv1.Role{}
		if err := json.Unmarshal(raw, o); err != nil {
			return err
		}
		if deleted {
			delete(s.roles, o.Namespace+"/"+o.Name)
		} else {
			s.roles[o.Namespace+"/"+o.Name] = o
		}
	case KindClusterRoleBinding:
		o := &rbacv1.ClusterRoleBinding{}
		if err := json.Unmarshal(raw, o); err != nil {
			return err
		}
		if deleted {
			delete(s.clusterRoleBindings, o.Name)
		} else {
			s.clusterRoleBindings[o.Name] = o
		}
	case KindRoleBinding:
		o := &rbacv1.RoleBinding{}
		if err := json.Unmarshal(raw, o); err != nil {
			return err
		}
		m := s.roleBindings[o.Namespace]
		if deleted {
			delete(m, o.Name)
			if len(m) == 0 {
				delete(s.roleBindings, o.Namespace)
			}
		} else {
			if m == nil {
				m = map[string]*rbacv1.RoleBinding{}
				s.roleBindings[o.Namespace] = m
			}
			m[o.Name] = o
		}
	default:
		return fmt.Errorf("rbac: unknown kind %s", kind)
	}
	return nil
}

// Reset drops every object of a kind (before a relist).
func (s *Store) Reset(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch kind {
	case KindClusterRole:
		s.clusterRoles = map[string]*rbacv1.ClusterRole{}
	case KindRole:
		s.roles = map[string]*rbacv1.Role{}
	case KindClusterRoleBinding:
		s.clusterRoleBindings = map[string]*rbacv1.ClusterRoleBinding{}
	case KindRoleBinding:
		s.roleBindings = map[string]map[string]*rbacv1.RoleBinding{}
	}
}

// ClusterRoles returns the cluster roles, sorted by name.
func (s *Store) ClusterRoles() []*rbacv1.ClusterRole {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*rbacv1.ClusterRole, 0, len(s.clusterRoles))
	for _, r := range s.clusterRoles {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// roleRules returns the rules of a binding's roleRef (the caller holds
// the read lock).
func (s *Store) roleRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch {
	case ref.APIGroup != rbacv1.GroupName:
	case ref.Kind == KindClusterRole:
		if r := s.clusterRoles[ref.Name]; r != nil {
			return r.Rules, nil
		}
		return nil, fmt.Errorf("clusterrole.rbac.authorization.k8s.io %q not found", ref.Name)
	case ref.Kind == KindRole && namespace != "":
		if r := s.roles[namespace+"/"+ref.Name]; r != nil {
			return r.Rules, nil
		}
		return nil, fmt.Errorf("role.rbac.authorization.k8s.io %q not found", ref.Name)
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// RoleRules returns the rules a roleRef grants in a namespace.
func (s *Store) RoleRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.roleRules(ref, namespace)
}

// visit calls f with every rule the user has in namespace (cluster-wide
// ones first); f returns false to stop. Errors are roles that bindings
// name but do not exist.
func (s *Store) visit(u user.Info, namespace string, f func(rbacv1.PolicyRule) bool) []error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var errs []error
	names := make([]string, 0, len(s.clusterRoleBindings))
	for n := range s.clusterRoleBindings {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b := s.clusterRoleBindings[n]
		if !bindingApplies(u, b.Subjects, "") {
			continue
		}
		rules, err := s.roleRules(b.RoleRef, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range rules {
			if !f(r) {
				return errs
			}
		}
	}
	if namespace == "" {
		return errs
	}
	bindings := s.roleBindings[namespace]
	names = names[:0]
	for n := range bindings {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b := bindings[n]
		if !bindingApplies(u, b.Subjects, namespace) {
			continue
		}
		rules, err := s.roleRules(b.RoleRef, namespace)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range rules {
			if !f(r) {
				return errs
			}
		}
	}
	return errs
}

// RulesFor returns every rule the user has in a namespace ("" for the
// cluster-wide ones only), and the errors met resolving them.
func (s *Store) RulesFor(u user.Info, namespace string) ([]rbacv1.PolicyRule, []error) {
	var rules []rbacv1.PolicyRule
	errs := s.visit(u, namespace, func(r rbacv1.PolicyRule) bool {
		rules = append(rules, r)
		return true
	})
	return rules, errs
}

// Authorize is the RBAC authorizer: allowed when a rule of a role bound to
// the user allows the request; otherwise no opinion, with the resolution
// errors as the reason.
func (s *Store) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	if u == nil {
		return authorizer.DecisionNoOpinion, "", nil
	}
	allowed := false
	errs := s.visit(u, a.GetNamespace(), func(r rbacv1.PolicyRule) bool {
		if RuleAllows(a, &r) {
			allowed = true
			return false
		}
		return true
	})
	if allowed {
		return authorizer.DecisionAllow, "", nil
	}
	if len(errs) == 0 {
		return authorizer.DecisionNoOpinion, "", nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return authorizer.DecisionNoOpinion, "RBAC: " + strings.Join(msgs, ", "), nil
}
