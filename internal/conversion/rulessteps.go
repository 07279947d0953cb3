package conversion

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// The steps of declarative rules: what each compiled rule does to a
// decoded object, and its inverse. Paths are the parsed field paths of
// the rules (parsePath); get, set and del read and write them.

// step is a compiled rule.
type step interface {
	apply(obj map[string]any) error
	// inverse is the step that undoes it, or nil when there is none.
	inverse() step
}

// get, set and del read and write a path of nested objects.
func get(obj map[string]any, path []string) (any, bool) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func set(obj map[string]any, path []string, v any) error {
	m := obj
	for i, p := range path[:len(path)-1] {
		next, ok := m[p]
		if !ok || next == nil {
			n := map[string]any{}
			m[p] = n
			m = n
			continue
		}
		if m, ok = next.(map[string]any); !ok {
			return fmt.Errorf(".%s is not an object", strings.Join(path[:i+1], "."))
		}
	}
	m[path[len(path)-1]] = v
	return nil
}

func del(obj map[string]any, path []string) {
	parent, ok := get(obj, path[:len(path)-1])
	if len(path) == 1 {
		parent, ok = obj, true
	}
	if m, isMap := parent.(map[string]any); ok && isMap {
		delete(m, path[len(path)-1])
	}
}

type renameStep struct{ from, to []string }

func (s renameStep) apply(obj map[string]any) error {
	v, ok := get(obj, s.from)
	if !ok {
		return nil
	}
	del(obj, s.from)
	return set(obj, s.to, v)
}

func (s renameStep) inverse() step { return renameStep{from: s.to, to: s.from} }

type mapStep struct {
	path   []string
	values map[string]string
}

func (s mapStep) apply(obj map[string]any) error {
	v, ok := get(obj, s.path)
	str, isStr := v.(string)
	if !ok || !isStr {
		return nil
	}
	if to, ok := s.values[str]; ok {
		return set(obj, s.path, to)
	}
	return nil
}

// inverse maps the images back; of several values with one image, the
// first in sorted order is taken (the round-trip check reports the others
// as lost).
func (s mapStep) inverse() step {
	keys := make([]string, 0, len(s.values))
	for k := range s.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	inv := map[string]string{}
	for _, k := range keys {
		if _, taken := inv[s.values[k]]; !taken {
			inv[s.values[k]] = k
		}
	}
	return mapStep{path: s.path, values: inv}
}

type splitStep struct {
	from []string
	to   [][]string
	sep  string
}

func (s splitStep) apply(obj map[string]any) error {
	v, ok := get(obj, s.from)
	str, isStr := v.(string)
	if !ok || !isStr {
		return nil
	}
	del(obj, s.from)
	parts := strings.SplitN(str, s.sep, len(s.to))
	for i, p := range parts {
		if err := set(obj, s.to[i], p); err != nil {
			return err
		}
	}
	return nil
}

func (s splitStep) inverse() step { return joinStep{s} }

// joinStep joins the fields of a splitStep's to into its from.
type joinStep struct{ splitStep }

func (s joinStep) apply(obj map[string]any) error {
	var parts []string
	found := false
	for _, p := range s.to {
		v, ok := get(obj, p)
		if !ok {
			continue
		}
		str, isStr := v.(string)
		if !isStr {
			return fmt.Errorf(".%s is not a string", strings.Join(p, "."))
		}
		parts = append(parts, str)
		found = true
		del(obj, p)
	}
	if !found {
		return nil
	}
	return set(obj, s.from, strings.Join(parts, s.sep))
}

func (s joinStep) inverse() step { return s.splitStep }

type wrapStep struct {
	path  []string
	field string
}

func (s wrapStep) apply(obj map[string]any) error {
	v, ok := get(obj, s.path)
	if !ok {
		return nil
	}
	return set(obj, s.path, map[string]any{s.field: v})
}

func (s wrapStep) inverse() step { return unwrapStep{s} }

type unwrapStep struct{ wrapStep }

func (s unwrapStep) apply(obj map[string]any) error {
	v, ok := get(obj, s.path)
	m, isMap := v.(map[string]any)
	if !ok || !isMap {
		return nil
	}
	inner, ok := m[s.field]
	if !ok {
		del(obj, s.path)
		return nil
	}
	return set(obj, s.path, inner)
}

func (s unwrapStep) inverse() step { return s.wrapStep }

type defaultStep struct {
	path  []string
	value any
}

func (s defaultStep) apply(obj map[string]any) error {
	if _, ok := get(obj, s.path); ok {
		return nil
	}
	return set(obj, s.path, deepCopyJSON(s.value))
}

func (s defaultStep) inverse() step { return removeStep(s) }

type removeStep struct {
	path  []string
	value any
}

func (s removeStep) apply(obj map[string]any) error {
	del(obj, s.path)
	return nil
}

func (s removeStep) inverse() step { return nil }

// fromAnnotationStep restores a field from where toAnnotationStep kept it.
type fromAnnotationStep struct {
	path []string
	key  string
}

func (s fromAnnotationStep) apply(obj map[string]any) error {
	ann, _ := get(obj, []string{"metadata", "annotations"})
	m, _ := ann.(map[string]any)
	raw, ok := m[s.key].(string)
	if !ok {
		return nil
	}
	delete(m, s.key)
	if len(m) == 0 {
		del(obj, []string{"metadata", "annotations"})
	}
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return fmt.Errorf("annotation %s does not hold a JSON value: %v", s.key, err)
	}
	return set(obj, s.path, v)
}

func (s fromAnnotationStep) inverse() step { return toAnnotationStep(s) }

type toAnnotationStep struct {
	path []string
	key  string
}

func (s toAnnotationStep) apply(obj map[string]any) error {
	v, ok := get(obj, s.path)
	if !ok {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	del(obj, s.path)
	return set(obj, []string{"metadata", "annotations", s.key}, string(b))
}

func (s toAnnotationStep) inverse() step { return fromAnnotationStep(s) }

func deepCopyJSON(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = deepCopyJSON(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = deepCopyJSON(x)
		}
		return out
	}
	return v
}
