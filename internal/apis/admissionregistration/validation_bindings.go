package admissionregistration

import (
	"slices"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation of the bindings of admission policies (see validation.go).

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
