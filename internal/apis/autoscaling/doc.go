// Package autoscaling is the built-in autoscaling/v2 API:
// HorizontalPodAutoscalers, stored as kube-apiserver stores them with no
// controllers running (as envtest does), with Kubernetes' own defaults,
// validation, strategy and table (through kuberegistry).
package autoscaling
