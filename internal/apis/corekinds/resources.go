package corekinds

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // core's defaults and conversions in legacyscheme
	"k8s.io/kubernetes/pkg/registry/core/endpoint"
	"k8s.io/kubernetes/pkg/registry/core/persistentvolumeclaim"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/kubernetes/pkg/registry/core/service"

	"github.com/crdserver/crdserver/internal/apis/kuberegistry"
	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// The etcd keys of the resources (kube-apiserver's).
const (
	ServicePrefix   = "/registry/services/specs/"
	EndpointsPrefix = "/registry/services/endpoints/"
	PodPrefix       = "/registry/pods/"
	PVCPrefix       = "/registry/persistentvolumeclaims/"
)

// endpointsWarning is kube-apiserver's warning on every request of v1
// Endpoints.
const endpointsWarning = "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"

// Resources are the resources of this package, in kube-apiserver's
// discovery order, each served from the cache newCache makes for its key
// prefix; Services allocate with services.
func Resources(newCache func(prefix string) *store.Cache, services *ServiceAllocation) []*resource.Resource {
	return []*resource.Resource{
		Endpoints(newCache(EndpointsPrefix)),
		PersistentVolumeClaims(newCache(PVCPrefix)),
		Pods(newCache(PodPrefix)),
		Services(newCache(ServicePrefix), services),
	}
}

// Endpoints is the endpoints resource; every request of it is warned
// that v1 Endpoints are deprecated.
func Endpoints(cache *store.Cache) *resource.Resource {
	//nolint:staticcheck // v1 Endpoints, deprecated, are served as kube-apiserver serves them
	r := kuberegistry.Kind[corev1.Endpoints, api.Endpoints]{
		Version: "v1", Plural: "endpoints", Kind: "Endpoints", ShortNames: []string{"ep"}, Namespaced: true, Prefix: EndpointsPrefix,
		Kube: endpoint.Strategy,
		List: func(items []api.Endpoints) runtime.Object { return &api.EndpointsList{Items: items} },
	}.Resource(cache)
	r.Versions[0].Deprecated = true
	r.Versions[0].Warning = endpointsWarning
	r.AllowCreateOnUpdate = true
	return r
}

// PersistentVolumeClaims is the persistentvolumeclaims resource, with the
// status subresource.
func PersistentVolumeClaims(cache *store.Cache) *resource.Resource {
	return kuberegistry.Kind[corev1.PersistentVolumeClaim, api.PersistentVolumeClaim]{
		Version: "v1", Plural: "persistentvolumeclaims", Kind: "PersistentVolumeClaim", ShortNames: []string{"pvc"}, Namespaced: true, Prefix: PVCPrefix,
		Kube: persistentvolumeclaim.Strategy, StatusKube: persistentvolumeclaim.StatusStrategy,
		List: func(items []api.PersistentVolumeClaim) runtime.Object {
			return &api.PersistentVolumeClaimList{Items: items}
		},
		ReturnDeletedObject: true,
	}.Resource(cache)
}

// Pods is the pods resource, with the status subresource and the field
// selectors kube-apiserver supports for Pods.
func Pods(cache *store.Cache) *resource.Resource {
	r := kuberegistry.Kind[corev1.Pod, api.Pod]{
		Version: "v1", Plural: "pods", Kind: "Pod", ShortNames: []string{"po"}, Categories: []string{"all"}, Namespaced: true, Prefix: PodPrefix,
		Kube: pod.Strategy, StatusKube: pod.StatusStrategy,
		List:                func(items []api.Pod) runtime.Object { return &api.PodList{Items: items} },
		ReturnDeletedObject: true,
	}.Resource(cache)
	r.Versions[0].FieldLabels = podFieldLabels
	return r
}

// Services is the services resource, with the status subresource; cluster
// IPs and node ports are allocated with a (nil: none are, every Service
// that needs one is refused).
func Services(cache *store.Cache, a *ServiceAllocation) *resource.Resource {
	r := kuberegistry.Kind[corev1.Service, api.Service]{
		Version: "v1", Plural: "services", Kind: "Service", ShortNames: []string{"svc"}, Categories: []string{"all"}, Namespaced: true, Prefix: ServicePrefix,
		Kube: service.Strategy, StatusKube: service.StatusStrategy,
		List:                func(items []api.Service) runtime.Object { return &api.ServiceList{Items: items} },
		ReturnDeletedObject: true,
	}.Resource(cache)
	r.Versions[0].FieldLabels = serviceFieldLabels
	r.AllowCreateOnUpdate = true
	r.Strategy = serviceStrategy{TypedStrategy: r.Strategy.(kuberegistry.TypedStrategy[corev1.Service, api.Service]), alloc: a}
	return r
}

// podFieldLabels are the field selector labels of Pods, as kube's pod
// strategy gives them (spec.host is kube's old name of spec.nodeName;
// status.podIPs is accepted and never set, as in kube).
var podFieldLabels = map[string]resource.FieldLabel{
	"spec.nodeName":           resource.ScalarField("spec", "nodeName"),
	"spec.host":               resource.ScalarField("spec", "nodeName"),
	"spec.restartPolicy":      resource.ScalarField("spec", "restartPolicy"),
	"spec.schedulerName":      resource.ScalarField("spec", "schedulerName"),
	"spec.serviceAccountName": resource.ScalarField("spec", "serviceAccountName"),
	"spec.hostNetwork": func(raw []byte) string {
		if v, _ := jsonraw.Scalar(raw, []string{"spec", "hostNetwork"}); v == "true" {
			return v
		}
		return "false"
	},
	"status.phase":             resource.ScalarField("status", "phase"),
	"status.podIP":             resource.ScalarField("status", "podIP"),
	"status.podIPs":            func([]byte) string { return "" },
	"status.nominatedNodeName": resource.ScalarField("status", "nominatedNodeName"),
}

// serviceFieldLabels are the field selector labels of Services.
var serviceFieldLabels = map[string]resource.FieldLabel{
	"spec.clusterIP": resource.ScalarField("spec", "clusterIP"),
	"spec.type":      resource.ScalarField("spec", "type"),
}
