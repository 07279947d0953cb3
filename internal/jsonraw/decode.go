package jsonraw

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDepth is the nesting encoding/json accepts.
const maxDepth = 10000

// Decode decodes a JSON object into the values Kubernetes' strict decoder
// (sigs.k8s.io/json, preserving integers) produces: maps, slices, strings,
// bool, nil, int64 for integers that fit and float64 for other numbers.
// It is quick: the input is copied once and strings without escapes are
// slices of that copy. It answers false, and the caller decodes with the
// full decoder (which words the errors and reports duplicate fields), for
// anything it does not take the simple way: malformed JSON, a duplicate
// key, a surrogate escape, invalid UTF-8, a number out of range, a value
// that is not an object.
func Decode(b []byte) (map[string]any, bool) {
	d := decoder{s: string(b)}
	d.space()
	if d.i >= len(d.s) || d.s[d.i] != '{' {
		return nil, false
	}
	m, ok := d.object(1)
	if !ok {
		return nil, false
	}
	d.space()
	return m, d.i == len(d.s)
}

type decoder struct {
	s string
	i int
}

func (d *decoder) space() {
	for d.i < len(d.s) && isSpace(d.s[d.i]) {
		d.i++
	}
}

func (d *decoder) value(depth int) (any, bool) {
	d.space()
	if d.i >= len(d.s) {
		return nil, false
	}
	switch c := d.s[d.i]; {
	case c == '{':
		m, ok := d.object(depth + 1)
		return m, ok
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		return d.str()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, false
}

func (d *decoder) literal(word string) bool {
	if !strings.HasPrefix(d.s[d.i:], word) {
		return false
	}
	d.i += len(word)
	return true
}

func (d *decoder) object(depth int) (map[string]any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	d.i++ // {
	m := map[string]any{}
	d.space()
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		return m, true
	}
	for {
		d.space()
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			return nil, false
		}
		key, ok := d.str()
		if !ok {
			return nil, false
		}
		d.space()
		if d.i >= len(d.s) || d.s[d.i] != ':' {
			return nil, false
		}
		d.i++
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		if _, dup := m[key]; dup {
			return nil, false
		}
		m[key] = v
		d.space()
		if d.i >= len(d.s) {
			return nil, false
		}
		switch d.s[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return m, true
		default:
			return nil, false
		}
	}
}

func (d *decoder) array(depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	d.i++ // [
	l := []any{}
	d.space()
	if d.i < len(d.s) && d.s[d.i] == ']' {
		d.i++
		return l, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		l = append(l, v)
		d.space()
		if d.i >= len(d.s) {
			return nil, false
		}
		switch d.s[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return l, true
		default:
			return nil, false
		}
	}
}

// str reads a string; d.s[d.i] is its opening quote.
func (d *decoder) str() (string, bool) {
	start := d.i + 1
	escaped, high := false, false
	i := start
	for ; i < len(d.s); i++ {
		c := d.s[i]
		switch {
		case c == '"':
			raw := d.s[start:i]
			d.i = i + 1
			if high && !utf8.ValidString(raw) {
				return "", false
			}
			if escaped {
				return unescape(raw)
			}
			return raw, true
		case c == '\\':
			escaped = true
			i++ // the escaped byte is never the closing quote
		case c < 0x20:
			return "", false
		case c >= 0x80:
			high = true
		}
	}
	return "", false
}

func unescape(raw string) (string, bool) {
	var b strings.Builder
	b.Grow(len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(raw) {
			return "", false
		}
		switch raw[i] {
		case '"', '\\', '/':
			b.WriteByte(raw[i])
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			if i+4 >= len(raw) {
				return "", false
			}
			r, err := strconv.ParseUint(raw[i+1:i+5], 16, 32)
			if err != nil || (r >= 0xD800 && r < 0xE000) {
				return "", false // surrogates: the full decoder pairs them
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			return "", false
		}
	}
	return b.String(), true
}

func (d *decoder) number() (any, bool) {
	start := d.i
	i := d.i
	if d.s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d.s) && d.s[i] >= '0' && d.s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(d.s) && d.s[i] == '0' {
		i++
	} else if digits() == 0 {
		return nil, false
	}
	float := false
	if i < len(d.s) && d.s[i] == '.' {
		float = true
		i++
		if digits() == 0 {
			return nil, false
		}
	}
	if i < len(d.s) && (d.s[i] == 'e' || d.s[i] == 'E') {
		i++
		if i < len(d.s) && (d.s[i] == '+' || d.s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	d.i = i
	lit := d.s[start:i]
	if !float {
		if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return n, true
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return nil, false
	}
	return f, true
}
