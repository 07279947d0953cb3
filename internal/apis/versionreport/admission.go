package versionreport

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// admissionKinds are the admission configurations whose rules name
// resources' versions, by resource, with where their rules are.
var admissionKinds = map[string]struct {
	kind    string
	webhook bool   // rules are per webhook: webhooks[].rules
	match   string // otherwise spec.<match>.resourceRules
}{
	"validatingwebhookconfigurations":   {kind: "ValidatingWebhookConfiguration", webhook: true},
	"mutatingwebhookconfigurations":     {kind: "MutatingWebhookConfiguration", webhook: true},
	"validatingadmissionpolicies":       {kind: "ValidatingAdmissionPolicy", match: "matchConstraints"},
	"mutatingadmissionpolicies":         {kind: "MutatingAdmissionPolicy", match: "matchConstraints"},
	"validatingadmissionpolicybindings": {kind: "ValidatingAdmissionPolicyBinding", match: "matchResources"},
	"mutatingadmissionpolicybindings":   {kind: "MutatingAdmissionPolicyBinding", match: "matchResources"},
}

type ruleJSON struct {
	APIGroups   []string `json:"apiGroups"`
	APIVersions []string `json:"apiVersions"`
	Resources   []string `json:"resources"`
}

type matchJSON struct {
	MatchPolicy   string     `json:"matchPolicy"`
	ResourceRules []ruleJSON `json:"resourceRules"`
}

// admissionConfig is one webhook, policy or binding and its rules.
type admissionConfig struct {
	rule  AdmissionRule
	rules []ruleJSON
}

// admissionRules reads every admission configuration's rules, as stored
// (their fields are alike in every version).
func admissionRules(resources []*resource.Resource) []admissionConfig {
	var out []admissionConfig
	seen := map[*store.Cache]bool{}
	for _, res := range resources {
		k, ok := admissionKinds[res.Plural]
		if res.Group != "admissionregistration.k8s.io" || !ok || res.Cache == nil || seen[res.Cache] {
			continue
		}
		seen[res.Cache] = true
		for _, it := range res.Cache.List(store.ListOptions{}).Items {
			var obj struct {
				Webhooks []struct {
					Name        string     `json:"name"`
					MatchPolicy string     `json:"matchPolicy"`
					Rules       []ruleJSON `json:"rules"`
				} `json:"webhooks"`
				Spec map[string]json.RawMessage `json:"spec"`
			}
			if json.Unmarshal(it.Bytes(), &obj) != nil {
				continue
			}
			if k.webhook {
				for _, w := range obj.Webhooks {
					out = append(out, admissionConfig{rule: AdmissionRule{Kind: k.kind, Name: it.Name, Webhook: w.Name, MatchPolicy: policyOrDefault(w.MatchPolicy)}, rules: w.Rules})
				}
				continue
			}
			var m matchJSON
			if raw, ok := obj.Spec[k.match]; !ok || json.Unmarshal(raw, &m) != nil {
				continue
			}
			out = append(out, admissionConfig{rule: AdmissionRule{Kind: k.kind, Name: it.Name, MatchPolicy: policyOrDefault(m.MatchPolicy)}, rules: m.ResourceRules})
		}
	}
	return out
}

func policyOrDefault(p string) string {
	if p == "" {
		return "Equivalent"
	}
	return p
}

// stopsMatching reports whether the configuration has a rule for the
// resource that lists the version, and no rule for it that lists one of
// the versions served after it goes (or "*"). With matchPolicy Exact a
// rule matches only requests to a version it lists; with Equivalent,
// kube-apiserver matches requests to another version through an
// equivalent resource it serves, and an unserved version is none: either
// way the configuration stops matching the resource.
func (a admissionConfig) stopsMatching(group, plural, version string, remaining []string) bool {
	lists, after := false, false
	for _, r := range a.rules {
		if !slices.Contains(r.APIGroups, group) && !slices.Contains(r.APIGroups, "*") {
			continue
		}
		if !slices.ContainsFunc(r.Resources, func(s string) bool {
			name, _, _ := strings.Cut(s, "/")
			return name == plural || name == "*"
		}) {
			continue
		}
		lists = lists || slices.Contains(r.APIVersions, version)
		after = after || slices.Contains(r.APIVersions, "*") || slices.ContainsFunc(remaining, func(v string) bool { return slices.Contains(r.APIVersions, v) })
	}
	return lists && !after
}
