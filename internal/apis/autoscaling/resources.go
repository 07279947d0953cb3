package autoscaling

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/apis/autoscaling"
	_ "k8s.io/kubernetes/pkg/apis/autoscaling/install" // autoscaling's defaults and conversions in legacyscheme
	"k8s.io/kubernetes/pkg/registry/autoscaling/horizontalpodautoscaler"

	"github.com/crdserver/crdserver/internal/apis/kuberegistry"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// HorizontalPodAutoscalerPrefix is the etcd key of
// HorizontalPodAutoscalers (kube-apiserver's).
const HorizontalPodAutoscalerPrefix = "/registry/horizontalpodautoscalers/"

// AddToScheme registers the autoscaling/v2 Go types (for protobuf and the
// built-in type converter).
var AddToScheme = autoscalingv2.AddToScheme

// Resources are the autoscaling/v2 resources, each served from the cache
// newCache makes for its key prefix.
func Resources(newCache func(prefix string) *store.Cache) []*resource.Resource {
	return []*resource.Resource{HorizontalPodAutoscalers(newCache(HorizontalPodAutoscalerPrefix))}
}

// HorizontalPodAutoscalers is the horizontalpodautoscalers resource, with
// the status subresource.
func HorizontalPodAutoscalers(cache *store.Cache) *resource.Resource {
	return kuberegistry.Kind[autoscalingv2.HorizontalPodAutoscaler, autoscaling.HorizontalPodAutoscaler]{
		Group: autoscalingv2.GroupName, Version: "v2", Plural: "horizontalpodautoscalers", Kind: "HorizontalPodAutoscaler", ShortNames: []string{"hpa"}, Categories: []string{"all"}, Namespaced: true, Prefix: HorizontalPodAutoscalerPrefix,
		Kube: horizontalpodautoscaler.Strategy, StatusKube: horizontalpodautoscaler.StatusStrategy,
		List: func(items []autoscaling.HorizontalPodAutoscaler) runtime.Object {
			return &autoscaling.HorizontalPodAutoscalerList{Items: items}
		},
	}.Resource(cache)
}
