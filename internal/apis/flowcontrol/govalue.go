package flowcontrol

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// goValue renders a value in JSON as Kubernetes' internal flowcontrol
// types render in validation messages: fields under their Go names, in
// declaration order, pointers to numbers as the numbers.
type goValue struct{ v any }

func (g goValue) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := writeGo(&b, reflect.ValueOf(g.v)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeGo(b *bytes.Buffer, v reflect.Value) error {
	switch v.Kind() {
	case reflect.Invalid:
		b.WriteString("null")
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		return writeGo(b, v.Elem())
	case reflect.Struct:
		b.WriteByte('{')
		t := v.Type()
		first := true
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			name, _ := json.Marshal(f.Name)
			b.Write(name)
			b.WriteByte(':')
			if err := writeGo(b, v.Field(i)); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case reflect.Slice:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		b.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeGo(b, v.Index(i)); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		out, err := json.Marshal(v.Interface())
		if err != nil {
			return err
		}
		b.Write(out)
	}
	return nil
}
