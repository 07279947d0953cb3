package schema

import (
	"context"
	_ "embed"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	apiextcel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/warning"
)

type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) AddWarning(_, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

//go:embed testdata/cel-things.yaml
var celThings string

// crdWithSchema wraps an openAPIV3Schema (JSON) in a CRD: celThings with
// the schema in place of its {}.
func crdWithSchema(schemaJSON string) string {
	return strings.Replace(celThings, "openAPIV3Schema: {}", "openAPIV3Schema: "+schemaJSON, 1)
}

func obj(spec string) string {
	return `{"apiVersion":"cel.example.com/v1","kind":"Thing","metadata":{"name":"abc","namespace":"default"},"spec":` + spec + `}`
}

// TestCELMatchesKubernetes runs the rules of each case through crdserver's
// CEL driver and through Kubernetes' CRD validator and requires the same
// errors and warnings, on create and on update, with the full budget and
// with small ones.
func TestCELMatchesKubernetes(t *testing.T) {
	spec := func(props, rules string) string {
		return `{"type":"object","properties":{"spec":{"type":"object","properties":` + props + `,"x-kubernetes-validations":` + rules + `}}}`
	}
	cases := []struct {
		name   string
		schema string
		objs   []string // every pair (new, old) is validated, and each alone
	}{
		{"messages, reasons and field paths",
			spec(`{"x":{"type":"integer"},"maxLimit":{"type":"integer"},"name":{"type":"string"},"test":{"type":"object","properties":{"x":{"type":"integer"}}},"m":{"type":"object","additionalProperties":{"type":"integer"}}}`,
				`[{"rule":"self.x <= self.maxLimit","messageExpression":"\"x exceeded max limit of %d\".format([self.maxLimit])","message":"static"},
				  {"rule":"self.x != 7","messageExpression":"self.name","message":"fallback"},
				  {"rule":"self.x != 9","messageExpression":"\"a\\nb\"","message":"newline fallback"},
				  {"rule":"self.x >= 0","reason":"FieldValueForbidden","message":"negative"},
				  {"rule":"self.x != 3","reason":"FieldValueRequired","message":"three"},
				  {"rule":"self.x != 4","reason":"FieldValueDuplicate","message":"four"},
				  {"rule":"self.x != 6","reason":"FieldValueInvalid"},
				  {"rule":"self.test.x <= self.maxLimit","fieldPath":".test.x","message":"test.x too big"},
				  {"rule":"self.x != 5","fieldPath":".m['k']","message":"five"}]`),
			[]string{
				obj(`{"x":1,"maxLimit":10,"name":"n","test":{"x":1}}`),
				obj(`{"x":11,"maxLimit":10,"name":"n","test":{"x":12}}`),
				obj(`{"x":7,"maxLimit":10,"name":"","test":{"x":1}}`),
				obj(`{"x":9,"maxLimit":10,"name":"n","test":{"x":1}}`),
				obj(`{"x":-1,"maxLimit":10,"name":"n","test":{"x":1}}`),
				obj(`{"x":3,"maxLimit":10,"name":"n","test":{"x":1}}`),
				obj(`{"x":4,"maxLimit":10,"name":"n","test":{"x":1}}`),
				obj(`{"x":5,"maxLimit":10,"name":"n","test":{"x":1},"m":{"k":1}}`),
				obj(`{"x":6,"maxLimit":10,"name":"n","test":{"x":1}}`),
			}},
		{"transition rules and optional oldSelf",
			spec(`{"immutable":{"type":"string"},"count":{"type":"integer","x-kubernetes-validations":[{"rule":"self >= oldSelf","message":"count may only grow"}]}}`,
				`[{"rule":"self.immutable == oldSelf.immutable","message":"immutable is immutable"},
				  {"rule":"!oldSelf.hasValue() || self.count != oldSelf.value().count + 100","optionalOldSelf":true,"message":"no jumps of 100"},
				  {"rule":"oldSelf.hasValue() || self.count < 1000","optionalOldSelf":true,"message":"starts small"}]`),
			[]string{
				obj(`{"immutable":"a","count":1}`),
				obj(`{"immutable":"a","count":2}`),
				obj(`{"immutable":"b","count":0}`),
				obj(`{"immutable":"a","count":101}`),
				obj(`{"immutable":"a","count":2000}`),
			}},
		{"map lists, maps and sets",
			spec(`{"items":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["k"],"items":{"type":"object","required":["k"],"properties":{"k":{"type":"string"},"v":{"type":"integer","x-kubernetes-validations":[{"rule":"self >= oldSelf","message":"v may only grow"},{"rule":"self < 100"}]}}}},
			     "byName":{"type":"object","additionalProperties":{"type":"object","properties":{"a":{"type":"integer"}},"x-kubernetes-validations":[{"rule":"self.a > 0","message":"a must be positive"}]}},
			     "tags":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string","x-kubernetes-validations":[{"rule":"self.size() < 5"}]}}}`,
				`[{"rule":"!has(self.items) || self.items.all(i, i.k != 'forbidden')","message":"forbidden key"}]`),
			[]string{
				obj(`{"items":[{"k":"a","v":1},{"k":"b","v":2}],"byName":{"x":{"a":1},"y":{"a":2}},"tags":["a","b"]}`),
				obj(`{"items":[{"k":"b","v":1},{"k":"a","v":200}],"byName":{"x":{"a":0},"y":{"a":-1}},"tags":["a","toolong"]}`),
				obj(`{"items":[{"k":"forbidden","v":1}],"byName":{"x":{"a":0}},"tags":["toolong"]}`),
			}},
		{"resource root, embedded resources and int-or-string",
			`{"type":"object","x-kubernetes-validations":[{"rule":"self.metadata.name.size() < 5","message":"short names"},{"rule":"self.kind == 'Thing'"}],
			  "properties":{"spec":{"type":"object","properties":{
			    "inner":{"type":"object","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true,"x-kubernetes-validations":[{"rule":"self.metadata.name.startsWith('a')","message":"inner names start with a"},{"rule":"self.apiVersion != 'v0'"}]},
			    "port":{"x-kubernetes-int-or-string":true,"x-kubernetes-validations":[{"rule":"self > 1"}]},
			    "list":{"type":"array","maxItems":3,"items":{"type":"integer"},"x-kubernetes-validations":[{"rule":"self[2] == 0"}]}}}}}`,
			[]string{
				obj(`{"inner":{"apiVersion":"v1","kind":"K","metadata":{"name":"abc"}},"port":2,"list":[1,2,0]}`),
				obj(`{"inner":{"apiVersion":"v0","kind":"K","metadata":{"name":"xyz"}},"port":"http","list":[1]}`),
				`{"apiVersion":"cel.example.com/v1","kind":"Thing","metadata":{"name":"toolong"},"spec":{"port":0,"list":[1,2,3]}}`,
			}},
		{"allOf rules",
			spec(`{"a":{"type":"integer"},"b":{"type":"integer","allOf":[{"x-kubernetes-validations":[{"rule":"self != 13","message":"unlucky"}]}]}}`,
				`[{"rule":"self.a < 10"}]`),
			[]string{obj(`{"a":1,"b":1}`), obj(`{"a":11,"b":13}`)},
		},
		{"wide object", "", nil},
	}
	wideCRD, wideObj := wide()
	cases[len(cases)-1].objs = []string{wideObj, strings.Replace(wideObj, `"f03":"v`, `"f03":"x`, 1)}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := wideCRD
			if c.schema != "" {
				doc = crdWithSchema(c.schema)
			}
			v := compile(t, doc)
			if v.val().cel == nil {
				t.Fatal("no CEL rules compiled")
			}
			upstream := apiextcel.NewValidator(v.b().structural, true, celconfig.PerCallLimit)
			run := func(newJSON, oldJSON string, budget int64) {
				t.Helper()
				var old map[string]any
				if oldJSON != "" {
					old = decode(t, oldJSON)
				}
				theirs, ours := &warnings{}, &warnings{}
				n1, o1 := decode(t, newJSON), old
				var opts []apiextcel.Option
				var r ratchet
				if old != nil {
					opts = append(opts, apiextcel.WithRatcheting(common.NewCorrelatedObject(n1, o1, &model.Structural{Structural: v.b().structural})))
					r = ratchet{current: common.NewCorrelatedObject(n1, o1, v.val().celSchema)}
				}
				var oldAny any
				if old != nil {
					oldAny = old
				}
				want, wantLeft := upstream.Validate(warning.WithWarningRecorder(context.Background(), theirs), nil, v.b().structural, n1, oldAny, budget, opts...)
				got, gotLeft := v.val().cel.validate(warning.WithWarningRecorder(context.Background(), ours), nil, n1, oldAny, r, budget)
				if a, b := describe(want), describe(got); a != b {
					t.Errorf("new %s old %s budget %d:\nkubernetes: %s\ncrdserver:  %s", newJSON, oldJSON, budget, a, b)
				}
				if (wantLeft < 0) != (gotLeft < 0) || (budget == celconfig.RuntimeCELCostBudget && wantLeft != gotLeft) {
					t.Errorf("remaining budget: kubernetes %d, crdserver %d", wantLeft, gotLeft)
				}
				sort.Strings(theirs.list)
				sort.Strings(ours.list)
				if a, b := strings.Join(theirs.list, "\n"), strings.Join(ours.list, "\n"); a != b {
					t.Errorf("warnings for new %s old %s:\nkubernetes: %s\ncrdserver:  %s", newJSON, oldJSON, a, b)
				}
			}
			for _, budget := range []int64{celconfig.RuntimeCELCostBudget, 3, 1, 0} {
				for _, n := range c.objs {
					run(n, "", budget)
					for _, o := range c.objs {
						run(n, o, budget)
					}
				}
			}
		})
	}
}

// describe lists errors in a stable order (Kubernetes walks maps in
// random order).
func describe(errs field.ErrorList) string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("[%s] %s", e.Type, e.Error()))
	}
	sort.Strings(out)
	return strings.Join(out, " | ")
}
