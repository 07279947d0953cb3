package admissionregistration

import (
	"context"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/auth"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// Where the objects live in etcd, as in Kubernetes.
const (
	ValidatingWebhookConfigurationPrefix   = "/registry/validatingwebhookconfigurations/"
	MutatingWebhookConfigurationPrefix     = "/registry/mutatingwebhookconfigurations/"
	ValidatingAdmissionPolicyPrefix        = "/registry/validatingadmissionpolicies/"
	ValidatingAdmissionPolicyBindingPrefix = "/registry/validatingadmissionpolicybindings/"
	MutatingAdmissionPolicyPrefix          = "/registry/mutatingadmissionpolicies/"
	MutatingAdmissionPolicyBindingPrefix   = "/registry/mutatingadmissionpolicybindings/"
)

// Options are what the policy strategies need besides their caches.
type Options struct {
	// Authorizer says whether the writer of a policy may read the objects
	// of its paramKind, and the writer of a binding the object of its
	// paramRef, as Kubernetes checks (nil: not checked).
	Authorizer auth.Authorizer
	// Resolve finds the resource of a kind (a paramKind); without it, or
	// when it fails, the writer needs the permission on every resource.
	Resolve func(schema.GroupVersionKind) (schema.GroupVersionResource, error)
}

// Resources are the six resources of admissionregistration.k8s.io/v1.
type Resources struct {
	ValidatingWebhookConfigurations   *resource.Resource
	MutatingWebhookConfigurations     *resource.Resource
	ValidatingAdmissionPolicies       *resource.Resource
	ValidatingAdmissionPolicyBindings *resource.Resource
	MutatingAdmissionPolicies         *resource.Resource
	MutatingAdmissionPolicyBindings   *resource.Resource
}

// All are the resources, in the order of Kubernetes' discovery.
func (r *Resources) All() []*resource.Resource {
	return []*resource.Resource{r.MutatingAdmissionPolicies, r.MutatingAdmissionPolicyBindings, r.MutatingWebhookConfigurations,
		r.ValidatingAdmissionPolicies, r.ValidatingAdmissionPolicyBindings, r.ValidatingWebhookConfigurations}
}

// New builds the resources, each served from the watch cache newCache
// makes for its key prefix.
func New(newCache func(prefix string) *store.Cache, o Options) *Resources {
	a := &paramAuthorizer{authz: o.Authorizer, resolve: o.Resolve}
	r := &Resources{}
	r.ValidatingWebhookConfigurations = newResource("validatingwebhookconfigurations", "ValidatingWebhookConfiguration", false,
		ValidatingWebhookConfigurationPrefix, newCache, validatingWebhookStrategy(), &admissionv1.ValidatingWebhookConfiguration{}, webhookTable{})
	r.MutatingWebhookConfigurations = newResource("mutatingwebhookconfigurations", "MutatingWebhookConfiguration", false,
		MutatingWebhookConfigurationPrefix, newCache, mutatingWebhookStrategy(), &admissionv1.MutatingWebhookConfiguration{}, webhookTable{})
	r.ValidatingAdmissionPolicies = newResource("validatingadmissionpolicies", "ValidatingAdmissionPolicy", true,
		ValidatingAdmissionPolicyPrefix, newCache, validatingPolicyStrategy{strategy[admissionv1.ValidatingAdmissionPolicy]{validatingPolicyKind(a)}}, &admissionv1.ValidatingAdmissionPolicy{}, policyTable{validating: true})
	policies := r.ValidatingAdmissionPolicies.Cache
	r.ValidatingAdmissionPolicyBindings = newResource("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", false,
		ValidatingAdmissionPolicyBindingPrefix, newCache, validatingBindingStrategy(a, policies), &admissionv1.ValidatingAdmissionPolicyBinding{}, bindingTable{})
	r.MutatingAdmissionPolicies = newResource("mutatingadmissionpolicies", "MutatingAdmissionPolicy", false,
		MutatingAdmissionPolicyPrefix, newCache, mutatingPolicyStrategy(a), &admissionv1.MutatingAdmissionPolicy{}, policyTable{})
	mutatingPolicies := r.MutatingAdmissionPolicies.Cache
	r.MutatingAdmissionPolicyBindings = newResource("mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", false,
		MutatingAdmissionPolicyBindingPrefix, newCache, mutatingBindingStrategy(a, mutatingPolicies), &admissionv1.MutatingAdmissionPolicyBinding{}, bindingTable{})
	return r
}

// newResource serves one cluster-scoped kind of the group. Its updates
// need a resourceVersion, as in Kubernetes, and a PUT never creates.
func newResource(plural, kind string, status bool, prefix string, newCache func(string) *store.Cache,
	s resource.Strategy, goType any, table resource.TableConvertor) *resource.Resource {
	return &resource.Resource{
		Group:              admissionv1.GroupName,
		Plural:             plural,
		Singular:           singular(plural),
		Kind:               kind,
		ListKind:           kind + "List",
		Categories:         []string{"api-extensions"},
		Versions:           []*resource.Version{{Name: "v1", Status: status}},
		StorageVersion:     "v1",
		KeyPrefix:          prefix,
		Cache:              newCache(prefix),
		Strategy:           s,
		Converter:          conversion.None{},
		StrategicMergeType: goType,
		Table:              table,
		FieldManagers:      resource.BuiltinFieldManagers(admissionv1.GroupName, kind, status),
		Protobuf:           true,
		Verbs:              []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	}
}

// singular is a plural's singular (…policies: …policy).
func singular(plural string) string {
	if n := len(plural); n > 3 && plural[n-3:] == "ies" {
		return plural[:n-3] + "y"
	}
	return plural[:len(plural)-1]
}

// kindRules are the rules of one kind, on its Go type T: the engine's
// Object is decoded into T for them.
type kindRules[T any] struct {
	kind     string
	defaults func(*T)
	// changed says whether an update bumps the generation.
	changed func(obj, old *T) bool
	// validate checks a new object (old nil) or an updated one.
	validate func(ctx context.Context, obj, old *T) field.ErrorList
	// warnCreate, warnUpdate give the warnings of a write (nil: none).
	warnCreate func(obj *T) []string
	warnUpdate func(obj *T) []string
	// prepare resets what a client may not set (old nil on create).
	prepare func(obj, old *T)
}

// strategy is a resource.Strategy made of a kind's rules.
type strategy[T any] struct{ r kindRules[T] }

// Normalize decodes a body through T and applies Kubernetes' defaults.
func (s strategy[T]) Normalize(obj *resource.Object) ([]error, error) {
	return resource.NormalizeTyped(obj, s.r.kind, "v1", s.r.defaults)
}

// PrepareForCreate defaults the object again (a server-side apply's
// result has not been through Normalize; Kubernetes defaults it too),
// resets what a client may not set and starts the generation at 1.
func (s strategy[T]) PrepareForCreate(_ context.Context, obj *resource.Object) {
	obj.Meta.Generation = 1
	resource.EditTyped(obj, func(t *T) {
		s.r.defaults(t)
		if s.r.prepare != nil {
			s.r.prepare(t, nil)
		}
	})
}

// PrepareForUpdate defaults the object again (as on create), keeps what
// a client may not change and bumps the generation on a change of the
// spec (of the webhooks).
func (s strategy[T]) PrepareForUpdate(_ context.Context, obj, old *resource.Object) {
	o, err := resource.Typed[T](old)
	if err != nil {
		return
	}
	n, err := resource.Typed[T](obj)
	if err != nil {
		return
	}
	s.r.defaults(n)
	if s.r.prepare != nil {
		s.r.prepare(n, o)
	}
	if err := resource.FromTyped(n, obj); err != nil {
		return
	}
	if s.r.changed(n, o) {
		obj.Meta.Generation = old.Meta.Generation + 1
	}
}

// decodeError is what validation says of an object that does not decode
// (never one that came through Normalize).
func decodeError(err error) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
}

func (s strategy[T]) Validate(ctx context.Context, obj *resource.Object) field.ErrorList {
	t, err := resource.Typed[T](obj)
	if err != nil {
		return decodeError(err)
	}
	return s.r.validate(ctx, t, nil)
}

func (s strategy[T]) ValidateUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	t, err := resource.Typed[T](obj)
	if err != nil {
		return decodeError(err)
	}
	o, err := resource.Typed[T](old)
	if err != nil {
		return decodeError(err)
	}
	return s.r.validate(ctx, t, o)
}

func (s strategy[T]) WarningsOnCreate(_ context.Context, obj *resource.Object) []string {
	if s.r.warnCreate == nil {
		return nil
	}
	t, err := resource.Typed[T](obj)
	if err != nil {
		return nil
	}
	return s.r.warnCreate(t)
}

func (s strategy[T]) WarningsOnUpdate(_ context.Context, obj, _ *resource.Object) []string {
	if s.r.warnUpdate == nil {
		return nil
	}
	t, err := resource.Typed[T](obj)
	if err != nil {
		return nil
	}
	return s.r.warnUpdate(t)
}
