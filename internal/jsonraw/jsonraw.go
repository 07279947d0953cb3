package jsonraw

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

var errSyntax = errors.New("malformed JSON object")

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index after the JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				if i < 0 {
					return -1
				}
				i--
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && !isSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// member is one key of an object and the span of its value.
type member struct {
	key        []byte // raw key without quotes (escapes not decoded)
	start, end int    // value span
}

// members scans the object starting at b[i] == '{' and returns its members
// and the index of its closing brace.
func members(b []byte, i int) ([]member, int, error) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return nil, 0, errSyntax
	}
	var out []member
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil, i, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, 0, errSyntax
		}
		ke := skipString(b, i)
		if ke < 0 {
			return nil, 0, errSyntax
		}
		key := b[i+1 : ke-1]
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return nil, 0, errSyntax
		}
		vs := skipSpace(b, i+1)
		ve := skipValue(b, vs)
		if ve < 0 {
			return nil, 0, errSyntax
		}
		out = append(out, member{key: key, start: vs, end: ve})
		i = skipSpace(b, ve)
		if i >= len(b) {
			return nil, 0, errSyntax
		}
		if b[i] == '}' {
			return out, i, nil
		}
		if b[i] != ',' {
			return nil, 0, errSyntax
		}
		i = skipSpace(b, i+1)
	}
}

// find returns the last member named key: encoding/json lets the last of
// duplicate keys win, and so does every edit here.
func find(ms []member, key string) *member {
	for i := len(ms) - 1; i >= 0; i-- {
		if string(ms[i].key) == key {
			return &ms[i]
		}
	}
	return nil
}

func splice(b []byte, start, end int, insert []byte) []byte {
	out := make([]byte, 0, len(b)-(end-start)+len(insert))
	out = append(out, b[:start]...)
	out = append(out, insert...)
	return append(out, b[end:]...)
}

// SetResourceVersion returns obj with metadata.resourceVersion set to rv.
func SetResourceVersion(obj []byte, rv int64) ([]byte, error) {
	top, _, err := members(obj, 0)
	if err != nil {
		return nil, err
	}
	val := strconv.AppendInt([]byte(`"`), rv, 10)
	val = append(val, '"')
	md := find(top, "metadata")
	if md == nil {
		open := skipSpace(obj, 0)
		ins := append([]byte(`"metadata":{"resourceVersion":`), val...)
		ins = append(ins, '}')
		if len(top) > 0 {
			ins = append(ins, ',')
		}
		return splice(obj, open+1, open+1, ins), nil
	}
	if obj[md.start] != '{' {
		return nil, errSyntax
	}
	inner, _, err := members(obj, md.start)
	if err != nil {
		return nil, err
	}
	if m := find(inner, "resourceVersion"); m != nil {
		return splice(obj, m.start, m.end, val), nil
	}
	ins := append([]byte(`"resourceVersion":`), val...)
	if len(inner) > 0 {
		ins = append(ins, ',')
	}
	return splice(obj, md.start+1, md.start+1, ins), nil
}

// String returns the value of a top-level string field and whether it is
// there. Escaped strings are decoded.
func String(obj []byte, key string) (string, bool, error) {
	top, _, err := members(obj, 0)
	if err != nil {
		return "", false, err
	}
	m := find(top, key)
	if m == nil || obj[m.start] != '"' {
		return "", false, nil
	}
	raw := obj[m.start:m.end]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, errSyntax
	}
	return s, true, nil
}

// SetString returns obj with the top-level field key set to the string
// value.
func SetString(obj []byte, key, value string) ([]byte, error) {
	top, _, err := members(obj, 0)
	if err != nil {
		return nil, err
	}
	val, _ := json.Marshal(value)
	if m := find(top, key); m != nil {
		return splice(obj, m.start, m.end, val), nil
	}
	open := skipSpace(obj, 0)
	k, _ := json.Marshal(key)
	ins := append(append(k, ':'), val...)
	if len(top) > 0 {
		ins = append(ins, ',')
	}
	return splice(obj, open+1, open+1, ins), nil
}

// ResourceVersion returns metadata.resourceVersion of an object, 0 if it
// has none or it is not a number.
func ResourceVersion(obj []byte) (int64, error) {
	top, _, err := members(obj, 0)
	if err != nil {
		return 0, err
	}
	md := find(top, "metadata")
	if md == nil || obj[md.start] != '{' {
		return 0, nil
	}
	inner, _, err := members(obj, md.start)
	if err != nil {
		return 0, err
	}
	m := find(inner, "resourceVersion")
	if m == nil || obj[m.start] != '"' {
		return 0, nil
	}
	n, _ := strconv.ParseInt(string(obj[m.start+1:m.end-1]), 10, 64)
	return n, nil
}

// Field returns the encoded value of a top-level field and whether it is
// there.
func Field(obj []byte, key string) ([]byte, bool, error) {
	top, _, err := members(obj, 0)
	if err != nil {
		return nil, false, err
	}
	m := find(top, key)
	if m == nil {
		return nil, false, nil
	}
	return obj[m.start:m.end], true, nil
}

// SetField returns obj with the top-level field key set to the encoded
// value raw (which must be valid JSON).
func SetField(obj []byte, key string, raw []byte) ([]byte, error) {
	top, _, err := members(obj, 0)
	if err != nil {
		return nil, err
	}
	if m := find(top, key); m != nil {
		return splice(obj, m.start, m.end, raw), nil
	}
	open := skipSpace(obj, 0)
	k, _ := json.Marshal(key)
	ins := append(append(k, ':'), raw...)
	if len(top) > 0 {
		ins = append(ins, ',')
	}
	return splice(obj, open+1, open+1, ins), nil
}

// Scalar returns the value at a path of nested objects as Kubernetes field
// selectors see it (strings as they are, numbers and booleans as written),
// and whether there is a string, number or boolean there.
func Scalar(obj []byte, path []string) (string, bool) {
	cur := obj
	for _, key := range path {
		v, ok, err := Field(cur, key)
		if err != nil || !ok {
			return "", false
		}
		cur = v
	}
	if len(cur) == 0 {
		return "", false
	}
	switch c := cur[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(cur, &s) != nil {
			return "", false
		}
		return s, true
	case c == 't' || c == 'f' || c == '-' || (c >= '0' && c <= '9'):
		return string(cur), true
	}
	return "", false
}
