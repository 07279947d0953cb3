package openapi

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// namespaceDefinitions returns the OpenAPI definitions of the core/v1
// Namespace types, as Kubernetes' openapi-gen describes them (the
// generated definitions of k8s.io/api/core/v1 are not in any importable
// module). Descriptions come from the types' SwaggerDoc.
func namespaceDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	return map[string]common.OpenAPIDefinition{
		corev1.Namespace{}.OpenAPIModelName():          namespaceDefinition(ref),
		corev1.NamespaceList{}.OpenAPIModelName():      namespaceListDefinition(ref),
		corev1.NamespaceSpec{}.OpenAPIModelName():      namespaceSpecDefinition(),
		corev1.NamespaceStatus{}.OpenAPIModelName():    namespaceStatusDefinition(ref),
		corev1.NamespaceCondition{}.OpenAPIModelName(): namespaceConditionDefinition(ref),
	}
}

func namespaceDefinition(ref common.ReferenceCallback) common.OpenAPIDefinition {
	doc := corev1.Namespace{}.SwaggerDoc()
	objectMeta := metav1.ObjectMeta{}.OpenAPIModelName()
	nsSpec := corev1.NamespaceSpec{}.OpenAPIModelName()
	nsStatus := corev1.NamespaceStatus{}.OpenAPIModelName()
	return common.OpenAPIDefinition{
		Schema: object(doc[""], map[string]spec.Schema{
			"kind":       typeMetaField("kind"),
			"apiVersion": typeMetaField("apiVersion"),
			"metadata":   structField(doc["metadata"], ref(objectMeta)),
			"spec":       structField(doc["spec"], ref(nsSpec)),
			"status":     structField(doc["status"], ref(nsStatus)),
		}),
		Dependencies: []string{nsSpec, nsStatus, objectMeta},
	}
}

func namespaceListDefinition(ref common.ReferenceCallback) common.OpenAPIDefinition {
	doc := corev1.NamespaceList{}.SwaggerDoc()
	listMeta := metav1.ListMeta{}.OpenAPIModelName()
	ns := corev1.Namespace{}.OpenAPIModelName()
	s := object(doc[""], map[string]spec.Schema{
		"kind":       typeMetaField("kind"),
		"apiVersion": typeMetaField("apiVersion"),
		"metadata":   structField(doc["metadata"], ref(listMeta)),
		"items":      arrayOf(doc["items"], spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(ns)}}),
	})
	s.Required = []string{"items"}
	return common.OpenAPIDefinition{Schema: s, Dependencies: []string{ns, listMeta}}
}

func namespaceSpecDefinition() common.OpenAPIDefinition {
	doc := corev1.NamespaceSpec{}.SwaggerDoc()
	finalizers := arrayOf(doc["finalizers"], stringField("", nil))
	finalizers.Extensions = spec.Extensions{"x-kubernetes-list-type": "atomic"}
	return common.OpenAPIDefinition{
		Schema: object(doc[""], map[string]spec.Schema{"finalizers": finalizers}),
	}
}

func namespaceStatusDefinition(ref common.ReferenceCallback) common.OpenAPIDefinition {
	doc := corev1.NamespaceStatus{}.SwaggerDoc()
	condition := corev1.NamespaceCondition{}.OpenAPIModelName()

	// NamespacePhase is an enum: openapi-gen lists its values and appends
	// their comments to the field's description.
	phase := stringField(doc["phase"]+"\n\nPossible enum values:\n"+
		" - `\"Active\"` means the namespace is available for use in the system\n"+
		" - `\"Terminating\"` means the namespace is undergoing graceful termination", nil)
	phase.Enum = []any{string(corev1.NamespaceActive), string(corev1.NamespaceTerminating)}

	conditions := arrayOf(doc["conditions"], spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(condition)}})
	conditions.Extensions = spec.Extensions{
		"x-kubernetes-list-map-keys":   []any{"type"},
		"x-kubernetes-list-type":       "map",
		"x-kubernetes-patch-merge-key": "type",
		"x-kubernetes-patch-strategy":  "merge",
	}
	return common.OpenAPIDefinition{
		Schema: object(doc[""], map[string]spec.Schema{
			"phase":      phase,
			"conditions": conditions,
		}),
		Dependencies: []string{condition},
	}
}

func namespaceConditionDefinition(ref common.ReferenceCallback) common.OpenAPIDefinition {
	doc := corev1.NamespaceCondition{}.SwaggerDoc()
	timeRef := metav1.Time{}.OpenAPIModelName()
	s := object(doc[""], map[string]spec.Schema{
		"type":               stringField(doc["type"], ""),
		"status":             stringField(doc["status"], ""),
		"lastTransitionTime": {SchemaProps: spec.SchemaProps{Description: doc["lastTransitionTime"], Ref: ref(timeRef)}},
		"reason":             stringField(doc["reason"], nil),
		"message":            stringField(doc["message"], nil),
	})
	s.Required = []string{"type", "status"}
	return common.OpenAPIDefinition{Schema: s, Dependencies: []string{timeRef}}
}

// object is an object schema with properties.
func object(description string, props map[string]spec.Schema) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{
		Description: description,
		Type:        []string{"object"},
		Properties:  props,
	}}
}

// typeMetaField is the kind or apiVersion property every object has.
func typeMetaField(name string) spec.Schema {
	return stringField(metav1.TypeMeta{}.SwaggerDoc()[name], nil)
}

// stringField is a string property; def is its default (openapi-gen gives
// required strings the default "").
func stringField(description string, def any) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{
		Description: description,
		Default:     def,
		Type:        []string{"string"},
	}}
}

// structField is a property holding a (non-pointer) struct, which
// openapi-gen defaults to {}.
func structField(description string, ref spec.Ref) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{
		Description: description,
		Default:     map[string]any{},
		Ref:         ref,
	}}
}

// arrayOf is an array property.
func arrayOf(description string, items spec.Schema) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{
		Description: description,
		Type:        []string{"array"},
		Items:       &spec.SchemaOrArray{Schema: &items},
	}}
}
