package evolution

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdserver/crdserver/internal/fixtures"
)

// widgets is the CRD the cases change: two served versions (v1 stored,
// v1beta1) with the same schema, which has a bit of everything.
//
//go:embed testdata/widgets.yaml
var widgets string

func base(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := fixtures.DecodeCRD(t, widgets)
	// Decouple the versions' schemas (the YAML alias decodes to copies,
	// but be sure).
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Schema = crd.Spec.Versions[i].Schema.DeepCopy()
	}
	return crd
}

func ver(c *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	return findVersion(&c.Spec, name)
}

// edit changes the schema of v1 at a path of property names, "[*]" for
// items and "{}" for additionalProperties ("" for the root).
func edit(c *apiextensionsv1.CustomResourceDefinition, path string, f func(*apiextensionsv1.JSONSchemaProps)) {
	var segs []string
	if path != "" {
		segs = strings.Split(path, ".")
	}
	editSchema(ver(c, "v1").Schema.OpenAPIV3Schema, segs, f)
}

func editSchema(s *apiextensionsv1.JSONSchemaProps, segs []string, f func(*apiextensionsv1.JSONSchemaProps)) {
	if len(segs) == 0 {
		f(s)
		return
	}
	switch segs[0] {
	case "[*]":
		editSchema(s.Items.Schema, segs[1:], f)
	case "{}":
		editSchema(s.AdditionalProperties.Schema, segs[1:], f)
	default:
		p, ok := s.Properties[segs[0]]
		if !ok {
			panic("no property " + segs[0])
		}
		editSchema(&p, segs[1:], f)
		s.Properties[segs[0]] = p
	}
}

func raw(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
func enum(vs ...string) []apiextensionsv1.JSON {
	out := make([]apiextensionsv1.JSON, len(vs))
	for i, v := range vs {
		out[i] = apiextensionsv1.JSON{Raw: []byte(v)}
	}
	return out
}
func i64(n int64) *int64     { return &n }
func f64(n float64) *float64 { return &n }
func str(s string) *string   { return &s }
func yes() *bool             { b := true; return &b }

type change func(*apiextensionsv1.CustomResourceDefinition)

// webhookConversion is a conversion through a webhook: the versions do
// not share stored objects as they are.
func webhookConversion() *apiextensionsv1.CustomResourceConversion {
	return &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: str("https://127.0.0.1:9443/convert")},
			ConversionReviewVersions: []string{"v1"},
		},
	}
}

// key is what a case expects of a finding: "<rule> <version> <path>".
func key(f Finding) string { return fmt.Sprintf("%s %s %s", f.Rule, f.Version, f.Path) }

func TestCheckCRD(t *testing.T) {
	cases := []struct {
		name     string
		old, new change // old: nil for the base CRD
		want     []string
	}{
		{name: "unchanged", new: func(*apiextensionsv1.CustomResourceDefinition) {}},
		{name: "docs only", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) { s.Description = "the spec" })
			edit(c, "spec.choice", func(s *apiextensionsv1.JSONSchemaProps) { s.AllOf[0].Description = "a is needed" })
		}},

		// field-removed
		{name: "field removed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) { delete(s.Properties, "paused") })
		}, want: []string{"field-removed v1 .spec.paused"}},
		{name: "field renamed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Properties["isPaused"] = s.Properties["paused"]
				delete(s.Properties, "paused")
			})
		}, want: []string{"field-removed v1 .spec.paused"}},
		{name: "field removed in array items", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.ports.[*]", func(s *apiextensionsv1.JSONSchemaProps) { delete(s.Properties, "port") })
		}, want: []string{"field-removed v1 .spec.ports[*].port"}},
		{name: "field removed in map values", old: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.config", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AdditionalProperties.Schema = &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"x": {Type: "string"}}}
			})
		}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.config", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AdditionalProperties.Schema = &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"y": {Type: "string"}}}
			})
		}, want: []string{"field-removed v1 .spec.config[*].x"}},
		{name: "field removed under preserve-unknown-fields", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.selector", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Properties = nil
				s.XPreserveUnknownFields = yes()
			})
		}, want: []string{"field-removed v1 .spec.selector.app"}},
		{name: "metadata schema dropped (near miss)", old: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Properties["metadata"] = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": {Type: "string", MaxLength: i64(20)}}}
				s.Properties["apiVersion"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
			})
		}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "", func(s *apiextensionsv1.JSONSchemaProps) {
				delete(s.Properties, "metadata")
				delete(s.Properties, "apiVersion")
			})
		}},
		{name: "metadata constraint added", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Properties["metadata"] = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": {Type: "string", MaxLength: i64(20)}}}
			})
		}, want: []string{"maxlength-lowered v1 .metadata.name"}},
		{name: "field added (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Properties["newField"] = apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"x"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{"x": {Type: "string", MinLength: i64(3)}}}
			})
		}},

		// type-changed
		{name: "type changed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Type = "string"
				s.Minimum, s.Maximum, s.Default = nil, nil, raw(`"1"`)
			})
		}, want: []string{"type-changed v1 .spec.replicas"}},
		{name: "type changed on an array's items", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.tags.[*]", func(s *apiextensionsv1.JSONSchemaProps) { s.Type = "integer" })
		}, want: []string{"type-changed v1 .spec.tags[*]"}},
		{name: "int-or-string turned off", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.size", func(s *apiextensionsv1.JSONSchemaProps) { s.XIntOrString = false; s.Type = "integer" })
		}, want: []string{"type-changed v1 .spec.size"}},
		{name: "int-or-string turned on (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) { s.Type, s.XIntOrString = "", true })
		}},
		{name: "nullable turned off", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.paused", func(s *apiextensionsv1.JSONSchemaProps) { s.Nullable = false })
		}, want: []string{"type-changed v1 .spec.paused"}},
		{name: "nullable turned on (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.color", func(s *apiextensionsv1.JSONSchemaProps) { s.Nullable = true })
		}},
		{name: "typed value becomes any (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.tags.[*]", func(s *apiextensionsv1.JSONSchemaProps) { s.Type, s.XPreserveUnknownFields = "", yes() })
		}},

		// required-added
		{name: "required added", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) { s.Required = append(s.Required, "color") })
		}, want: []string{"required-added v1 .spec.color"}},
		{name: "required added in array items", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.ports.[*]", func(s *apiextensionsv1.JSONSchemaProps) { s.Required = append(s.Required, "port") })
		}, want: []string{"required-added v1 .spec.ports[*].port"}},
		{name: "required added with a default (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Properties["mode"] = apiextensionsv1.JSONSchemaProps{Type: "string", Default: raw(`"fast"`)}
				s.Required = append(s.Required, "mode")
			})
		}},

		// enum-narrowed
		{name: "enum value removed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.color", func(s *apiextensionsv1.JSONSchemaProps) { s.Enum = enum(`"red"`, `"green"`) })
		}, want: []string{"enum-narrowed v1 .spec.color"}},
		{name: "enum added", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.name", func(s *apiextensionsv1.JSONSchemaProps) { s.Enum = enum(`"a"`) })
		}, want: []string{"enum-narrowed v1 .spec.name"}},
		{name: "enum widened (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.color", func(s *apiextensionsv1.JSONSchemaProps) { s.Enum = enum(`"blue"`, `"green"`, `"red"`, `"yellow"`) })
		}},
		{name: "enum removed (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.color", func(s *apiextensionsv1.JSONSchemaProps) { s.Enum = nil })
		}},

		// pattern-changed, format-changed
		{name: "pattern changed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.name", func(s *apiextensionsv1.JSONSchemaProps) { s.Pattern = "^[a-z0-9]+$" })
		}, want: []string{"pattern-changed v1 .spec.name"}},
		{name: "pattern added in map values", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.labels.{}", func(s *apiextensionsv1.JSONSchemaProps) { s.Pattern = "^[a-z]*$" })
		}, want: []string{"pattern-changed v1 .spec.labels[*]"}},
		{name: "pattern removed (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.name", func(s *apiextensionsv1.JSONSchemaProps) { s.Pattern = "" })
		}},
		{name: "format changed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.email", func(s *apiextensionsv1.JSONSchemaProps) { s.Format = "hostname" })
		}, want: []string{"format-changed v1 .spec.email"}},
		{name: "format removed (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.email", func(s *apiextensionsv1.JSONSchemaProps) { s.Format = "" })
		}},

		// minimum, maximum, multipleOf
		{name: "minimum raised", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) { s.Minimum = f64(1) })
		}, want: []string{"minimum-raised v1 .spec.replicas"}},
		{name: "minimum made exclusive", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) { s.ExclusiveMinimum = true })
		}, want: []string{"minimum-raised v1 .spec.replicas"}},
		{name: "minimum added in array items", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.ports.[*].port", func(s *apiextensionsv1.JSONSchemaProps) { s.Minimum = f64(1024) })
		}, want: []string{"minimum-raised v1 .spec.ports[*].port"}},
		{name: "minimum lowered (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) { s.Minimum = f64(-1) })
		}},
		{name: "maximum lowered", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) { s.Maximum = f64(50) })
		}, want: []string{"maximum-lowered v1 .spec.replicas"}},
		{name: "maximum made exclusive", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) { s.ExclusiveMaximum = true })
		}, want: []string{"maximum-lowered v1 .spec.replicas"}},
		{name: "maximum raised (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) { s.Maximum = f64(200) })
		}},
		{name: "maximum removed (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) { s.Maximum = nil })
		}},
		{name: "multipleOf changed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.ratio", func(s *apiextensionsv1.JSONSchemaProps) { s.MultipleOf = f64(0.3) })
		}, want: []string{"multipleof-changed v1 .spec.ratio"}},
		{name: "multipleOf finer (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.ratio", func(s *apiextensionsv1.JSONSchemaProps) { s.MultipleOf = f64(0.25) })
		}},

		// lengths, items, properties
		{name: "maxLength lowered", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.name", func(s *apiextensionsv1.JSONSchemaProps) { s.MaxLength = i64(10) })
		}, want: []string{"maxlength-lowered v1 .spec.name"}},
		{name: "maxLength lowered in map values", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.labels.{}", func(s *apiextensionsv1.JSONSchemaProps) { s.MaxLength = i64(32) })
		}, want: []string{"maxlength-lowered v1 .spec.labels[*]"}},
		{name: "maxLength added", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.email", func(s *apiextensionsv1.JSONSchemaProps) { s.MaxLength = i64(100) })
		}, want: []string{"maxlength-lowered v1 .spec.email"}},
		{name: "maxLength raised (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.name", func(s *apiextensionsv1.JSONSchemaProps) { s.MaxLength = i64(30) })
		}},
		{name: "minLength raised", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.name", func(s *apiextensionsv1.JSONSchemaProps) { s.MinLength = i64(2) })
		}, want: []string{"minlength-raised v1 .spec.name"}},
		{name: "minLength lowered (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.name", func(s *apiextensionsv1.JSONSchemaProps) { s.MinLength = i64(0) })
		}},
		{name: "maxItems lowered", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.ports", func(s *apiextensionsv1.JSONSchemaProps) { s.MaxItems = i64(5) })
		}, want: []string{"maxitems-lowered v1 .spec.ports"}},
		{name: "maxItems raised (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.ports", func(s *apiextensionsv1.JSONSchemaProps) { s.MaxItems = i64(20) })
		}},
		{name: "minItems raised", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.tags", func(s *apiextensionsv1.JSONSchemaProps) { s.MinItems = i64(1) })
		}, want: []string{"minitems-raised v1 .spec.tags"}},
		{name: "minItems 0 added (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.tags", func(s *apiextensionsv1.JSONSchemaProps) { s.MinItems = i64(0) })
		}},
		{name: "maxProperties lowered", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.labels", func(s *apiextensionsv1.JSONSchemaProps) { s.MaxProperties = i64(10) })
		}, want: []string{"maxproperties-lowered v1 .spec.labels"}},
		{name: "maxProperties raised (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.labels", func(s *apiextensionsv1.JSONSchemaProps) { s.MaxProperties = i64(30) })
		}},
		{name: "minProperties raised", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.labels", func(s *apiextensionsv1.JSONSchemaProps) { s.MinProperties = i64(1) })
		}, want: []string{"minproperties-raised v1 .spec.labels"}},
		{name: "minProperties 0 added (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.labels", func(s *apiextensionsv1.JSONSchemaProps) { s.MinProperties = i64(0) })
		}},

		// cel-rule-added
		{name: "CEL rule added", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
				s.XValidations = append(s.XValidations, apiextensionsv1.ValidationRule{Rule: "self.replicas <= 5"})
			})
		}, want: []string{"cel-rule-added v1 .spec"}},
		{name: "CEL rule added at the root and in array items", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "", func(s *apiextensionsv1.JSONSchemaProps) {
				s.XValidations = append(s.XValidations, apiextensionsv1.ValidationRule{Rule: "self.metadata.name.size() < 10"})
			})
			edit(c, "spec.ports.[*]", func(s *apiextensionsv1.JSONSchemaProps) {
				s.XValidations = append(s.XValidations, apiextensionsv1.ValidationRule{Rule: "self.name != 'x'"})
			})
		}, want: []string{"cel-rule-added v1 .", "cel-rule-added v1 .spec.ports[*]"}},
		{name: "CEL message changed, rule removed (near miss)", old: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
				s.XValidations = append(s.XValidations, apiextensionsv1.ValidationRule{Rule: "has(self.name)"})
			})
		}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) { s.XValidations[0].Message = "replicas must be zero or more" })
		}},

		// combinator-narrowed
		{name: "anyOf added", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AnyOf = []apiextensionsv1.JSONSchemaProps{{Required: []string{"color"}}, {Required: []string{"name"}}}
			})
		}, want: []string{"combinator-narrowed v1 .spec"}},
		{name: "not added, oneOf added, allOf entry added", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.name", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Not = &apiextensionsv1.JSONSchemaProps{Pattern: "^admin$"}
			})
			edit(c, "spec.selector", func(s *apiextensionsv1.JSONSchemaProps) {
				s.OneOf = []apiextensionsv1.JSONSchemaProps{{Required: []string{"app"}}}
			})
			edit(c, "spec.choice", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AllOf = append(s.AllOf, apiextensionsv1.JSONSchemaProps{Required: []string{"b"}})
			})
		}, want: []string{"required-added v1 .spec.choice.b", "combinator-narrowed v1 .spec.name", "combinator-narrowed v1 .spec.selector"}},
		{name: "allOf removed, anyOf widened (near miss)", old: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AnyOf = []apiextensionsv1.JSONSchemaProps{{Required: []string{"color"}}}
			})
		}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AnyOf = []apiextensionsv1.JSONSchemaProps{{Required: []string{"color"}}, {Required: []string{"name"}}}
			})
			edit(c, "spec.choice", func(s *apiextensionsv1.JSONSchemaProps) { s.AllOf = nil })
		}},

		// list and map types
		{name: "list type changed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.ports", func(s *apiextensionsv1.JSONSchemaProps) { s.XListType, s.XListMapKeys = nil, nil })
			edit(c, "spec.tags", func(s *apiextensionsv1.JSONSchemaProps) { s.XListType = str("set") })
		}, want: []string{"list-type-changed v1 .spec.ports", "list-type-changed v1 .spec.tags"}},
		{name: "list type atomic made explicit (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.tags", func(s *apiextensionsv1.JSONSchemaProps) { s.XListType = str("atomic") })
		}},
		{name: "list map keys changed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.ports", func(s *apiextensionsv1.JSONSchemaProps) { s.XListMapKeys = []string{"name", "port"} })
		}, want: []string{"list-map-keys-changed v1 .spec.ports"}},
		{name: "map type changed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.selector", func(s *apiextensionsv1.JSONSchemaProps) { s.XMapType = nil })
		}, want: []string{"map-type-changed v1 .spec.selector"}},
		{name: "map type granular made explicit (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.labels", func(s *apiextensionsv1.JSONSchemaProps) { s.XMapType = str("granular") })
		}},

		// preserve-unknown-fields, additionalProperties, embedded resources
		{name: "preserve-unknown-fields turned off", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.extra", func(s *apiextensionsv1.JSONSchemaProps) { s.XPreserveUnknownFields = nil })
		}, want: []string{"preserve-unknown-fields-removed v1 .spec.extra"}},
		{name: "preserve-unknown-fields turned on (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.selector", func(s *apiextensionsv1.JSONSchemaProps) { s.XPreserveUnknownFields = yes() })
		}},
		{name: "additionalProperties removed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.config", func(s *apiextensionsv1.JSONSchemaProps) { s.AdditionalProperties = nil })
		}, want: []string{"additional-properties-narrowed v1 .spec.config"}},
		{name: "additionalProperties: any value gets a schema", old: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.config", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true}
			})
		}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.config", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}
			})
		}, want: []string{"additional-properties-narrowed v1 .spec.config[*]"}},
		{name: "additionalProperties widened to any value (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.config", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true}
			})
		}},
		{name: "embedded resource turned off", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.template", func(s *apiextensionsv1.JSONSchemaProps) { s.XEmbeddedResource = false })
		}, want: []string{"embedded-resource-changed v1 .spec.template"}},

		// default-changed
		{name: "default changed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) { s.Default = raw("2") })
			edit(c, "spec.color", func(s *apiextensionsv1.JSONSchemaProps) { s.Default = raw(`"red"`) })
		}, want: []string{"default-changed v1 .spec.color", "default-changed v1 .spec.replicas"}},
		{name: "default spelled differently (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) { s.Default = raw(" 1.0 ") })
		}},

		// The CRD's scope and names.
		{name: "scope changed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Scope = apiextensionsv1.ClusterScoped
		}, want: []string{"scope-changed  "}},
		{name: "names changed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Group = "example.org"
			c.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "Gadgets"}
		}, want: []string{"category-removed  ", "group-changed  ", "kind-changed  ", "listkind-changed  ", "plural-changed  ", "shortname-removed  ", "singular-changed  "}},
		{name: "names defaulted or added (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Names.ListKind, c.Spec.Names.Singular = "", ""
			c.Spec.Names.ShortNames = append(c.Spec.Names.ShortNames, "wdg")
			c.Spec.Names.Categories = append(c.Spec.Names.Categories, "widgets")
		}},

		// Versions.
		{name: "served version removed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions = c.Spec.Versions[:1]
		}, want: []string{"served-version-removed v1beta1 "}},
		{name: "deprecated version removed (near miss)", old: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1beta1").Deprecated = true
		}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions = c.Spec.Versions[:1]
		}},
		{name: "unserved version removed (near miss)", old: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1beta1").Served = false
		}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions = c.Spec.Versions[:1]
		}},
		{name: "version unserved", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1beta1").Served = false
		}, want: []string{"version-unserved-without-deprecation v1beta1 "}},
		{name: "version deprecated and unserved at once", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1beta1").Served, ver(c, "v1beta1").Deprecated = false, true
		}, want: []string{"version-unserved-without-deprecation v1beta1 "}},
		{name: "deprecated version unserved (near miss)", old: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1beta1").Deprecated = true
		}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1beta1").Served = false
		}},
		{name: "GA deprecated with only a beta left", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1").Deprecated = true
		}, want: []string{"deprecated-for-less-stable v1 "}},
		{name: "beta deprecated with GA left (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1beta1").Deprecated = true
		}},
		{name: "beta deprecated with only an alpha left", old: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Name = "v1alpha1"
			c.Spec.Versions[0].Storage, c.Spec.Versions[1].Storage = false, true
		}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1beta1").Deprecated = true
		}, want: []string{"deprecated-for-less-stable v1beta1 "}},
		{name: "GA deprecated for another GA (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			v2 := *ver(c, "v1").DeepCopy()
			v2.Name, v2.Storage = "v2", false
			c.Spec.Versions = append(c.Spec.Versions, v2)
			ver(c, "v1").Deprecated = true
		}},
		{name: "storage moved to a less stable version", old: func(c *apiextensionsv1.CustomResourceDefinition) {
			spec := ver(c, "v1beta1").Schema.OpenAPIV3Schema.Properties["spec"]
			spec.Properties["legacy"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1").Storage, ver(c, "v1beta1").Storage = false, true
		}, want: []string{"storage-moved-to-less-stable v1beta1 "}},
		{name: "storage moved back to a served version of the same schema (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1").Storage, ver(c, "v1beta1").Storage = false, true
			ver(c, "v1beta1").Schema.OpenAPIV3Schema.Description = "documentation does not count"
		}},
		{name: "storage moved to a served version whose schema changes with the move", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1").Storage, ver(c, "v1beta1").Storage = false, true
			spec := ver(c, "v1beta1").Schema.OpenAPIV3Schema.Properties["spec"]
			spec.Properties["legacy"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}, want: []string{"storage-moved-to-less-stable v1beta1 "}},
		{name: "storage moved to a more stable version (near miss)", old: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1").Storage, ver(c, "v1beta1").Storage = false, true
		}},
		{name: "storage moved to a new version", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			v2 := *ver(c, "v1").DeepCopy()
			v2.Name = "v2"
			ver(c, "v1").Storage = false
			c.Spec.Versions = append(c.Spec.Versions, v2)
		}, want: []string{"storage-moved-to-new-version v2 "}},
		{name: "version added (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			v2 := *ver(c, "v1").DeepCopy()
			v2.Name, v2.Storage = "v2", false
			c.Spec.Versions = append(c.Spec.Versions, v2)
		}},
		{name: "schema change in an unserved version (near miss)", old: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1beta1").Served = false
		}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1beta1").Served = false
			ver(c, "v1beta1").Schema.OpenAPIV3Schema.Properties = nil
		}},
		{name: "schema change in both versions", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			for _, v := range []string{"v1", "v1beta1"} {
				s := ver(c, v).Schema.OpenAPIV3Schema.Properties["spec"]
				delete(s.Properties, "paused")
			}
		}, want: []string{"field-removed v1 .spec.paused", "field-removed v1beta1 .spec.paused"}},

		// Subresources and selectable fields.
		{name: "subresources removed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1").Subresources = nil
		}, want: []string{"subresource-removed v1 ", "subresource-removed v1 "}},
		{name: "scale paths changed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1").Subresources.Scale.LabelSelectorPath = str(".status.selector")
		}, want: []string{"scale-paths-changed v1 "}},
		{name: "subresource added (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1beta1").Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
		}},
		{name: "selectable field removed", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1").SelectableFields = []apiextensionsv1.SelectableField{{JSONPath: ".spec.name"}}
		}, want: []string{"selectable-field-removed v1 .spec.color"}},
		{name: "selectable field added (near miss)", new: func(c *apiextensionsv1.CustomResourceDefinition) {
			ver(c, "v1").SelectableFields = append(ver(c, "v1").SelectableFields, apiextensionsv1.SelectableField{JSONPath: ".spec.name"})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := base(t)
			// These cases change each version on its own: a conversion
			// webhook keeps the versions' objects apart
			// (TestAcrossVersions has versions that share them).
			old.Spec.Conversion = webhookConversion()
			if tc.old != nil {
				tc.old(old)
			}
			nw := old.DeepCopy()
			if tc.new != nil {
				tc.new(nw)
			}
			before := old.DeepCopy()
			got := CheckCRD(context.Background(), old, nw, Options{})
			var keys []string
			for _, f := range got {
				keys = append(keys, key(f))
				if f.Message == "" || strings.Contains(f.Message, "\n") {
					t.Errorf("bad message in %+v", f)
				}
			}
			if strings.Join(keys, "|") != strings.Join(tc.want, "|") {
				t.Errorf("findings:\n%s\nwant:\n%s", FormatText(got), strings.Join(tc.want, "\n"))
			}
			if !apiequalJSON(t, before, old) {
				t.Error("CheckCRD changed the old CRD")
			}
		})
	}
}

func apiequalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(x) == string(y)
}

func TestStability(t *testing.T) {
	for v, want := range map[string]stability{
		"v1": ga, "v10": ga, "v2beta3": beta, "v1alpha1": alpha, "v1beta": belowAlpha, "foo1": belowAlpha, "V1": belowAlpha, "v1gamma1": belowAlpha,
	} {
		if got := stabilityOf(v); got != want {
			t.Errorf("stabilityOf(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestPaths(t *testing.T) {
	if got := child(".spec", "a.b"); got != `.spec["a.b"]` {
		t.Errorf("child: %s", got)
	}
	for in, want := range map[string]string{
		"":                        ".",
		"<nil>":                   ".",
		"spec.replicas":           ".spec.replicas",
		"spec.ports[0].port":      ".spec.ports[*].port",
		"metadata.labels[app]":    ".metadata.labels[*]",
		"spec.m[a.b][2]":          ".spec.m[*][*]",
		"spec.items[12].x.y[3].z": ".spec.items[*].x.y[*].z",
	} {
		if got := normalizePath(in); got != want {
			t.Errorf("normalizePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSchemaPath(t *testing.T) {
	root := ver(base(t), "v1").Schema.OpenAPIV3Schema
	for in, want := range map[string]string{
		"<nil>":                               ".",
		"spec.replicas":                       ".spec.replicas",
		"spec.labels.app":                     ".spec.labels[*]",
		"spec.labels.app.kubernetes.io/name":  ".spec.labels[*]",
		"spec.labels[app.kubernetes.io/name]": ".spec.labels[*]",
		"spec.ports[3].port":                  ".spec.ports[*].port",
		"spec.config.a.b":                     ".spec.config[*]",
		"metadata.name":                       ".metadata.name",
	} {
		if got := schemaPath(root, in); got != want {
			t.Errorf("schemaPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFormatText(t *testing.T) {
	fs := []Finding{
		{Rule: "type-changed", Version: "v1", Path: ".spec.b", Message: "type changed\nfrom a to b"},
		{Rule: "scope-changed", Message: "scope changed"},
		{Rule: "field-removed", Version: "v1", Path: ".spec.a", Message: "field a was removed"},
		{Rule: "enum-narrowed", Version: "v1", Path: ".spec.a", Message: "enum values removed"},
		{Rule: "served-version-removed", Version: "v1alpha1", Message: "gone"},
	}
	want := `scope-changed version= path=: scope changed
enum-narrowed version=v1 path=.spec.a: enum values removed
field-removed version=v1 path=.spec.a: field a was removed
type-changed version=v1 path=.spec.b: type changed from a to b
served-version-removed version=v1alpha1 path=: gone
`
	if got := FormatText(fs); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if fs[0].Rule != "type-changed" {
		t.Error("FormatText sorted its argument")
	}
	b, err := json.Marshal(fs[1])
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"rule":"scope-changed","version":"","path":"","message":"scope changed"}` {
		t.Errorf("JSON: %s", b)
	}
}

func TestExistingObjects(t *testing.T) {
	obj := func(ns, name, spec string) map[string]any {
		var s map[string]any
		if err := json.Unmarshal([]byte(spec), &s); err != nil {
			t.Fatal(err)
		}
		return map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     s,
		}
	}
	small := obj("default", "small", `{"replicas": 3, "color": "red", "name": "abc", "labels": {"app": "web"}, "ports": [{"name": "http", "port": 8080}]}`)
	big := obj("prod", "big", `{"replicas": 7, "color": "blue", "name": "abcdefghij", "labels": {"app": "a-rather-long-label-value"}, "ports": [{"name": "ssh", "port": 22}]}`)
	nothing := obj("default", "empty", `{}`)

	cases := []struct {
		name    string
		new     change
		objects []map[string]any
		want    []string // keys, and texts the messages contain
	}{
		{name: "new CEL rule no object fails", objects: []map[string]any{small}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
				s.XValidations = append(s.XValidations, apiextensionsv1.ValidationRule{Rule: "self.replicas <= 5"})
			})
		}},
		{name: "new CEL rule one object fails", objects: []map[string]any{small, big}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
				s.XValidations = append(s.XValidations, apiextensionsv1.ValidationRule{Rule: "self.replicas <= 5"})
			})
		}, want: []string{"cel-rule-added v1 .spec", "1 of 2 existing objects fail it, e.g. prod/big"}},
		{name: "two new CEL rules, one fails", objects: []map[string]any{small, big}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
				s.XValidations = append(s.XValidations,
					apiextensionsv1.ValidationRule{Rule: "self.replicas <= 5", Message: "at most 5"},
					apiextensionsv1.ValidationRule{Rule: "self.replicas <= 50"})
			})
		}, want: []string{"cel-rule-added v1 .spec", `"self.replicas <= 5"`}},
		{name: "new CEL rule in array items", objects: []map[string]any{small, big}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.ports.[*]", func(s *apiextensionsv1.JSONSchemaProps) {
				s.XValidations = append(s.XValidations, apiextensionsv1.ValidationRule{Rule: "self.port > 1000"})
			})
		}, want: []string{"cel-rule-added v1 .spec.ports[*]", "1 of 2", "prod/big"}},
		{name: "enum narrowed, values unused", objects: []map[string]any{small}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.color", func(s *apiextensionsv1.JSONSchemaProps) { s.Enum = enum(`"red"`, `"green"`) })
		}},
		{name: "enum narrowed, value used", objects: []map[string]any{small, big}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.color", func(s *apiextensionsv1.JSONSchemaProps) { s.Enum = enum(`"red"`, `"green"`) })
		}, want: []string{"enum-narrowed v1 .spec.color", "1 of 2", "prod/big"}},
		{name: "required added, everyone has it", objects: []map[string]any{small, big}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) { s.Required = append(s.Required, "color") })
		}},
		{name: "required added, one lacks it", objects: []map[string]any{small, nothing}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) { s.Required = append(s.Required, "color") })
		}, want: []string{"required-added v1 .spec.color", "1 of 2", "default/empty"}},
		{name: "maxLength lowered in map values", objects: []map[string]any{small, big}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.labels.{}", func(s *apiextensionsv1.JSONSchemaProps) { s.MaxLength = i64(10) })
		}, want: []string{"maxlength-lowered v1 .spec.labels[*]", "prod/big"}},
		{name: "minimum raised in array items", objects: []map[string]any{small, big}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.ports.[*].port", func(s *apiextensionsv1.JSONSchemaProps) { s.Minimum = f64(1024) })
		}, want: []string{"minimum-raised v1 .spec.ports[*].port", "prod/big"}},
		{name: "pattern and maxLength on one field, only maxLength fails", objects: []map[string]any{small, big}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.name", func(s *apiextensionsv1.JSONSchemaProps) { s.MaxLength, s.Pattern = i64(5), "^[a-z]*$" })
		}, want: []string{"maxlength-lowered v1 .spec.name", "prod/big"}},
		{name: "format changed, every object fails", objects: []map[string]any{small, big}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.name", func(s *apiextensionsv1.JSONSchemaProps) { s.Format = "uuid" })
		}, want: []string{"format-changed v1 .spec.name", "2 of 2 existing objects fail it, e.g. default/small"}},
		{name: "minItems raised, the field is absent or long enough", objects: []map[string]any{small, nothing}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.ports", func(s *apiextensionsv1.JSONSchemaProps) { s.MinItems = i64(1) })
		}},
		{name: "minItems raised", objects: []map[string]any{small, nothing, big}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.ports", func(s *apiextensionsv1.JSONSchemaProps) { s.MinItems = i64(2) })
		}, want: []string{"minitems-raised v1 .spec.ports", "2 of 3 existing objects fail it, e.g. default/small"}},
		{name: "metadata.name maxLength added", objects: []map[string]any{small, big}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Properties["metadata"] = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": {Type: "string", MaxLength: i64(3)}}}
			})
		}, want: []string{"maxlength-lowered v1 .metadata.name", "1 of 2", "default/small"}},
		{name: "anyOf added", objects: []map[string]any{small, big}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AnyOf = []apiextensionsv1.JSONSchemaProps{{Required: []string{"paused"}}, {Required: []string{"tags"}}}
			})
		}, want: []string{"combinator-narrowed v1 .spec", "2 of 2"}},
		{name: "anyOf added, objects pass", objects: []map[string]any{small, big}, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AnyOf = []apiextensionsv1.JSONSchemaProps{{Required: []string{"paused"}}, {Required: []string{"ports"}}}
			})
		}},
		{name: "no objects at all", objects: nil, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) { s.Maximum = f64(1) })
		}},
		{name: "removals are reported whatever the objects", objects: nil, new: func(c *apiextensionsv1.CustomResourceDefinition) {
			edit(c, "spec", func(s *apiextensionsv1.JSONSchemaProps) { delete(s.Properties, "paused") })
		}, want: []string{"field-removed v1 .spec.paused"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := base(t)
			nw := old.DeepCopy()
			tc.new(nw)
			asked := map[string]bool{}
			got := CheckCRD(context.Background(), old, nw, Options{ExistingObjects: func(v string) []map[string]any {
				asked[v] = true
				if v == "v1" {
					return tc.objects
				}
				return nil
			}})
			if len(tc.want) == 0 {
				if len(got) != 0 {
					t.Errorf("findings:\n%s", FormatText(got))
				}
				return
			}
			if len(got) != 1 || key(got[0]) != tc.want[0] {
				t.Fatalf("findings:\n%s\nwant one: %s", FormatText(got), tc.want[0])
			}
			for _, s := range tc.want[1:] {
				if !strings.Contains(got[0].Message, s) {
					t.Errorf("message %q does not contain %q", got[0].Message, s)
				}
			}
			if !asked["v1"] {
				t.Error("ExistingObjects was not asked for v1")
			}
		})
	}
}
