package rbac

import (
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// ConfirmNoEscalation checks that the user holds every permission in
// rules (in namespace, or cluster-wide for ""), as Kubernetes requires of
// whoever writes a role or binds one without the escalate or bind verbs.
// The error is Kubernetes' text, listing what is missing.
func (s *Store) ConfirmNoEscalation(u user.Info, namespace string, rules []rbacv1.PolicyRule) error {
	owner, errs := s.RulesFor(u, namespace)
	ok, missing := validation.Covers(owner, rules)
	if ok {
		return nil
	}
	var lines []string
	seen := map[string]bool{}
	for _, r := range compact(missing) {
		if l := compactString(r); !seen[l] {
			seen[l] = true
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.GetName(), u.GetGroups(), strings.Join(lines, "\n"))
	if len(errs) > 0 {
		msg += fmt.Sprintf("; resolution errors: %v", errs)
	}
	return fmt.Errorf("%s", msg)
}

// compact merges the verbs of rules that differ only in verbs.
func compact(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	index := map[string]int{}
	for _, r := range rules {
		key := fmt.Sprintf("%q|%q|%q|%q", r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs)
		if i, ok := index[key]; ok {
			for _, v := range r.Verbs {
				if !contains(out[i].Verbs, v) {
					out[i].Verbs = append(out[i].Verbs, v)
				}
			}
			continue
		}
		index[key] = len(out)
		r.Verbs = append([]string(nil), r.Verbs...)
		out = append(out, r)
	}
	return out
}

// compactString prints a rule the way Kubernetes' escalation errors do:
// {APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}.
func compactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("ResourceNames", r.ResourceNames)
	add("NonResourceURLs", r.NonResourceURLs)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}
