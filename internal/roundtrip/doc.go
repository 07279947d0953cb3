// Package roundtrip checks that a CRD's conversion keeps every object
// whole: Rule 2 of Kubernetes' deprecation policy, an object written in
// one version and read in another converts back without losing anything.
//
// For every served version A and every other served version B, each
// sample object of A is converted A→B→A by a converter — crdserver's own
// contract, conversion.Converter — and compared with the original; every
// path whose value was lost or changed is a Loss, and so is a conversion
// that fails or gives an object B's schema refuses:
//
//	conv, err := roundtrip.NewWebhook(crd, "https://127.0.0.1:9443/convert", caPEM, 30*time.Second)
//	objs, _ := samples.Generate(ctx, crd, "v1", 20, 1)
//	losses, err := roundtrip.RoundTrip(ctx, crd, conv, map[string][]map[string]any{"v1": objs})
//
// The converters:
//
//   - NewWebhook calls a conversion webhook directly, as crdserver does
//     (ConversionReview apiextensions.k8s.io/v1, the answer checked the
//     same way), then prunes and defaults with the target version's schema,
//     as the server does after a conversion.
//   - NewStrategy converts with the CRD's own spec.conversion in process:
//     None (apiVersion only, then the target schema prunes), or its
//     webhook.
//   - NewRules converts with declarative rules in process, as crdserver
//     does for a CRD that has ConversionRules (the proof that accepts
//     them, internal/apis/conversionrules).
//   - Server uses a server's own conversion through its API: it creates
//     each object in a scratch namespace (crdserver-check-<random>) and
//     reads it in the other version (see Server). It is an Admitter: the
//     round trip starts from the object as the server created it, so that
//     defaulting and pruning are not losses.
//
// The first three are what conversion.ForCRD and conversion.WithSchemas
// make for the server itself; any other conversion.Converter plugs in the
// same way.
//
// The comparison (Compare) ignores apiVersion and the metadata the server
// sets (resourceVersion, uid, creationTimestamp, generation,
// managedFields, selfLink). By default a field that is absent on one side
// and empty on the other ("", 0, false, null, [], or a map of only such
// values) is no loss: Go types with omitempty, which most webhooks are
// written with, cannot tell them apart, and Kubernetes' own round-trip
// tests compare with the same semantic equality. Options.Strict reports
// those too.
package roundtrip
