package resource

import (
	"testing"

	"github.com/crdserver/crdserver/internal/store"
)

func TestDecodeItemKeepsVersionsShared(t *testing.T) {
	obj := func(name, owners string) []byte {
		return []byte(`{"apiVersion":"g/v1beta1","kind":"K","metadata":{"name":"` + name + `",` + owners +
			`"managedFields":[{"manager":"tool","operation":"Apply","apiVersion":"g/v1beta1","fieldsType":"FieldsV1","fieldsV1":{}},` +
			`{"manager":"ctl","operation":"Update","apiVersion":"g/v1","fieldsType":"FieldsV1","fieldsV1":{}},` +
			`{"manager":"tool","operation":"Update","apiVersion":"g/v1beta1","fieldsType":"FieldsV1","fieldsV1":{}}]},"spec":{}}`)
	}
	a, err := DecodeItem("/k/a", obj("a", ""), 5)
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodeItem("/k/b", obj("b", `"ownerReferences":[{"apiVersion":"g/v1","kind":"K","name":"a","uid":"1"}],`), 6)
	if err != nil {
		t.Fatal(err)
	}
	va, vb := VersionsOf(a), VersionsOf(b)
	if va == nil || va != vb {
		t.Fatalf("objects alike do not share their Versions: %p %p", va, vb)
	}
	want := []ManagedAt{{"ctl", "g/v1"}, {"tool", "g/v1beta1"}}
	if va.APIVersion != "g/v1beta1" || len(va.Managed) != 2 || va.Managed[0] != want[0] || va.Managed[1] != want[1] {
		t.Errorf("Versions: %+v", va)
	}
	if l := LifecycleOf(b); len(l.Owners) != 1 || l.Versions != vb {
		t.Errorf("b's Lifecycle: %+v", l)
	}
	c, err := DecodeItem("/k/c", []byte(`{"apiVersion":"g/v1","kind":"K","metadata":{"name":"c"}}`), 7)
	if err != nil {
		t.Fatal(err)
	}
	if vc := VersionsOf(c); vc == nil || vc.APIVersion != "g/v1" || len(vc.Managed) != 0 || vc == va {
		t.Errorf("c's Versions: %+v", vc)
	}
	// An item DecodeItem did not make: read from its JSON, shared alike.
	if vd := VersionsOf(&store.Item{Key: "/k/d", Raw: obj("d", "")}); vd != va {
		t.Errorf("an item without kept Versions: %+v, want %+v", vd, va)
	}
}

// BenchmarkDecodeItem: what the cache pays to index a written object (a
// Widget with two managedFields entries).
func BenchmarkDecodeItem(b *testing.B) {
	raw := []byte(`{"apiVersion":"peer.example.com/v1","kind":"Widget","metadata":{"name":"w-1","namespace":"default","uid":"6f1c3f0e-5d7e-4a8c-9a51-0d2f3c4b5a69",` +
		`"labels":{"bench":"crdbench"},"creationTimestamp":"2026-12-07T21:00:00Z","generation":1,` +
		`"managedFields":[{"manager":"crdbench","operation":"Update","apiVersion":"peer.example.com/v1","time":"2026-12-07T21:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:bench":{}}},"f:spec":{".":{},"f:color":{},"f:size":{},"f:tags":{}}}},` +
		`{"manager":"kubectl","operation":"Apply","apiVersion":"peer.example.com/v1beta1","time":"2026-12-07T21:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:size":{}}}}]},` +
		`"spec":{"color":"red","size":7,"tags":["x","y"]}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeItem("/registry/peer.example.com/widgets/default/w-1", raw, 42); err != nil {
			b.Fatal(err)
		}
	}
}
