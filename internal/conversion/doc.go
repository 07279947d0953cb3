// Package conversion is where every conversion of objects between the
// versions of a resource lives.
//
// A Converter converts encoded objects to one apiVersion and says which it
// changed (Result.Changed). The converters:
//
//   - None changes apiVersion only: Kubernetes' None strategy, and the
//     conversion of every built-in resource.
//   - Webhook sends ConversionReviews (apiextensions.k8s.io/v1 or v1beta1,
//     the first the CRD lists) to a CRD's webhook URL or service, over TLS
//     verified with the CRD's caBundle (system roots without one). Objects
//     already in the wanted version are not sent; many go in one review, at
//     most Options.MaxObjectsPerCall each. Every answer is checked as
//     Kubernetes checks it — review version, uid, result, count, each
//     object's apiVersion and kind — and converted objects keep the server's
//     metadata: the webhook may change labels and annotations, a changed
//     name, namespace or uid fails the conversion, any other metadata change
//     is ignored. Failures are 500 Status errors that carry the webhook's
//     message, so nothing is written on a failed write.
//   - WithSchemas runs the target version's schema (prune, default) over
//     what another converter returns, as Kubernetes does after conversion.
//   - Failing stands in for a CRD whose converter cannot be built.
//
// ForCRD assembles a CRD's converter. Items converts objects of a watch
// cache and remembers the result in each item's memo (store.Item.Memo), so
// that every reader of a version shares one conversion, as a watch cache per
// version would, without keeping one.
//
// A crdserver without cluster DNS reaches webhook services through
// Options.ServiceAddresses (namespace/name:port → host:port); the TLS server
// name stays <name>.<namespace>.svc.
package conversion
