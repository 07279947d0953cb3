package openapi

import (
	"encoding/json"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/crdserver/crdserver/internal/fixtures"
)

// The v2 document put together from encoded pieces is the document
// MergeSpecs makes of the spec objects (the oracle), for the corpus's
// CRDs and the CronTab, and the pieces take the encoded way.
func TestV2AsMergeSpecs(t *testing.T) {
	crds, _, err := fixtures.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	crds = append(crds, cronTab(t, "", "1"), cronTab(t, "coordination.k8s.io", "2"))
	p := New(builtins(t), nil)
	base, _, err := p.builtinV2.Get()
	if err != nil {
		t.Fatal(err)
	}
	var pieces [][]byte
	for _, crd := range crds {
		whole := func() (*apiextensionsv1.CustomResourceDefinition, error) { return crd, nil }
		versions := map[string]func() (*apiextensionsv1.CustomResourceDefinition, error){}
		for _, v := range crd.Spec.Versions {
			versions[v.Name] = whole
		}
		piece, err := newCRDDocs(crd, whole, versions, nil).v2.Get()
		if err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, piece)
	}
	static, err := base.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := mergeV2JSON(static, pieces)
	if err != nil || !ok {
		t.Fatalf("merged as encoded: %v, %v", ok, err)
	}
	want, err := mergeV2Specs(base, pieces)
	if err != nil {
		t.Fatal(err)
	}
	var g, w map[string]any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		for k := range w {
			if !reflect.DeepEqual(g[k], w[k]) {
				t.Errorf("%s differs", k)
			}
		}
	}
	// A CRD definition that differs from a built-in one of its name is
	// left to MergeSpecs, which renames it.
	odd := &spec.Swagger{SwaggerProps: spec.SwaggerProps{Swagger: "2.0", Definitions: spec.Definitions{
		"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {SchemaProps: spec.SchemaProps{Description: "another"}},
	}, Paths: &spec.Paths{Paths: map[string]spec.PathItem{"/apis/odd.example.com/v1/odds": {}}}}}
	packed, err := packPiece(odd)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := mergeV2JSON(static, [][]byte{packed}); ok || err != nil {
		t.Errorf("a conflicting definition merged as encoded (%v)", err)
	}
}
