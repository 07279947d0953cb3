// Package networking is the built-in networking.k8s.io/v1 API:
// Ingresses, IngressClasses and NetworkPolicies, stored as kube-apiserver
// stores them with no controllers running (as envtest does), with
// Kubernetes' own defaults, validation, strategies and tables (through
// kuberegistry).
package networking
