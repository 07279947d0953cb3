// Package discovery is the built-in discovery.k8s.io/v1 API:
// EndpointSlices, stored as kube-apiserver stores them with no
// controllers running (as envtest does), with Kubernetes' own defaults,
// validation, strategy and table (through kuberegistry).
package discovery
