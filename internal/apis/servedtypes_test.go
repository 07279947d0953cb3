package apis

import (
	"bytes"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	extapplyconfiguration "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/applyconfigurations"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	rbacpolicy "github.com/crdserver/crdserver/internal/auth/rbac"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

var update = flag.Bool("update", false, "rewrite ../resource/servedtypes_gen.go from client-go's schema")

// TestServedTypes makes the schema of the built-in kinds' types from
// client-go's (every served k8s.io/api kind, and the types it refers to,
// transitively), writes it as Go with apiextensions-apiserver's schema
// (schemaGo), checks that is internal/resource/servedtypes_gen.go byte for
// byte, and that what the server compiled in is both schemas, type by type.
func TestServedTypes(t *testing.T) {
	st, err := store.Open(t.Context(), store.OpenOptions{Dir: t.TempDir(), NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	var caches []*store.Cache
	b := New(func(prefix string) *store.Cache {
		c := store.NewCache(st, prefix, resource.DecodeItem, store.CacheOptions{}, slog.New(slog.DiscardHandler))
		caches = append(caches, c)
		return c
	}, rbacpolicy.NewStore(), Options{})
	t.Cleanup(func() {
		for _, c := range caches {
			c.Stop()
		}
	})

	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	tv, err := applyconfigurations.NewTypeConverter(request.Scheme()).ObjectToTyped(cm)
	if err != nil {
		t.Fatal(err)
	}
	all := tv.Schema()

	// The roots: every kind whose managed fields follow a schema, in each
	// served version,
	// but the CRDs' and APIServices' (apiextensions-apiserver's and kube-aggregator's schemas have them).
	var roots []string
	want := map[string]bool{}
	var todo []string
	add := func(name string) {
		if !want[name] {
			want[name] = true
			todo = append(todo, name)
		}
	}
	for _, r := range b.All {
		if r.FieldManagers == nil || r.FieldManagers.TypeConverter == nil || r.FieldManagers.Group == "apiextensions.k8s.io" || r.FieldManagers.Group == "apiregistration.k8s.io" {
			continue
		}
		for _, v := range r.Versions {
			gvk := schema.GroupVersionKind{Group: r.FieldManagers.Group, Version: v.Name, Kind: r.FieldManagers.Kind}
			name, err := request.Scheme().ToOpenAPIDefinitionName(gvk)
			if err != nil {
				t.Fatalf("%v: %v", gvk, err)
			}
			roots = append(roots, name)
			add(name)
		}
	}
	// What the converter falls back to for fields of no type.
	add("__untyped_atomic_")
	add("__untyped_deduced_")
	for len(todo) > 0 {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		def, ok := all.FindNamedType(name)
		if !ok {
			t.Fatalf("client-go's schema has no type %s", name)
		}
		namedTypes(def.Atom, add)
	}
	var part smdschema.Schema
	for _, def := range all.Types {
		if want[def.Name] {
			part.Types = append(part.Types, def)
		}
	}
	// apiextensions-apiserver's schema, whole (its CRD types and the meta
	// types they use).
	crd := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}}
	crdTV, err := extapplyconfiguration.NewTypeConverter(request.Scheme()).ObjectToTyped(crd)
	if err != nil {
		t.Fatal(err)
	}
	crdSchema := crdTV.Schema()

	out, err := schemaGo([]string{"servedKubeTypes", "servedCRDTypes"}, [][]smdschema.TypeDef{part.Types, crdSchema.Types})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "resource", "servedtypes_gen.go")
	if *update {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Skip("written; run again to check it")
	}
	if have, err := os.ReadFile(path); err != nil || !bytes.Equal(have, out) {
		t.Fatalf("internal/resource/servedtypes_gen.go is not client-go's schema of the served kinds (%d types) and apiextensions-apiserver's (%v); run go test ./internal/apis -run TestServedTypes -update", len(part.Types), err)
	}

	// What the server compiled in is client-go's schema, and
	// apiextensions-apiserver's.
	kube, crds := resource.ServedSchemas()
	for _, c := range []struct {
		name      string
		got, want []smdschema.TypeDef
	}{{"client-go", kube.Types, part.Types}, {"apiextensions-apiserver", crds.Types, crdSchema.Types}} {
		if len(c.got) != len(c.want) {
			t.Fatalf("%d types compiled in, want %d of %s's", len(c.got), len(c.want), c.name)
		}
		for i := range c.want {
			if !c.got[i].Equals(&c.want[i]) {
				t.Errorf("type %s differs from %s's", c.got[i].Name, c.name)
			}
		}
	}
	parsed := &typed.Parser{Schema: smdschema.Schema{Types: kube.Types}}
	for _, name := range roots {
		if !parsed.Type(name).IsValid() {
			t.Errorf("served type %s is not in the schema", name)
		}
	}
	if len(roots) < 15 {
		t.Errorf("only %d served kinds found: %v", len(roots), roots)
	}
}

// namedTypes calls add with every type an atom refers to by name.
func namedTypes(a smdschema.Atom, add func(string)) {
	ref := func(r smdschema.TypeRef) {
		if r.NamedType != nil {
			add(*r.NamedType)
		}
		namedTypes(r.Inlined, add)
	}
	if a.Map != nil {
		for _, f := range a.Fields {
			ref(f.Type)
		}
		ref(a.Map.ElementType)
	}
	if a.List != nil {
		ref(a.List.ElementType)
	}
}
