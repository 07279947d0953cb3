// Package customresource turns a CustomResourceDefinition into the
// serving definition of its resource (a resource.Resource): the served
// versions with their subresources, deprecation warnings and selectable
// fields; the strategy that applies the CRD's schemas (prune, default,
// validate, CEL) and Kubernetes' rules for custom resources (status apart
// from spec, generation, the scale subresource's checks); the printer
// columns; and the field managers typed by the CRD's OpenAPI.
package customresource
