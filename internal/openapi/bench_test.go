package openapi

import (
	"reflect"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

// builtinDocumentAt returns the built-in document at path, made anew (its
// web service not yet built).
func builtinDocumentAt(b *testing.B, path string) builtinDocument {
	for _, d := range builtinDocuments(builtins(b)) {
		if d.path == path {
			return d
		}
	}
	b.Fatalf("no document %s", path)
	return builtinDocument{}
}

// BenchmarkNew is what a server pays at start-up: nothing is built.
func BenchmarkNew(b *testing.B) {
	all := builtins(b)
	b.ReportAllocs()
	for b.Loop() {
		New(all, nil)
	}
}

// BenchmarkBuildV3CoreV1 builds the api/v1 document: routes, definitions
// by reflection, and kube-openapi's build.
func BenchmarkBuildV3CoreV1(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := buildBuiltinV3(builtinDocumentAt(b, "api/v1")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildV2 builds the whole v2 document of the built-in APIs.
func BenchmarkBuildV2(b *testing.B) {
	all := builtins(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := buildBuiltinV2(builtinDocuments(all)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTypeDefinitions makes the definitions of every built-in type
// by reflection, as one v2 build does.
func BenchmarkTypeDefinitions(b *testing.B) {
	var roots []reflect.Type
	for _, d := range builtinDocuments(builtins(b)) {
		roots = append(roots, d.service().roots...)
	}
	getDefinitions := definitions(roots)
	ref := func(name string) spec.Ref { return spec.MustCreateRef("#/definitions/" + name) }
	b.ReportAllocs()
	for b.Loop() {
		getDefinitions(ref)
	}
}
