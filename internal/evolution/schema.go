package evolution

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// walker compares the schemas of one version, node by node.
type walker struct {
	version string
	out     []Finding
	// hints holds, for some findings (by index in out), a text the
	// validation error of an object failing them contains: a CEL rule's
	// message or rule text.
	hints map[int]string
	// offline: no stored objects will be validated against the findings,
	// so constraints that concern only fields new at their place, which
	// no stored object has, are judged here (newfields.go).
	offline bool
}

// keep keeps the findings for which f returns true, with their hints.
func (w *walker) keep(f func(Finding) bool) {
	var out []Finding
	var hints map[int]string
	for i, x := range w.out {
		if !f(x) {
			continue
		}
		if h, ok := w.hints[i]; ok {
			if hints == nil {
				hints = map[int]string{}
			}
			hints[len(out)] = h
		}
		out = append(out, x)
	}
	w.out, w.hints = out, hints
}

func (w *walker) add(rule, path, format string, args ...any) {
	w.out = append(w.out, Finding{Rule: rule, Version: w.version, Path: showPath(path), Message: fmt.Sprintf(format, args...)})
}

func (w *walker) hint(text string) {
	if w.hints == nil {
		w.hints = map[int]string{}
	}
	w.hints[len(w.out)-1] = strings.TrimSpace(text)
}

// showPath is how a path is shown: the root is ".".
func showPath(p string) string {
	if p == "" {
		return "."
	}
	return p
}

var plainName = regexp.MustCompile(`^[A-Za-z0-9_$-]+$`)

// child is the path of a property.
func child(path, name string) string {
	if plainName.MatchString(name) {
		return path + "." + name
	}
	return path + "[" + strconv.Quote(name) + "]"
}

// node compares the schemas of the same place in the old and the new
// revision, and what is below it.
func (w *walker) node(path string, o, n *apiextensionsv1.JSONSchemaProps) {
	// Constraints inside allOf are constraints of the node.
	o, n = foldAllOf(o), foldAllOf(n)
	if w.types(path, o, n) {
		// The type changed: what is below is not comparable.
		return
	}
	w.constraints(path, o, n)
	w.required(path, o, n)
	w.extensions(path, o, n)
	w.combinators(path, o, n)
	w.defaults(path, o, n)
	w.celRules(path, o, n)

	// Properties.
	if path == "" {
		// Every object has metadata, whose name and generateName a schema
		// may constrain: compare those whether or not a side lists them.
		w.node(".metadata", objectMeta(o), objectMeta(n))
	}
	for _, name := range sortedKeys(o.Properties) {
		if path == "" && name == "metadata" {
			continue
		}
		op := o.Properties[name]
		np, ok := n.Properties[name]
		if !ok {
			if path == "" && isMetaField(name) {
				// apiVersion, kind and metadata are there whatever the
				// schema says; dropping their schema only loosens it.
				continue
			}
			if isTrue(n.XPreserveUnknownFields) {
				w.add("field-removed", child(path, name), "field %s was removed from the schema (its values are kept as unknown fields, without validation)", name)
			} else {
				w.add("field-removed", child(path, name), "field %s was removed", name)
			}
			continue
		}
		w.node(child(path, name), &op, &np)
	}
	// Items.
	if o.Items != nil && o.Items.Schema != nil && n.Items != nil && n.Items.Schema != nil {
		w.node(path+"[*]", o.Items.Schema, n.Items.Schema)
	}
	// additionalProperties.
	oa, na := o.AdditionalProperties, n.AdditionalProperties
	oAllows := oa != nil && (oa.Allows || oa.Schema != nil)
	nAllows := na != nil && (na.Allows || na.Schema != nil)
	switch {
	case oAllows && !nAllows:
		if !isTrue(n.XPreserveUnknownFields) {
			w.add("additional-properties-narrowed", path, "additionalProperties was removed: keys other than the listed properties are now pruned")
		}
	case oAllows && oa.Schema == nil && na.Schema != nil:
		w.add("additional-properties-narrowed", path+"[*]", "map values, which were of any kind, now have a schema")
	case oAllows && oa.Schema != nil && na.Schema != nil:
		w.node(path+"[*]", oa.Schema, na.Schema)
	}
}

// types compares type, int-or-string and nullable, and reports whether
// the type itself changed.
func (w *walker) types(path string, o, n *apiextensionsv1.JSONSchemaProps) bool {
	changed := false
	switch {
	case o.XIntOrString && !n.XIntOrString && n.Type != "":
		w.add("type-changed", path, "no longer int-or-string: only %s", typeName(n))
		changed = true
	case n.Type != "" && o.Type != n.Type:
		w.add("type-changed", path, "type changed from %s to %s", typeName(o), typeName(n))
		changed = true
	}
	if o.Nullable && !n.Nullable {
		w.add("type-changed", path, "no longer nullable: null values are dropped")
	}
	return changed
}

func typeName(s *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case s.XIntOrString:
		return "int-or-string"
	case s.Type == "":
		return "any value"
	}
	return s.Type
}

// constraints compares the value validations of one node.
func (w *walker) constraints(path string, o, n *apiextensionsv1.JSONSchemaProps) {
	// enum
	if len(n.Enum) > 0 {
		if len(o.Enum) == 0 {
			w.add("enum-narrowed", path, "now limited to the values %s", jsonList(n.Enum))
		} else {
			var removed []apiextensionsv1.JSON
			for _, v := range o.Enum {
				if !slices.ContainsFunc(n.Enum, func(x apiextensionsv1.JSON) bool { return sameJSON(x.Raw, v.Raw) }) {
					removed = append(removed, v)
				}
			}
			if len(removed) > 0 {
				w.add("enum-narrowed", path, "enum values removed: %s", jsonList(removed))
			}
		}
	}
	if n.Pattern != "" && n.Pattern != o.Pattern {
		if o.Pattern == "" {
			w.add("pattern-changed", path, "pattern %q added", n.Pattern)
		} else {
			w.add("pattern-changed", path, "pattern changed from %q to %q", o.Pattern, n.Pattern)
		}
	}
	if n.Format != "" && n.Format != o.Format {
		w.add("format-changed", path, "format changed from %s to %q", quoteOrNone(o.Format), n.Format)
	}
	// minimum, maximum
	if n.Minimum != nil {
		switch {
		case o.Minimum == nil:
			w.add("minimum-raised", path, "minimum %s added", bound(*n.Minimum, n.ExclusiveMinimum))
		case *n.Minimum > *o.Minimum || (*n.Minimum == *o.Minimum && n.ExclusiveMinimum && !o.ExclusiveMinimum):
			w.add("minimum-raised", path, "minimum raised from %s to %s", bound(*o.Minimum, o.ExclusiveMinimum), bound(*n.Minimum, n.ExclusiveMinimum))
		}
	}
	if n.Maximum != nil {
		switch {
		case o.Maximum == nil:
			w.add("maximum-lowered", path, "maximum %s added", bound(*n.Maximum, n.ExclusiveMaximum))
		case *n.Maximum < *o.Maximum || (*n.Maximum == *o.Maximum && n.ExclusiveMaximum && !o.ExclusiveMaximum):
			w.add("maximum-lowered", path, "maximum lowered from %s to %s", bound(*o.Maximum, o.ExclusiveMaximum), bound(*n.Maximum, n.ExclusiveMaximum))
		}
	}
	if n.MultipleOf != nil {
		switch {
		case o.MultipleOf == nil:
			w.add("multipleof-changed", path, "multipleOf %s added", num(*n.MultipleOf))
		case *n.MultipleOf != *o.MultipleOf && !isMultiple(*o.MultipleOf, *n.MultipleOf):
			w.add("multipleof-changed", path, "multipleOf changed from %s to %s", num(*o.MultipleOf), num(*n.MultipleOf))
		}
	}
	w.upper("maxlength-lowered", "maxLength", path, o.MaxLength, n.MaxLength)
	w.upper("maxitems-lowered", "maxItems", path, o.MaxItems, n.MaxItems)
	w.upper("maxproperties-lowered", "maxProperties", path, o.MaxProperties, n.MaxProperties)
	w.lower("minlength-raised", "minLength", path, o.MinLength, n.MinLength)
	w.lower("minitems-raised", "minItems", path, o.MinItems, n.MinItems)
	w.lower("minproperties-raised", "minProperties", path, o.MinProperties, n.MinProperties)
}

// upper reports a new or lower upper limit.
func (w *walker) upper(rule, keyword, path string, o, n *int64) {
	switch {
	case n == nil:
	case o == nil:
		w.add(rule, path, "%s %d added", keyword, *n)
	case *n < *o:
		w.add(rule, path, "%s lowered from %d to %d", keyword, *o, *n)
	}
}

// lower reports a higher lower limit (an unset one is 0).
func (w *walker) lower(rule, keyword, path string, o, n *int64) {
	var ov, nv int64
	if o != nil {
		ov = *o
	}
	if n != nil {
		nv = *n
	}
	if nv > ov {
		w.add(rule, path, "%s raised from %d to %d", keyword, ov, nv)
	}
}

// required reports fields that became required, unless the schema
// defaults them.
func (w *walker) required(path string, o, n *apiextensionsv1.JSONSchemaProps) {
	for _, r := range n.Required {
		if slices.Contains(o.Required, r) {
			continue
		}
		if p, ok := n.Properties[r]; ok && p.Default != nil {
			continue
		}
		w.add("required-added", child(path, r), "field %s is now required", r)
	}
}

// extensions compares the x-kubernetes-* extensions that change what is
// kept or how lists and maps merge.
func (w *walker) extensions(path string, o, n *apiextensionsv1.JSONSchemaProps) {
	if ol, nl := listType(o), listType(n); ol != nl {
		w.add("list-type-changed", path, "x-kubernetes-list-type changed from %s to %s", ol, nl)
	} else if nl == "map" && !sameSet(o.XListMapKeys, n.XListMapKeys) {
		w.add("list-map-keys-changed", path, "x-kubernetes-list-map-keys changed from %v to %v", o.XListMapKeys, n.XListMapKeys)
	}
	if om, nm := mapType(o), mapType(n); om != nm {
		w.add("map-type-changed", path, "x-kubernetes-map-type changed from %s to %s", om, nm)
	}
	if isTrue(o.XPreserveUnknownFields) && !isTrue(n.XPreserveUnknownFields) {
		w.add("preserve-unknown-fields-removed", path, "x-kubernetes-preserve-unknown-fields was turned off: unknown fields are now pruned")
	}
	if o.XEmbeddedResource != n.XEmbeddedResource {
		if n.XEmbeddedResource {
			w.add("embedded-resource-changed", path, "now an embedded resource: apiVersion, kind and metadata are required and checked")
		} else {
			w.add("embedded-resource-changed", path, "no longer an embedded resource: its apiVersion, kind and metadata are no longer checked, and are pruned unless listed or unknown fields are kept")
		}
	}
}

func listType(s *apiextensionsv1.JSONSchemaProps) string {
	if s.XListType == nil || *s.XListType == "" {
		return "atomic"
	}
	return *s.XListType
}

func mapType(s *apiextensionsv1.JSONSchemaProps) string {
	if s.XMapType == nil || *s.XMapType == "" {
		return "granular"
	}
	return *s.XMapType
}

// combinators compares allOf, anyOf, oneOf and not conservatively: what
// may accept fewer values is reported. Offline, a combinator that only
// concerns fields new at the node, and that an object without them
// passes, is not: no stored object has those fields.
func (w *walker) combinators(path string, o, n *apiextensionsv1.JSONSchemaProps) {
	newOnly := func(ss ...apiextensionsv1.JSONSchemaProps) bool {
		return w.offline && onlyNewFields(o, n, path == "", ss...)
	}
	oAll, nAll := canonicalList(o.AllOf), canonicalList(n.AllOf)
	for i, s := range nAll {
		if slices.ContainsFunc(oAll, func(x any) bool { return reflect.DeepEqual(x, s) }) {
			continue
		}
		if newOnly(n.AllOf[i]) && passesWithout(&n.AllOf[i]) {
			continue
		}
		w.add("combinator-narrowed", path, "allOf has a new subschema")
		break
	}
	oAny, nAny := canonicalList(o.AnyOf), canonicalList(n.AnyOf)
	switch {
	case len(nAny) == 0:
	case newOnly(n.AnyOf...) && passesWithout(&apiextensionsv1.JSONSchemaProps{AnyOf: n.AnyOf}):
	case len(oAny) == 0:
		w.add("combinator-narrowed", path, "anyOf added")
	default:
		for _, s := range oAny {
			if !slices.ContainsFunc(nAny, func(x any) bool { return reflect.DeepEqual(x, s) }) {
				w.add("combinator-narrowed", path, "anyOf lost or changed a subschema")
				break
			}
		}
	}
	if oOne, nOne := canonicalList(o.OneOf), canonicalList(n.OneOf); len(nOne) > 0 && !reflect.DeepEqual(oOne, nOne) &&
		(!newOnly(n.OneOf...) || !passesWithout(&apiextensionsv1.JSONSchemaProps{OneOf: n.OneOf})) {
		if len(oOne) == 0 {
			w.add("combinator-narrowed", path, "oneOf added")
		} else {
			w.add("combinator-narrowed", path, "oneOf changed")
		}
	}
	if n.Not != nil && (o.Not == nil || !reflect.DeepEqual(canonical(o.Not), canonical(n.Not))) &&
		(!newOnly(*n.Not) || !passesWithout(&apiextensionsv1.JSONSchemaProps{Not: n.Not})) {
		if o.Not == nil {
			w.add("combinator-narrowed", path, "not added")
		} else {
			w.add("combinator-narrowed", path, "not changed")
		}
	}
}

// defaults reports a default added to, changed on or removed from a
// field that was there.
func (w *walker) defaults(path string, o, n *apiextensionsv1.JSONSchemaProps) {
	switch {
	case o.Default == nil && n.Default == nil:
	case o.Default == nil && documentsDefault(o.Description, n.Default.Raw):
		w.add("default-changed", path, "default %s added, as the field's description already said: objects stored without the field show it when read", string(compact(n.Default.Raw)))
		w.out[len(w.out)-1].Severity = SeverityInfo
	case o.Default == nil:
		w.add("default-changed", path, "default %s added: objects stored without the field show it when read", string(compact(n.Default.Raw)))
	case n.Default == nil:
		w.add("default-changed", path, "default %s removed", string(compact(o.Default.Raw)))
	case !sameJSON(o.Default.Raw, n.Default.Raw):
		w.add("default-changed", path, "default changed from %s to %s", string(compact(o.Default.Raw)), string(compact(n.Default.Raw)))
	}
}

// celRules reports x-kubernetes-validations rules whose rule text is new
// at this node.
func (w *walker) celRules(path string, o, n *apiextensionsv1.JSONSchemaProps) {
	for _, r := range n.XValidations {
		if slices.ContainsFunc(o.XValidations, func(x apiextensionsv1.ValidationRule) bool {
			return strings.TrimSpace(x.Rule) == strings.TrimSpace(r.Rule)
		}) {
			continue
		}
		if w.offline && celOnlyNewFields(r.Rule, o, n, path == "") {
			continue
		}
		msg := fmt.Sprintf("new x-kubernetes-validations rule %q", oneLine(r.Rule))
		if r.Message != "" {
			msg += fmt.Sprintf(" (message %q)", oneLine(r.Message))
		}
		w.add("cel-rule-added", path, "%s", msg)
		if r.Message != "" {
			w.hint(r.Message)
		} else if r.MessageExpression == "" {
			w.hint(r.Rule)
		}
	}
}

// objectMeta is the schema of a root schema's metadata: what it says,
// over the name and generateName strings every object may have.
func objectMeta(root *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	m := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"name":         {Type: "string"},
		"generateName": {Type: "string"},
	}}
	if md, ok := root.Properties["metadata"]; ok {
		md = *md.DeepCopy()
		for k, v := range m.Properties {
			if _, ok := md.Properties[k]; !ok {
				if md.Properties == nil {
					md.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
				}
				md.Properties[k] = v
			}
		}
		if md.Type == "" {
			md.Type = "object"
		}
		return &md
	}
	return m
}

// Helpers.

func isMetaField(name string) bool {
	return name == "apiVersion" || name == "kind" || name == "metadata"
}

func isTrue(b *bool) bool { return b != nil && *b }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func isMultiple(a, b float64) bool {
	if b == 0 {
		return false
	}
	r := a / b
	return math.Abs(r-math.Round(r)) < 1e-9
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func bound(f float64, exclusive bool) string {
	if exclusive {
		return num(f) + " (exclusive)"
	}
	return num(f)
}

func quoteOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return strconv.Quote(s)
}

// decodeJSON decodes raw JSON to compare values (nil if it does not decode).
func decodeJSON(raw []byte) any {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	return v
}

func sameJSON(a, b []byte) bool { return reflect.DeepEqual(decodeJSON(a), decodeJSON(b)) }

func compact(raw []byte) []byte {
	v := decodeJSON(raw)
	if v == nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

func jsonList(vs []apiextensionsv1.JSON) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = string(compact(v.Raw))
	}
	return strings.Join(parts, ", ")
}

// canonical is a schema as a decoded JSON value without its
// documentation (description, title, example, externalDocs), so that
// schemas compare by what they accept.
func canonical(s *apiextensionsv1.JSONSchemaProps) any {
	c := s.DeepCopy()
	stripDocs(c)
	b, err := json.Marshal(c)
	if err != nil {
		return nil
	}
	return decodeJSON(b)
}

func canonicalList(ss []apiextensionsv1.JSONSchemaProps) []any {
	out := make([]any, len(ss))
	for i := range ss {
		out[i] = canonical(&ss[i])
	}
	return out
}

func stripDocs(s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	s.Description, s.Title, s.Example, s.ExternalDocs = "", "", nil, nil
	for k, p := range s.Properties {
		stripDocs(&p)
		s.Properties[k] = p
	}
	if s.Items != nil {
		stripDocs(s.Items.Schema)
		for i := range s.Items.JSONSchemas {
			stripDocs(&s.Items.JSONSchemas[i])
		}
	}
	if s.AdditionalProperties != nil {
		stripDocs(s.AdditionalProperties.Schema)
	}
	for _, list := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range list {
			stripDocs(&list[i])
		}
	}
	stripDocs(s.Not)
}
