// Package apps is the built-in apps/v1 API: Deployments, ReplicaSets,
// StatefulSets and DaemonSets, stored as kube-apiserver stores them with
// no controllers running (as envtest does), with Kubernetes' own
// defaults, validation, strategies and tables (through kuberegistry).
package apps
