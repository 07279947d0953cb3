package apis

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestKeyResource(t *testing.T) {
	for key, want := range map[string]*schema.GroupResource{
		"/registry/secrets/ns/a":                                         {Resource: "secrets"},
		"/registry/configmaps/ns/a":                                      {Resource: "configmaps"},
		"/registry/events/ns/a.17f":                                      {Resource: "events"},
		"/registry/namespaces/a":                                         {Resource: "namespaces"},
		"/registry/leases/kube-system/x":                                 {Group: "coordination.k8s.io", Resource: "leases"},
		"/registry/clusterroles/admin":                                   {Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
		"/registry/apiextensions.k8s.io/customresourcedefinitions/a.b.c": {Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
		"/registry/storagemigration.k8s.io/storageversionmigrations/m":   {Group: "storagemigration.k8s.io", Resource: "storageversionmigrations"},
		"/registry/validatingadmissionpolicies/p":                        {Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"},
		"/registry/mutatingwebhookconfigurations/w":                      {Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"},
		"/registry/stable.example.com/crontabs/ns/a":                     {Group: "stable.example.com", Resource: "crontabs"},
		"/registry/stable.example.com/crontabs/a":                        {Group: "stable.example.com", Resource: "crontabs"},
		"compact_rev_key":                                                nil,
		"/registry/nodot/x":                                              nil,
		"/registry/secrets":                                              nil,
		"/elsewhere/secrets/ns/a":                                        nil,
		"/registry/stable.example.com":                                   nil,
		"/registry/stable.example.com/crontabs":                          nil,
	} {
		gr, ok := KeyResource(key)
		if want == nil {
			if ok {
				t.Errorf("%s: %v, want none", key, gr)
			}
			continue
		}
		if !ok || gr != *want {
			t.Errorf("%s: %v %v, want %v", key, gr, ok, *want)
		}
	}
}
