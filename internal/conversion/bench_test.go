package conversion

import (
	"context"
	_ "embed"
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/schema"
	"github.com/crdserver/crdserver/internal/store"

	rulesv1alpha1 "github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
)

// benchCRD is the CronTab CRD the benchmarks convert between its two
// versions (v1beta1 stored, v1).
//
//go:embed testdata/bench-crontabs.yaml
var benchCRD string

// benchObjects are n stored v1beta1 CronTabs as a server holds them.
func benchObjects(n int) [][]byte {
	objs := make([][]byte, n)
	for i := range objs {
		objs[i] = fmt.Appendf(nil, `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"crontab-%05d","namespace":"default","uid":"6f1c9a8e-0000-4000-8000-%012d","resourceVersion":"%d","generation":1,"creationTimestamp":"2026-11-25T10:00:00Z","labels":{"bench":"crdbench"},"managedFields":[{"manager":"crdbench","operation":"Update","apiVersion":"example.com/v1beta1","time":"2026-11-25T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:hostPort":{},"f:metadata":{"f:labels":{".":{},"f:bench":{}}},"f:spec":{".":{},"f:cronSpec":{},"f:image":{},"f:replicas":{}}}}]},"hostPort":"host-%05d.example.com:%d","spec":{"cronSpec":"*/5 * * * *","image":"my-awesome-cron-image","replicas":%d}}`,
			i, i, 1000+i, i, 8000+i%1000, 1+i%3)
	}
	return objs
}

func benchConverters(b testing.TB) map[string]Converter {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(benchCRD), crd); err != nil {
		b.Fatal(err)
	}
	schemas := map[string]*schema.Version{}
	for _, v := range crd.Spec.Versions {
		s, err := schema.Compile(crd, v.Name)
		if err != nil {
			b.Fatal(err)
		}
		schemas["example.com/"+v.Name] = s
	}
	rs := rulesv1alpha1.RuleSet{Hub: "v1", Versions: []rulesv1alpha1.VersionRules{{Name: "v1beta1", ToHub: []rulesv1alpha1.Rule{{Split: &rulesv1alpha1.SplitRule{From: ".hostPort", To: []string{".host", ".port"}, Separator: ":"}}}}}}
	rules, errs := NewRules(rs, "example.com", []string{"v1beta1", "v1"})
	if errs != nil {
		b.Fatal(errs.ToAggregate())
	}
	return map[string]Converter{
		"None":  &WithSchemas{Inner: None{}, Schemas: schemas},
		"Rules": &WithSchemas{Inner: rules, Schemas: schemas},
	}
}

// BenchmarkConvertList converts a list of 10,000 stored CronTabs to v1,
// as a cold list does (nothing remembered), by None and by rules, each
// followed by the target schema.
func BenchmarkConvertList(b *testing.B) {
	objs := benchObjects(10000)
	for _, name := range []string{"None", "Rules"} {
		conv := benchConverters(b)[name]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := conv.Convert(context.Background(), objs, "example.com/v1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkItemsAfterEdit converts 10,000 cached CronTabs to v1 through a
// CRD's converter made afresh each time, as the first list after a CRD
// edit does (nothing the new converter made is remembered yet; the list
// is split across the CPUs).
func BenchmarkItemsAfterEdit(b *testing.B) {
	objs := benchObjects(10000)
	items := make([]*store.Item, len(objs))
	for i, o := range objs {
		items[i] = store.NewCachedItem(&store.Item{Key: fmt.Sprint(i), Raw: o})
	}
	for _, name := range []string{"None", "Rules"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Items(context.Background(), benchConverters(b)[name], items, "example.com/v1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// answering stands in for a conversion webhook: a strategy converter
// other than None and Rules, whose answers WithSchemas keeps in the memo.
type answering struct{ counting }

func (*answering) recheckInterval() time.Duration { return DefaultRecheckInterval }

// BenchmarkItemsWarm reads 10,000 cached CronTabs in v1 again, as every
// list after the first does: each object's conversion is in its memo. By
// None, and by a webhook whose answers are kept.
func BenchmarkItemsWarm(b *testing.B) {
	objs := benchObjects(10000)
	for _, name := range []string{"None", "Webhook"} {
		conv := benchConverters(b)["None"]
		if name == "Webhook" {
			conv.(*WithSchemas).Inner = &answering{}
		}
		items := make([]*store.Item, len(objs))
		for i, o := range objs {
			items[i] = store.NewCachedItem(&store.Item{Key: fmt.Sprint(i), Raw: o})
		}
		if _, err := Items(context.Background(), conv, items, "example.com/v1"); err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Items(context.Background(), conv, items, "example.com/v1"); err != nil {
					b.Fatal(err)
				}
			}
		})
		if a, ok := conv.(*WithSchemas).Inner.(*answering); ok && a.n != len(objs) {
			b.Fatalf("the webhook converted %d objects, want %d (once each)", a.n, len(objs))
		}
	}
}
