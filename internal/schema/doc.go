// Package schema applies a CRD version's structural schema to custom
// resources, with Kubernetes' own algorithms (k8s.io/apiextensions-apiserver):
// pruning of unknown fields (with their paths, for field validation),
// metadata coercion, defaulting, OpenAPI validation with ratcheting,
// embedded-resource and list-type checks, and CEL rules.
//
// Compile builds a Version once per CRD version — structural schema,
// validators and compiled CEL programs — and requests only run it:
//
//	v, err := schema.Compile(crd, "v1")
//	unknown, err := v.Coerce(obj, true) // prune; unknown field paths
//	v.Default(obj)
//	errs := v.Validate(ctx, obj)        // or ValidateUpdate, ValidateStatus
package schema
