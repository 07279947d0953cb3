package resource

import "testing"

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
}
