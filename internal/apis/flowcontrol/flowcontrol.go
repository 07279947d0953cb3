// Package flowcontrol is the built-in flowcontrol.apiserver.k8s.io/v1 API:
// FlowSchemas and PriorityLevelConfigurations, the configuration of API
// Priority and Fairness (package filters serves requests by it, package
// controller/flowcontrol keeps Kubernetes' mandatory and suggested objects
// in place). Defaults, validation and tables are Kubernetes' (which live in
// k8s.io/kubernetes, not imported), to the message; both kinds have a
// status subresource, and a write of the object keeps its status.
package flowcontrol

import (
	"context"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// Where the objects live in etcd, as in Kubernetes.
const (
	FlowSchemaPrefix    = "/registry/flowschemas/"
	PriorityLevelPrefix = "/registry/prioritylevelconfigurations/"
)

// FlowSchemas is the flowschemas resource, served from cache.
func FlowSchemas(cache *store.Cache) *resource.Resource {
	return newResource("flowschemas", "FlowSchema", FlowSchemaPrefix, cache, strategy[flowcontrolv1.FlowSchema]{kindRules[flowcontrolv1.FlowSchema]{
		kind:     "FlowSchema",
		defaults: DefaultFlowSchema,
		parts: func(t *flowcontrolv1.FlowSchema) (*metav1.ObjectMeta, any, func(from *flowcontrolv1.FlowSchema)) {
			return &t.ObjectMeta, t.Spec, func(from *flowcontrolv1.FlowSchema) { t.Spec = from.Spec }
		},
		keepStatus: func(obj, old *flowcontrolv1.FlowSchema) { obj.Status = old.Status },
		clearStatus: func(t *flowcontrolv1.FlowSchema) {
			t.Status = flowcontrolv1.FlowSchemaStatus{}
		},
		validate: func(obj, _ *flowcontrolv1.FlowSchema) field.ErrorList { return ValidateFlowSchema(obj) },
		validateStatus: func(obj *flowcontrolv1.FlowSchema) field.ErrorList {
			return validateFlowSchemaStatus(&obj.Status, field.NewPath("status"))
		},
	}}, &flowcontrolv1.FlowSchema{}, flowSchemaTable{})
}

// PriorityLevels is the prioritylevelconfigurations resource, served from
// cache.
func PriorityLevels(cache *store.Cache) *resource.Resource {
	return newResource("prioritylevelconfigurations", "PriorityLevelConfiguration", PriorityLevelPrefix, cache, strategy[flowcontrolv1.PriorityLevelConfiguration]{kindRules[flowcontrolv1.PriorityLevelConfiguration]{
		kind:     "PriorityLevelConfiguration",
		defaults: DefaultPriorityLevel,
		parts: func(t *flowcontrolv1.PriorityLevelConfiguration) (*metav1.ObjectMeta, any, func(from *flowcontrolv1.PriorityLevelConfiguration)) {
			return &t.ObjectMeta, t.Spec, func(from *flowcontrolv1.PriorityLevelConfiguration) { t.Spec = from.Spec }
		},
		keepStatus: func(obj, old *flowcontrolv1.PriorityLevelConfiguration) { obj.Status = old.Status },
		clearStatus: func(t *flowcontrolv1.PriorityLevelConfiguration) {
			t.Status = flowcontrolv1.PriorityLevelConfigurationStatus{}
		},
		validate: func(obj, old *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
			if old != nil && apiequality.Semantic.DeepEqual(obj.Spec, old.Spec) {
				// The declarative rules ratchet: an unchanged spec passes them.
				return withoutDeclarative(obj)
			}
			return ValidatePriorityLevel(obj)
		},
		validateStatus: func(obj *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
			return validatePriorityLevelStatus(&obj.Status, field.NewPath("status"))
		},
	}}, &flowcontrolv1.PriorityLevelConfiguration{}, priorityLevelTable{})
}

// withoutDeclarative is ValidatePriorityLevel without the declarative
// rules.
func withoutDeclarative(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	n := len(declarativePriorityLevelSpec(&pl.Spec, field.NewPath("spec")))
	errs := ValidatePriorityLevel(pl)
	return errs[:len(errs)-n]
}

func newResource(plural, kind, prefix string, cache *store.Cache, s resource.Strategy, goType any, table resource.TableConvertor) *resource.Resource {
	return &resource.Resource{
		Group:                    flowcontrolv1.GroupName,
		Plural:                   plural,
		Singular:                 plural[:len(plural)-1],
		Kind:                     kind,
		ListKind:                 kind + "List",
		Versions:                 []*resource.Version{{Name: "v1", Status: true}},
		StorageVersion:           "v1",
		KeyPrefix:                prefix,
		Cache:                    cache,
		Strategy:                 s,
		Converter:                conversion.None{},
		StrategicMergeType:       goType,
		Table:                    table,
		FieldManagers:            resource.BuiltinFieldManagers(flowcontrolv1.GroupName, kind, true),
		AllowUnconditionalUpdate: true,
		Protobuf:                 true,
		Verbs:                    []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	}
}

// kindRules are the rules of one kind, on its Go type T.
type kindRules[T any] struct {
	kind     string
	defaults func(*T)
	// parts gives an object's metadata, its spec, and a function that
	// copies the spec of another object into it.
	parts       func(*T) (meta *metav1.ObjectMeta, spec any, setSpec func(from *T))
	keepStatus  func(obj, old *T)
	clearStatus func(*T)
	// validate checks a new object (old nil) or an updated one.
	validate       func(obj, old *T) field.ErrorList
	validateStatus func(obj *T) field.ErrorList
}

// strategy is a resource.Strategy (and StatusStrategy) of a kind's rules,
// as Kubernetes' flowcontrol strategies: the generation starts at 1 and
// grows with a change of the spec; the status is the status
// subresource's.
type strategy[T any] struct{ r kindRules[T] }

// Normalize decodes a body through T and applies Kubernetes' defaults.
func (s strategy[T]) Normalize(obj *resource.Object) ([]error, error) {
	return resource.NormalizeTyped(obj, s.r.kind, "v1", s.r.defaults)
}

func (s strategy[T]) PrepareForCreate(_ context.Context, obj *resource.Object) {
	obj.Meta.Generation = 1
	resource.EditTyped(obj, func(t *T) {
		s.r.defaults(t)
		s.r.clearStatus(t)
	})
}

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
	s.r.keepStatus(n, o)
	if err := resource.FromTyped(n, obj); err != nil {
		return
	}
	_, ns, _ := s.r.parts(n)
	_, os, _ := s.r.parts(o)
	if !apiequality.Semantic.DeepEqual(ns, os) {
		obj.Meta.Generation = old.Meta.Generation + 1
	}
}

func decodeError(err error) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
}

func (s strategy[T]) Validate(_ context.Context, obj *resource.Object) field.ErrorList {
	t, err := resource.Typed[T](obj)
	if err != nil {
		return decodeError(err)
	}
	return s.r.validate(t, nil)
}

func (s strategy[T]) ValidateUpdate(_ context.Context, obj, old *resource.Object) field.ErrorList {
	t, err := resource.Typed[T](obj)
	if err != nil {
		return decodeError(err)
	}
	o, err := resource.Typed[T](old)
	if err != nil {
		return decodeError(err)
	}
	return s.r.validate(t, o)
}

// PrepareForStatusUpdate keeps everything but the status (and
// managedFields).
func (s strategy[T]) PrepareForStatusUpdate(_ context.Context, obj, old *resource.Object) {
	o, err := resource.Typed[T](old)
	if err != nil {
		return
	}
	resource.EditTyped(obj, func(t *T) {
		meta, _, setSpec := s.r.parts(t)
		oldMeta, _, _ := s.r.parts(o)
		setSpec(o)
		managed := meta.ManagedFields
		*meta = *oldMeta.DeepCopy()
		meta.ManagedFields = managed
	})
}

func (s strategy[T]) ValidateStatusUpdate(_ context.Context, obj, _ *resource.Object) field.ErrorList {
	t, err := resource.Typed[T](obj)
	if err != nil {
		return decodeError(err)
	}
	return s.r.validateStatus(t)
}
