package schema

import (
	"math"
	"regexp"
	"unicode/utf8"

	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
)

// check answers one question fast: is a value certainly valid under the
// OpenAPI schema that Kubernetes' validator (kube-openapi) applies? It
// reads the very schema that validator is built from, and follows its
// rules (type and format matching, nullable, enum, string lengths in runes,
// patterns, registered formats, number ranges, item and property counts,
// required, additionalProperties). Where those rules get subtle (allOf,
// anyOf, oneOf, not, unusual number formats, enums of non-strings,
// multipleOf on fractions) it answers "not certain", and so does any
// value that fails. Only then does the full validator run, and it alone
// words the errors. A valid object, the common case, skips it: building
// a validator per field and value made it most of the cost of a write.
type check struct {
	unsure   bool // the node uses what check does not decide
	types    spec.StringOrArray
	nullable bool
	format   string // the (supported) format, or ""

	maxLength, minLength *int64
	pattern              *regexp.Regexp
	maximum, minimum     *float64
	exclusiveMaximum     bool
	exclusiveMinimum     bool
	multipleOf           *float64

	maxItems, minItems           *int64
	maxProperties, minProperties *int64
	required                     []string

	hasEnum bool
	enum    map[string]bool // the enum, when every value is a string; nil otherwise

	properties    map[string]*check
	additional    *check
	noAdditional  bool // additionalProperties: false
	items         *check
	hasConstraint bool // some number constraint is set
}

// newCheck builds the check of s; nil means "not certain" for any value.
func newCheck(s *spec.Schema) *check {
	if s == nil {
		return nil
	}
	c := &check{types: s.Type, nullable: s.Nullable, format: s.Format,
		maxLength: s.MaxLength, minLength: s.MinLength,
		maximum: s.Maximum, minimum: s.Minimum, exclusiveMaximum: s.ExclusiveMaximum, exclusiveMinimum: s.ExclusiveMinimum,
		multipleOf: s.MultipleOf, maxItems: s.MaxItems, minItems: s.MinItems,
		maxProperties: s.MaxProperties, minProperties: s.MinProperties, required: s.Required}
	c.hasConstraint = s.Maximum != nil || s.Minimum != nil || s.MultipleOf != nil
	if s.Ref.String() != "" || len(s.AllOf) > 0 || len(s.AnyOf) > 0 || len(s.OneOf) > 0 || s.Not != nil ||
		len(s.PatternProperties) > 0 || len(s.Dependencies) > 0 || s.AdditionalItems != nil || s.UniqueItems ||
		(s.Items != nil && (len(s.Items.Schemas) > 0 || s.Items.Schema == nil)) {
		c.unsure = true
		return c
	}
	if s.Pattern != "" {
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			c.unsure = true
			return c
		}
		c.pattern = re
	}
	if len(s.Enum) > 0 {
		c.hasEnum = true
		c.enum = make(map[string]bool, len(s.Enum))
		for _, e := range s.Enum {
			str, ok := e.(string)
			if !ok {
				c.enum = nil
				break
			}
			c.enum[str] = true
		}
	}
	if s.Properties != nil {
		c.properties = make(map[string]*check, len(s.Properties))
		for name := range s.Properties {
			p := s.Properties[name]
			c.properties[name] = newCheck(&p)
		}
	}
	if a := s.AdditionalProperties; a != nil {
		switch {
		case a.Schema != nil:
			if c.additional = newCheck(a.Schema); c.additional == nil {
				c.unsure = true
			}
		case !a.Allows:
			c.noAdditional = true
		}
	}
	if s.Items != nil {
		c.items = newCheck(s.Items.Schema)
	}
	return c
}

const maxExactFloatInt = 1 << 53

// valid reports whether v is certainly valid.
func (c *check) valid(v any) bool {
	if c == nil || c.unsure {
		return false
	}
	if v == nil {
		return !c.hasEnum && (len(c.types) == 0 || c.types.Contains("null") || c.nullable)
	}
	if c.hasEnum {
		s, ok := v.(string)
		if !ok || c.enum == nil || !c.enum[s] {
			return false
		}
	}
	switch v := v.(type) {
	case string:
		// With a format, a string passes the type check unless the type
		// is numeric; without one, the type must include string.
		if c.format != "" {
			if c.types.Contains("integer") || c.types.Contains("number") {
				return false
			}
			if strfmt.Default.ContainsName(c.format) && !strfmt.Default.Validates(c.format, v) {
				return false
			}
		} else if len(c.types) > 0 && !c.types.Contains("string") {
			return false
		}
		if c.maxLength != nil || c.minLength != nil {
			n := int64(utf8.RuneCountInString(v))
			if (c.maxLength != nil && n > *c.maxLength) || (c.minLength != nil && n < *c.minLength) {
				return false
			}
		}
		return c.pattern == nil || c.pattern.MatchString(v)
	case bool:
		return c.format == "" && (len(c.types) == 0 || c.types.Contains("boolean"))
	case int64:
		return c.validInt(v)
	case float64:
		return c.validFloat(v)
	case []any:
		if c.format != "" || (len(c.types) > 0 && !c.types.Contains("array")) {
			return false
		}
		if (c.maxItems != nil && int64(len(v)) > *c.maxItems) || (c.minItems != nil && int64(len(v)) < *c.minItems) {
			return false
		}
		if c.items != nil {
			for _, item := range v {
				if !c.items.valid(item) {
					return false
				}
			}
		}
		return true
	case map[string]any:
		if c.format != "" || (len(c.types) > 0 && !c.types.Contains("object")) {
			return false
		}
		if (c.maxProperties != nil && int64(len(v)) > *c.maxProperties) || (c.minProperties != nil && int64(len(v)) < *c.minProperties) {
			return false
		}
		for _, r := range c.required {
			if _, ok := v[r]; !ok {
				return false
			}
		}
		for k, val := range v {
			if p, ok := c.properties[k]; ok {
				if !p.valid(val) {
					return false
				}
				continue
			}
			if c.noAdditional || (c.additional != nil && !c.additional.valid(val)) {
				return false
			}
		}
		return true
	}
	return false // a type JSON decoding does not produce
}

func (c *check) validInt(v int64) bool {
	integerOnly := len(c.types) == 1 && c.types[0] == "integer"
	switch c.format {
	case "":
		if len(c.types) > 0 && !c.types.Contains("integer") && !c.types.Contains("number") {
			return false
		}
	case "int64":
		if !integerOnly {
			return false
		}
	case "int32":
		if !integerOnly || v > math.MaxInt32 || v < math.MinInt32 {
			return false
		}
	default:
		return false
	}
	if !c.hasConstraint {
		return true
	}
	if len(c.types) != 1 || v > maxExactFloatInt || v < -maxExactFloatInt {
		return false
	}
	bound := func(b float64) (int64, bool) {
		if b != math.Trunc(b) || b > maxExactFloatInt || b < -maxExactFloatInt {
			return 0, false
		}
		if c.format == "int32" && (b > math.MaxInt32 || b < math.MinInt32) {
			return 0, false
		}
		return int64(b), true
	}
	if c.maximum != nil {
		m, ok := bound(*c.maximum)
		if !ok || v > m || (c.exclusiveMaximum && v == m) {
			return false
		}
	}
	if c.minimum != nil {
		m, ok := bound(*c.minimum)
		if !ok || v < m || (c.exclusiveMinimum && v == m) {
			return false
		}
	}
	if c.multipleOf != nil {
		f, ok := bound(*c.multipleOf)
		if !ok || f < 1 || v%f != 0 {
			return false
		}
	}
	return true
}

func (c *check) validFloat(v float64) bool {
	if c.format != "" || len(c.types) != 1 || c.types[0] != "number" || c.multipleOf != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	if c.maximum != nil && (v > *c.maximum || (c.exclusiveMaximum && v == *c.maximum)) {
		return false
	}
	if c.minimum != nil && (v < *c.minimum || (c.exclusiveMinimum && v == *c.minimum)) {
		return false
	}
	return true
}
