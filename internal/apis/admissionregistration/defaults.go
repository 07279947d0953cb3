package admissionregistration

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Kubernetes' defaults of the admissionregistration.k8s.io/v1 kinds
// (k8s.io/kubernetes/pkg/apis/admissionregistration/v1, which cannot be
// imported): what a client leaves out is filled in before validation.

// defaultTimeoutSeconds is a webhook's timeout when it names none.
const defaultTimeoutSeconds = 10

func defaultRules(rules []admissionv1.RuleWithOperations) {
	for i := range rules {
		defaultRule(&rules[i].Rule)
	}
}

func defaultRule(r *admissionv1.Rule) {
	if r.Scope == nil {
		r.Scope = ptr.To(admissionv1.AllScopes)
	}
}

func defaultClientConfig(cc *admissionv1.WebhookClientConfig) {
	if cc.Service != nil && cc.Service.Port == nil {
		cc.Service.Port = ptr.To[int32](443)
	}
}

// webhookDefaults are the defaults both kinds of webhooks share.
func webhookDefaults(failurePolicy **admissionv1.FailurePolicyType, matchPolicy **admissionv1.MatchPolicyType,
	namespaceSelector, objectSelector **metav1.LabelSelector, timeoutSeconds **int32) {
	if *failurePolicy == nil {
		*failurePolicy = ptr.To(admissionv1.Fail)
	}
	if *matchPolicy == nil {
		*matchPolicy = ptr.To(admissionv1.Equivalent)
	}
	if *namespaceSelector == nil {
		*namespaceSelector = &metav1.LabelSelector{}
	}
	if *objectSelector == nil {
		*objectSelector = &metav1.LabelSelector{}
	}
	if *timeoutSeconds == nil {
		*timeoutSeconds = ptr.To[int32](defaultTimeoutSeconds)
	}
}

// DefaultValidatingWebhookConfiguration sets Kubernetes' defaults: every
// webhook fails closed (failurePolicy Fail), matches equivalent requests,
// selects every namespace and object, times out after 10s, and a service
// is called on port 443; rules apply to every scope.
func DefaultValidatingWebhookConfiguration(c *admissionv1.ValidatingWebhookConfiguration) {
	for i := range c.Webhooks {
		h := &c.Webhooks[i]
		webhookDefaults(&h.FailurePolicy, &h.MatchPolicy, &h.NamespaceSelector, &h.ObjectSelector, &h.TimeoutSeconds)
		defaultClientConfig(&h.ClientConfig)
		defaultRules(h.Rules)
	}
}

// DefaultMutatingWebhookConfiguration sets the defaults of validating
// webhooks, and reinvocationPolicy Never.
func DefaultMutatingWebhookConfiguration(c *admissionv1.MutatingWebhookConfiguration) {
	for i := range c.Webhooks {
		h := &c.Webhooks[i]
		webhookDefaults(&h.FailurePolicy, &h.MatchPolicy, &h.NamespaceSelector, &h.ObjectSelector, &h.TimeoutSeconds)
		if h.ReinvocationPolicy == nil {
			h.ReinvocationPolicy = ptr.To(admissionv1.NeverReinvocationPolicy)
		}
		defaultClientConfig(&h.ClientConfig)
		defaultRules(h.Rules)
	}
}

// defaultMatchResources sets matchPolicy Equivalent, selectors that
// select everything, and the scope of every rule.
func defaultMatchResources(m *admissionv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		m.MatchPolicy = ptr.To(admissionv1.Equivalent)
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for i := range m.ResourceRules {
		defaultRule(&m.ResourceRules[i].Rule)
	}
	for i := range m.ExcludeResourceRules {
		defaultRule(&m.ExcludeResourceRules[i].Rule)
	}
}

// DefaultValidatingAdmissionPolicy sets failurePolicy Fail and the
// defaults of its matchConstraints.
func DefaultValidatingAdmissionPolicy(p *admissionv1.ValidatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		p.Spec.FailurePolicy = ptr.To(admissionv1.Fail)
	}
	defaultMatchResources(p.Spec.MatchConstraints)
}

// DefaultValidatingAdmissionPolicyBinding sets the defaults of its
// matchResources. (parameterNotFoundAction has none: it is required.)
func DefaultValidatingAdmissionPolicyBinding(b *admissionv1.ValidatingAdmissionPolicyBinding) {
	defaultMatchResources(b.Spec.MatchResources)
}

// DefaultMutatingAdmissionPolicy sets failurePolicy Fail and the defaults
// of its matchConstraints. (reinvocationPolicy has none: it is required.)
func DefaultMutatingAdmissionPolicy(p *admissionv1.MutatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		p.Spec.FailurePolicy = ptr.To(admissionv1.Fail)
	}
	defaultMatchResources(p.Spec.MatchConstraints)
}

// DefaultMutatingAdmissionPolicyBinding sets the defaults of its
// matchResources.
func DefaultMutatingAdmissionPolicyBinding(b *admissionv1.MutatingAdmissionPolicyBinding) {
	defaultMatchResources(b.Spec.MatchResources)
}
