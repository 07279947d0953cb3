package apiservice

import (
	"testing"

	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/resource"
)

// The local APIServices are kube-apiserver's: built-in group/versions
// with its priorities ("onstart"), CRD group/versions with 1000/100
// ("true"), group/versions kube has no priority for left out.
func TestDesired(t *testing.T) {
	leases := &resource.Resource{Group: "coordination.k8s.io", Versions: []*resource.Version{{Name: "v1"}}}
	core := &resource.Resource{Group: "", Versions: []*resource.Version{{Name: "v1"}}}
	unknown := &resource.Resource{Group: "unknown.k8s.io", Versions: []*resource.Version{{Name: "v1"}}}
	crd := &resource.Resource{Group: "stable.example.com", Versions: []*resource.Version{{Name: "v1"}, {Name: "v1beta1"}}}
	ix := &registry.Index{Resources: []*resource.Resource{core, leases, unknown, crd}, Builtin: map[*resource.Resource]bool{core: true, leases: true, unknown: true}}
	got := Desired(ix)
	want := map[string][3]any{
		"v1.":                        {int32(18000), int32(1), "onstart"},
		"v1.coordination.k8s.io":     {int32(16500), int32(15), "onstart"},
		"v1.stable.example.com":      {int32(1000), int32(100), "true"},
		"v1beta1.stable.example.com": {int32(1000), int32(100), "true"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d APIServices, want %d: %v", len(got), len(want), got)
	}
	for name, w := range want {
		a := got[name]
		if a == nil || a.Spec.GroupPriorityMinimum != w[0] || a.Spec.VersionPriority != w[1] || a.Labels[ManagedLabel] != w[2] || a.Spec.Service != nil {
			t.Errorf("%s: %+v, want %v", name, a, w)
		}
	}
}
