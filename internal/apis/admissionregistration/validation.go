package admissionregistration

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/util/jsonpath"
)

// Kubernetes' validation of the admissionregistration.k8s.io/v1 kinds
// (k8s.io/kubernetes/pkg/apis/admissionregistration/validation, which
// cannot be imported), written again on the v1 types, to the same rules,
// field paths, order and messages. Metadata is validated by the engine.

// The values Kubernetes accepts, sorted as its messages list them.
var (
	failurePolicies      = []string{string(admissionv1.Fail), string(admissionv1.Ignore)}
	matchPolicies        = []string{string(admissionv1.Equivalent), string(admissionv1.Exact)}
	allSideEffects       = []string{string(admissionv1.SideEffectClassNone), string(admissionv1.SideEffectClassNoneOnDryRun), string(admissionv1.SideEffectClassSome), string(admissionv1.SideEffectClassUnknown)}
	noSideEffects        = []string{string(admissionv1.SideEffectClassNone), string(admissionv1.SideEffectClassNoneOnDryRun)}
	operations           = []string{string(admissionv1.OperationAll), string(admissionv1.Connect), string(admissionv1.Create), string(admissionv1.Delete), string(admissionv1.Update)}
	mutatingOperations   = []string{string(admissionv1.OperationAll), string(admissionv1.Connect), string(admissionv1.Create), string(admissionv1.Update)}
	reinvocationPolicies = []string{string(admissionv1.IfNeededReinvocationPolicy), string(admissionv1.NeverReinvocationPolicy)}
	scopes               = []string{string(admissionv1.AllScopes), string(admissionv1.ClusterScope), string(admissionv1.NamespacedScope)}
	validationReasons    = []string{string(metav1.StatusReasonForbidden), string(metav1.StatusReasonInvalid), string(metav1.StatusReasonRequestEntityTooLarge)}
	patchTypes           = []string{string(admissionv1.PatchTypeApplyConfiguration), string(admissionv1.PatchTypeJSONPatch)}
	validationActions    = []string{string(admissionv1.Audit), string(admissionv1.Deny), string(admissionv1.Warn)}
	notFoundActions      = []string{string(admissionv1.DenyAction), string(admissionv1.AllowAction)}
	// admissionReviewVersions are the AdmissionReview versions a webhook
	// may be sent.
	admissionReviewVersions = []string{"v1", "v1beta1"}
)

const (
	maxMatchConditions  = 64
	maxAuditAnnotations = 20
	// maxAuditAnnotationValueExpressionLength bounds an audit
	// annotation's valueExpression (5kb).
	maxAuditAnnotationValueExpressionLength = 5 * 1024
	// staticSuffix names the configurations only static manifests may
	// hold (Kubernetes' ManifestBasedAdmissionControlConfig, on by
	// default in 1.37).
	staticSuffix = ".static.k8s.io"
)

// options are what differs between validating a new object and an
// updated one: an update keeps what the stored object already had.
type options struct {
	ignoreMatchConditions     bool
	paramsInMatchConditions   bool
	requireNoSideEffects      bool
	requireKnownReviewVersion bool
	requireUniqueWebhookNames bool
	allowInvalidLabelValue    bool
	storedMatchConditions     sets.Set[string]
	storedValidations         sets.Set[string]
	storedMessageExpressions  sets.Set[string]
	storedAuditAnnotations    sets.Set[string]
	storedApplyConfigurations sets.Set[string]
}

// createOptions are the options of a new webhook configuration.
func createOptions() options {
	return options{requireNoSideEffects: true, requireKnownReviewVersion: true, requireUniqueWebhookNames: true}
}

func validateStaticSuffix(name string) field.ErrorList {
	if strings.HasSuffix(name, staticSuffix) {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name,
			fmt.Sprintf("names ending with %q are reserved for static manifest-based configurations and cannot be managed via the API", staticSuffix))}
	}
	return nil
}

// staticSuffixWarnings are the warnings of an update of an object with a
// reserved name.
func staticSuffixWarnings(name string) []string {
	if strings.HasSuffix(name, staticSuffix) {
		return []string{fmt.Sprintf("metadata.name: names ending with %q are reserved for static manifest-based configurations and cannot be managed via the API", staticSuffix)}
	}
	return nil
}

func hasWildcard[T ~string](values []T) bool {
	return slices.Contains(values, "*")
}

// validateResources checks a rule's resources, which may name
// subresources.
func validateResources(resources []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(p, ""))
	}
	wildcardSubresource := sets.New[string]() // x/*
	wildcardResource := sets.New[string]()    // */x
	doubleWildcard, singleWildcard, withoutSubresource := false, false, false
	for i, rs := range resources {
		if rs == "" {
			errs = append(errs, field.Required(p.Index(i), ""))
			continue
		}
		if rs == "*/*" {
			doubleWildcard = true
		}
		if rs == "*" {
			singleWildcard = true
		}
		res, sub, ok := strings.Cut(rs, "/")
		if !ok {
			withoutSubresource = rs != "*"
			continue
		}
		if wildcardSubresource.Has(res) {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, rs)))
		}
		if wildcardResource.Has(sub) {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, rs)))
		}
		if sub == "*" {
			wildcardSubresource.Insert(res)
		}
		if res == "*" {
			wildcardResource.Insert(sub)
		}
	}
	if len(resources) > 1 && doubleWildcard {
		errs = append(errs, field.Invalid(p, resources, "if '*/*' is present, must not specify other resources"))
	}
	if singleWildcard && withoutSubresource {
		errs = append(errs, field.Invalid(p, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return errs
}

func validateRule(r *admissionv1.Rule, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), ""))
	}
	if len(r.APIGroups) > 1 && hasWildcard(r.APIGroups) {
		errs = append(errs, field.Invalid(p.Child("apiGroups"), r.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(p.Child("apiVersions"), ""))
	}
	if len(r.APIVersions) > 1 && hasWildcard(r.APIVersions) {
		errs = append(errs, field.Invalid(p.Child("apiVersions"), r.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(p.Child("apiVersions").Index(i), ""))
		}
	}
	errs = append(errs, validateResources(r.Resources, p.Child("resources"))...)
	if r.Scope != nil && !slices.Contains(scopes, string(*r.Scope)) {
		errs = append(errs, field.NotSupported(p.Child("scope"), *r.Scope, scopes))
	}
	return errs
}

func validateRuleWithOperations(r *admissionv1.RuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(p.Child("operations"), ""))
	}
	if len(r.Operations) > 1 && hasWildcard(r.Operations) {
		errs = append(errs, field.Invalid(p.Child("operations"), r.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, op := range r.Operations {
		if !slices.Contains(operations, string(op)) {
			errs = append(errs, field.NotSupported(p.Child("operations").Index(i), op, operations))
		}
	}
	return append(errs, validateRule(&r.Rule, p)...)
}

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

func validateMatchConditions(conditions []admissionv1.MatchCondition, o options, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(conditions) > maxMatchConditions {
		errs = append(errs, field.TooMany(p, len(conditions), maxMatchConditions))
	}
	names := sets.New[string]()
	for i, mc := range conditions {
		cp := p.Index(i)
		if expr := strings.TrimSpace(mc.Expression); expr == "" {
			errs = append(errs, field.Required(cp.Child("expression"), ""))
		} else {
			errs = append(errs, compileMatchCondition(cp.Child("expression"), expr, o.paramsInMatchConditions, o.storedMatchConditions)...)
		}
		if mc.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), ""))
		} else {
			errs = append(errs, validateQualifiedName(mc.Name, cp.Child("name"))...)
		}
		if mc.Name != "" {
			if names.Has(mc.Name) {
				errs = append(errs, field.Duplicate(cp.Child("name"), mc.Name))
			} else {
				names.Insert(mc.Name)
			}
		}
	}
	return errs
}

func validateQualifiedName(value string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(value) {
		errs = append(errs, field.Invalid(p, value, msg))
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

// validateParamKind checks a policy's paramKind.
func validateParamKind(pk admissionv1.ParamKind, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	ap := p.Child("apiVersion")
	if pk.APIVersion == "" {
		errs = append(errs, field.Required(ap, ""))
	} else if group, version, err := parseGroupVersion(pk.APIVersion); err != nil {
		errs = append(errs, field.Invalid(ap, pk.APIVersion, err.Error()))
	} else {
		if group != "" {
			if msgs := utilvalidation.IsDNS1123Subdomain(group); len(msgs) > 0 {
				errs = append(errs, field.Invalid(ap, group, strings.Join(msgs, ",")))
			}
		}
		if version == "" {
			errs = append(errs, field.Invalid(ap, pk.APIVersion, "version must be specified"))
		} else if msgs := utilvalidation.IsDNS1035Label(version); len(msgs) > 0 {
			errs = append(errs, field.Invalid(ap, version, strings.Join(msgs, ",")))
		}
	}
	if pk.Kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), ""))
	} else if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(pk.Kind)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("kind"), pk.Kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}
	return errs
}

// parseGroupVersion splits "group/version" as Kubernetes' policy
// validation does ("" and "/" are an empty group and version).
func parseGroupVersion(gv string) (group, version string, err error) {
	if gv == "" || gv == "/" {
		return "", "", nil
	}
	switch strings.Count(gv, "/") {
	case 0:
		return "", gv, nil
	case 1:
		group, version, _ = strings.Cut(gv, "/")
		return group, version, nil
	}
	return "", "", fmt.Errorf("unexpected GroupVersion string: %v", gv)
}

func validateMatchResources(mr *admissionv1.MatchResources, p *field.Path) field.ErrorList {
	if mr == nil {
		return nil
	}
	var errs field.ErrorList
	if mr.MatchPolicy == nil {
		errs = append(errs, field.Required(p.Child("matchPolicy"), ""))
	} else if !slices.Contains(matchPolicies, string(*mr.MatchPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *mr.MatchPolicy, matchPolicies))
	}
	// Selectors are validated strictly: these types came after
	// kubernetes/kubernetes#99139.
	if mr.NamespaceSelector == nil {
		errs = append(errs, field.Required(p.Child("namespaceSelector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(mr.NamespaceSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("namespaceSelector"))...)
	}
	if mr.ObjectSelector == nil {
		errs = append(errs, field.Required(p.Child("objectSelector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(mr.ObjectSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("objectSelector"))...)
	}
	for i := range mr.ResourceRules {
		errs = append(errs, validateNamedRule(&mr.ResourceRules[i], p.Child("resourceRules").Index(i))...)
	}
	for i := range mr.ExcludeResourceRules {
		errs = append(errs, validateNamedRule(&mr.ExcludeResourceRules[i], p.Child("excludeResourceRules").Index(i))...)
	}
	return errs
}

func validateNamedRule(r *admissionv1.NamedRuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, name := range r.ResourceNames {
		for _, msg := range content.IsPathSegmentName(name) {
			errs = append(errs, field.Invalid(p.Child("resourceNames").Index(i), name, msg))
		}
		if names.Has(name) {
			errs = append(errs, field.Duplicate(p.Child("resourceNames").Index(i), name))
		} else {
			names.Insert(name)
		}
	}
	return append(errs, validateRuleWithOperations(&r.RuleWithOperations, p)...)
}

// validateMutatingOperations refuses DELETE in the rules of a mutating
// policy or binding: only creates, updates and connects are mutated.
func validateMutatingOperations(rules []admissionv1.NamedRuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, r := range rules {
		for _, op := range r.Operations {
			if !slices.Contains(mutatingOperations, string(op)) {
				errs = append(errs, field.NotSupported(p.Child("resourceRules", "operations"), op, mutatingOperations))
			}
		}
	}
	return errs
}

// policySpec is what validating and mutating policies share.
type policySpec struct {
	paramKind        *admissionv1.ParamKind
	matchConstraints *admissionv1.MatchResources
	failurePolicy    *admissionv1.FailurePolicyType
	matchConditions  []admissionv1.MatchCondition
	variables        []admissionv1.Variable
	// mutating: a MutatingAdmissionPolicy's spec.
	mutating bool
}

// validateCommonSpec checks what both kinds of policies have, up to their
// variables; it returns the options the rest of the spec is checked
// with.
func validateCommonSpec(s *policySpec, o options, compiler func() plugincel.Compiler, p *field.Path) (field.ErrorList, options) {
	var errs field.ErrorList
	if s.failurePolicy == nil {
		errs = append(errs, field.Required(p.Child("failurePolicy"), ""))
	} else if !slices.Contains(failurePolicies, string(*s.failurePolicy)) {
		errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *s.failurePolicy, failurePolicies))
	}
	if s.paramKind != nil {
		o.paramsInMatchConditions = true
		errs = append(errs, validateParamKind(*s.paramKind, p.Child("paramKind"))...)
	}
	if s.matchConstraints == nil {
		errs = append(errs, field.Required(p.Child("matchConstraints"), ""))
	} else {
		mp := p.Child("matchConstraints")
		errs = append(errs, validateMatchResources(s.matchConstraints, mp)...)
		// A resource rule gives the expressions their types.
		if len(s.matchConstraints.ResourceRules) == 0 {
			errs = append(errs, field.Required(mp.Child("resourceRules"), ""))
		}
		if s.mutating {
			errs = append(errs, validateMutatingOperations(s.matchConstraints.ResourceRules, mp)...)
		}
	}
	if !o.ignoreMatchConditions {
		errs = append(errs, validateMatchConditions(s.matchConditions, o, p.Child("matchConditions"))...)
	}
	for i, v := range s.variables {
		errs = append(errs, validateVariable(compiler(), &v, s.paramKind != nil, o, p.Child("variables").Index(i))...)
	}
	return errs, o
}

func validateVariable(c plugincel.Compiler, v *admissionv1.Variable, params bool, o options, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(v.Name) == "" {
		errs = append(errs, field.Required(p.Child("name"), "name is not specified"))
	} else if !isCELIdentifier(v.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), v.Name, "must be a valid CEL identifier"))
	}
	if strings.TrimSpace(v.Expression) == "" {
		errs = append(errs, field.Required(p.Child("expression"), "expression is not specified"))
	} else {
		// Kubernetes compiles a variable that was stored as a validation
		// in the environment of stored expressions.
		errs = append(errs, compileVariable(c, p, v.Name, v.Expression, params, o.storedValidations)...)
	}
	return errs
}

// validateValidatingPolicySpec checks a ValidatingAdmissionPolicy's spec.
func validateValidatingPolicySpec(name string, spec *admissionv1.ValidatingAdmissionPolicySpec, o options) field.ErrorList {
	p := field.NewPath("spec")
	var compiler plugincel.Compiler
	getCompiler := func() plugincel.Compiler {
		if compiler == nil {
			compiler = newCompiler(len(spec.Variables) > 0)
		}
		return compiler
	}
	errs, o := validateCommonSpec(&policySpec{paramKind: spec.ParamKind, matchConstraints: spec.MatchConstraints, failurePolicy: spec.FailurePolicy,
		matchConditions: spec.MatchConditions, variables: spec.Variables}, o, getCompiler, p)
	params := spec.ParamKind != nil
	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		return append(errs,
			field.Required(p.Child("validations"), "validations or auditAnnotations must contain at least one item"),
			field.Required(p.Child("auditAnnotations"), "validations or auditAnnotations must contain at least one item"))
	}
	for i := range spec.Validations {
		errs = append(errs, validateValidation(getCompiler(), &spec.Validations[i], params, o, p.Child("validations").Index(i))...)
	}
	if spec.AuditAnnotations != nil {
		ap := p.Child("auditAnnotations")
		if len(spec.AuditAnnotations) > maxAuditAnnotations {
			errs = append(errs, field.Invalid(ap, auditAnnotationsValue(spec.AuditAnnotations), fmt.Sprintf("must not have more than %d auditAnnotations", maxAuditAnnotations)))
		}
		keys := sets.New[string]()
		for i := range spec.AuditAnnotations {
			a := &spec.AuditAnnotations[i]
			errs = append(errs, validateAuditAnnotation(getCompiler(), name, a, params, o, ap.Index(i))...)
			if keys.Has(a.Key) {
				errs = append(errs, field.Duplicate(ap.Index(i).Child("key"), a.Key))
			}
			keys.Insert(a.Key)
		}
	}
	return errs
}

// auditAnnotation is an AuditAnnotation as Kubernetes' messages show it:
// its internal type has no JSON names.
type auditAnnotation struct {
	Key, ValueExpression string
}

func auditAnnotationsValue(as []admissionv1.AuditAnnotation) []auditAnnotation {
	out := make([]auditAnnotation, len(as))
	for i, a := range as {
		out[i] = auditAnnotation(a)
	}
	return out
}

// newlines are the line breaks of CEL's grammar.
var newlines = regexp.MustCompile(`[\n\r]+`)

func validateValidation(c plugincel.Compiler, v *admissionv1.Validation, params bool, o options, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	msg := strings.TrimSpace(v.Message)
	msgExpr := strings.TrimSpace(v.MessageExpression)
	if strings.TrimSpace(v.Expression) == "" {
		errs = append(errs, field.Required(p.Child("expression"), "expression is not specified"))
	} else {
		errs = append(errs, compileValidation(c, p.Child("expression"), v.Expression, params, o.storedValidations)...)
	}
	if v.MessageExpression != "" && msgExpr == "" {
		errs = append(errs, field.Invalid(p.Child("messageExpression"), v.MessageExpression, "must be non-empty if specified"))
	} else if msgExpr != "" {
		// Compiled as written, so that errors show the right column.
		errs = append(errs, compileMessageExpression(c, p.Child("messageExpression"), v.MessageExpression, o.paramsInMatchConditions, o.storedMessageExpressions)...)
	}
	if v.Message != "" && msg == "" {
		errs = append(errs, field.Invalid(p.Child("message"), v.Message, "must be non-empty if specified"))
	} else if newlines.MatchString(msg) {
		errs = append(errs, field.Invalid(p.Child("message"), v.Message, "must not contain line breaks"))
	}
	if v.Reason != nil && !slices.Contains(validationReasons, string(*v.Reason)) {
		errs = append(errs, field.NotSupported(p.Child("reason"), *v.Reason, validationReasons))
	}
	return errs
}

func validateAuditAnnotation(c plugincel.Compiler, name string, a *admissionv1.AuditAnnotation, params bool, o options, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name != "" {
		errs = append(errs, validateQualifiedName(name+"/"+a.Key, p.Child("key"))...)
	} else {
		errs = append(errs, field.Invalid(p.Child("key"), a.Key, "requires metadata.name be non-empty"))
	}
	vp := p.Child("valueExpression")
	switch trimmed := strings.TrimSpace(a.ValueExpression); {
	case trimmed == "":
		errs = append(errs, field.Required(vp, "valueExpression is not specified"))
	case len(trimmed) > maxAuditAnnotationValueExpressionLength:
		errs = append(errs, field.Required(vp, fmt.Sprintf("must not exceed %d bytes in length", maxAuditAnnotationValueExpressionLength)))
	default:
		errs = append(errs, compileAuditAnnotation(c, vp, trimmed, a.ValueExpression, params, o.storedAuditAnnotations)...)
	}
	return errs
}

// validateMutatingPolicySpec checks a MutatingAdmissionPolicy's spec.
func validateMutatingPolicySpec(spec *admissionv1.MutatingAdmissionPolicySpec, o options) field.ErrorList {
	p := field.NewPath("spec")
	// Mutating policies compile with composition always (their
	// expressions may name variables, and object() builds types).
	compiler := compositionCompiler()
	errs, o := validateCommonSpec(&policySpec{paramKind: spec.ParamKind, matchConstraints: spec.MatchConstraints, failurePolicy: spec.FailurePolicy,
		matchConditions: spec.MatchConditions, variables: spec.Variables, mutating: true}, o, func() plugincel.Compiler { return compiler }, p)
	params := spec.ParamKind != nil
	if len(spec.Mutations) == 0 {
		errs = append(errs, field.Required(p.Child("mutations"), "mutations must contain at least one item"))
	}
	for i := range spec.Mutations {
		errs = append(errs, validateMutation(compiler, &spec.Mutations[i], params, o, p.Child("mutations").Index(i))...)
	}
	if spec.ReinvocationPolicy == "" {
		errs = append(errs, field.Required(p.Child("reinvocationPolicy"), ""))
	} else if !slices.Contains(reinvocationPolicies, string(spec.ReinvocationPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("reinvocationPolicy"), spec.ReinvocationPolicy, reinvocationPolicies))
	}
	return errs
}

func validateMutation(c plugincel.Compiler, m *admissionv1.Mutation, params bool, o options, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch m.PatchType {
	case "":
		errs = append(errs, field.Required(p.Child("patchType"), ""))
	case admissionv1.PatchTypeJSONPatch:
		if m.JSONPatch == nil {
			errs = append(errs, field.Required(p.Child("jsonPatch"), "must be specified when patchType is JSONPatch"))
		} else {
			ep := p.Child("jsonPatch", "expression")
			if trimmed := strings.TrimSpace(m.JSONPatch.Expression); trimmed == "" {
				errs = append(errs, field.Required(ep, ""))
			} else {
				// Kubernetes looks a stored JSON patch up among the stored
				// apply configurations.
				errs = append(errs, compileJSONPatch(c, ep, trimmed, m.JSONPatch.Expression, params, o.storedApplyConfigurations)...)
			}
		}
		if m.ApplyConfiguration != nil {
			errs = append(errs, field.Invalid(p.Child("applyConfiguration"), "{applyConfiguration}", "must not be specified when patchType is JSONPatch"))
		}
	case admissionv1.PatchTypeApplyConfiguration:
		if m.ApplyConfiguration == nil {
			errs = append(errs, field.Required(p.Child("applyConfiguration"), "must be specified when patchType is ApplyConfiguration"))
		} else {
			ep := p.Child("applyConfiguration", "expression")
			if trimmed := strings.TrimSpace(m.ApplyConfiguration.Expression); trimmed == "" {
				errs = append(errs, field.Required(ep, ""))
			} else {
				errs = append(errs, compileApplyConfiguration(c, ep, trimmed, m.ApplyConfiguration.Expression, params, o.storedApplyConfigurations)...)
			}
		}
		if m.JSONPatch != nil {
			errs = append(errs, field.Invalid(p.Child("jsonPatch"), "{jsonPatch}", "must not be specified when patchType is ApplyConfiguration"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("patchType"), m.PatchType, patchTypes))
	}
	return errs
}

// policyUpdateOptions are the options of an updated policy: its match
// conditions are not checked again when neither they nor its paramKind
// changed, and what it already had compiles as stored expressions.
func policyUpdateOptions(same bool, matchConditions []admissionv1.MatchCondition) options {
	o := options{
		ignoreMatchConditions:     same,
		storedMatchConditions:     sets.New[string](),
		storedValidations:         sets.New[string](),
		storedMessageExpressions:  sets.New[string](),
		storedAuditAnnotations:    sets.New[string](),
		storedApplyConfigurations: sets.New[string](),
	}
	for _, mc := range matchConditions {
		o.storedMatchConditions.Insert(mc.Expression)
	}
	return o
}

func validatingPolicyUpdateOptions(spec, old *admissionv1.ValidatingAdmissionPolicySpec) options {
	o := policyUpdateOptions(paramKindEqual(spec.ParamKind, old.ParamKind) && semanticEqual(spec.MatchConditions, old.MatchConditions), old.MatchConditions)
	for _, v := range old.Validations {
		o.storedValidations.Insert(v.Expression)
		if v.MessageExpression != "" {
			o.storedMessageExpressions.Insert(v.MessageExpression)
		}
	}
	for _, a := range old.AuditAnnotations {
		o.storedAuditAnnotations.Insert(a.ValueExpression)
	}
	return o
}

func mutatingPolicyUpdateOptions(spec, old *admissionv1.MutatingAdmissionPolicySpec) options {
	o := policyUpdateOptions(paramKindEqual(spec.ParamKind, old.ParamKind) && semanticEqual(spec.MatchConditions, old.MatchConditions), old.MatchConditions)
	for _, m := range old.Mutations {
		if m.ApplyConfiguration != nil {
			o.storedApplyConfigurations.Insert(m.ApplyConfiguration.Expression)
		}
		// Kubernetes keeps no set of stored JSON patches: a stored one
		// is looked up among the apply configurations (see validateMutation).
	}
	return o
}

func paramKindEqual(a, b *admissionv1.ParamKind) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// semanticEqual compares match conditions as Kubernetes' semantic
// equality does: an empty list is a missing one.
func semanticEqual(a, b []admissionv1.MatchCondition) bool {
	return slices.Equal(a, b)
}

// validatePolicyName checks a binding's policyName (a missing one is
// reported by the callers).
func validatePolicyName(name string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

func validateParamRef(pr *admissionv1.ParamRef, p *field.Path) field.ErrorList {
	if pr == nil {
		return nil
	}
	var errs field.ErrorList
	if pr.Name != "" {
		for _, msg := range content.IsPathSegmentName(pr.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), pr.Name, msg))
		}
		if pr.Selector != nil {
			errs = append(errs, field.Forbidden(p.Child("name"), `name and selector are mutually exclusive`))
		}
	}
	if pr.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(pr.Selector, metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
		if pr.Name != "" {
			errs = append(errs, field.Forbidden(p.Child("selector"), `name and selector are mutually exclusive`))
		}
	}
	if pr.Name == "" && pr.Selector == nil {
		errs = append(errs, field.Required(p, `one of name or selector must be specified`))
	}
	if pr.ParameterNotFoundAction == nil || *pr.ParameterNotFoundAction == "" {
		errs = append(errs, field.Required(p.Child("parameterNotFoundAction"), ""))
	} else if !slices.Contains(notFoundActions, string(*pr.ParameterNotFoundAction)) {
		errs = append(errs, field.NotSupported(p.Child("parameterNotFoundAction"), *pr.ParameterNotFoundAction, notFoundActions))
	}
	return errs
}

func validateValidationActions(actions []admissionv1.ValidationAction, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, a := range actions {
		if !slices.Contains(validationActions, string(a)) {
			errs = append(errs, field.NotSupported(p.Index(i), a, validationActions))
		}
		if seen.Has(string(a)) {
			errs = append(errs, field.Duplicate(p.Index(i), a))
		}
		seen.Insert(string(a))
	}
	if seen.Has(string(admissionv1.Deny)) && seen.Has(string(admissionv1.Warn)) {
		errs = append(errs, field.Invalid(p, actions, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	return errs
}

// validateValidatingBindingSpec checks a ValidatingAdmissionPolicyBinding.
// Kubernetes' declarative validation (beta, on by default) answers for a
// missing policyName and missing validationActions, after the rest of its
// rules.
func validateValidatingBindingSpec(spec *admissionv1.ValidatingAdmissionPolicyBindingSpec) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	if spec.PolicyName != "" {
		errs = append(errs, validatePolicyName(spec.PolicyName, p.Child("policyName"))...)
	}
	errs = append(errs, validateParamRef(spec.ParamRef, p.Child("paramRef"))...)
	errs = append(errs, validateMatchResources(spec.MatchResources, p.Child("matchResources"))...)
	errs = append(errs, validateValidationActions(spec.ValidationActions, p.Child("validationActions"))...)
	// Declarative validation's answers come last.
	if spec.PolicyName == "" {
		errs = append(errs, field.Required(p.Child("policyName"), ""))
	}
	if len(spec.ValidationActions) == 0 {
		errs = append(errs, field.Required(p.Child("validationActions"), ""))
	}
	return errs
}

// validateMutatingBindingSpec checks a MutatingAdmissionPolicyBinding.
func validateMutatingBindingSpec(spec *admissionv1.MutatingAdmissionPolicyBindingSpec) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	if spec.PolicyName == "" {
		errs = append(errs, field.Required(p.Child("policyName"), ""))
	} else {
		errs = append(errs, validatePolicyName(spec.PolicyName, p.Child("policyName"))...)
	}
	errs = append(errs, validateParamRef(spec.ParamRef, p.Child("paramRef"))...)
	errs = append(errs, validateMatchResources(spec.MatchResources, p.Child("matchResources"))...)
	if spec.MatchResources != nil {
		errs = append(errs, validateMutatingOperations(spec.MatchResources.ResourceRules, p.Child("matchResources"))...)
	}
	return errs
}

// validatePolicyStatus checks a ValidatingAdmissionPolicy's status.
func validatePolicyStatus(status *admissionv1.ValidatingAdmissionPolicyStatus) field.ErrorList {
	p := field.NewPath("status")
	var errs field.ErrorList
	if tc := status.TypeChecking; tc != nil {
		for i, w := range tc.ExpressionWarnings {
			wp := p.Child("typeChecking", "expressionWarnings").Index(i)
			if w.Warning == "" {
				errs = append(errs, field.Required(wp.Child("warning"), ""))
			}
			errs = append(errs, validateFieldRef(w.FieldRef, wp.Child("fieldRef"))...)
		}
	}
	return append(errs, metav1validation.ValidateConditions(status.Conditions, p.Child("conditions"))...)
}

func validateFieldRef(ref string, p *field.Path) field.ErrorList {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if err := jsonpath.New("spec").Parse(fmt.Sprintf("{%s}", ref)); err != nil {
		return field.ErrorList{field.Invalid(p, ref, fmt.Sprintf("invalid JSONPath: %v", err))}
	}
	return nil
}

// excludedResources are the resources admission webhooks never see
// (virtual resources whose interception could break the cluster).
var excludedResources = []schema.GroupResource{
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"},
	{Group: "authentication.k8s.io", Resource: "tokenreviews"},
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"},
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
}

// excludedRuleWarnings warn of the rules that name one of them
// explicitly: they have no effect. A rule with a wildcard group or
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
					if slices.Contains(excludedResources, gr) && !seen.Has(gr) {
						seen.Insert(gr)
						warnings = append(warnings, fmt.Sprintf("%s: %s is excluded from admission webhooks; this rule will have no effect", p.Index(j), gr))
					}
				}
			}
		}
	}
	return warnings
}
