// Package apiextensions is the built-in apiextensions.k8s.io/v1 API:
// CustomResourceDefinitions, with Kubernetes' own defaulting, validation
// and warnings (k8s.io/apiextensions-apiserver), status reset on create,
// generation on spec changes, status.storedVersions kept up to date, and
// deletion that first marks a CRD Terminating with the cleanup finalizer.
// It also holds the helpers the registry and the CRD controllers share
// (Decode, IsEstablished, Servable).
package apiextensions
