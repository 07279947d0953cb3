package schema

import (
	"sort"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// pruner drops the fields a schema does not know, with the rules of
// Kubernetes' pruning (x-kubernetes-preserve-unknown-fields, embedded
// resources keeping apiVersion, kind and metadata, additionalProperties),
// over a tree built once. Kubernetes' pruning copies each property's
// schema out of its map at every step, one allocation per field.
type pruner struct {
	preserve   bool // x-kubernetes-preserve-unknown-fields
	embedded   bool // x-kubernetes-embedded-resource (and the root)
	properties map[string]*pruner
	// hasAdditional: additionalProperties is set; additional is its
	// schema, nil for a bare true, which keeps keys but prunes below them.
	hasAdditional bool
	additional    *pruner
	items         *pruner
}

// newPruner builds the pruner of s; nil (no schema) prunes everything
// in objects below it.
func newPruner(s *structuralschema.Structural, root bool) *pruner {
	if s == nil {
		return nil
	}
	p := &pruner{preserve: s.XPreserveUnknownFields, embedded: root || s.XEmbeddedResource}
	if s.Properties != nil {
		p.properties = make(map[string]*pruner, len(s.Properties))
		for name := range s.Properties {
			prop := s.Properties[name]
			p.properties[name] = newPruner(&prop, false)
		}
	}
	if s.AdditionalProperties != nil {
		p.hasAdditional = true
		p.additional = newPruner(s.AdditionalProperties.Structural, false)
	}
	p.items = newPruner(s.Items, false)
	return p
}

func isMetaField(k string) bool { return k == "apiVersion" || k == "kind" || k == "metadata" }

// pruneRun is one pruning: the paths it dropped (when tracked) and
// whether it dropped anything.
type pruneRun struct {
	opts    structuralschema.UnknownFieldPathOptions
	dropped bool
}

// prune prunes obj and, with track, returns the sorted paths it dropped.
func (p *pruner) prune(obj any, track bool) []string {
	r := pruneRun{opts: structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: track}}
	p.walk(obj, &r, false)
	sort.Strings(r.opts.UnknownFieldPaths)
	return r.opts.UnknownFieldPaths
}

// pruneChanged prunes obj and reports whether it dropped anything.
func (p *pruner) pruneChanged(obj any) bool {
	var r pruneRun
	p.walk(obj, &r, false)
	return r.dropped
}

// walk prunes x. With keep (x-kubernetes-preserve-unknown-fields here, or
// on the list x is an item of), unknown fields stay, but known ones are
// still pruned below; a list passes keep on to its items, an object does
// not.
func (p *pruner) walk(x any, r *pruneRun, keep bool) {
	keep = keep || (p != nil && p.preserve)
	if keep && p == nil {
		return
	}
	opts := &r.opts
	depth := len(opts.ParentPath)
	switch x := x.(type) {
	case map[string]any:
		if p == nil {
			for k := range x {
				opts.RecordUnknownField(k)
				delete(x, k)
				r.dropped = true
			}
			return
		}
		for k, v := range x {
			if p.embedded && isMetaField(k) {
				continue
			}
			if prop, ok := p.properties[k]; ok {
				opts.AppendKey(k)
				prop.walk(v, r, false)
				opts.ParentPath = opts.ParentPath[:depth]
			} else if p.hasAdditional {
				opts.AppendKey(k)
				p.additional.walk(v, r, false)
				opts.ParentPath = opts.ParentPath[:depth]
			} else if !keep {
				if !isMetaField(k) || depth > 0 {
					opts.RecordUnknownField(k)
				}
				delete(x, k)
				r.dropped = true
			}
		}
	case []any:
		var items *pruner
		if p != nil {
			items = p.items
		}
		for i, v := range x {
			opts.AppendIndex(i)
			items.walk(v, r, keep)
			opts.ParentPath = opts.ParentPath[:depth]
		}
	}
}
