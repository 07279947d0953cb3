package kuberegistry

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// Kind describes one built-in kind served with kube's rules: its type V
// in the served version (k8s.io/api), its internal type I
// (k8s.io/kubernetes/pkg/apis/...) and kube's strategies for it.
type Kind[V, I any] struct {
	// Group and Version are the served group version (one version).
	Group, Version string
	// Plural and Kind name the resource; ShortNames and Categories are
	// discovery's.
	Plural, Kind string
	ShortNames   []string
	Categories   []string
	Namespaced   bool
	// Prefix is the etcd key prefix, kube-apiserver's.
	Prefix string
	// Scale serves the scale subresource (spec.replicas, status.replicas,
	// spec.selector).
	Scale bool
	// Kube is kube's strategy; StatusKube, when set, its status strategy
	// (the status subresource is served).
	Kube       Strategy
	StatusKube StatusStrategy
	// OrphanWarning is the warning kube sends on a delete that orphans
	// dependents because it names no propagation policy (Jobs').
	OrphanWarning string
	// List puts internal objects in the kind's internal list type (for
	// kube's printers).
	List func(items []I) runtime.Object
	// ReturnDeletedObject answers a delete with the deleted object, as
	// kube's registry of the kind does.
	ReturnDeletedObject bool
}

// Resource is the kind as the engine serves it, from cache.
func (k Kind[V, I]) Resource(cache *store.Cache) *resource.Resource {
	v := &resource.Version{Name: k.Version, Status: k.StatusKube != nil}
	if k.Scale {
		v.Scale = &resource.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", Selector: SpecSelector}
	}
	var strategy resource.Strategy = TypedStrategy[V, I]{Group: k.Group, Kind: k.Kind, Version: k.Version, Kube: k.Kube, Status: k.StatusKube, OrphanWarning: k.OrphanWarning}
	if _, ok := k.Kube.(rest.RESTGracefulDeleteStrategy); ok {
		strategy = GracefulStrategy[V, I]{strategy.(TypedStrategy[V, I])}
	}
	return &resource.Resource{
		Group:                    k.Group,
		Plural:                   k.Plural,
		Singular:                 strings.ToLower(k.Kind),
		Kind:                     k.Kind,
		ListKind:                 k.Kind + "List",
		ShortNames:               k.ShortNames,
		Categories:               k.Categories,
		Namespaced:               k.Namespaced,
		Versions:                 []*resource.Version{v},
		StorageVersion:           k.Version,
		KeyPrefix:                k.Prefix,
		Cache:                    cache,
		Strategy:                 strategy,
		Converter:                conversion.None{},
		Table:                    Table[V, I]{List: k.List},
		FieldManagers:            resource.BuiltinFieldManagers(k.Group, k.Kind, k.StatusKube != nil),
		AllowUnconditionalUpdate: true,
		Protobuf:                 true,
		StrategicMergeType:       new(V),
		Verbs:                    []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
		ReturnDeletedObject:      k.ReturnDeletedObject,
	}
}

// SpecSelector is a Scale's status.selector: spec.selector as a label
// selector string, as kube's scale subresources give it.
func SpecSelector(obj map[string]any) (string, error) {
	m, found, err := unstructured.NestedMap(obj, "spec", "selector")
	if err != nil || !found {
		return "", err
	}
	ls := &metav1.LabelSelector{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, ls); err != nil {
		return "", err
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return "", err
	}
	return sel.String(), nil
}
