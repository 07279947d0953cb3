package conversion

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	rulesv1alpha1 "github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
)

func mustRules(t *testing.T, spec string, versions ...string) *Rules {
	t.Helper()
	var rs rulesv1alpha1.RuleSet
	if err := yaml.UnmarshalStrict([]byte(spec), &rs); err != nil {
		t.Fatal(err)
	}
	r, errs := NewRules(rs, "example.com", versions)
	if errs != nil {
		t.Fatal(errs.ToAggregate())
	}
	return r
}

func convertJSON(t *testing.T, r *Rules, in, to string) map[string]any {
	t.Helper()
	res, err := r.Convert(context.Background(), [][]byte{[]byte(in)}, to)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(res.Objects[0], &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func jsonOf(t *testing.T, s string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The documentation's CronTab: v1beta1's hostPort is v1's host and port.
func TestRulesCronTab(t *testing.T) {
	r := mustRules(t, `
hub: v1
versions:
- name: v1beta1
  toHub:
  - split: {from: .hostPort, to: [.host, .port], separator: ":"}
`, "v1beta1", "v1")
	beta := `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"c","resourceVersion":"7"},"hostPort":"localhost:7070","spec":{"image":"i"}}`
	v1 := convertJSON(t, r, beta, "example.com/v1")
	want := jsonOf(t, `{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"c","resourceVersion":"7"},"host":"localhost","port":"7070","spec":{"image":"i"}}`)
	if !reflect.DeepEqual(v1, want) {
		t.Fatalf("to v1: %v", v1)
	}
	back, _ := json.Marshal(v1)
	if got := convertJSON(t, r, string(back), "example.com/v1beta1"); !reflect.DeepEqual(got, jsonOf(t, beta)) {
		t.Fatalf("back: %v", got)
	}
	// Objects already in the wanted version come back unchanged.
	res, err := r.Convert(context.Background(), [][]byte{[]byte(beta)}, "example.com/v1beta1")
	if err != nil || res.Changed != nil {
		t.Fatalf("same version: %v %v", res, err)
	}
}

// Every named rule and its derived inverse; CEL with an explicit fromHub;
// numbers stay exact.
func TestRulesEveryKind(t *testing.T) {
	r := mustRules(t, `
hub: v2
versions:
- name: v1
  toHub:
  - rename: {from: .spec.size, to: .spec.replicas}
  - mapValues: {path: .spec.mode, values: {fast: Fast, slow: Slow}}
  - wrap: {path: .spec.image, field: name}
  - default: {path: .spec.tier, value: "gold"}
  - annotation: {path: .spec.owner, key: example.com/owner}
- name: v3
  toHub:
  - cel: {path: .spec.replicas, expression: "self.spec.count * 2"}
  - remove: {path: .spec.count}
  fromHub:
  - cel: {path: .spec.count, expression: "self.spec.replicas / 2"}
  - remove: {path: .spec.replicas}
`, "v1", "v2", "v3")
	v1 := `{"apiVersion":"example.com/v1","kind":"K","metadata":{"name":"k","annotations":{"example.com/owner":"\"ann\""}},"spec":{"size":9007199254740993,"mode":"fast","image":"nginx"}}`
	v2 := convertJSON(t, r, v1, "example.com/v2")
	spec := v2["spec"].(map[string]any)
	if spec["mode"] != "Fast" || !reflect.DeepEqual(spec["image"], map[string]any{"name": "nginx"}) || spec["tier"] != "gold" || spec["owner"] != "ann" {
		t.Fatalf("to v2: %v", v2)
	}
	if _, ok := v2["metadata"].(map[string]any)["annotations"]; ok {
		t.Fatalf("the annotation stayed: %v", v2)
	}
	raw, _ := r.Convert(context.Background(), [][]byte{[]byte(v1)}, "example.com/v2")
	if !strings.Contains(string(raw.Objects[0]), `"replicas":9007199254740993`) {
		t.Fatalf("a large integer lost its exactness: %s", raw.Objects[0])
	}
	back, _ := json.Marshal(v2)
	if got := convertJSON(t, r, string(back), "example.com/v1"); !reflect.DeepEqual(got, jsonOf(t, v1)) {
		t.Fatalf("back to v1: %v\nwant %v", got, jsonOf(t, v1))
	}
	// v1 → v3 goes through the hub.
	v3 := convertJSON(t, r, v1, "example.com/v3")
	if v3["spec"].(map[string]any)["count"] != float64(9007199254740993/2) {
		t.Fatalf("to v3: %v", v3)
	}
}

func TestRulesRefused(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{`hub: v9
versions: []`, `spec.hub: Unsupported value: "v9"`},
		{`hub: v2
versions:
- name: v1
  toHub:
  - cel: {path: .spec.a, expression: "self.spec.b"}`, `spec.versions[0].fromHub: Required value: toHub[0] has no inverse: give fromHub`},
		{`hub: v2
versions:
- name: v1
  toHub:
  - cel: {path: .spec.a, expression: "self.spec.b +"}
  fromHub: []`, `spec.versions[0].toHub[0].cel.expression: Invalid value`},
		{`hub: v2
versions:
- name: v1
  toHub:
  - rename: {from: .kind, to: .spec.kind}`, `spec.versions[0].toHub[0].rename.from: Invalid value: ".kind": may not name apiVersion, kind`},
		{`hub: v2
versions:
- name: v1
  toHub:
  - {}`, `spec.versions[0].toHub[0]: Required value: one rule`},
		{`hub: v2
versions: []`, `spec.versions: Required value: version "v1" has no rules`},
	} {
		var rs rulesv1alpha1.RuleSet
		if err := yaml.UnmarshalStrict([]byte(c.spec), &rs); err != nil {
			t.Fatal(err)
		}
		_, errs := NewRules(rs, "example.com", []string{"v1", "v2"})
		if errs == nil || !strings.Contains(errs.ToAggregate().Error(), c.want) {
			t.Errorf("%s\ngot %v, want %q", c.spec, errs.ToAggregate(), c.want)
		}
	}
}
