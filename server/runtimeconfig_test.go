package server

import (
	"reflect"
	"strings"
	"testing"

	"github.com/crdserver/crdserver/internal/resource"
)

// TestApplyRuntimeConfig: --runtime-config turns group versions off as
// kube-apiserver does (api/all, per group version, the core group as v1
// or api/v1), and refuses what kube-apiserver refuses, with its messages.
func TestApplyRuntimeConfig(t *testing.T) {
	res := func(group, plural string, versions ...string) *resource.Resource {
		r := &resource.Resource{Group: group, Plural: plural}
		for _, v := range versions {
			r.Versions = append(r.Versions, &resource.Version{Name: v})
		}
		return r
	}
	all := []*resource.Resource{
		res("", "configmaps", "v1"),
		res("events.k8s.io", "events", "v1"),
		res("rbac.authorization.k8s.io", "roles", "v1"),
		res("conversion.crdserver.io", "conversionrules", "v1alpha1"),
		res("example.crdserver.io", "widgets", "v1", "v1beta1"),
	}
	served := func(rs []*resource.Resource) []string {
		var out []string
		for _, r := range rs {
			for _, v := range r.Versions {
				out = append(out, r.Plural+"."+r.Group+"/"+v.Name)
			}
		}
		return out
	}
	for _, c := range []struct {
		rc   map[string]string
		want []string
	}{
		{nil, served(all)},
		{map[string]string{"api/all": "true"}, served(all)},
		{map[string]string{"events.k8s.io/v1": "false"}, []string{"configmaps./v1", "roles.rbac.authorization.k8s.io/v1", "conversionrules.conversion.crdserver.io/v1alpha1", "widgets.example.crdserver.io/v1", "widgets.example.crdserver.io/v1beta1"}},
		{map[string]string{"api/all": "false", "v1": "true", "rbac.authorization.k8s.io/v1": "true"}, []string{"configmaps./v1", "roles.rbac.authorization.k8s.io/v1"}},
		{map[string]string{"api/v1": "false", "api/alpha": "false", "api/beta": "false"}, []string{"events.events.k8s.io/v1", "roles.rbac.authorization.k8s.io/v1", "widgets.example.crdserver.io/v1"}},
		{map[string]string{"rbac.authorization.k8s.io/v1/roles": "false"}, []string{"configmaps./v1", "events.events.k8s.io/v1", "conversionrules.conversion.crdserver.io/v1alpha1", "widgets.example.crdserver.io/v1", "widgets.example.crdserver.io/v1beta1"}},
		// A group version of Kubernetes crdserver does not serve: nothing
		// to turn off.
		{map[string]string{"apps/v1": "false"}, served(all)},
	} {
		got, err := applyRuntimeConfig(all, c.rc)
		if err != nil {
			t.Errorf("%v: %v", c.rc, err)
			continue
		}
		if !reflect.DeepEqual(served(got), c.want) {
			t.Errorf("%v: serves %v, want %v", c.rc, served(got), c.want)
		}
	}
	if len(all[4].Versions) != 2 {
		t.Error("the resources given were changed")
	}
	for _, c := range []struct {
		rc   map[string]string
		want string
	}{
		{map[string]string{"foo.io/v1": "true"}, "unknown api groups foo.io/v1"},
		{map[string]string{"apps/v9": "false"}, "group version apps/v9 that has not been registered"},
		{map[string]string{"apps/v1": "maybe"}, `invalid value of apps/v1: maybe, err: strconv.ParseBool: parsing "maybe": invalid syntax`},
		{map[string]string{"apps/v1/Deployments": "false"}, `invalid key apps/v1/Deployments: group/version/resource and resource is always lowercase plural, not "Deployments"`},
		{map[string]string{"apps/v1": "true"}, "--runtime-config turns on apps/v1, which crdserver does not serve"},
	} {
		_, err := applyRuntimeConfig(all, c.rc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.rc, err, c.want)
		}
	}
}
