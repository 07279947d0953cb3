package admissionregistration

import (
	"context"
	"reflect"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// The rules of each kind, as Kubernetes' strategies have them: the
// generation starts at 1 and grows with every change of the webhooks (of
// the spec, for policies and bindings); names ending in .static.k8s.io are
// refused; webhooks whose rules name a resource admission webhooks never
// see are accepted with a warning; a policy's status belongs to its status
// subresource; and the writer of a policy or binding with parameters must
// be able to read them.

func validatingWebhookStrategy() strategy[admissionv1.ValidatingWebhookConfiguration] {
	type T = admissionv1.ValidatingWebhookConfiguration
	return strategy[T]{kindRules[T]{
		kind:     "ValidatingWebhookConfiguration",
		defaults: DefaultValidatingWebhookConfiguration,
		changed:  func(obj, old *T) bool { return !reflect.DeepEqual(obj.Webhooks, old.Webhooks) },
		validate: func(_ context.Context, obj, old *T) field.ErrorList {
			if old == nil {
				return append(validateWebhookConfiguration(validatingWebhooks(obj.Webhooks), nil, false), validateStaticSuffix(obj.Name)...)
			}
			return validateWebhookConfiguration(validatingWebhooks(obj.Webhooks), validatingWebhooks(old.Webhooks), true)
		},
		warnCreate: func(t *T) []string { return excludedRuleWarnings(validatingWebhooks(t.Webhooks)) },
		warnUpdate: func(t *T) []string {
			return append(staticSuffixWarnings(t.Name), excludedRuleWarnings(validatingWebhooks(t.Webhooks))...)
		},
	}}
}

func mutatingWebhookStrategy() strategy[admissionv1.MutatingWebhookConfiguration] {
	type T = admissionv1.MutatingWebhookConfiguration
	return strategy[T]{kindRules[T]{
		kind:     "MutatingWebhookConfiguration",
		defaults: DefaultMutatingWebhookConfiguration,
		changed:  func(obj, old *T) bool { return !reflect.DeepEqual(obj.Webhooks, old.Webhooks) },
		validate: func(_ context.Context, obj, old *T) field.ErrorList {
			if old == nil {
				return append(validateWebhookConfiguration(mutatingWebhooks(obj.Webhooks), nil, false), validateStaticSuffix(obj.Name)...)
			}
			return validateWebhookConfiguration(mutatingWebhooks(obj.Webhooks), mutatingWebhooks(old.Webhooks), true)
		},
		warnCreate: func(t *T) []string { return excludedRuleWarnings(mutatingWebhooks(t.Webhooks)) },
		warnUpdate: func(t *T) []string {
			return append(staticSuffixWarnings(t.Name), excludedRuleWarnings(mutatingWebhooks(t.Webhooks))...)
		},
	}}
}

// validatingPolicyKind are the rules of ValidatingAdmissionPolicies.
func validatingPolicyKind(a *paramAuthorizer) kindRules[admissionv1.ValidatingAdmissionPolicy] {
	type T = admissionv1.ValidatingAdmissionPolicy
	return kindRules[T]{
		kind:     "ValidatingAdmissionPolicy",
		defaults: DefaultValidatingAdmissionPolicy,
		changed:  func(obj, old *T) bool { return !apiequality.Semantic.DeepEqual(obj.Spec, old.Spec) },
		prepare: func(obj, old *T) {
			if old == nil {
				obj.Status = admissionv1.ValidatingAdmissionPolicyStatus{}
			} else {
				obj.Status = old.Status
			}
		},
		validate: func(ctx context.Context, obj, old *T) field.ErrorList {
			var errs field.ErrorList
			if old == nil {
				errs = append(validateValidatingPolicySpec(obj.Name, &obj.Spec, options{}), validateStaticSuffix(obj.Name)...)
			} else {
				errs = validateValidatingPolicySpec(obj.Name, &obj.Spec, validatingPolicyUpdateOptions(&obj.Spec, &old.Spec))
			}
			if len(errs) > 0 {
				return errs
			}
			if old != nil && paramKindEqual(obj.Spec.ParamKind, old.Spec.ParamKind) {
				return nil
			}
			return a.authorizeParamKind(ctx, obj.Spec.ParamKind)
		},
		warnUpdate: func(t *T) []string { return staticSuffixWarnings(t.Name) },
	}
}

// validatingPolicyStrategy adds the status subresource: a status write
// changes the status alone (and no metadata but managedFields), and never
// the generation.
type validatingPolicyStrategy struct {
	strategy[admissionv1.ValidatingAdmissionPolicy]
}

func (validatingPolicyStrategy) PrepareForStatusUpdate(_ context.Context, obj, old *resource.Object) {
	o, err := resource.Typed[admissionv1.ValidatingAdmissionPolicy](old)
	if err != nil {
		return
	}
	resource.EditTyped(obj, func(p *admissionv1.ValidatingAdmissionPolicy) {
		p.Spec = o.Spec
		metav1.ResetObjectMetaForStatus(&p.ObjectMeta, &o.ObjectMeta)
	})
}

func (validatingPolicyStrategy) ValidateStatusUpdate(_ context.Context, obj, _ *resource.Object) field.ErrorList {
	p, err := resource.Typed[admissionv1.ValidatingAdmissionPolicy](obj)
	if err != nil {
		return decodeError(err)
	}
	return validatePolicyStatus(&p.Status)
}

func mutatingPolicyStrategy(a *paramAuthorizer) strategy[admissionv1.MutatingAdmissionPolicy] {
	type T = admissionv1.MutatingAdmissionPolicy
	return strategy[T]{kindRules[T]{
		kind:     "MutatingAdmissionPolicy",
		defaults: DefaultMutatingAdmissionPolicy,
		changed:  func(obj, old *T) bool { return !apiequality.Semantic.DeepEqual(obj.Spec, old.Spec) },
		validate: func(ctx context.Context, obj, old *T) field.ErrorList {
			var errs field.ErrorList
			if old == nil {
				errs = append(validateMutatingPolicySpec(&obj.Spec, options{}), validateStaticSuffix(obj.Name)...)
			} else {
				errs = validateMutatingPolicySpec(&obj.Spec, mutatingPolicyUpdateOptions(&obj.Spec, &old.Spec))
			}
			if len(errs) > 0 {
				return errs
			}
			if old != nil && paramKindEqual(obj.Spec.ParamKind, old.Spec.ParamKind) {
				return nil
			}
			return a.authorizeParamKind(ctx, obj.Spec.ParamKind)
		},
		warnUpdate: func(t *T) []string { return staticSuffixWarnings(t.Name) },
	}}
}

func validatingBindingStrategy(a *paramAuthorizer, policies *store.Cache) strategy[admissionv1.ValidatingAdmissionPolicyBinding] {
	type T = admissionv1.ValidatingAdmissionPolicyBinding
	return strategy[T]{kindRules[T]{
		kind:     "ValidatingAdmissionPolicyBinding",
		defaults: DefaultValidatingAdmissionPolicyBinding,
		changed:  func(obj, old *T) bool { return !apiequality.Semantic.DeepEqual(obj.Spec, old.Spec) },
		validate: func(ctx context.Context, obj, old *T) field.ErrorList {
			errs := validateValidatingBindingSpec(&obj.Spec)
			if old == nil {
				errs = append(errs, validateStaticSuffix(obj.Name)...)
			}
			if len(errs) > 0 {
				return errs
			}
			return a.authorizeParamRef(ctx, obj.Spec.PolicyName, obj.Spec.ParamRef, func(name string) (*admissionv1.ParamKind, bool) {
				p, ok := getPolicy[admissionv1.ValidatingAdmissionPolicy](policies, ValidatingAdmissionPolicyPrefix, name)
				if !ok {
					return nil, false
				}
				return p.Spec.ParamKind, true
			}, false)
		},
		warnUpdate: func(t *T) []string { return staticSuffixWarnings(t.Name) },
	}}
}

func mutatingBindingStrategy(a *paramAuthorizer, policies *store.Cache) strategy[admissionv1.MutatingAdmissionPolicyBinding] {
	type T = admissionv1.MutatingAdmissionPolicyBinding
	return strategy[T]{kindRules[T]{
		kind:     "MutatingAdmissionPolicyBinding",
		defaults: DefaultMutatingAdmissionPolicyBinding,
		changed:  func(obj, old *T) bool { return !apiequality.Semantic.DeepEqual(obj.Spec, old.Spec) },
		validate: func(ctx context.Context, obj, old *T) field.ErrorList {
			errs := validateMutatingBindingSpec(&obj.Spec)
			if old == nil {
				errs = append(errs, validateStaticSuffix(obj.Name)...)
			}
			if len(errs) > 0 {
				return errs
			}
			return a.authorizeParamRef(ctx, obj.Spec.PolicyName, obj.Spec.ParamRef, func(name string) (*admissionv1.ParamKind, bool) {
				p, ok := getPolicy[admissionv1.MutatingAdmissionPolicy](policies, MutatingAdmissionPolicyPrefix, name)
				if !ok {
					return nil, false
				}
				return p.Spec.ParamKind, true
			}, true)
		},
		warnUpdate: func(t *T) []string { return staticSuffixWarnings(t.Name) },
	}}
}

// getPolicy reads a policy from its watch cache.
func getPolicy[T any](c *store.Cache, prefix, name string) (*T, bool) {
	if c == nil {
		return nil, false
	}
	it, _ := c.Get(prefix + name)
	if it == nil {
		return nil, false
	}
	obj, err := resource.DecodeObject(it.Bytes())
	if err != nil {
		return nil, false
	}
	t, err := resource.Typed[T](obj)
	return t, err == nil
}
