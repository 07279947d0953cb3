// Package apps is the built-in apps/v1 API: Deployments, ReplicaSets,
// StatefulSets and DaemonSets, stored as kube-apiserver stores them with
// no controllers running (as envtest does). Defaults, validation, the
// strategies' rules and kubectl's tables are Kubernetes' own, imported
// from k8s.io/kubernetes: an object is converted to the internal apps type
// and handed to kube's functions, so field paths and messages are
// kube-apiserver's.
package apps
