package jsonraw

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("result is not JSON: %v: %s", err, b)
	}
	return m
}

func TestSetResourceVersion(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{}`, `{"metadata":{"resourceVersion":"7"}}`},
		{`{"kind":"X"}`, `{"kind":"X","metadata":{"resourceVersion":"7"}}`},
		{`{"metadata":{}}`, `{"metadata":{"resourceVersion":"7"}}`},
		{`{"metadata":{"name":"a"}}`, `{"metadata":{"name":"a","resourceVersion":"7"}}`},
		{`{"metadata":{"name":"a","resourceVersion":"3"},"spec":{"metadata":{"x":1}}}`, `{"metadata":{"name":"a","resourceVersion":"7"},"spec":{"metadata":{"x":1}}}`},
		{` { "a" : [1, {"metadata":{}}, "}"] , "metadata" : { "resourceVersion" : "1" } } `, `{"a":[1,{"metadata":{}},"}"],"metadata":{"resourceVersion":"7"}}`},
		{`{"s":"a\"metadata\":{","metadata":{"labels":{"resourceVersion":"x"}}}`, `{"s":"a\"metadata\":{","metadata":{"labels":{"resourceVersion":"x"},"resourceVersion":"7"}}`},
	}
	for _, c := range cases {
		got, err := SetResourceVersion([]byte(c.in), 7)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if !reflect.DeepEqual(decode(t, got), decode(t, []byte(c.want))) {
			t.Errorf("%s: got %s, want %s", c.in, got, c.want)
		}
	}
}

func TestMalformed(t *testing.T) {
	for _, in := range []string{``, `[]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"metadata":3}`, `{"a":"x}`, `{"metadata":{"a":[}}`} {
		if out, err := SetResourceVersion([]byte(in), 1); err == nil {
			// Accept only when the output is still valid JSON.
			var m map[string]any
			if json.Unmarshal(out, &m) != nil {
				t.Errorf("%q: no error and invalid output %q", in, out)
			}
		}
	}
}

func TestStrings(t *testing.T) {
	obj := []byte(`{"apiVersion":"a\/b","kind":"K","n":1}`)
	if v, ok, err := String(obj, "apiVersion"); err != nil || !ok || v != "a/b" {
		t.Fatalf("String = %q %v %v", v, ok, err)
	}
	if _, ok, _ := String(obj, "n"); ok {
		t.Fatal("a number is not a string")
	}
	out, err := SetString(obj, "apiVersion", "g/v2")
	if err != nil {
		t.Fatal(err)
	}
	if m := decode(t, out); m["apiVersion"] != "g/v2" || m["kind"] != "K" {
		t.Fatalf("SetString: %s", out)
	}
	out, _ = SetString([]byte(`{}`), "kind", "K")
	if string(out) != `{"kind":"K"}` {
		t.Fatalf("SetString on empty: %s", out)
	}
}

func FuzzSetResourceVersion(f *testing.F) {
	for _, s := range []string{`{}`, `{"metadata":{"name":"a"}}`, `{"a":[1,{"b":"}"}],"metadata":{"resourceVersion":"2"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var before map[string]any
		valid := json.Unmarshal(in, &before) == nil
		out, err := SetResourceVersion(in, 42)
		if err != nil {
			return
		}
		var after map[string]any
		if json.Unmarshal(out, &after) != nil {
			if valid {
				t.Fatalf("valid input %q gave invalid output %q", in, out)
			}
			return
		}
		if !valid {
			return
		}
		md, _ := after["metadata"].(map[string]any)
		if md == nil || md["resourceVersion"] != "42" {
			t.Fatalf("resourceVersion not set: %q -> %q", in, out)
		}
	})
}

func TestFields(t *testing.T) {
	obj := []byte(`{"a":{"b":[1,2]},"c":"d"}`)
	if v, ok, err := Field(obj, "a"); err != nil || !ok || string(v) != `{"b":[1,2]}` {
		t.Fatalf("Field: %s %v %v", v, ok, err)
	}
	if _, ok, _ := Field(obj, "x"); ok {
		t.Fatal("missing field found")
	}
	out, err := SetField(obj, "a", []byte(`{"z":true}`))
	if err != nil || string(out) != `{"a":{"z":true},"c":"d"}` {
		t.Fatalf("SetField replace: %s %v", out, err)
	}
	out, _ = SetField(obj, "m", []byte(`1`))
	if m := decode(t, out); m["m"] != float64(1) || m["c"] != "d" {
		t.Fatalf("SetField add: %s", out)
	}
	if rv, err := ResourceVersion([]byte(`{"metadata":{"resourceVersion":"42"}}`)); err != nil || rv != 42 {
		t.Fatalf("ResourceVersion: %d %v", rv, err)
	}
}

func TestScalar(t *testing.T) {
	obj := []byte(`{"spec":{"color":"blue","n":3,"ok":true,"o":{},"s":"a\"b"}}`)
	for path, want := range map[string]string{"spec.color": "blue", "spec.n": "3", "spec.ok": "true", "spec.s": `a"b`} {
		if got, ok := Scalar(obj, strings.Split(path, ".")); !ok || got != want {
			t.Errorf("%s: %q %v", path, got, ok)
		}
	}
	for _, path := range []string{"spec.o", "spec.missing", "nope.x"} {
		if _, ok := Scalar(obj, strings.Split(path, ".")); ok {
			t.Errorf("%s found", path)
		}
	}
}
