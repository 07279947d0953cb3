package schema

import (
	_ "embed"
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"
	"time"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"
)

// storedCRD has what reading a stored object does anything with: defaults
// at every level (properties, additionalProperties, items, nullable
// ones), an embedded resource, and fields to prune.
//
//go:embed testdata/stored.yaml
var storedCRD string

func storedSchema(t *testing.T) (*Version, *spec.Schema) {
	t.Helper()
	v := compile(t, storedCRD)
	var doc struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	raw, err := yaml.YAMLToJSON([]byte(storedCRD))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var openapi spec.Schema
	if err := json.Unmarshal(doc.Spec.Versions[0].Schema.OpenAPIV3Schema, &openapi); err != nil {
		t.Fatal(err)
	}
	return v, &openapi
}

// kubernetesStorageDecode is what Kubernetes' storage codec does to a
// custom resource it decodes (customresource_handler.go: the
// unstructuredSchemaCoercer with dropInvalidMetadata and repairGeneration,
// then the unstructuredDefaulter), with its own functions: the oracle.
// (Kubernetes dereferences a nil ObjectMeta to repair the generation of
// an object without metadata; that one case is left alone here, as
// crdserver leaves it.)
func kubernetesStorageDecode(obj map[string]any, s *structuralschema.Structural) error {
	kind, foundKind, err := unstructured.NestedString(obj, "kind")
	if err != nil {
		return err
	}
	apiVersion, foundAPIVersion, err := unstructured.NestedString(obj, "apiVersion")
	if err != nil {
		return err
	}
	meta, foundMeta, _, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{DropMalformedFields: true})
	if err != nil {
		return err
	}
	structuralpruning.PruneWithOptions(obj, s, true, structuralschema.UnknownFieldPathOptions{})
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, s)
	if ferr, _ := schemaobjectmeta.CoerceWithOptions(nil, obj, s, false, schemaobjectmeta.CoerceOptions{DropInvalidFields: true}); ferr != nil {
		return ferr
	}
	if meta != nil && meta.Generation == 0 {
		meta.Generation = 1
	}
	if foundKind {
		obj["kind"] = kind
	}
	if foundAPIVersion {
		obj["apiVersion"] = apiVersion
	}
	if foundMeta {
		if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
			return err
		}
	}
	structuraldefaulting.Default(obj, s)
	return nil
}

func pick(r *rand.Rand, vs ...any) any { return vs[r.Intn(len(vs))] }

// randomMeta makes metadata as crdserver writes it, or as a tool writing
// to etcd might: of the right types or not, canonical or not.
func randomMeta(r *rand.Rand) any {
	switch r.Intn(20) {
	case 0:
		return nil
	case 1:
		return "not an object"
	}
	times := []any{"2026-11-25T10:00:00Z", "2026-11-25T11:00:00+01:00", "2026-11-25T10:00:00.5Z", "0001-01-01T00:00:00Z", "yesterday", int64(3), nil}
	strs := []any{"x", "", int64(42), nil}
	md := map[string]any{}
	fields := map[string]func() any{
		"name":                       func() any { return pick(r, strs...) },
		"namespace":                  func() any { return pick(r, strs...) },
		"uid":                        func() any { return pick(r, strs...) },
		"resourceVersion":            func() any { return pick(r, "12", "", int64(12)) },
		"generation":                 func() any { return pick(r, int64(1), int64(0), int64(7), "1", nil, 1.5) },
		"creationTimestamp":          func() any { return pick(r, times...) },
		"deletionTimestamp":          func() any { return pick(r, times...) },
		"deletionGracePeriodSeconds": func() any { return pick(r, int64(0), int64(30), "30") },
		"labels": func() any {
			return pick(r, map[string]any{"a": "b"}, map[string]any{}, map[string]any{"a": int64(1)}, map[string]any{"a": "x y"}, nil)
		},
		"annotations": func() any {
			return pick(r, map[string]any{"a": "b"}, map[string]any{"foo": int64(42), "bar": "abc"}, "x")
		},
		"finalizers": func() any { return pick(r, []any{"f"}, []any{}, []any{int64(1)}, "f") },
		"ownerReferences": func() any {
			return pick(r,
				[]any{map[string]any{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u"}},
				[]any{map[string]any{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u", "controller": true, "blockOwnerDeletion": false}},
				[]any{map[string]any{"apiVersion": "v1", "kind": "K", "name": "n"}},
				[]any{map[string]any{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u", "extra": "x"}},
				[]any{})
		},
		"managedFields": func() any {
			entry := map[string]any{"manager": "m", "operation": "Update", "apiVersion": "example.com/v1", "time": pick(r, times...), "fieldsType": "FieldsV1",
				"fieldsV1": pick(r, map[string]any{"f:spec": map[string]any{".": map[string]any{}, "f:a": map[string]any{}}}, map[string]any{"f:x": "y"}, map[string]any{})}
			if r.Intn(3) == 0 {
				entry["subresource"] = pick(r, "status", "")
			}
			if r.Intn(4) == 0 {
				delete(entry, "time")
			}
			return []any{entry}
		},
		"unknown": func() any { return int64(42) },
	}
	for name, f := range fields {
		if r.Intn(3) == 0 {
			md[name] = f()
		}
	}
	return md
}

// TestNormalizeStoredMatchesKubernetes reads random stored objects (fields
// the schema knows and does not, nulls, embedded resources, metadata of
// every shape) the way crdserver does and the way Kubernetes' storage
// decoder does, and requires the same objects, and that a change is
// reported exactly when there is one.
func TestNormalizeStoredMatchesKubernetes(t *testing.T) {
	v, openapi := storedSchema(t)
	r := rand.New(rand.NewSource(1))
	var changed, kept int
	for n := 0; n < 20000; n++ {
		obj, _ := randomValue(r, openapi, 0).(map[string]any)
		if obj == nil {
			continue
		}
		obj["apiVersion"], obj["kind"] = "example.com/v1", "Thing"
		if r.Intn(5) > 0 {
			obj["metadata"] = randomMeta(r)
		}
		if spec, ok := obj["spec"].(map[string]any); ok && r.Intn(2) == 0 {
			spec["e"] = map[string]any{"apiVersion": pick(r, "v1", int64(1)), "kind": "E", "metadata": randomMeta(r), "data": "d"}
		}
		if r.Intn(3) == 0 {
			// As crdserver writes it: nothing to do.
			obj = map[string]any{"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "x", "namespace": "ns", "uid": "u", "generation": int64(2),
				"creationTimestamp": "2026-11-25T10:00:00Z", "labels": map[string]any{"a": "b"}}, "spec": map[string]any{"a": "A", "nul": nil, "m": map[string]any{}, "l": []any{}}}
		}
		theirs := runtime.DeepCopyJSON(obj)
		ours := runtime.DeepCopyJSON(obj)
		werr := kubernetesStorageDecode(theirs, v.b().structural)
		got, gerr := v.NormalizeStored(ours)
		in, _ := json.Marshal(obj)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("object %s: kubernetes error %v, crdserver error %v", in, werr, gerr)
		}
		if werr != nil {
			continue
		}
		if !reflect.DeepEqual(theirs, ours) {
			a, _ := json.Marshal(theirs)
			b, _ := json.Marshal(ours)
			t.Fatalf("object %s:\nkubernetes %s\ncrdserver  %s", in, a, b)
		}
		if want := !reflect.DeepEqual(obj, ours); got != want {
			t.Fatalf("object %s: changed %v, want %v", in, got, want)
		}
		if got {
			changed++
		} else {
			kept++
		}
	}
	if changed < 1000 || kept < 1000 {
		t.Fatalf("%d objects changed, %d kept: not enough of each", changed, kept)
	}
}

// TestPlainStoredMetaIsKeptByTheRoundTrip: metadata that plainStoredMeta
// lets skip the trip through ObjectMeta comes back from that trip (with
// dropping what does not decode, as reading from storage does) unchanged.
func TestPlainStoredMetaIsKeptByTheRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	plain := 0
	for n := 0; n < 50000; n++ {
		md, ok := randomMeta(r).(map[string]any)
		if !ok || !plainStoredMeta(md) {
			continue
		}
		plain++
		obj := map[string]any{"metadata": runtime.DeepCopyJSONValue(md)}
		meta, found, _, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{DropMalformedFields: true})
		if err != nil || !found {
			t.Fatalf("%v: %v %v", md, found, err)
		}
		if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(obj["metadata"], md) {
			t.Fatalf("the round trip changes %#v into %#v", md, obj["metadata"])
		}
	}
	if plain < 500 {
		t.Fatalf("only %d plain metadata tried", plain)
	}
	// Metadata as crdserver writes it is plain: reading it back costs no
	// round trip.
	written := decode(t, `{"name":"ct","namespace":"default","uid":"6f1c9a8e-0000-4000-8000-000000000001","resourceVersion":"12","generation":1,"creationTimestamp":"2026-11-25T10:00:00Z","labels":{"a":"b"},"finalizers":["f"],"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"c","uid":"u","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"example.com/v1","time":"2026-11-25T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:a":{}}}},{"manager":"status","operation":"Apply","apiVersion":"example.com/v1","time":"2026-11-25T10:00:01Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{}},"subresource":"status"}]}`)
	if !plainStoredMeta(written) {
		t.Fatalf("crdserver's metadata is not plain: %v", written)
	}
}

// TestNeedsDefaultsMatchesDefault: NeedsDefaults says true exactly when
// Kubernetes' defaulting changes the object.
func TestNeedsDefaultsMatchesDefault(t *testing.T) {
	v, openapi := storedSchema(t)
	r := rand.New(rand.NewSource(3))
	var needs, not int
	for n := 0; n < 20000; n++ {
		obj, _ := randomValue(r, openapi, 0).(map[string]any)
		if obj == nil {
			continue
		}
		if r.Intn(2) == 0 {
			// Drop the nulls that defaulting never sees.
			structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, v.b().structural)
		}
		defaulted := runtime.DeepCopyJSON(obj)
		structuraldefaulting.Default(defaulted, v.b().structural)
		want := !reflect.DeepEqual(obj, defaulted)
		if got := v.NeedsDefaults(obj); got != want {
			in, _ := json.Marshal(obj)
			out, _ := json.Marshal(defaulted)
			t.Fatalf("object %s (defaulted %s): NeedsDefaults %v, want %v", in, out, got, want)
		}
		if want {
			needs++
		} else {
			not++
		}
	}
	if needs < 1000 || not < 1000 {
		t.Fatalf("%d objects needed defaults, %d did not: not enough of each", needs, not)
	}
}

// The objects of Kubernetes' own tests, read from storage: a field the
// schema does not know, and metadata of the wrong types.
func TestNormalizeStoredExamples(t *testing.T) {
	v, _ := storedSchema(t)
	for _, tc := range []struct{ in, want string }{
		{
			in:   `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"foo","generation":1},"unspecified":"bar","spec":{"a":"x","nul":null}}`,
			want: `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"foo","generation":1},"spec":{"a":"x","nul":null}}`,
		},
		{
			in:   `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"foo","unknown":42,"generation":null,"annotations":{"foo":42,"bar":"abc"},"labels":{"invalid":"x y"}},"spec":{"a":"x","e":{"apiVersion":"foo/v1","kind":"Foo","metadata":{"unknown":42,"annotations":{"foo":42},"labels":{"invalid":"x y"}}}}}`,
			want: `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"foo","generation":1,"labels":{"invalid":"x y"}},"spec":{"a":"x","nul":"N","e":{"apiVersion":"foo/v1","kind":"Foo","metadata":{"labels":{"invalid":"x y"}}}}}`,
		},
	} {
		obj := decode(t, tc.in)
		changed, err := v.NormalizeStored(obj)
		if err != nil || !changed {
			t.Fatalf("%s: changed %v, %v", tc.in, changed, err)
		}
		if want := decode(t, tc.want); !reflect.DeepEqual(obj, want) {
			got, _ := json.Marshal(obj)
			t.Errorf("%s:\ngot  %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

// TestPlainTime: plainTime accepts exactly the times metav1.Time encodes
// as they are, other than the zero time.
func TestPlainTime(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	digits := "0123456789"
	accepted := 0
	for n := 0; n < 200000; n++ {
		b := []byte("2024-02-29T23:59:59Z")
		for i := r.Intn(4); i > 0; i-- {
			p := r.Intn(len(b))
			if r.Intn(10) == 0 {
				b[p] = "-T:Z+. "[r.Intn(7)]
			} else if b[p] >= '0' && b[p] <= '9' {
				b[p] = digits[r.Intn(10)]
			}
		}
		s := string(b)
		if r.Intn(50) == 0 {
			s = []string{"0001-01-01T00:00:00Z", "2026-11-25T10:00:00.5Z", "2026-11-25T11:00:00+01:00", "", "2026-11-25T10:00:00z"}[r.Intn(5)]
		}
		tm, err := time.Parse(time.RFC3339, s)
		want := err == nil && !tm.IsZero() && tm.UTC().Format(time.RFC3339) == s
		if got := plainTime(s); got != want {
			t.Fatalf("plainTime(%q) = %v, want %v", s, got, want)
		}
		if want {
			accepted++
		}
	}
	if accepted < 10000 {
		t.Fatalf("only %d times accepted", accepted)
	}
}
