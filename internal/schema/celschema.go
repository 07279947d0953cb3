package schema

import (
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apiserver/pkg/cel/common"
)

// celSchema is the schema CEL values, correlated objects and map lists
// walk. It answers like model.Structural (whose methods it inherits) but
// builds its children once: model.Structural makes a new map of every
// property, each a copy of its schema, on every field lookup, which made
// field access in a CEL rule cost O(properties) allocations.
type celSchema struct {
	*model.Structural
	properties map[string]common.Schema
	items      common.Schema
	additional common.SchemaOrBool
	// typed is the schema with apiVersion, kind and metadata that CEL sees
	// for the root of a resource (embedded resources included).
	typed common.Schema
}

var _ common.Schema = (*celSchema)(nil)

// newCELSchema builds the tree of s. A resource (the root of the object,
// or an embedded resource) also gets the typed view CEL uses for it.
func newCELSchema(s *structuralschema.Structural, resource bool) *celSchema {
	if s == nil {
		return nil
	}
	c := buildCELSchema(s)
	if resource {
		t := buildCELSchema(model.WithTypeAndObjectMeta(s))
		t.typed = t
		c.typed = t
	}
	return c
}

func buildCELSchema(s *structuralschema.Structural) *celSchema {
	c := &celSchema{Structural: &model.Structural{Structural: s}}
	if s.Properties != nil {
		c.properties = make(map[string]common.Schema, len(s.Properties))
		for name := range s.Properties {
			p := s.Properties[name]
			c.properties[name] = newCELSchema(&p, p.XEmbeddedResource)
		}
	}
	if s.Items != nil {
		c.items = newCELSchema(s.Items, s.Items.XEmbeddedResource)
	}
	if s.AdditionalProperties != nil {
		a := &celSchemaOrBool{allows: s.AdditionalProperties.Bool}
		if st := s.AdditionalProperties.Structural; st != nil {
			a.schema = newCELSchema(st, st.XEmbeddedResource)
		}
		c.additional = a
	}
	return c
}

func (c *celSchema) Properties() map[string]common.Schema { return c.properties }

func (c *celSchema) Items() common.Schema {
	if c.items == nil {
		return nil
	}
	return c.items
}

func (c *celSchema) AdditionalProperties() common.SchemaOrBool { return c.additional }

func (c *celSchema) WithTypeAndObjectMeta() common.Schema {
	if c.typed != nil {
		return c.typed
	}
	return c.Structural.WithTypeAndObjectMeta()
}

type celSchemaOrBool struct {
	schema *celSchema
	allows bool
}

func (b *celSchemaOrBool) Schema() common.Schema {
	if b.schema == nil {
		return nil
	}
	return b.schema
}

func (b *celSchemaOrBool) Allows() bool { return b.allows }
