package admission

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/crdserver/crdserver/internal/conversion"
)

func TestObjectInterfacesConvert(t *testing.T) {
	oi := NewObjectInterfaces(widgetFuncs)
	w := widget("w", 3)

	// To another version, through the resource's conversion, and back.
	v2, err := admission.ConvertToGVK(w, widgetV2, oi)
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedInt64(v2.(*unstructured.Unstructured).Object, "spec", "size"); s != 3 || v2.GetObjectKind().GroupVersionKind() != widgetV2 {
		t.Errorf("v2 %v", v2)
	}
	back := widget("", 0)
	if err := oi.GetObjectConvertor().Convert(v2, back, nil); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(back.Object, "spec", "replicas"); r != 3 || back.GetName() != "w" {
		t.Errorf("back %v", back.Object)
	}

	// The same version: a copy that shares nothing.
	same := widget("", 0)
	if err := oi.GetObjectConvertor().Convert(w, same, nil); err != nil {
		t.Fatal(err)
	}
	same.Object["spec"].(map[string]any)["replicas"] = int64(9)
	if r, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas"); r != 3 {
		t.Error("the converted object shares the original's maps")
	}

	// No conversion: one version only.
	if _, err := admission.ConvertToGVK(w, widgetV2, NewObjectInterfaces(ResourceFuncs{})); err == nil {
		t.Error("converted without a conversion")
	}
	failing := NewObjectInterfaces(ResourceFuncs{Convert: func(*unstructured.Unstructured, schema.GroupVersion) (*unstructured.Unstructured, error) {
		return nil, errors.New("webhook down")
	}})
	if _, err := admission.ConvertToGVK(w, widgetV2, failing); err == nil || err.Error() != "webhook down" {
		t.Errorf("error %v", err)
	}

	kinds, _, err := oi.GetObjectTyper().ObjectKinds(w)
	if err != nil || len(kinds) != 1 || kinds[0] != widgetV1 {
		t.Errorf("kinds %v, %v", kinds, err)
	}
	if got := oi.GetEquivalentResourceMapper().KindFor(widgetsV2, ""); got != widgetV2 {
		t.Errorf("KindFor %v", got)
	}
	if got := NewObjectInterfaces(ResourceFuncs{}).GetEquivalentResourceMapper().EquivalentResourcesFor(configMaps, ""); len(got) != 1 || got[0] != configMaps {
		t.Errorf("EquivalentResourcesFor %v", got)
	}
}

func TestServiceResolver(t *testing.T) {
	r := serviceResolver{conversion.ServiceKey("ns", "hook", 443): "127.0.0.1:9443"}
	for _, c := range []struct {
		ns, name string
		port     int32
		want     string
	}{
		{"ns", "hook", 443, "https://127.0.0.1:9443"},
		{"ns", "hook", 8443, "https://hook.ns.svc:8443"},
		{"other", "hook", 443, "https://hook.other.svc:443"},
	} {
		u, err := r.ResolveEndpoint(c.ns, c.name, c.port)
		if err != nil || u.String() != c.want {
			t.Errorf("%s/%s:%d: %v, %v, want %s", c.ns, c.name, c.port, u, err, c.want)
		}
	}
	if _, err := r.ResolveEndpoint("", "hook", 443); err == nil {
		t.Error("no namespace")
	}
}

// Two Admissions may share a registry: the metrics are exported once.
func TestMetricsRegisteredOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	o := Options{Client: fake.NewClientset(), Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		RESTMapper: meta.NewDefaultRESTMapper(nil), Authorizer: allowAll, Registerer: reg}
	for range 2 {
		if _, err := New(o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}
