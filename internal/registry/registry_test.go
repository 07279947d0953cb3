package registry

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// crdItem is a stored CRD of group g and plural p, with its names
// accepted (and Established) or not, serving versions.
func crdItem(t *testing.T, g, p string, accepted bool, versions []string, rev int64) *store.Item {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: p + "." + g, UID: types.UID("uid-" + p + g), Generation: 1},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: g, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: p, Singular: p + "x", Kind: "K" + p, ListKind: "K" + p + "List"},
		},
	}
	for i, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: i == 0,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}})
	}
	if accepted {
		crd.Status.AcceptedNames = crd.Spec.Names
		crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
		}
	}
	raw, err := json.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	return &store.Item{Key: "/registry/apiextensions.k8s.io/customresourcedefinitions/" + crd.Name, Name: crd.Name, Raw: raw, Rev: rev}
}

// An Index patched with the CRDs that changed is the Index built anew
// from every CRD, through a random series of changes.
func TestPatchedIndexAsFull(t *testing.T) {
	ns := &resource.Resource{Group: "", Plural: "namespaces", Kind: "Namespace", Versions: []*resource.Version{{Name: "v1"}}}
	r := New(Options{Builtins: []*resource.Resource{ns}, NewCache: func(string) *store.Cache { return nil }, Log: slog.New(slog.DiscardHandler)})
	rng := rand.New(rand.NewPCG(1, 2))
	groups := []string{"a.example.com", "b.example.com", "c.example.com"}
	plurals := []string{"foos", "bars", "bazes", "quxes", "widgets"}
	rev := int64(1)
	for round := range 60 {
		for range 1 + rng.IntN(6) {
			g, p := groups[rng.IntN(len(groups))], plurals[rng.IntN(len(plurals))]
			rev++
			switch rng.IntN(4) {
			case 0:
				r.removeCRD(p + "." + g)
			case 1:
				r.applyCRD(crdItem(t, g, p, false, []string{"v1"}, rev))
			default:
				r.applyCRD(crdItem(t, g, p, true, []string{"v1", "v2"}[:1+rng.IntN(2)], rev))
			}
		}
		r.mu.Lock()
		r.publish()
		got := r.index.Load()
		want := r.fullIndex()
		r.mu.Unlock()
		if got.Changed == nil && round > 0 {
			t.Fatalf("round %d: a full Index for a few changes", round)
		}
		for _, f := range []struct {
			name      string
			got, want any
		}{
			{"byGVR", got.byGVR, want.byGVR}, {"storage", got.storage, want.storage}, {"CRDs", got.CRDs, want.CRDs},
			{"items", got.items, want.items}, {"CRDResources", got.CRDResources, want.CRDResources},
			{"Established", got.Established, want.Established}, {"Discoverable", got.Discoverable, want.Discoverable},
			{"Builtin", got.Builtin, want.Builtin}, {"Groups", got.Groups, want.Groups}, {"Resources", got.Resources, want.Resources},
		} {
			if !reflect.DeepEqual(f.got, f.want) {
				t.Fatalf("round %d: %s differs:\n got %s\nwant %s", round, f.name, fmt.Sprint(f.got), fmt.Sprint(f.want))
			}
		}
	}
}
