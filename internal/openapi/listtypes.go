package openapi

import (
	"log/slog"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/applyconfigurations"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// listTypeSchema is client-go's structured-merge-diff schema of the
// k8s.io/api types (the one server-side apply uses): it says which lists
// are atomic, sets or maps (with their keys), and which maps and structs
// are atomic, as the +listType, +listMapKey, +mapType and +structType
// comments of the types (which reflection cannot see) say, and holds
// openapi-gen's defaults (+default comments included). It has the types
// that can be applied: not authentication.k8s.io's or
// authorization.k8s.io's.
type listTypeSchema struct {
	schema *smdschema.Schema
}

// listTypes is the schema, or nil when client-go does not give it.
// client-go has no exported accessor to its parser: the schema is reached
// through a TypedValue of its type converter.
var listTypes = sync.OnceValue(func() *listTypeSchema {
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	tv, err := applyconfigurations.NewTypeConverter(builtinScheme()).ObjectToTyped(cm)
	if err != nil {
		slog.Warn("openapi: no list types for the built-in types", "err", err)
		return nil
	}
	return &listTypeSchema{schema: tv.Schema()}
})

// fields returns the fields of the struct type named name (none if the
// schema does not have it).
func (l *listTypeSchema) fields(name string) smdFields {
	if l == nil {
		return smdFields{}
	}
	t, ok := l.schema.FindNamedType(name)
	if !ok || t.Map == nil {
		return smdFields{}
	}
	return smdFields{m: t.Map}
}

// smdFields are the fields of one struct type in the schema.
type smdFields struct {
	m *smdschema.Map
}

// atomic says the struct is replaced as a whole (x-kubernetes-map-type:
// atomic).
func (f smdFields) atomic() bool {
	return f.m != nil && f.m.ElementRelationship == smdschema.Atomic
}

// defaultOf returns the default of the field named name, as openapi-gen
// gave it (+default comments included), if the schema has the struct.
func (f smdFields) defaultOf(name string) (any, bool) {
	if f.m == nil {
		return nil, false
	}
	field, _ := f.m.FindField(name)
	return copyJSON(field.Default), true
}

// copyJSON is a deep copy of a decoded JSON (or YAML) value, so that
// documents do not share the schema's maps.
func copyJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = copyJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyJSON(e)
		}
		return out
	}
	return v
}

// extensions are the OpenAPI extensions of the field named name: its
// x-kubernetes-list-type and x-kubernetes-list-map-keys if it is a list,
// its x-kubernetes-map-type if it is a map that is not separable.
func (f smdFields) extensions(name string) map[string]any {
	if f.m == nil {
		return nil
	}
	field, ok := f.m.FindField(name)
	if !ok {
		return nil
	}
	tr := field.Type
	if tr.NamedType != nil {
		// A struct, described by its own definition, unless the field
		// makes it atomic.
		if tr.ElementRelationship != nil && *tr.ElementRelationship == smdschema.Atomic {
			return map[string]any{extensionMapType: "atomic"}
		}
		return nil
	}
	switch list, m := tr.Inlined.List, tr.Inlined.Map; {
	case list != nil:
		switch list.ElementRelationship {
		case smdschema.Atomic:
			return map[string]any{extensionListType: "atomic"}
		case smdschema.Associative:
			if len(list.Keys) == 0 {
				return map[string]any{extensionListType: "set"}
			}
			keys := make([]any, len(list.Keys))
			for i, k := range list.Keys {
				keys[i] = k
			}
			return map[string]any{extensionListType: "map", extensionListMapKeys: keys}
		}
	case m != nil:
		switch m.ElementRelationship {
		case smdschema.Atomic:
			return map[string]any{extensionMapType: "atomic"}
		case smdschema.Separable:
			return map[string]any{extensionMapType: "granular"}
		}
	}
	return nil
}
