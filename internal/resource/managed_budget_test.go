package resource

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/crdserver/crdserver/internal/budget"
	"github.com/crdserver/crdserver/internal/conversion"
)

// The type converter is built when first needed, built again after the
// pool released it or the resource released it (a request in flight on a
// replaced resource still gets its field manager).
func TestFieldManagersBuiltAgain(t *testing.T) {
	builds := 0
	pool := budget.New(1)
	f := &FieldManagers{Group: "g.io", Kind: "Widget", Converter: conversion.None{}, Pool: pool,
		TypeConverter: func() (managedfields.TypeConverter, int64, error) {
			builds++
			return managedfields.NewDeducedTypeConverter(), 10, nil
		}}
	f.Release() // before any use
	if _, err := f.FieldManager("v1", ""); err != nil || builds != 1 {
		t.Fatalf("first use: %v, %d builds", err, builds)
	}
	if _, err := f.FieldManager("v1", "status"); err != nil || builds != 1 {
		t.Fatalf("second use: %v, %d builds", err, builds)
	}
	f.Release()
	if _, err := f.FieldManager("v1", ""); err != nil || builds != 2 {
		t.Fatalf("after Release: %v, %d builds", err, builds)
	}
	other := &FieldManagers{Group: "g.io", Kind: "Other", Converter: conversion.None{}, Pool: pool,
		TypeConverter: func() (managedfields.TypeConverter, int64, error) {
			return managedfields.NewDeducedTypeConverter(), 10, nil
		}}
	if _, err := other.FieldManager("v1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.FieldManager("v1", ""); err != nil || builds != 3 {
		t.Fatalf("after the pool released it: %v, %d builds", err, builds)
	}
}
