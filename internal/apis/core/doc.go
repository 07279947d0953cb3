// Package core is the built-in core API (group "", version v1) that
// crdserver serves: Namespaces, with Kubernetes' rules (the kubernetes
// finalizer, the Active and Terminating phases, the finalize subresource,
// the system namespaces that cannot be deleted) and the NamespaceLifecycle
// admission check of creates.
package core
