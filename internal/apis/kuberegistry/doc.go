// Package kuberegistry serves built-in kinds with kube-apiserver's own
// rules, imported from k8s.io/kubernetes: an object is defaulted in its
// served version, converted to the kind's internal type and handed to
// kube's registry strategy (prepare, validate, warnings, status) and to
// kube's printers for kubectl's tables, so field paths and messages are
// kube-apiserver's. A Kind describes one such kind; its Resource is what
// the engine serves.
package kuberegistry
