package rbac

import (
	"slices"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// AggregatedRules computes the rules of an aggregated ClusterRole: the
// rules of every other ClusterRole its selectors match, in name order,
// each once. ok is false when a selector is invalid.
func AggregatedRules(role *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) ([]rbacv1.PolicyRule, bool) {
	if role.AggregationRule == nil {
		return role.Rules, true
	}
	var selectors []labels.Selector
	for i := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, false
		}
		selectors = append(selectors, sel)
	}
	sorted := append([]*rbacv1.ClusterRole(nil), all...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var rules []rbacv1.PolicyRule
	for _, other := range sorted {
		if other.Name == role.Name {
			continue
		}
		match := false
		for _, sel := range selectors {
			if sel.Matches(labels.Set(other.Labels)) {
				match = true
				break
			}
		}
		if !match {
			continue
		}
		for _, r := range other.Rules {
			dup := false
			for _, have := range rules {
				if sameRule(have, r) {
					dup = true
					break
				}
			}
			if !dup {
				rules = append(rules, r)
			}
		}
	}
	if rules == nil {
		rules = []rbacv1.PolicyRule{}
	}
	return rules, true
}

// sameRule is apiequality.Semantic.DeepEqual on two rules (what kube's
// aggregation controller compares them with: a nil list equals an empty
// one), without its reflection: aggregating compares every pair of rules.
func sameRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}
