package apps

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/apis/apps"
	_ "k8s.io/kubernetes/pkg/apis/apps/install" // apps' defaults and conversions in legacyscheme
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	"k8s.io/kubernetes/pkg/registry/apps/daemonset"
	"k8s.io/kubernetes/pkg/registry/apps/deployment"
	"k8s.io/kubernetes/pkg/registry/apps/replicaset"
	"k8s.io/kubernetes/pkg/registry/apps/statefulset"

	"github.com/crdserver/crdserver/internal/apis/kuberegistry"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// The etcd keys of the apps resources (kube-apiserver's).
const (
	DeploymentPrefix  = "/registry/deployments/"
	ReplicaSetPrefix  = "/registry/replicasets/"
	StatefulSetPrefix = "/registry/statefulsets/"
	DaemonSetPrefix   = "/registry/daemonsets/"
)

// AddToScheme registers the apps/v1 Go types (for protobuf and the
// built-in type converter).
var AddToScheme = appsv1.AddToScheme

// Resources are the apps/v1 resources, in kube-apiserver's discovery
// order, each served from the cache newCache makes for its key prefix.
func Resources(newCache func(prefix string) *store.Cache) []*resource.Resource {
	return []*resource.Resource{
		DaemonSets(newCache(DaemonSetPrefix)),
		Deployments(newCache(DeploymentPrefix)),
		ReplicaSets(newCache(ReplicaSetPrefix)),
		StatefulSets(newCache(StatefulSetPrefix)),
	}
}

// Deployments is the deployments resource, with the status and scale
// subresources.
func Deployments(cache *store.Cache) *resource.Resource {
	return kuberegistry.Kind[appsv1.Deployment, apps.Deployment]{
		Group: appsv1.GroupName, Version: "v1", Plural: "deployments", Kind: "Deployment", ShortNames: []string{"deploy"}, Categories: []string{"all"}, Namespaced: true, Prefix: DeploymentPrefix, Scale: true,
		Kube: deployment.Strategy, StatusKube: deployment.StatusStrategy,
		List: func(items []apps.Deployment) runtime.Object { return &apps.DeploymentList{Items: items} },
	}.Resource(cache)
}

// ReplicaSets is the replicasets resource, with the status and scale
// subresources.
func ReplicaSets(cache *store.Cache) *resource.Resource {
	return kuberegistry.Kind[appsv1.ReplicaSet, apps.ReplicaSet]{
		Group: appsv1.GroupName, Version: "v1", Plural: "replicasets", Kind: "ReplicaSet", ShortNames: []string{"rs"}, Categories: []string{"all"}, Namespaced: true, Prefix: ReplicaSetPrefix, Scale: true,
		Kube: replicaset.Strategy, StatusKube: replicaset.StatusStrategy,
		List: func(items []apps.ReplicaSet) runtime.Object { return &apps.ReplicaSetList{Items: items} },
	}.Resource(cache)
}

// StatefulSets is the statefulsets resource, with the status and scale
// subresources; their names are DNS labels.
func StatefulSets(cache *store.Cache) *resource.Resource {
	r := kuberegistry.Kind[appsv1.StatefulSet, apps.StatefulSet]{
		Group: appsv1.GroupName, Version: "v1", Plural: "statefulsets", Kind: "StatefulSet", ShortNames: []string{"sts"}, Categories: []string{"all"}, Namespaced: true, Prefix: StatefulSetPrefix, Scale: true,
		Kube: statefulset.Strategy, StatusKube: statefulset.StatusStrategy,
		List: func(items []apps.StatefulSet) runtime.Object { return &apps.StatefulSetList{Items: items} },
	}.Resource(cache)
	r.ValidateName = appsvalidation.ValidateStatefulSetName
	return r
}

// DaemonSets is the daemonsets resource, with the status subresource.
func DaemonSets(cache *store.Cache) *resource.Resource {
	return kuberegistry.Kind[appsv1.DaemonSet, apps.DaemonSet]{
		Group: appsv1.GroupName, Version: "v1", Plural: "daemonsets", Kind: "DaemonSet", ShortNames: []string{"ds"}, Categories: []string{"all"}, Namespaced: true, Prefix: DaemonSetPrefix,
		Kube: daemonset.Strategy, StatusKube: daemonset.StatusStrategy,
		List: func(items []apps.DaemonSet) runtime.Object { return &apps.DaemonSetList{Items: items} },
	}.Resource(cache)
}
