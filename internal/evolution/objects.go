package evolution

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/schema"
)

// matcher says which validation errors of an object show that it fails
// the constraint of a finding.
type matcher struct {
	types  []field.ErrorType // any type when empty
	detail string            // a text the error's detail contains ("" any)
	below  bool              // errors below the finding's path count too
}

// objectRules are the rules existing objects may fail, with how their
// validation errors look (Kubernetes' OpenAPI validation messages).
var objectRules = map[string]matcher{
	"required-added":        {types: []field.ErrorType{field.ErrorTypeRequired}},
	"enum-narrowed":         {types: []field.ErrorType{field.ErrorTypeNotSupported}},
	"pattern-changed":       {types: []field.ErrorType{field.ErrorTypeInvalid}, detail: "should match"},
	"format-changed":        {types: []field.ErrorType{field.ErrorTypeTypeInvalid}, detail: "must be of type"},
	"minimum-raised":        {types: []field.ErrorType{field.ErrorTypeInvalid}, detail: "should be greater than"},
	"maximum-lowered":       {types: []field.ErrorType{field.ErrorTypeInvalid}, detail: "should be less than"},
	"multipleof-changed":    {types: []field.ErrorType{field.ErrorTypeInvalid}, detail: "multiple of"},
	"maxlength-lowered":     {types: []field.ErrorType{field.ErrorTypeTooLong}},
	"minlength-raised":      {types: []field.ErrorType{field.ErrorTypeInvalid}, detail: "chars long"},
	"maxitems-lowered":      {types: []field.ErrorType{field.ErrorTypeTooMany}},
	"minitems-raised":       {types: []field.ErrorType{field.ErrorTypeInvalid}, detail: "items"},
	"maxproperties-lowered": {types: []field.ErrorType{field.ErrorTypeTooMany}},
	"minproperties-raised":  {types: []field.ErrorType{field.ErrorTypeInvalid}, detail: "properties"},
	"cel-rule-added":        {below: true},
	"combinator-narrowed":   {below: true},
}

// celNotChecked is the start of the error that says CEL rules were not
// run because the object failed the OpenAPI schema.
const celNotChecked = "some validation rules were not checked"

// filterByObjects keeps the findings of one version that existing
// objects fail, or that are not about what objects may fail, and says in
// their messages how many objects fail them.
func filterByObjects(ctx context.Context, oldCRD, newCRD *apiextensionsv1.CustomResourceDefinition, w *walker, objs []map[string]any) []Finding {
	if !slices.ContainsFunc(w.out, func(f Finding) bool { _, ok := objectRules[f.Rule]; return ok }) {
		return w.out
	}
	newV, err := schema.Compile(newCRD, w.version)
	if err != nil || newV == nil {
		why := "the new schema does not compile"
		if err != nil {
			why = err.Error()
		}
		out := append([]Finding(nil), w.out...)
		for i := range out {
			if _, ok := objectRules[out[i].Rule]; ok {
				out[i].Message += fmt.Sprintf(" (existing objects not checked: %s)", why)
			}
		}
		return out
	}
	oldV, err := schema.Compile(oldCRD, w.version)
	if err != nil {
		oldV = nil
	}
	root := findVersion(&newCRD.Spec, w.version).Schema.OpenAPIV3Schema

	type failing struct {
		count   int
		example string
	}
	fails := make([]failing, len(w.out))
	for _, obj := range objs {
		fresh := freshErrors(ctx, oldV, newV, obj)
		if len(fresh) == 0 {
			continue
		}
		for i, f := range w.out {
			m, ok := objectRules[f.Rule]
			if !ok {
				continue
			}
			if e := firstMatch(root, f, m, w.hints[i], fresh); e != nil {
				if fails[i].count == 0 {
					fails[i].example = fmt.Sprintf("%s (%s)", objectName(obj), oneLine(e.Error()))
				}
				fails[i].count++
			}
		}
	}
	var out []Finding
	for i, f := range w.out {
		if _, ok := objectRules[f.Rule]; !ok {
			out = append(out, f)
			continue
		}
		if fails[i].count == 0 {
			continue
		}
		f.Message += fmt.Sprintf("; %d of %d existing objects fail it, e.g. %s", fails[i].count, len(objs), fails[i].example)
		out = append(out, f)
	}
	return out
}

// freshErrors validates an object, pruned and defaulted as a read would,
// with the new schema and the old one, and returns the errors only the
// new one finds.
func freshErrors(ctx context.Context, oldV, newV *schema.Version, obj map[string]any) field.ErrorList {
	validate := func(v *schema.Version) field.ErrorList {
		o, err := copyObject(obj)
		if err != nil {
			return field.ErrorList{field.Invalid(nil, nil, "the object does not encode: "+err.Error())}
		}
		if _, err := v.Coerce(o, false); err != nil {
			return field.ErrorList{field.Invalid(nil, nil, err.Error())}
		}
		v.Default(o)
		return v.Validate(ctx, o)
	}
	newErrs := validate(newV)
	if len(newErrs) == 0 || oldV == nil {
		return newErrs
	}
	seen := map[string]bool{}
	for _, e := range validate(oldV) {
		seen[errorKey(e)] = true
	}
	var fresh field.ErrorList
	for _, e := range newErrs {
		if !seen[errorKey(e)] {
			fresh = append(fresh, e)
		}
	}
	return fresh
}

func errorKey(e *field.Error) string {
	return string(e.Type) + "\x00" + e.Field + "\x00" + e.Detail
}

// firstMatch returns the first error that shows an object fails f.
// hint, when not empty, is a text the error's detail must contain (a CEL
// rule's message; an error without a detail, Duplicate, is let through).
func firstMatch(root *apiextensionsv1.JSONSchemaProps, f Finding, m matcher, hint string, errs field.ErrorList) *field.Error {
	for _, e := range errs {
		if f.Rule == "cel-rule-added" && strings.HasPrefix(e.Detail, celNotChecked) {
			// The rules did not run: count the object, conservatively.
			return e
		}
		p := schemaPath(root, e.Field)
		if p != f.Path && (!m.below || !under(p, f.Path)) {
			continue
		}
		if len(m.types) > 0 && !slices.Contains(m.types, e.Type) {
			continue
		}
		if m.detail != "" && !strings.Contains(e.Detail, m.detail) {
			continue
		}
		if hint != "" && e.Type != field.ErrorTypeDuplicate && !strings.Contains(e.Detail, hint) {
			continue
		}
		return e
	}
	return nil
}

// under reports whether path p is below the path parent.
func under(p, parent string) bool {
	return parent == "." || strings.HasPrefix(p, parent+".") || strings.HasPrefix(p, parent+"[")
}

// schemaPath turns a validation error's field path into a finding's,
// guided by the schema: OpenAPI validation names a map value
// "spec.labels.app" and CEL "spec.labels[app]", both .spec.labels[*]; a
// key or property name may hold dots. Without a way through the schema,
// it falls back to normalizePath.
func schemaPath(s *apiextensionsv1.JSONSchemaProps, errPath string) string {
	if errPath == "" || errPath == "<nil>" {
		return "."
	}
	if p, ok := resolve(s, tokenize(errPath)); ok {
		return showPath(p)
	}
	return normalizePath(errPath)
}

// token is a part of a field path: a name, or a [index or key].
type token struct {
	s       string
	bracket bool
}

func tokenize(p string) []token {
	var out []token
	for len(p) > 0 {
		switch p[0] {
		case '.':
			p = p[1:]
		case '[':
			j := strings.IndexByte(p, ']')
			if j < 0 {
				return append(out, token{s: p})
			}
			out = append(out, token{s: p[1:j], bracket: true})
			p = p[j+1:]
		default:
			j := strings.IndexAny(p, ".[")
			if j < 0 {
				j = len(p)
			}
			out = append(out, token{s: p[:j]})
			p = p[j:]
		}
	}
	return out
}

// resolve finds the schema path of the tokens below s.
func resolve(s *apiextensionsv1.JSONSchemaProps, toks []token) (string, bool) {
	if len(toks) == 0 {
		return "", true
	}
	if s == nil {
		return "", false
	}
	var items, values *apiextensionsv1.JSONSchemaProps
	if s.Items != nil {
		items = s.Items.Schema
	}
	if s.AdditionalProperties != nil {
		values = s.AdditionalProperties.Schema
		if values == nil && s.AdditionalProperties.Allows {
			values = &apiextensionsv1.JSONSchemaProps{}
		}
	}
	if toks[0].bracket {
		next := items
		if next == nil {
			next = values
		}
		rest, ok := resolve(next, toks[1:])
		return "[*]" + rest, ok
	}
	// A property, whose name may span several dotted tokens.
	for k := 1; k <= len(toks) && !toks[k-1].bracket; k++ {
		name := joinTokens(toks[:k])
		if p, ok := s.Properties[name]; ok {
			if rest, ok := resolve(&p, toks[k:]); ok {
				return child("", name) + rest, true
			}
		}
	}
	// A map key, which may span several dotted tokens.
	if values != nil {
		for k := 1; k <= len(toks) && !toks[k-1].bracket; k++ {
			if rest, ok := resolve(values, toks[k:]); ok {
				return "[*]" + rest, true
			}
		}
	}
	return "", false
}

func joinTokens(toks []token) string {
	parts := make([]string, len(toks))
	for i, t := range toks {
		parts[i] = t.s
	}
	return strings.Join(parts, ".")
}

// normalizePath turns a validation error's field path ("spec.items[0].x",
// "metadata.labels[app]") into a finding's (".spec.items[*].x",
// ".metadata.labels[*]").
func normalizePath(s string) string {
	if s == "" || s == "<nil>" {
		return "."
	}
	var b strings.Builder
	if s[0] != '.' && s[0] != '[' {
		b.WriteByte('.')
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '[' {
			b.WriteByte(s[i])
			continue
		}
		j := strings.IndexByte(s[i:], ']')
		if j < 0 {
			b.WriteString(s[i:])
			break
		}
		b.WriteString("[*]")
		i += j
	}
	return b.String()
}

// copyObject deep-copies an object as the server holds a decoded one
// (integers as int64, other numbers as float64).
func copyObject(obj map[string]any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := utiljson.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// objectName is namespace/name, or the name of a cluster-scoped object.
func objectName(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	if name == "" {
		name = "(no name)"
	}
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
