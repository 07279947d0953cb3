package jsonraw

import (
	"reflect"
	"strings"
	"testing"

	kjson "sigs.k8s.io/json"
)

// sameAsKubernetes checks that, when Decode takes a document, Kubernetes'
// strict decoder takes it too, without strict errors, to the same value.
func sameAsKubernetes(t *testing.T, doc []byte) bool {
	t.Helper()
	got, ok := Decode(doc)
	if !ok {
		return false
	}
	var want map[string]any
	strict, err := kjson.UnmarshalStrict(doc, &want, kjson.DisallowDuplicateFields)
	if err != nil || len(strict) != 0 {
		t.Fatalf("Decode took %q, Kubernetes says %v %v", doc, err, strict)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nDecode     %#v\nKubernetes %#v", doc, got, want)
	}
	return true
}

var decodeCases = []struct {
	doc  string
	fast bool
}{
	{`{}`, true},
	{` {"a":1, "b" : -2.5e3 ,"c":[true,false,null,"x",{}],"d":{"e":[]}} `, true},
	{`{"big":9223372036854775807,"bigger":9223372036854775808,"exp":1e3,"neg":-0,"frac":0.1}`, true},
	{`{"s":"tab\tquote\" slash\/ back\\ nl\n \u00e9 \u4e2d","u":"é中🙂"}`, true},
	{`{"a":1,"a":2}`, false},        // duplicate: the full decoder reports it
	{`{"a":"\ud83d\ude42"}`, false}, // surrogate pair
	{"{\"a\":\"\xff\"}", false},     // invalid UTF-8
	{`{"a":1e999}`, false},          // out of range
	{`{"a":01}`, false},             // malformed from here on
	{`{"a":1.}`, false},
	{`{"a":-}`, false},
	{`{"a":tru}`, false},
	{`{"a":truex}`, false},
	{`{"a":1,}`, false},
	{`{"a" 1}`, false},
	{`{"a":[1,]}`, false},
	{`{"a":"x`, false},
	{"{\"a\":\"\x01\"}", false},
	{`{"a":"\q"}`, false},
	{`{} x`, false},
	{`[1]`, false},
	{`null`, false},
	{``, false},
}

func TestDecode(t *testing.T) {
	for _, c := range decodeCases {
		if got := sameAsKubernetes(t, []byte(c.doc)); got != c.fast {
			t.Errorf("%q: decoded fast %v, want %v", c.doc, got, c.fast)
		}
	}
	deep := strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1)
	if _, ok := Decode([]byte(deep)); ok {
		t.Error("nesting beyond encoding/json's limit was decoded")
	}
}

func FuzzDecode(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c.doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		sameAsKubernetes(t, doc)
	})
}
