package schema

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

var pruneSchemas = []string{
	`{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"string"},"k0":{"type":"object","properties":{"z":{"type":"integer"}}},"l":{"type":"array","items":{"type":"object","properties":{"k1":{"type":"string"}}}}}},"status":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"k2":{"type":"object","properties":{"z":{"type":"string"}}}}}}}`,
	`{"type":"object","properties":{"spec":{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"object","properties":{"z":{"type":"string"}}}},"e":{"type":"object","x-kubernetes-embedded-resource":true,"properties":{"k3":{"type":"string"}}},"p":{"type":"object","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true,"properties":{"k1":{"type":"object","properties":{"z":{"type":"integer"}}}}},"any":{"x-kubernetes-preserve-unknown-fields":true},"pl":{"type":"array","items":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"k0":{"type":"object"}}}},"pa":{"type":"array","x-kubernetes-preserve-unknown-fields":true,"items":{"type":"object","properties":{"k1":{"type":"object","properties":{"z":{"type":"string"}}}}}}}}}}`,
}

// TestPrunerMatchesKubernetes prunes random objects with crdserver's
// pruner and Kubernetes' and requires the same objects and the same
// unknown field paths.
func TestPrunerMatchesKubernetes(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i, doc := range pruneSchemas {
		var v1 apiextensionsv1.JSONSchemaProps
		if err := json.Unmarshal([]byte(doc), &v1); err != nil {
			t.Fatal(err)
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&v1, &internal, nil); err != nil {
			t.Fatal(err)
		}
		s, err := structuralschema.NewStructural(&internal)
		if err != nil {
			t.Fatal(err)
		}
		var openapi spec.Schema
		if err := json.Unmarshal([]byte(doc), &openapi); err != nil {
			t.Fatal(err)
		}
		p := newPruner(s, true)
		dropped := 0
		for n := 0; n < 5000; n++ {
			obj, _ := randomValue(r, &openapi, 0).(map[string]any)
			if obj == nil {
				continue
			}
			addMeta(r, obj)
			obj["apiVersion"], obj["kind"], obj["metadata"] = "x/v1", "X", map[string]any{"name": "n", "k0": "m"}
			theirs := runtime.DeepCopyJSON(obj)
			ours := runtime.DeepCopyJSON(obj)
			want := structuralpruning.PruneWithOptions(theirs, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
			got := p.prune(ours, true)
			if !reflect.DeepEqual(theirs, ours) || !reflect.DeepEqual(want, got) {
				in, _ := json.Marshal(obj)
				a, _ := json.Marshal(theirs)
				b, _ := json.Marshal(ours)
				t.Fatalf("schema %d, object %s:\nkubernetes %s %v\ncrdserver  %s %v", i, in, a, want, b, got)
			}
			dropped += len(want)
		}
		if dropped == 0 {
			t.Errorf("schema %d: the objects had nothing to prune", i)
		}
	}
}

// addMeta gives some nested objects the fields embedded resources keep.
func addMeta(r *rand.Rand, v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			addMeta(r, x)
		}
		if r.Intn(3) == 0 {
			v["apiVersion"], v["kind"], v["metadata"] = "v1", "K", map[string]any{"name": "x", "z": int64(1)}
		}
	case []any:
		for _, x := range v {
			addMeta(r, x)
		}
	}
}

// TestPlainMetaIsKeptByTheRoundTrip: metadata that plainMeta lets skip
// the trip through ObjectMeta comes back from that trip unchanged and
// without unknown fields; and metadata it does not let skip is metadata
// the trip would change (for the shapes tried here).
func TestPlainMetaIsKeptByTheRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	values := []any{"x", "", nil, int64(1), map[string]any{}, map[string]any{"a": "b"}, map[string]any{"a": ""}, map[string]any{"a": int64(1)}, []any{"x"}}
	keys := []string{"name", "generateName", "namespace", "labels", "annotations", "uid", "bogus"}
	plain := 0
	for n := 0; n < 60000; n++ {
		md := map[string]any{}
		for i := r.Intn(4); i > 0; i-- {
			md[keys[r.Intn(len(keys))]] = values[r.Intn(len(values))]
		}
		if !plainMeta(md) {
			continue
		}
		plain++
		obj := map[string]any{"metadata": runtime.DeepCopyJSONValue(md)}
		meta, found, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
		if err != nil || !found || len(unknown) != 0 {
			t.Fatalf("%v: %v %v %v", md, found, unknown, err)
		}
		if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(obj["metadata"], md) {
			t.Fatalf("the round trip changes %#v into %#v", md, obj["metadata"])
		}
	}
	if plain < 1000 {
		t.Fatalf("only %d plain metadata tried", plain)
	}
}
