package schema

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"testing"

	kjson "sigs.k8s.io/json"

	"github.com/crdserver/crdserver/internal/fixtures"
	"github.com/crdserver/crdserver/internal/request"
)

// cronTab is the documentation's CronTab CRD with validation and a default.
//
//go:embed testdata/crontab.yaml
var cronTab string

func compile(t testing.TB, doc string) *Version {
	t.Helper()
	crd := fixtures.DecodeCRD(t, doc)
	v, err := Compile(crd, crd.Spec.Versions[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if _, err := kjson.UnmarshalStrict([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPipeline(t *testing.T) {
	v := compile(t, cronTab)
	obj := decode(t, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"a"},"spec":{"cronSpec":"* * * *","image":"i","x":1},"y":2}`)
	unknown, err := v.Coerce(obj, true)
	if err != nil || strings.Join(unknown, ",") != "spec.x,y" {
		t.Fatalf("unknown %v %v", unknown, err)
	}
	v.Default(obj)
	if obj["spec"].(map[string]any)["replicas"] != int64(1) {
		t.Fatalf("default not applied: %v", obj)
	}
	errs := v.Validate(context.Background(), obj)
	if len(errs) != 1 || errs[0].Field != "spec.cronSpec" || !strings.Contains(errs[0].Error(), "spec.cronSpec in body should match") {
		t.Fatalf("errors %v", errs)
	}
	// Ratcheting: keeping the invalid value is fine, changing it to another
	// invalid value is not.
	old := decode(t, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"a"},"spec":{"cronSpec":"bad","replicas":1}}`)
	same := decode(t, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"cronSpec":"bad","replicas":1}}`)
	if errs := v.ValidateUpdate(context.Background(), same, old); len(errs) != 0 {
		t.Fatalf("ratcheting: %v", errs)
	}
	other := decode(t, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"a"},"spec":{"cronSpec":"worse","replicas":1}}`)
	if errs := v.ValidateUpdate(context.Background(), other, old); len(errs) != 1 {
		t.Fatalf("changed invalid value: %v", errs)
	}
}

// wideCRD's objects have 50 string fields and 5 CEL rules.
//
//go:embed testdata/wide.yaml
var wideCRD string

// wide is wideCRD and an object of it.
func wide() (string, string) {
	var fields []string
	for i := 0; i < 50; i++ {
		fields = append(fields, fmt.Sprintf(`"f%02d":"%s"`, i, strings.Repeat("v", 30)))
	}
	crd := wideCRD
	obj := `{"apiVersion":"bench.example.com/v1","kind":"Wide","metadata":{"name":"w","namespace":"default"},"spec":{` + strings.Join(fields, ",") + `}}`
	return crd, obj
}

func TestWideObject(t *testing.T) {
	crd, obj := wide()
	v := compile(t, crd)
	if len(obj) < 2000 {
		t.Fatalf("object of %d bytes", len(obj))
	}
	m := decode(t, obj)
	if _, err := v.Coerce(m, true); err != nil {
		t.Fatal(err)
	}
	if errs := v.Validate(context.Background(), m); len(errs) != 0 {
		t.Fatalf("errors %v", errs)
	}
	bad := decode(t, strings.Replace(obj, `"f03":"v`, `"f03":"x`, 1))
	if errs := v.Validate(context.Background(), bad); len(errs) != 1 || errs[0].Field != "spec" {
		t.Fatalf("CEL rule not applied: %v", errs)
	}
}

// benchPipeline runs what a create runs on the body: decode (as the
// server decodes request bodies), prune, default, validate (CEL included).
func benchPipeline(b *testing.B, crd, obj string) {
	v := compile(b, crd)
	body := []byte(obj)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m, _, err := request.DecodeObjectStrict(body, "application/json", "Object")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := v.Coerce(m, true); err != nil {
			b.Fatal(err)
		}
		v.Default(m)
		if errs := v.Validate(ctx, m); len(errs) != 0 {
			b.Fatal(errs)
		}
	}
}

func BenchmarkPipelineCronTab(b *testing.B) {
	benchPipeline(b, cronTab, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"my-new-cron-object","namespace":"default"},"spec":{"cronSpec":"* * * * */5","image":"my-awesome-cron-image","replicas":3}}`)
}

func BenchmarkPipelineWide2KiB(b *testing.B) {
	crd, obj := wide()
	benchPipeline(b, crd, obj)
}
