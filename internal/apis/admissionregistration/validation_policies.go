package admissionregistration

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/client-go/util/jsonpath"
)

// Validation of ValidatingAdmissionPolicies and MutatingAdmissionPolicies
// (see validation.go).

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
