package admissionregistration

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crdserver/crdserver/internal/admission"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
)

// Validation of ValidatingWebhookConfigurations and
// MutatingWebhookConfigurations (see validation.go).

func validateAdmissionReviewVersions(versions []string, requireKnown bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(versions) == 0 {
		return field.ErrorList{field.Required(p, "must specify one of "+strings.Join(admissionReviewVersions, ", "))}
	}
	seen := sets.New[string]()
	known := false
	for i, v := range versions {
		if seen.Has(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, "duplicate version"))
			continue
		}
		seen.Insert(v)
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, msg))
		}
		known = known || slices.Contains(admissionReviewVersions, v)
	}
	if requireKnown && !known {
		errs = append(errs, field.Invalid(p, versions, "must include at least one of "+strings.Join(admissionReviewVersions, ", ")))
	}
	return errs
}

// webhook is what validating and mutating webhooks share.
type webhook struct {
	name                    string
	clientConfig            admissionv1.WebhookClientConfig
	rules                   []admissionv1.RuleWithOperations
	failurePolicy           *admissionv1.FailurePolicyType
	matchPolicy             *admissionv1.MatchPolicyType
	namespaceSelector       *metav1.LabelSelector
	objectSelector          *metav1.LabelSelector
	sideEffects             *admissionv1.SideEffectClass
	timeoutSeconds          *int32
	admissionReviewVersions []string
	matchConditions         []admissionv1.MatchCondition
	// reinvocationPolicy is a mutating webhook's.
	mutating           bool
	reinvocationPolicy *admissionv1.ReinvocationPolicyType
}

func validatingWebhooks(hooks []admissionv1.ValidatingWebhook) []webhook {
	out := make([]webhook, len(hooks))
	for i, h := range hooks {
		out[i] = webhook{name: h.Name, clientConfig: h.ClientConfig, rules: h.Rules, failurePolicy: h.FailurePolicy, matchPolicy: h.MatchPolicy,
			namespaceSelector: h.NamespaceSelector, objectSelector: h.ObjectSelector, sideEffects: h.SideEffects, timeoutSeconds: h.TimeoutSeconds,
			admissionReviewVersions: h.AdmissionReviewVersions, matchConditions: h.MatchConditions}
	}
	return out
}

func mutatingWebhooks(hooks []admissionv1.MutatingWebhook) []webhook {
	out := make([]webhook, len(hooks))
	for i, h := range hooks {
		out[i] = webhook{name: h.Name, clientConfig: h.ClientConfig, rules: h.Rules, failurePolicy: h.FailurePolicy, matchPolicy: h.MatchPolicy,
			namespaceSelector: h.NamespaceSelector, objectSelector: h.ObjectSelector, sideEffects: h.SideEffects, timeoutSeconds: h.TimeoutSeconds,
			admissionReviewVersions: h.AdmissionReviewVersions, matchConditions: h.MatchConditions, mutating: true, reinvocationPolicy: h.ReinvocationPolicy}
	}
	return out
}

// validateWebhooks checks the webhooks of a configuration.
func validateWebhooks(hooks []webhook, o options) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range hooks {
		h := &hooks[i]
		p := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhook(h, o, p)...)
		errs = append(errs, validateAdmissionReviewVersions(h.admissionReviewVersions, o.requireKnownReviewVersion, p.Child("admissionReviewVersions"))...)
		if o.requireUniqueWebhookNames && h.name != "" {
			if names.Has(h.name) {
				errs = append(errs, field.Duplicate(p.Child("name"), h.name))
			} else {
				names.Insert(h.name)
			}
		}
	}
	return errs
}

func validateWebhook(h *webhook, o options, p *field.Path) field.ErrorList {
	errs := utilvalidation.IsFullyQualifiedName(p.Child("name"), h.name)
	selectorOpts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: o.allowInvalidLabelValue}
	for i := range h.rules {
		errs = append(errs, validateRuleWithOperations(&h.rules[i], p.Child("rules").Index(i))...)
	}
	if h.failurePolicy != nil && !slices.Contains(failurePolicies, string(*h.failurePolicy)) {
		errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *h.failurePolicy, failurePolicies))
	}
	if h.matchPolicy != nil && !slices.Contains(matchPolicies, string(*h.matchPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *h.matchPolicy, matchPolicies))
	}
	allowed := allSideEffects
	if o.requireNoSideEffects {
		allowed = noSideEffects
	}
	if h.sideEffects == nil {
		errs = append(errs, field.Required(p.Child("sideEffects"), "must specify one of "+strings.Join(allowed, ", ")))
	} else if !slices.Contains(allowed, string(*h.sideEffects)) {
		errs = append(errs, field.NotSupported(p.Child("sideEffects"), *h.sideEffects, allowed))
	}
	if h.timeoutSeconds != nil && (*h.timeoutSeconds > 30 || *h.timeoutSeconds < 1) {
		errs = append(errs, field.Invalid(p.Child("timeoutSeconds"), *h.timeoutSeconds, "the timeout value must be between 1 and 30 seconds"))
	}
	if h.namespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(h.namespaceSelector, selectorOpts, p.Child("namespaceSelector"))...)
	}
	if h.objectSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(h.objectSelector, selectorOpts, p.Child("objectSelector"))...)
	}
	if h.mutating && h.reinvocationPolicy != nil && !slices.Contains(reinvocationPolicies, string(*h.reinvocationPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("reinvocationPolicy"), *h.reinvocationPolicy, reinvocationPolicies))
	}
	cc := h.clientConfig
	cp := p.Child("clientConfig")
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		errs = append(errs, field.Required(cp, "exactly one of url or service is required"))
	case cc.URL != nil:
		errs = append(errs, webhookutil.ValidateWebhookURL(cp.Child("url"), *cc.URL, true)...)
	default:
		var port int32
		if cc.Service.Port != nil {
			port = *cc.Service.Port
		}
		// Kubernetes passes the service's name where the helper takes
		// its namespace, and the namespace where it takes the name: a
		// missing name is reported on namespace, and the other way round.
		errs = append(errs, webhookutil.ValidateWebhookService(cp.Child("service"), cc.Service.Name, cc.Service.Namespace, cc.Service.Path, port)...)
	}
	if !o.ignoreMatchConditions {
		errs = append(errs, validateMatchConditions(h.matchConditions, o, p.Child("matchConditions"))...)
	}
	return errs
}

// validateWebhookConfiguration checks a webhook configuration: new when
// old is nil, else updated (what the stored one already had stays
// accepted).
func validateWebhookConfiguration(hooks, oldHooks []webhook, update bool) field.ErrorList {
	o := createOptions()
	if update {
		o = updateOptions(hooks, oldHooks)
	}
	return validateWebhooks(hooks, o)
}

// updateOptions are the options of an updated webhook configuration.
func updateOptions(hooks, old []webhook) options {
	o := options{
		ignoreMatchConditions:     sameMatchConditions(hooks, old),
		requireNoSideEffects:      true,
		requireKnownReviewVersion: true,
		requireUniqueWebhookNames: true,
		storedMatchConditions:     sets.New[string](),
	}
	names := sets.New[string]()
	for _, h := range old {
		if h.sideEffects == nil || !slices.Contains(noSideEffects, string(*h.sideEffects)) {
			o.requireNoSideEffects = false
		}
		known := false
		for _, v := range h.admissionReviewVersions {
			known = known || slices.Contains(admissionReviewVersions, v)
		}
		if !known && len(h.admissionReviewVersions) > 0 {
			o.requireKnownReviewVersion = false
		}
		if names.Has(h.name) {
			o.requireUniqueWebhookNames = false
		}
		names.Insert(h.name)
		for _, sel := range []*metav1.LabelSelector{h.namespaceSelector, h.objectSelector} {
			if sel != nil && len(metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, nil)) > 0 {
				o.allowInvalidLabelValue = true
			}
		}
		for _, mc := range h.matchConditions {
			o.storedMatchConditions.Insert(mc.Expression)
		}
	}
	return o
}

// sameMatchConditions says whether an update leaves every webhook's match
// conditions as they were (then they are not checked again).
func sameMatchConditions(hooks, old []webhook) bool {
	if len(hooks) != len(old) {
		return false
	}
	for i := range old {
		if !slices.Equal(hooks[i].matchConditions, old[i].matchConditions) {
			return false
		}
	}
	return true
}

// excludedRuleWarnings warn of the rules that name one of the resources
// no admission sees (admission.ExcludedResources) explicitly: they have no
// effect. A rule with a wildcard group or
// resource is not flagged.
func excludedRuleWarnings(hooks []webhook) []string {
	var warnings []string
	for i, h := range hooks {
		p := field.NewPath("webhooks").Index(i).Child("rules")
		for j, r := range h.rules {
			if hasWildcard(r.APIGroups) || hasWildcard(r.Resources) {
				continue
			}
			seen := sets.New[schema.GroupResource]()
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					gr := schema.GroupResource{Group: g, Resource: res}
					if slices.Contains(admission.ExcludedResources, gr) && !seen.Has(gr) {
						seen.Insert(gr)
						warnings = append(warnings, fmt.Sprintf("%s: %s is excluded from admission webhooks; this rule will have no effect", p.Index(j), gr))
					}
				}
			}
		}
	}
	return warnings
}
