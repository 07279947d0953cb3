package evolution

import (
	"reflect"
	"regexp"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// foldAllOf returns s with the allOf entries that only constrain the
// value of the node itself (enum, bounds, lengths, counts, pattern,
// format, multipleOf, required, CEL rules) merged into it: an object
// passes s exactly when it passes the result, and an enum moved between
// allOf and the node compares as the same enum. Entries that say more (or
// conflict in a way one keyword cannot say) stay in allOf. s itself is
// not changed.
func foldAllOf(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if len(s.AllOf) == 0 {
		return s
	}
	c := s.DeepCopy()
	var rest []apiextensionsv1.JSONSchemaProps
	for i := range c.AllOf {
		e := c.AllOf[i].DeepCopy()
		stripDocs(e)
		if !foldable(c, e) {
			rest = append(rest, c.AllOf[i])
			continue
		}
		merge(c, e)
	}
	c.AllOf = rest
	return c
}

// foldable reports whether entry e of s's allOf holds only keywords that
// merge into s.
func foldable(s, e *apiextensionsv1.JSONSchemaProps) bool {
	same := func(a, b string) bool { return a == "" || b == "" || a == b }
	if !same(s.Type, e.Type) || !same(s.Pattern, e.Pattern) || !same(s.Format, e.Format) {
		return false
	}
	if s.MultipleOf != nil && e.MultipleOf != nil && *s.MultipleOf != *e.MultipleOf {
		return false
	}
	x := *e
	x.Type, x.Enum, x.Pattern, x.Format, x.MultipleOf = "", nil, "", "", nil
	x.Minimum, x.ExclusiveMinimum, x.Maximum, x.ExclusiveMaximum = nil, false, nil, false
	x.MaxLength, x.MinLength, x.MaxItems, x.MinItems, x.MaxProperties, x.MinProperties = nil, nil, nil, nil, nil, nil
	x.Required, x.XValidations = nil, nil
	return reflect.DeepEqual(x, apiextensionsv1.JSONSchemaProps{})
}

// merge adds the constraints of e to s (both must hold).
func merge(s, e *apiextensionsv1.JSONSchemaProps) {
	if s.Type == "" {
		s.Type = e.Type
	}
	if s.Pattern == "" {
		s.Pattern = e.Pattern
	}
	if s.Format == "" {
		s.Format = e.Format
	}
	if s.MultipleOf == nil {
		s.MultipleOf = e.MultipleOf
	}
	if len(e.Enum) > 0 {
		if len(s.Enum) == 0 {
			s.Enum = e.Enum
		} else {
			s.Enum = slices.DeleteFunc(s.Enum, func(v apiextensionsv1.JSON) bool {
				return !slices.ContainsFunc(e.Enum, func(x apiextensionsv1.JSON) bool { return sameJSON(x.Raw, v.Raw) })
			})
		}
	}
	if e.Minimum != nil && (s.Minimum == nil || *e.Minimum > *s.Minimum || (*e.Minimum == *s.Minimum && e.ExclusiveMinimum)) {
		s.Minimum, s.ExclusiveMinimum = e.Minimum, e.ExclusiveMinimum
	}
	if e.Maximum != nil && (s.Maximum == nil || *e.Maximum < *s.Maximum || (*e.Maximum == *s.Maximum && e.ExclusiveMaximum)) {
		s.Maximum, s.ExclusiveMaximum = e.Maximum, e.ExclusiveMaximum
	}
	least := func(a, b *int64) *int64 {
		if a == nil || (b != nil && *b < *a) {
			return b
		}
		return a
	}
	most := func(a, b *int64) *int64 {
		if a == nil || (b != nil && *b > *a) {
			return b
		}
		return a
	}
	s.MaxLength, s.MaxItems, s.MaxProperties = least(s.MaxLength, e.MaxLength), least(s.MaxItems, e.MaxItems), least(s.MaxProperties, e.MaxProperties)
	s.MinLength, s.MinItems, s.MinProperties = most(s.MinLength, e.MinLength), most(s.MinItems, e.MinItems), most(s.MinProperties, e.MinProperties)
	for _, r := range e.Required {
		if !slices.Contains(s.Required, r) {
			s.Required = append(s.Required, r)
		}
	}
	for _, r := range e.XValidations {
		if !slices.ContainsFunc(s.XValidations, func(x apiextensionsv1.ValidationRule) bool {
			return strings.TrimSpace(x.Rule) == strings.TrimSpace(r.Rule)
		}) {
			s.XValidations = append(s.XValidations, r)
		}
	}
}

var defaultWord = regexp.MustCompile(`(?i)\bdefault`)

// documentsDefault reports whether a field's description already states
// the default value raw: it speaks of a default and names the value (a
// string as itself, quoted or not; a number or boolean as written).
func documentsDefault(description string, raw []byte) bool {
	if !defaultWord.MatchString(description) {
		return false
	}
	var text string
	switch v := decodeJSON(raw).(type) {
	case string:
		text = v
	case float64, bool:
		text = string(compact(raw))
	default:
		return false // objects, lists and null have no one way to be written
	}
	if text == "" {
		return false
	}
	re, err := regexp.Compile(`(^|[^A-Za-z0-9_.-])` + regexp.QuoteMeta(text) + `($|[^A-Za-z0-9_-]|\.($|[^A-Za-z0-9_-]))`)
	return err == nil && re.MatchString(description)
}
