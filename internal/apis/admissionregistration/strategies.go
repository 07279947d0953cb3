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
	return webhookStrategy("ValidatingWebhookConfiguration", DefaultValidatingWebhookConfiguration,
		func(t *admissionv1.ValidatingWebhookConfiguration) (string, any, []webhook) {
			return t.Name, t.Webhooks, validatingWebhooks(t.Webhooks)
		})
}

func mutatingWebhookStrategy() strategy[admissionv1.MutatingWebhookConfiguration] {
	return webhookStrategy("MutatingWebhookConfiguration", DefaultMutatingWebhookConfiguration,
		func(t *admissionv1.MutatingWebhookConfiguration) (string, any, []webhook) {
			return t.Name, t.Webhooks, mutatingWebhooks(t.Webhooks)
		})
}

// webhookStrategy is the strategy of a kind of webhook configuration:
// parts gives an object's name, its webhooks as stored and as checked.
func webhookStrategy[T any](kind string, defaults func(*T), parts func(*T) (name string, stored any, hooks []webhook)) strategy[T] {
	hooks := func(t *T) []webhook { _, _, h := parts(t); return h }
	return strategy[T]{kindRules[T]{
		kind:     kind,
		defaults: defaults,
		changed: func(obj, old *T) bool {
			_, a, _ := parts(obj)
			_, b, _ := parts(old)
			return !reflect.DeepEqual(a, b)
		},
		validate: func(_ context.Context, obj, old *T) field.ErrorList {
			if old == nil {
				name, _, h := parts(obj)
				return append(validateWebhookConfiguration(h, nil, false), validateStaticSuffix(name)...)
			}
			return validateWebhookConfiguration(hooks(obj), hooks(old), true)
		},
		warnCreate: func(t *T) []string { return excludedRuleWarnings(hooks(t)) },
		warnUpdate: func(t *T) []string {
			name, _, h := parts(t)
			return append(staticSuffixWarnings(name), excludedRuleWarnings(h)...)
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
	return bindingStrategy(bindingKind[T]{
		kind:     "ValidatingAdmissionPolicyBinding",
		defaults: DefaultValidatingAdmissionPolicyBinding,
		parts: func(t *T) (string, any, string, *admissionv1.ParamRef) {
			return t.Name, t.Spec, t.Spec.PolicyName, t.Spec.ParamRef
		},
		validateSpec: func(t *T) field.ErrorList { return validateValidatingBindingSpec(&t.Spec) },
		policyParamKind: func(ctx context.Context, name string) (*admissionv1.ParamKind, bool) {
			p, ok := getPolicy[admissionv1.ValidatingAdmissionPolicy](ctx, policies, ValidatingAdmissionPolicyPrefix, name)
			if !ok {
				return nil, false
			}
			return p.Spec.ParamKind, true
		},
	}, a)
}

func mutatingBindingStrategy(a *paramAuthorizer, policies *store.Cache) strategy[admissionv1.MutatingAdmissionPolicyBinding] {
	type T = admissionv1.MutatingAdmissionPolicyBinding
	return bindingStrategy(bindingKind[T]{
		kind:     "MutatingAdmissionPolicyBinding",
		defaults: DefaultMutatingAdmissionPolicyBinding,
		parts: func(t *T) (string, any, string, *admissionv1.ParamRef) {
			return t.Name, t.Spec, t.Spec.PolicyName, t.Spec.ParamRef
		},
		validateSpec: func(t *T) field.ErrorList { return validateMutatingBindingSpec(&t.Spec) },
		policyParamKind: func(ctx context.Context, name string) (*admissionv1.ParamKind, bool) {
			p, ok := getPolicy[admissionv1.MutatingAdmissionPolicy](ctx, policies, MutatingAdmissionPolicyPrefix, name)
			if !ok {
				return nil, false
			}
			return p.Spec.ParamKind, true
		},
		mutating: true,
	}, a)
}

// bindingKind is what differs between the kinds of policy bindings.
type bindingKind[T any] struct {
	kind     string
	defaults func(*T)
	// parts gives a binding's name, its spec, the name of its policy and
	// its paramRef.
	parts        func(*T) (name string, spec any, policy string, ref *admissionv1.ParamRef)
	validateSpec func(*T) field.ErrorList
	// policyParamKind reads the paramKind of a policy of the kind bound,
	// as it is now (a policy created just before its binding included).
	policyParamKind func(ctx context.Context, name string) (*admissionv1.ParamKind, bool)
	// mutating: it binds MutatingAdmissionPolicies.
	mutating bool
}

// bindingStrategy is the strategy of a kind of policy binding: the writer
// of a binding with parameters must be able to read them.
func bindingStrategy[T any](b bindingKind[T], a *paramAuthorizer) strategy[T] {
	return strategy[T]{kindRules[T]{
		kind:     b.kind,
		defaults: b.defaults,
		changed: func(obj, old *T) bool {
			_, x, _, _ := b.parts(obj)
			_, y, _, _ := b.parts(old)
			return !apiequality.Semantic.DeepEqual(x, y)
		},
		validate: func(ctx context.Context, obj, old *T) field.ErrorList {
			errs := b.validateSpec(obj)
			name, _, policy, ref := b.parts(obj)
			if old == nil {
				errs = append(errs, validateStaticSuffix(name)...)
			}
			if len(errs) > 0 {
				return errs
			}
			return a.authorizeParamRef(ctx, policy, ref, b.policyParamKind, b.mutating)
		},
		warnUpdate: func(t *T) []string { name, _, _, _ := b.parts(t); return staticSuffixWarnings(name) },
	}}
}

// getPolicy reads a policy, as it is now, from its watch cache.
func getPolicy[T any](ctx context.Context, c *store.Cache, prefix, name string) (*T, bool) {
	if c == nil {
		return nil, false
	}
	it, err := c.GetNewest(ctx, prefix+name)
	if err != nil || it == nil {
		return nil, false
	}
	obj, err := resource.DecodeObject(it.Bytes())
	if err != nil {
		return nil, false
	}
	t, err := resource.Typed[T](obj)
	return t, err == nil
}
