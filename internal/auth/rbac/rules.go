// Package rbac is Kubernetes' role-based access control: rules and
// bindings of the rbac.authorization.k8s.io/v1 API decide what a user may
// do. It holds the authorizer, the rules a user has (for
// SelfSubjectRulesReviews and escalation checks), the default cluster
// roles, and ClusterRole aggregation.
package rbac

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// RuleAllows reports whether a rule allows a request.
func RuleAllows(a authorizer.Attributes, r *rbacv1.PolicyRule) bool {
	if !has(r.Verbs, a.GetVerb()) {
		return false
	}
	if !a.IsResourceRequest() {
		return nonResourceURLMatches(r.NonResourceURLs, a.GetPath())
	}
	if !has(r.APIGroups, a.GetAPIGroup()) {
		return false
	}
	combined := a.GetResource()
	if a.GetSubresource() != "" {
		combined += "/" + a.GetSubresource()
	}
	if !resourceMatches(r.Resources, combined, a.GetSubresource()) {
		return false
	}
	return len(r.ResourceNames) == 0 || contains(r.ResourceNames, a.GetName())
}

// has is membership where "*" matches everything.
func has(set []string, s string) bool {
	for _, x := range set {
		if x == rbacv1.VerbAll || x == s {
			return true
		}
	}
	return false
}

func contains(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

// resourceMatches: "*", the exact resource (or resource/subresource), or
// "*/subresource".
func resourceMatches(rules []string, combined, subresource string) bool {
	for _, r := range rules {
		switch {
		case r == rbacv1.ResourceAll, r == combined:
			return true
		case subresource != "" && r == "*/"+subresource:
			return true
		}
	}
	return false
}

// nonResourceURLMatches: "*", the exact path, or a prefix ending in "*".
func nonResourceURLMatches(rules []string, path string) bool {
	for _, r := range rules {
		switch {
		case r == rbacv1.NonResourceAll, r == path:
			return true
		case strings.HasSuffix(r, "*") && strings.HasPrefix(path, strings.TrimSuffix(r, "*")):
			return true
		}
	}
	return false
}

// ServiceAccountUsername is the user name of a service account.
func ServiceAccountUsername(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// appliesTo reports whether a binding's subject is the user. A
// ServiceAccount subject without a namespace is in the binding's.
func appliesTo(u user.Info, s *rbacv1.Subject, bindingNamespace string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return u.GetName() == s.Name
	case rbacv1.GroupKind:
		return contains(u.GetGroups(), s.Name)
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return ns != "" && u.GetName() == ServiceAccountUsername(ns, s.Name)
	}
	return false
}

func bindingApplies(u user.Info, subjects []rbacv1.Subject, ns string) bool {
	for i := range subjects {
		if appliesTo(u, &subjects[i], ns) {
			return true
		}
	}
	return false
}
