// Package admissionregistration is the built-in admissionregistration.k8s.io/v1
// API, served as Kubernetes 1.37 serves it by default: the configurations
// of admission webhooks (ValidatingWebhookConfiguration,
// MutatingWebhookConfiguration) and the CEL admission policies and their
// bindings (ValidatingAdmissionPolicy, with its status subresource,
// ValidatingAdmissionPolicyBinding, MutatingAdmissionPolicy,
// MutatingAdmissionPolicyBinding), all cluster-scoped, in the category
// api-extensions.
//
// This package stores and checks these objects; it does not act on them
// (calling webhooks and evaluating policies is internal/admission's work,
// and the type checking that fills a ValidatingAdmissionPolicy's status,
// kube-controller-manager's work in Kubernetes, runs as a leader-elected
// controller of the server).
//
// Defaulting and validation are Kubernetes' (they live in
// k8s.io/kubernetes, which cannot be imported), written again on the v1
// types of k8s.io/api to the same rules, order and messages, and checked
// against a real kube-apiserver's answers; the CEL expressions are
// compiled by k8s.io/apiserver's admission CEL compiler, in the same
// environments as Kubernetes compiles them. Usage:
//
//	r := admissionregistration.New(newCache, admissionregistration.Options{Authorizer: authz, Resolve: resolve})
//	all := r.All() // the six resources, to register
package admissionregistration
