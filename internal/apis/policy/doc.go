// Package policy is the built-in policy/v1 API: PodDisruptionBudgets,
// stored as kube-apiserver stores them with no controllers running (as
// envtest does), with Kubernetes' own defaults, validation, strategy and
// table (through kuberegistry).
package policy
