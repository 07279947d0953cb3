package openapi

import (
	"reflect"
	"strconv"
	"strings"

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

// enum is a string type openapi-gen knows as an enum (+enum): its
// values, each with the comment of its constant.
type enum []enumValue

type enumValue struct {
	value, doc string
}

// enums are the enums of the built-in types. Reflection cannot see the
// +enum comment nor the constants, so they are listed here; of the types
// crdserver serves, only NamespaceStatus.phase is an enum.
var enums = map[reflect.Type]enum{
	reflect.TypeFor[corev1.NamespacePhase](): {
		{string(corev1.NamespaceActive), "means the namespace is available for use in the system"},
		{string(corev1.NamespaceTerminating), "means the namespace is undergoing graceful termination"},
	},
}

// enumOf returns the enum of type t (or of what it points to).
func enumOf(t reflect.Type) (enum, bool) {
	e, ok := enums[indirect(t)]
	return e, ok
}

// values are the enum's values, as the schema's enum.
func (e enum) values() []any {
	out := make([]any, len(e))
	for i, v := range e {
		out[i] = v.value
	}
	return out
}

// description is what openapi-gen appends to the description of a field
// of the enum's type.
func (e enum) description() string {
	var b strings.Builder
	b.WriteString("\n\nPossible enum values:")
	for _, v := range e {
		b.WriteString("\n - `" + strconv.Quote(v.value) + "` " + v.doc)
	}
	return b.String()
}
