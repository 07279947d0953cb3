package openapi

import (
	"reflect"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// What openapi-gen reads in the comments of the k8s.io/api types and
// reflection cannot see (+optional, +enum), for the types crdserver
// serves. The +listType, +mapType, +structType and +default comments come
// from client-go's structured-merge-diff schema instead (listtypes.go).

// optionalFields are the fields of the built-in types without omitempty
// that are optional all the same: openapi-gen reads a +optional comment
// on them, which reflection cannot see. A field without omitempty is
// required unless it is listed here. The list holds every such field of
// the types crdserver serves (found in the k8s.io/api sources and checked
// against kube-apiserver's documents).
var optionalFields = map[reflect.Type][]string{
	reflect.TypeFor[corev1.Event]():                        {"reportingComponent", "reportingInstance"},
	reflect.TypeFor[eventsv1.Event]():                      {"metadata"},
	reflect.TypeFor[authenticationv1.TokenRequest]():       {"spec"},
	reflect.TypeFor[authenticationv1.TokenRequestSpec]():   {"audiences", "expirationSeconds", "boundObjectRef"},
	reflect.TypeFor[authenticationv1.TokenRequestStatus](): {"token", "expirationTimestamp"},
	reflect.TypeFor[rbacv1.RoleRef]():                      {"apiGroup"},
	reflect.TypeFor[rbacv1.Role]():                         {"rules"},
	reflect.TypeFor[rbacv1.ClusterRole]():                  {"rules"},
}

// requiredFields are the fields with omitempty that are required all the
// same: openapi-gen reads a +required comment on them.
var requiredFields = map[reflect.Type][]string{
	reflect.TypeFor[admissionregistrationv1.ValidatingAdmissionPolicyBinding]():     {"spec"},
	reflect.TypeFor[admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec](): {"policyName", "validationActions"},
	reflect.TypeFor[authenticationv1.TokenReviewSpec]():                             {"token"},
}

// descriptionFixes mend the descriptions the SwaggerDoc of a type gives
// where openapi-gen reads its comment otherwise: the example of
// validationActions keeps the backslashes of its quotes.
var descriptionFixes = map[reflect.Type]map[string]func(string) string{
	reflect.TypeFor[admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec](): {
		"validationActions": func(d string) string {
			const example = `"[{"message": "Invalid value", {"policy": "policy.example.com", {"binding": "policybinding.example.com", {"expressionIndex": "1", {"validationActions": ["Audit"]}]"`
			return strings.Replace(d, example, `"[{\"message\": \"Invalid value\", {\"policy\": \"policy.example.com\", {\"binding\": \"policybinding.example.com\", {\"expressionIndex\": \"1\", {\"validationActions\": [\"Audit\"]}]"`, 1)
		},
	},
}

// enum is a string type openapi-gen knows as an enum (+enum): its
// values, each with the comment of its constant.
type enum struct {
	values []enumValue
	// blankLine is set for the enums whose fields' comments end with an
	// empty line, which openapi-gen keeps before the list of values.
	blankLine bool
}

type enumValue struct {
	value, doc string
}

// enums are the enums of the built-in types. Reflection cannot see the
// +enum comment nor the constants, so they are listed here, values sorted
// as openapi-gen sorts them: NamespaceStatus.phase and the enums of
// admissionregistration.k8s.io/v1.
var enums = map[reflect.Type]enum{
	reflect.TypeFor[corev1.NamespacePhase](): {values: []enumValue{
		{string(corev1.NamespaceActive), "means the namespace is available for use in the system"},
		{string(corev1.NamespaceTerminating), "means the namespace is undergoing graceful termination"},
	}},
	reflect.TypeFor[admissionregistrationv1.FailurePolicyType](): {values: []enumValue{
		{string(admissionregistrationv1.Fail), "means that an error calling the webhook causes the admission to fail."},
		{string(admissionregistrationv1.Ignore), "means that an error calling the webhook is ignored."},
	}},
	reflect.TypeFor[admissionregistrationv1.MatchPolicyType](): {values: []enumValue{
		{string(admissionregistrationv1.Equivalent), "means requests should be sent to the webhook if they modify a resource listed in rules via another API group or version."},
		{string(admissionregistrationv1.Exact), "means requests should only be sent to the webhook if they exactly match a given rule."},
	}},
	reflect.TypeFor[admissionregistrationv1.SideEffectClass](): {values: []enumValue{
		{string(admissionregistrationv1.SideEffectClassNone), "means that calling the webhook will have no side effects."},
		{string(admissionregistrationv1.SideEffectClassNoneOnDryRun), "means that calling the webhook will possibly have side effects, but if the request being reviewed has the dry-run attribute, the side effects will be suppressed."},
		{string(admissionregistrationv1.SideEffectClassSome), "means that calling the webhook will possibly have side effects. If a request with the dry-run attribute would trigger a call to this webhook, the request will instead fail."},
		{string(admissionregistrationv1.SideEffectClassUnknown), "means that no information is known about the side effects of calling the webhook. If a request with the dry-run attribute would trigger a call to this webhook, the request will instead fail."},
	}},
	reflect.TypeFor[admissionregistrationv1.ReinvocationPolicyType](): {values: []enumValue{
		{string(admissionregistrationv1.IfNeededReinvocationPolicy), "indicates that the mutation may be called at least one additional time as part of the admission evaluation if the object being admitted is modified by other admission plugins after the initial mutation call."},
		{string(admissionregistrationv1.NeverReinvocationPolicy), "indicates that the mutation must not be called more than once in a single admission evaluation."},
	}},
	reflect.TypeFor[admissionregistrationv1.PatchType](): {blankLine: true, values: []enumValue{
		{string(admissionregistrationv1.PatchTypeApplyConfiguration), "ApplyConfiguration indicates that the mutation is using apply configuration to mutate the object."},
		{string(admissionregistrationv1.PatchTypeJSONPatch), "JSONPatch indicates that the object is mutated through JSON Patch."},
	}},
	reflect.TypeFor[admissionregistrationv1.ScopeType](): {blankLine: true, values: []enumValue{
		{string(admissionregistrationv1.AllScopes), "means that all scopes are included."},
		{string(admissionregistrationv1.ClusterScope), "means that scope is limited to cluster-scoped objects. Namespace objects are cluster-scoped."},
		{string(admissionregistrationv1.NamespacedScope), "means that scope is limited to namespaced objects."},
	}},
	// Lists of these have an enum of items, and no values in their
	// description.
	reflect.TypeFor[admissionregistrationv1.OperationType](): {values: []enumValue{
		{string(admissionregistrationv1.OperationAll), ""},
		{string(admissionregistrationv1.Connect), ""},
		{string(admissionregistrationv1.Create), ""},
		{string(admissionregistrationv1.Delete), ""},
		{string(admissionregistrationv1.Update), ""},
	}},
	reflect.TypeFor[admissionregistrationv1.ValidationAction](): {values: []enumValue{
		{string(admissionregistrationv1.Audit), ""},
		{string(admissionregistrationv1.Deny), ""},
		{string(admissionregistrationv1.Warn), ""},
	}},
}

// enumOf returns the enum of type t (or of what it points to).
func enumOf(t reflect.Type) (enum, bool) {
	e, ok := enums[indirect(t)]
	return e, ok
}

// values are the enum's values, as the schema's enum.
func (e enum) enumValues() []any {
	out := make([]any, len(e.values))
	for i, v := range e.values {
		out[i] = v.value
	}
	return out
}

// description is what openapi-gen appends to the description of a field
// of the enum's type.
func (e enum) description() string {
	var b strings.Builder
	if e.blankLine {
		b.WriteString("\n")
	}
	b.WriteString("\n\nPossible enum values:")
	for _, v := range e.values {
		b.WriteString("\n - `" + strconv.Quote(v.value) + "` " + v.doc)
	}
	return b.String()
}
