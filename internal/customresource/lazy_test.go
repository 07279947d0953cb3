package customresource

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	crdapi "github.com/crdserver/crdserver/internal/apis/apiextensions"
	"github.com/crdserver/crdserver/internal/budget"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/fixtures"
	"github.com/crdserver/crdserver/internal/samples"
	"github.com/crdserver/crdserver/internal/schema"
)

// variants are objects to check a schema with: valid samples of it, and
// each broken in a few ways (an unknown field, a wrong type, a null,
// a field gone, defaults to fill).
func variants(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, version string) []map[string]any {
	t.Helper()
	valid, err := samples.Generate(context.Background(), crd, version, 2, 7)
	if err != nil {
		t.Fatalf("%s %s: %v", crd.Name, version, err)
	}
	out := append([]map[string]any{}, valid...)
	for i, obj := range valid {
		spec, _ := obj["spec"].(map[string]any)
		if spec == nil {
			continue
		}
		unknown := runtime.DeepCopyJSON(obj)
		unknown["spec"].(map[string]any)["zzUnknown"] = map[string]any{"a": int64(1)}
		unknown["status"] = map[string]any{"zzUnknown": true, "conditions": "not a list"}
		wrong := runtime.DeepCopyJSON(obj)
		for k := range spec {
			wrong["spec"].(map[string]any)[k] = fmt.Sprint("wrong-", i)
			break
		}
		null := runtime.DeepCopyJSON(obj)
		for k := range spec {
			null["spec"].(map[string]any)[k] = nil
		}
		empty := runtime.DeepCopyJSON(obj)
		empty["spec"] = map[string]any{}
		out = append(out, unknown, wrong, null, empty)
	}
	return out
}

// TestLazyAsEager: the schemas the registry compiles lazily, from the
// stored CRD, part by part, in a pool so small that most parts are
// released between uses and built again, answer as the schemas
// compiled at once from the decoded CRD: pruning (with the unknown
// fields' paths), defaulting, validation of creates, updates and status
// updates (CEL rules included), the storage decoder's normalization, and
// conversion between versions. Over the corpus's CRDs (all 1,539 with
// CRDSERVER_CORPUS).
func TestLazyAsEager(t *testing.T) {
	crds, whole, err := fixtures.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	if whole {
		t.Logf("the whole corpus: %d CRDs", len(crds))
	}
	ctx := context.Background()
	pool := budget.New(2 << 20) // holds a few parts: most are released and built again
	checked := 0
	for _, crd := range crds {
		raw, err := json.Marshal(crd)
		if err != nil {
			t.Fatal(err)
		}
		slim, withSchema, err := crdapi.DecodeSlim(raw)
		if err != nil {
			t.Fatal(err)
		}
		lazy := LazySchemas(pool, slim, func() []byte { return raw }, withSchema)
		eager, err := CompileSchemas(crd)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range crd.Spec.Versions {
			av := crd.Spec.Group + "/" + v.Name
			l, e := lazy[av], eager[av]
			if (l == nil) != (e == nil) {
				t.Fatalf("%s: lazy %v, eager %v", av, l != nil, e != nil)
			}
			objs := variants(t, crd, v.Name)
			for i, obj := range objs {
				compare(t, fmt.Sprintf("%s %s #%d", crd.Name, v.Name, i), ctx, l, e, obj, objs[(i+1)%len(objs)])
				checked++
			}
		}
		if len(crd.Spec.Versions) > 1 {
			compareConversion(t, ctx, crd, lazy, eager)
		}
	}
	if s := pool.Stats(); s.Releases == 0 {
		t.Errorf("nothing was released: %+v", s)
	}
	t.Logf("%d objects checked", checked)
}

// compare runs each of a schema's operations on copies of obj (and old)
// with the lazy and the eager schema.
func compare(t *testing.T, what string, ctx context.Context, l, e *schema.Version, obj, old map[string]any) {
	t.Helper()
	run := func(v *schema.Version) []any {
		var out []any
		pruned := runtime.DeepCopyJSON(obj)
		unknown, err := v.Coerce(pruned, true)
		out = append(out, pruned, unknown, fmt.Sprint(err))
		defaulted := runtime.DeepCopyJSON(pruned)
		v.Default(defaulted)
		out = append(out, defaulted, v.HasDefaults(), v.NeedsDefaults(pruned))
		out = append(out, sorted(v.Validate(ctx, runtime.DeepCopyJSON(obj))))
		out = append(out, sorted(v.ValidateUpdate(ctx, runtime.DeepCopyJSON(obj), runtime.DeepCopyJSON(old))))
		out = append(out, sorted(v.ValidateStatus(ctx, runtime.DeepCopyJSON(obj), runtime.DeepCopyJSON(old))))
		stored := runtime.DeepCopyJSON(obj)
		changed, err := v.NormalizeStored(stored)
		out = append(out, stored, changed, fmt.Sprint(err))
		return out
	}
	got, want := run(l), run(e)
	for i := range want {
		if !reflect.DeepEqual(fmt.Sprint(got[i]), fmt.Sprint(want[i])) {
			t.Errorf("%s: step %d: lazy %v, eager %v", what, i, got[i], want[i])
		}
	}
}

// sorted are the errors as text, sorted: the validator walks properties
// in map order, so the order of the errors differs from run to run.
func sorted(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	slices.Sort(out)
	return out
}

// compareConversion converts each version's samples to every other
// version with None and the lazy and the eager schemas around it.
func compareConversion(t *testing.T, ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, lazy, eager map[string]*schema.Version) {
	t.Helper()
	lc := conversion.WithStrategy(crd, conversion.None{}, lazy, 1)
	ec := conversion.WithStrategy(crd, conversion.None{}, eager, 1)
	for _, from := range crd.Spec.Versions {
		objs := variants(t, crd, from.Name)
		var raws [][]byte
		for _, o := range objs {
			b, _ := json.Marshal(o)
			raws = append(raws, b)
		}
		for _, to := range crd.Spec.Versions {
			av := crd.Spec.Group + "/" + to.Name
			got, gerr := lc.Convert(ctx, raws, av)
			want, werr := ec.Convert(ctx, raws, av)
			if fmt.Sprint(gerr) != fmt.Sprint(werr) {
				t.Fatalf("%s %s → %s: lazy %v, eager %v", crd.Name, from.Name, to.Name, gerr, werr)
			}
			for i := range want.Objects {
				if string(got.Objects[i]) != string(want.Objects[i]) {
					t.Errorf("%s %s → %s #%d: lazy %s, eager %s", crd.Name, from.Name, to.Name, i, got.Objects[i], want.Objects[i])
				}
			}
		}
	}
}
