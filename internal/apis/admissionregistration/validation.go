package admissionregistration

import (
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
