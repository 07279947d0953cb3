package openapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"time"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// addTypeDefinitions adds to defs the definition of every Go struct type
// reachable from roots that defs does not hold yet, made by reflection the
// way Kubernetes' openapi-gen describes the k8s.io/api types:
//
//   - a struct is an object; its properties are its fields by their json
//     names (json:"-" skipped, json:",inline" and untagged embedded
//     structs merged), described by the type's SwaggerDoc;
//   - a field without omitempty is required (unless comments.go lists
//     it as optional; one with omitempty may be listed as required), and has the default client-go's structured-merge-diff schema
//     gives it, or else openapi-gen's (the zero value of a scalar
//     without omitempty, {} for a struct that has no UnmarshalJSON);
//   - strings, booleans and numbers (and the types based on them) are
//     their scalar types, with formats int32, int64, byte, float, double;
//     []byte is a string of format byte; pointers are their element,
//     slices arrays and maps with string keys objects with
//     additionalProperties;
//   - a struct type is a $ref to its own definition, named by its
//     OpenAPIModelName; the types defs already holds (the meta types,
//     Time, Quantity, IntOrString, ...) are referred to as they are;
//   - patchStrategy and patchMergeKey struct tags become
//     x-kubernetes-patch-strategy and x-kubernetes-patch-merge-key, and
//     client-go's structured-merge-diff schema gives list and map types
//     (listtypes.go); the enums are listed in comments.go.
func addTypeDefinitions(defs map[string]common.OpenAPIDefinition, roots []reflect.Type, ref common.ReferenceCallback) {
	d := &definer{defs: defs, ref: ref, queued: map[string]bool{}, lists: listTypes()}
	for _, t := range roots {
		if t = indirect(t); t.Kind() == reflect.Struct {
			d.want(t)
		}
	}
	for len(d.todo) > 0 {
		t := d.todo[len(d.todo)-1]
		d.todo = d.todo[:len(d.todo)-1]
		name := modelName(t)
		d.defs[name] = d.define(t, name)
	}
}

// definer makes the definitions of one addTypeDefinitions call.
type definer struct {
	defs   map[string]common.OpenAPIDefinition
	ref    common.ReferenceCallback
	lists  *listTypeSchema
	queued map[string]bool
	todo   []reflect.Type
}

// want returns the definition name of the struct type t, and queues t
// for a definition unless there is one.
func (d *definer) want(t reflect.Type) string {
	name := modelName(t)
	if _, ok := d.defs[name]; !ok && !d.queued[name] {
		d.queued[name] = true
		d.todo = append(d.todo, t)
	}
	return name
}

// define makes the definition of the struct type t.
func (d *definer) define(t reflect.Type, name string) common.OpenAPIDefinition {
	o := &object{deps: map[string]bool{}, fields: d.lists.fields(name)}
	o.schema.Description = swaggerDoc(t)[""]
	o.schema.Type = []string{"object"}
	d.addFields(o, t)
	if o.fields.atomic() {
		o.schema.AddExtension(extensionMapType, "atomic")
	}
	deps := make([]string, 0, len(o.deps))
	for dep := range o.deps {
		deps = append(deps, dep)
	}
	slices.Sort(deps)
	return common.OpenAPIDefinition{Schema: o.schema, Dependencies: deps}
}

// object is a struct's definition being made.
type object struct {
	schema spec.Schema
	deps   map[string]bool
	// fields are the struct's fields in the structured-merge-diff schema.
	fields smdFields
}

// addFields adds the fields of the struct type t to o, described by t's
// SwaggerDoc; inlined structs add their own fields with their own docs.
func (d *definer) addFields(o *object, t reflect.Type) {
	doc := swaggerDoc(t)
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && name == "" {
			if ft := indirect(f.Type); ft.Kind() == reflect.Struct {
				d.addFields(o, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omitempty := slices.Contains(strings.Split(opts, ","), "omitempty")
		if !omitempty && !slices.Contains(optionalFields[t], name) || slices.Contains(requiredFields[t], name) {
			o.schema.Required = append(o.schema.Required, name)
		}
		if o.schema.Properties == nil {
			o.schema.Properties = map[string]spec.Schema{}
		}
		description := doc[name]
		if fix := descriptionFixes[t][name]; fix != nil {
			description = fix(description)
		}
		o.schema.Properties[name] = d.property(o, f, name, description, omitempty)
	}
}

// property is the schema of the field f, named name.
func (d *definer) property(o *object, f reflect.StructField, name, description string, omitempty bool) spec.Schema {
	var s spec.Schema
	if slices.Contains(strings.Split(f.Tag.Get("json"), ",")[1:], "string") {
		s = scalar("string", "")
	} else {
		s = d.schemaOf(o, f.Type)
	}
	if e, ok := enumOf(f.Type); ok {
		description += e.description()
	}
	s.Description = description
	if def, ok := o.fields.defaultOf(name); ok {
		s.Default = def
	} else {
		s.Default = zeroDefault(f.Type, omitempty)
	}
	for tag, ext := range map[string]string{"patchStrategy": extensionPatchStrategy, "patchMergeKey": extensionPatchMergeKey} {
		if v := f.Tag.Get(tag); v != "" {
			s.AddExtension(ext, v)
		}
	}
	for ext, v := range o.fields.extensions(name) {
		s.AddExtension(ext, v)
	}
	return s
}

// schemaOf is the schema of a value of type t, without description or
// default. Struct types it refers to become dependencies of o.
func (d *definer) schemaOf(o *object, t reflect.Type) spec.Schema {
	t = indirect(t)
	switch t.Kind() {
	case reflect.Struct:
		if t == timeType {
			return scalar("string", "date-time")
		}
		name := d.want(t)
		o.deps[name] = true
		return spec.Schema{SchemaProps: spec.SchemaProps{Ref: d.ref(name)}}
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return scalar("string", "byte") // base64
		}
		items := d.schemaOf(o, t.Elem())
		if e, ok := enumOf(t.Elem()); ok {
			items.Enum = e.enumValues()
		}
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: &items}}}
	case reflect.Map:
		values := d.schemaOf(o, t.Elem())
		return spec.Schema{SchemaProps: spec.SchemaProps{
			Type:                 []string{"object"},
			AdditionalProperties: &spec.SchemaOrBool{Allows: true, Schema: &values},
		}}
	case reflect.Interface:
		return spec.Schema{} // anything
	}
	typ, format := scalarKinds[t.Kind()].typ, scalarKinds[t.Kind()].format
	s := scalar(typ, format)
	if e, ok := enumOf(t); ok {
		s.Enum = e.enumValues()
	}
	return s
}

// scalarKinds are the OpenAPI types and formats of Go's scalar kinds, as
// openapi-gen gives them.
var scalarKinds = map[reflect.Kind]struct{ typ, format string }{
	reflect.String:  {"string", ""},
	reflect.Bool:    {"boolean", ""},
	reflect.Int:     {"integer", "int32"},
	reflect.Int8:    {"integer", "byte"},
	reflect.Int16:   {"integer", "int32"},
	reflect.Int32:   {"integer", "int32"},
	reflect.Int64:   {"integer", "int64"},
	reflect.Uint:    {"integer", "int32"},
	reflect.Uint8:   {"integer", "byte"},
	reflect.Uint16:  {"integer", "int32"},
	reflect.Uint32:  {"integer", "int64"},
	reflect.Uint64:  {"integer", "int64"},
	reflect.Float32: {"number", "float"},
	reflect.Float64: {"number", "double"},
}

func scalar(typ, format string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{typ}, Format: format}}
}

// zeroDefault is the default openapi-gen gives a field of type t: none
// for pointers, slices, maps and types with their own UnmarshalJSON, {}
// for other structs (a struct holding only one embedded field is that
// field), and the zero value for a scalar without omitempty.
func zeroDefault(t reflect.Type, omitempty bool) any {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Array, reflect.Interface:
		return nil
	case reflect.Struct:
		if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
			return nil
		}
		if t.NumField() == 1 && t.Field(0).Anonymous {
			return zeroDefault(t.Field(0).Type, omitempty)
		}
		return map[string]any{}
	}
	if omitempty {
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		return ""
	case reflect.Bool:
		return false
	default:
		return 0
	}
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
)

// indirect is t without its pointers.
func indirect(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// modelName is the definition name of the struct type t: its
// OpenAPIModelName ("io.k8s.api.core.v1.ConfigMap"), as kube-openapi's
// builders name the types of routes.
func modelName(t reflect.Type) string {
	return util.GetCanonicalTypeName(reflect.Zero(t).Interface())
}

// swaggerDoc is the SwaggerDoc of the struct type t: the descriptions of
// its fields by json name, and of the type itself under "".
func swaggerDoc(t reflect.Type) map[string]string {
	if doc, ok := reflect.Zero(t).Interface().(interface{ SwaggerDoc() map[string]string }); ok {
		return doc.SwaggerDoc()
	}
	return nil
}

// The extensions of the schemas of Kubernetes' types.
const (
	extensionPatchStrategy = "x-kubernetes-patch-strategy"
	extensionPatchMergeKey = "x-kubernetes-patch-merge-key"
	extensionListType      = "x-kubernetes-list-type"
	extensionListMapKeys   = "x-kubernetes-list-map-keys"
	extensionMapType       = "x-kubernetes-map-type"
)
