package server

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/server/resourceconfig"
	serverstore "k8s.io/apiserver/pkg/server/storage"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/crdserver/crdserver/internal/resource"
)

// gvRegistry answers kube-apiserver's questions about the group versions
// there are (resourceconfig.GroupVersionRegistry).
type gvRegistry []schema.GroupVersion

func (r gvRegistry) IsGroupRegistered(group string) bool {
	for _, gv := range r {
		if gv.Group == group {
			return true
		}
	}
	return false
}

func (r gvRegistry) IsVersionRegistered(v schema.GroupVersion) bool {
	for _, gv := range r {
		if gv == v {
			return true
		}
	}
	return false
}

func (r gvRegistry) PrioritizedVersionsAllGroups() []schema.GroupVersion { return r }

func (r gvRegistry) PrioritizedVersionsForGroup(group string) []schema.GroupVersion {
	var out []schema.GroupVersion
	for _, gv := range r {
		if gv.Group == group {
			out = append(out, gv)
		}
	}
	return out
}

// kubeGroupVersions are the built-in group versions of Kubernetes (those
// client-go knows, and the CRDs' and the aggregator's).
func kubeGroupVersions() []schema.GroupVersion {
	gvs := clientgoscheme.Scheme.PrioritizedVersionsAllGroups()
	return append(gvs,
		schema.GroupVersion{Group: "apiextensions.k8s.io", Version: "v1"},
		schema.GroupVersion{Group: "apiextensions.k8s.io", Version: "v1beta1"},
		schema.GroupVersion{Group: "apiregistration.k8s.io", Version: "v1"},
		schema.GroupVersion{Group: "apiregistration.k8s.io", Version: "v1beta1"})
}

// applyRuntimeConfig returns the built-in resources with the versions
// kube-apiserver's --runtime-config turns off removed (and the resources
// left with none). Group versions are checked as kube-apiserver checks
// them, with its messages: those of groups neither crdserver nor
// Kubernetes serves are refused; a group version Kubernetes serves and
// crdserver does not may be turned off (there is nothing to do), not on.
func applyRuntimeConfig(all []*resource.Resource, rc map[string]string) ([]*resource.Resource, error) {
	if len(rc) == 0 {
		return all, nil
	}
	// The core group is "v1" or "api/v1".
	m := cliflag.ConfigurationMap{}
	for k, v := range rc {
		switch {
		case k == "v1":
			k = "/v1"
		case k == "api/v1" || strings.HasPrefix(k, "api/v1/"):
			k = strings.TrimPrefix(k, "api")
		}
		m[k] = v
	}
	served := sets.New[schema.GroupVersion]()
	var gvs []schema.GroupVersion
	for _, r := range all {
		for _, v := range r.Versions {
			gv := schema.GroupVersion{Group: r.Group, Version: v.Name}
			if !served.Has(gv) {
				served.Insert(gv)
				gvs = append(gvs, gv)
			}
		}
	}
	kube := gvRegistry(kubeGroupVersions())
	known := append(append(gvRegistry{}, gvs...), kube...)
	var unknown []string
	for k := range m {
		switch k {
		case resourceconfig.APIAll, resourceconfig.APIGA, resourceconfig.APIBeta, resourceconfig.APIAlpha:
			continue
		}
		tokens := strings.Split(k, "/")
		if len(tokens) < 2 || len(tokens) > 3 {
			return nil, fmt.Errorf("runtime-config invalid key %s", k)
		}
		gv := schema.GroupVersion{Group: tokens[0], Version: tokens[1]}
		if !known.IsGroupRegistered(gv.Group) {
			unknown = append(unknown, gv.String())
			continue
		}
		if gv.Group != "" || known.IsVersionRegistered(gv) {
			continue
		}
		return nil, fmt.Errorf("group version %s that has not been registered", gv.String())
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown api groups %s", strings.Join(unknown, ","))
	}
	cfg := serverstore.NewResourceConfig()
	cfg.EnableVersions(gvs...)
	cfg, err := resourceconfig.MergeAPIResourceConfigs(cfg, m, known)
	if err != nil {
		return nil, err
	}
	// Turning on what only Kubernetes serves is refused.
	var missing []string
	for gv, on := range cfg.GroupVersionConfigs {
		if on && !served.Has(gv) && kube.IsVersionRegistered(gv) {
			if _, explicit := cfg.ExplicitGroupVersionConfigs[gv]; explicit {
				missing = append(missing, gv.String())
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("--runtime-config turns on %s, which crdserver does not serve", strings.Join(missing, ","))
	}
	var out []*resource.Resource
	for _, r := range all {
		var versions []*resource.Version
		for _, v := range r.Versions {
			if cfg.ResourceEnabled(schema.GroupVersionResource{Group: r.Group, Version: v.Name, Resource: r.Plural}) {
				versions = append(versions, v)
			}
		}
		switch len(versions) {
		case 0:
		case len(r.Versions):
			out = append(out, r)
		default:
			c := *r
			c.Versions = versions
			out = append(out, &c)
		}
	}
	return out, nil
}
