package roundtrip

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"sort"
	"strconv"
)

// ignored are the paths Compare skips: what a server sets on a write, and
// the apiVersion a conversion changes.
var ignored = map[string]bool{
	"apiVersion":                 true,
	"metadata.resourceVersion":   true,
	"metadata.uid":               true,
	"metadata.creationTimestamp": true,
	"metadata.generation":        true,
	"metadata.managedFields":     true,
	"metadata.selfLink":          true,
}

// Compare returns every value of original that after lost (Lost) or has
// otherwise (Changed, also for a value after has and original had not),
// with its path, Original and After set. Maps are compared key by key,
// lists item by item; numbers by value (7 and 7.0 are equal).
func Compare(original, after map[string]any, opts Options) []Loss {
	c := &comparer{strict: opts.Strict}
	c.fields("", original, after)
	return c.out
}

type comparer struct {
	strict bool
	out    []Loss
}

var identifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$-]*$`)

// child is the path of key in the map at path.
func child(path, key string) string {
	if identifier.MatchString(key) {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// lost records a value at path that came back absent.
func (c *comparer) lost(path string, original any) {
	c.out = append(c.out, Loss{Kind: Lost, Path: path, Original: encode(original)})
}

// appeared records a value at path that was absent and came back.
func (c *comparer) appeared(path string, after any) {
	c.out = append(c.out, Loss{Kind: Changed, Path: path, After: encode(after)})
}

// changed records a value at path that came back different.
func (c *comparer) changed(path string, original, after any) {
	c.out = append(c.out, Loss{Kind: Changed, Path: path, Original: encode(original), After: encode(after)})
}

// encode is v as compact JSON, with <, > and & as they are.
func encode(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(strconv.Quote(err.Error()))
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

func (c *comparer) fields(path string, a, b map[string]any) {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := child(path, k)
		if ignored[p] {
			continue
		}
		av, inA := a[k]
		bv, inB := b[k]
		switch {
		case inA && inB:
			c.value(p, av, bv)
		case inA:
			if c.strict || !empty(av) {
				c.lost(p, av)
			}
		default:
			if c.strict || !empty(bv) {
				c.appeared(p, bv)
			}
		}
	}
}

func (c *comparer) value(path string, a, b any) {
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			c.fields(path, av, bv)
			return
		}
	case []any:
		if bv, ok := b.([]any); ok {
			for i := range max(len(av), len(bv)) {
				p := path + "[" + strconv.Itoa(i) + "]"
				switch {
				case i < len(av) && i < len(bv):
					c.value(p, av[i], bv[i])
				case i < len(av):
					c.lost(p, av[i])
				default:
					c.appeared(p, bv[i])
				}
			}
			return
		}
	}
	if !scalarEqual(a, b) {
		c.changed(path, a, b)
	}
}

// empty reports the values a Go field with omitempty leaves out, and
// maps of nothing else (a struct of such fields).
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case map[string]any:
		for _, x := range v {
			if !empty(x) {
				return false
			}
		}
		return true
	case []any:
		return len(v) == 0
	}
	if f, ok := number(v); ok {
		return f == 0
	}
	return false
}

// scalarEqual compares two JSON values that are not both maps or both
// lists.
func scalarEqual(a, b any) bool {
	ai, aInt := a.(int64)
	bi, bInt := b.(int64)
	if aInt && bInt {
		return ai == bi
	}
	af, aNum := number(a)
	bf, bNum := number(b)
	if aNum || bNum {
		if !aNum || !bNum || af != bf {
			return false
		}
		// An int64 beyond 2⁵³ and the float64 nearest to it are not equal.
		switch {
		case aInt:
			return bf < math.MaxInt64 && int64(bf) == ai
		case bInt:
			return af < math.MaxInt64 && int64(af) == bi
		}
		return true
	}
	switch a.(type) {
	case map[string]any, []any:
		return false
	}
	switch b.(type) {
	case map[string]any, []any:
		return false
	}
	return a == b
}

// number is a JSON number as a float64.
func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case int:
		return float64(v), true
	case int32:
		return float64(v), true
	case float32:
		return float64(v), true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}
