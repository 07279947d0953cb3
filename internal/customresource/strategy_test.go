package customresource

import (
	_ "embed"
	"testing"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/fixtures"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/schema"
	"github.com/crdserver/crdserver/internal/store"
)

// gadgetsCRD has two served versions with one schema that defaults
// spec.size; v1 is stored.
//
//go:embed testdata/gadgets.yaml
var gadgetsCRD string

// A CRD's strategy vouches for what it prepared: the schemas' revision,
// and defaulted only in the storage version with no default missing. It
// vouches for nothing when no cache reads its writes back or its
// converter does not know the schemas' revision.
func TestWriteStamp(t *testing.T) {
	crd := fixtures.DecodeCRD(t, gadgetsCRD)
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
