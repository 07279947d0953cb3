package networking

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/apis/networking"
	_ "k8s.io/kubernetes/pkg/apis/networking/install" // networking's defaults and conversions in legacyscheme
	"k8s.io/kubernetes/pkg/registry/networking/ingress"
	"k8s.io/kubernetes/pkg/registry/networking/ingressclass"
	"k8s.io/kubernetes/pkg/registry/networking/networkpolicy"

	"github.com/crdserver/crdserver/internal/apis/kuberegistry"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// The etcd keys of the networking resources (kube-apiserver's: Ingresses
// keep the key of the extensions group's).
const (
	IngressPrefix       = "/registry/ingress/"
	IngressClassPrefix  = "/registry/ingressclasses/"
	NetworkPolicyPrefix = "/registry/networkpolicies/"
)

// AddToScheme registers the networking.k8s.io/v1 Go types (for protobuf
// and the built-in type converter).
var AddToScheme = networkingv1.AddToScheme

// Resources are the networking.k8s.io/v1 resources, in kube-apiserver's
// discovery order, each served from the cache newCache makes for its key
// prefix.
func Resources(newCache func(prefix string) *store.Cache) []*resource.Resource {
	return []*resource.Resource{
		IngressClasses(newCache(IngressClassPrefix)),
		Ingresses(newCache(IngressPrefix)),
		NetworkPolicies(newCache(NetworkPolicyPrefix)),
	}
}

// Ingresses is the ingresses resource, with the status subresource.
func Ingresses(cache *store.Cache) *resource.Resource {
	return kuberegistry.Kind[networkingv1.Ingress, networking.Ingress]{
		Group: networkingv1.GroupName, Version: "v1", Plural: "ingresses", Kind: "Ingress", ShortNames: []string{"ing"}, Namespaced: true, Prefix: IngressPrefix,
		Kube: ingress.Strategy, StatusKube: ingress.StatusStrategy,
		List: func(items []networking.Ingress) runtime.Object { return &networking.IngressList{Items: items} },
	}.Resource(cache)
}

// IngressClasses is the cluster-scoped ingressclasses resource.
func IngressClasses(cache *store.Cache) *resource.Resource {
	return kuberegistry.Kind[networkingv1.IngressClass, networking.IngressClass]{
		Group: networkingv1.GroupName, Version: "v1", Plural: "ingressclasses", Kind: "IngressClass", Prefix: IngressClassPrefix,
		Kube: ingressclass.Strategy,
		List: func(items []networking.IngressClass) runtime.Object {
			return &networking.IngressClassList{Items: items}
		},
	}.Resource(cache)
}

// NetworkPolicies is the networkpolicies resource.
func NetworkPolicies(cache *store.Cache) *resource.Resource {
	return kuberegistry.Kind[networkingv1.NetworkPolicy, networking.NetworkPolicy]{
		Group: networkingv1.GroupName, Version: "v1", Plural: "networkpolicies", Kind: "NetworkPolicy", ShortNames: []string{"netpol"}, Namespaced: true, Prefix: NetworkPolicyPrefix,
		Kube: networkpolicy.Strategy,
		List: func(items []networking.NetworkPolicy) runtime.Object {
			return &networking.NetworkPolicyList{Items: items}
		},
	}.Resource(cache)
}
