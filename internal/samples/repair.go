package samples

import (
	"strconv"
	"strings"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxRepairs bounds the repairs of one object before it is made again.
const maxRepairs = 10

// repair makes again the values that validation found wrong in obj (a
// CEL rule of an object, a missing required field, duplicate keys), in
// place, so that rules on one part of an object do not send the whole
// object back. False when an error is not at a value it can make again
// (the object's root, its type or metadata): then the whole object is.
func (g *generator) repair(root *structuralschema.Structural, obj map[string]any, errs field.ErrorList) bool {
	done := map[string]bool{}
	for _, e := range errs {
		if done[e.Field] {
			continue
		}
		done[e.Field] = true
		segs, ok := parsePath(e.Field)
		if !ok || len(segs) == 0 || !g.remake(root, obj, segs) {
			return false
		}
	}
	return len(done) > 0
}

// segment is one step of a field path: a property or map key, or a list
// index.
type segment struct {
	key   string
	index int // -1 for a key
}

// parsePath splits a field path as field.Path prints it
// (spec.ports[0].name, spec.labels[some-key]).
func parsePath(p string) ([]segment, bool) {
	if p == "" || p == "<nil>" {
		return nil, false
	}
	var segs []segment
	for p != "" {
		switch p[0] {
		case '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return nil, false
			}
			inner := p[1:end]
			if i, err := strconv.Atoi(inner); err == nil && i >= 0 {
				segs = append(segs, segment{key: inner, index: i})
			} else {
				segs = append(segs, segment{key: inner, index: -1})
			}
			p = p[end+1:]
		case '.':
			p = p[1:]
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			segs = append(segs, segment{key: p[:end], index: -1})
			p = p[end:]
		}
	}
	return segs, true
}

// remake makes the value at segs of obj again.
func (g *generator) remake(root *structuralschema.Structural, obj map[string]any, segs []segment) bool {
	var cur any = obj
	s := root
	for depth, seg := range segs {
		if (depth == 0 || s.XEmbeddedResource) && typeMeta[seg.key] {
			return false
		}
		last := depth == len(segs)-1
		switch c := cur.(type) {
		case map[string]any:
			next := child(s, seg.key)
			if next == nil {
				return false
			}
			if last {
				v, ok := g.value(next, depth+1)
				if !ok {
					return false
				}
				c[seg.key] = v
				return true
			}
			cur, s = c[seg.key], next
		case []any:
			if seg.index < 0 || seg.index >= len(c) || s.Items == nil {
				return false
			}
			if last {
				v, ok := g.value(s.Items, depth+1)
				if !ok {
					return false
				}
				c[seg.index] = v
				return true
			}
			cur, s = c[seg.index], s.Items
		default:
			return false
		}
	}
	return false
}

// child is the schema of key in an object of schema s: its property, or
// its additionalProperties.
func child(s *structuralschema.Structural, key string) *structuralschema.Structural {
	if p, ok := s.Properties[key]; ok {
		return &p
	}
	if s.AdditionalProperties != nil {
		return s.AdditionalProperties.Structural
	}
	return nil
}
