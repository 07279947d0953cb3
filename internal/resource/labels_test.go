package resource

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"testing"
)

// TestItemsShareLabelSets: objects with the same labels get one map in
// the cache, equal to their labels; other labels, another map; and the
// table stays within its bound whatever the objects.
func TestItemsShareLabelSets(t *testing.T) {
	item := func(name string, labels map[string]string) map[string]string {
		t.Helper()
		obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "ns", "labels": labels}}
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		it, err := DecodeItem("/registry/configmaps/ns/"+name, b, 7)
		if err != nil {
			t.Fatal(err)
		}
		if it.Name != name || it.Namespace != "ns" {
			t.Fatalf("item %q/%q, want ns/%s", it.Namespace, it.Name, name)
		}
		return it.Labels
	}
	a := item("a", map[string]string{"app": "web", "team": "x"})
	b := item("b", map[string]string{"team": "x", "app": "web"})
	c := item("c", map[string]string{"app": "web", "team": "y"})
	if !reflect.DeepEqual(a, map[string]string{"app": "web", "team": "x"}) || !reflect.DeepEqual(c, map[string]string{"app": "web", "team": "y"}) {
		t.Fatalf("labels %v, %v", a, c)
	}
	if reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer() {
		t.Error("two objects with the same labels have a map each")
	}
	if reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(c).UnsafePointer() {
		t.Error("objects with other labels share a map")
	}
	// A key and value that would run together without the separator.
	if d := item("d", map[string]string{"ab": "c"}); reflect.ValueOf(d).UnsafePointer() == reflect.ValueOf(item("e", map[string]string{"a": "bc"})).UnsafePointer() {
		t.Error("ab=c and a=bc share a map")
	}
	if item("f", nil) != nil || item("g", map[string]string{}) != nil {
		t.Error("no labels: want a nil map")
	}
	for i := range maxLabelSets + 10 {
		want := map[string]string{"i": fmt.Sprint(i)}
		if got := sharedLabels(maps.Clone(want)); !reflect.DeepEqual(got, want) {
			t.Fatalf("set %d: %v", i, got)
		}
	}
	labelSets.Lock()
	n := len(labelSets.m)
	labelSets.Unlock()
	if n > maxLabelSets {
		t.Errorf("%d label sets kept, bound %d", n, maxLabelSets)
	}
}
