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
//   - WithSchemas wraps another converter in a CRD's schemas as
//     Kubernetes' storage codec does: an object read from storage is first
//     read in the version it is stored in (metadata through ObjectMeta,
//     unknown fields pruned, that version's defaults applied), then
//     converted, and what was converted is pruned by the target version's
//     schema; nothing is defaulted after conversion. Objects this process
//     wrote under the same schemas need none of the reading
//     (store.WriteStamp).
//   - Rules converts with the declarative rules of a CRD's
//     ConversionRules (their types: internal/apis/conversionrules/v1alpha1),
//     compiled once (rulescompile.go, rulessteps.go, rulescel.go);
//     RulesWebhook answers ConversionReviews with them.
//   - Failing stands in for a CRD whose converter cannot be built.
//
// Converter is the one conversion contract: the registry, the memo and
// the round-trip checks (internal/roundtrip) all convert through it.
// ConversionReviews, sent by Webhook or answered by RulesWebhook and by the
// public conversion/webhook toolkit, are encoded and decoded by one codec,
// package review.
//
// ForCRD assembles a CRD's converter. Items converts objects of a watch
// cache and remembers the result in each item's memo (store.Item.Memo), so
// that every reader of a version shares one conversion (and one reading
// from storage), as a watch cache per version would, without keeping one;
// an item that needs nothing is served as cached. A webhook's answers are
// kept for Options.RecheckInterval, then asked again by one reader (see
// answer). Webhook failures are worded as Kubernetes' webhook client words
// them.
//
// A crdserver without cluster DNS reaches webhook services through
// Options.ServiceAddresses (namespace/name:port → host:port); the TLS server
// name stays <name>.<namespace>.svc.
package conversion
