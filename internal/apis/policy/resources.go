package policy

import (
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/apis/policy"
	_ "k8s.io/kubernetes/pkg/apis/policy/install" // policy's defaults and conversions in legacyscheme
	"k8s.io/kubernetes/pkg/registry/policy/poddisruptionbudget"

	"github.com/crdserver/crdserver/internal/apis/kuberegistry"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// PodDisruptionBudgetPrefix is the etcd key of PodDisruptionBudgets
// (kube-apiserver's).
const PodDisruptionBudgetPrefix = "/registry/poddisruptionbudgets/"

// AddToScheme registers the policy/v1 Go types (for protobuf and the
// built-in type converter).
var AddToScheme = policyv1.AddToScheme

// Resources are the policy/v1 resources, each served from the cache
// newCache makes for its key prefix.
func Resources(newCache func(prefix string) *store.Cache) []*resource.Resource {
	return []*resource.Resource{PodDisruptionBudgets(newCache(PodDisruptionBudgetPrefix))}
}

// PodDisruptionBudgets is the poddisruptionbudgets resource, with the
// status subresource; kube checks their names as path segments only.
func PodDisruptionBudgets(cache *store.Cache) *resource.Resource {
	r := kuberegistry.Kind[policyv1.PodDisruptionBudget, policy.PodDisruptionBudget]{
		Group: policyv1.GroupName, Version: "v1", Plural: "poddisruptionbudgets", Kind: "PodDisruptionBudget", ShortNames: []string{"pdb"}, Namespaced: true, Prefix: PodDisruptionBudgetPrefix,
		Kube: poddisruptionbudget.Strategy, StatusKube: poddisruptionbudget.StatusStrategy,
		List: func(items []policy.PodDisruptionBudget) runtime.Object {
			return &policy.PodDisruptionBudgetList{Items: items}
		},
	}.Resource(cache)
	r.ValidateName = validatePathSegment
	return r
}

// validatePathSegment is kube-apiserver's check of a name its strategy
// does not check: it must be a path segment (rest.BeforeCreate's).
func validatePathSegment(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}
