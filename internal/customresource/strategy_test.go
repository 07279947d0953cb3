package customresource

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/schema"
	"github.com/crdserver/crdserver/internal/store"
)

const stampedCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, default: 1}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, default: 1}
`

// A CRD's strategy vouches for what it prepared: the schemas' revision,
// and defaulted only in the storage version with no default missing. It
// vouches for nothing when no cache reads its writes back or its
// converter does not know the schemas' revision.
func TestWriteStamp(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal([]byte(stampedCRD), crd); err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*schema.Version{}
	for _, v := range []string{"v1", "v2"} {
		s, err := schema.Compile(crd, v)
		if err != nil {
			t.Fatal(err)
		}
		schemas["example.com/"+v] = s
	}
	conv := &conversion.WithSchemas{Inner: conversion.None{}, Schemas: schemas, SchemaRev: 5, StorageVersion: "example.com/v1"}
	cache := &store.Cache{}
	object := func(av string, spec map[string]any) *resource.Object {
		return &resource.Object{Content: map[string]any{"apiVersion": av, "kind": "Gadget", "spec": spec}}
	}
	s := newStrategy(crd, cache, conv, "v1", nil, schemas, nil)
	cases := []struct {
		name string
		obj  *resource.Object
		want store.WriteStamp
	}{
		{"storage version, defaulted", object("example.com/v1", map[string]any{"size": int64(3)}), store.WriteStamp{Epoch: 5, Defaulted: true}},
		{"storage version, a default missing", object("example.com/v1", map[string]any{}), store.WriteStamp{Epoch: 5}},
		{"another version", object("example.com/v2", map[string]any{"size": int64(3)}), store.WriteStamp{Epoch: 5}},
	}
	for _, c := range cases {
		if got := s.WriteStamp(c.obj); got == nil || *got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	obj := object("example.com/v1", map[string]any{"size": int64(3)})
	if got := newStrategy(crd, nil, conv, "v1", nil, schemas, nil).WriteStamp(obj); got != nil {
		t.Errorf("without a cache: %+v", got)
	}
	if got := newStrategy(crd, cache, conversion.None{}, "v1", nil, schemas, nil).WriteStamp(obj); got != nil {
		t.Errorf("without the schemas' revision: %+v", got)
	}
}
