// Package conversion converts custom resources between the versions of
// their CRD, as the CRD's spec.conversion says.
//
// ForCRD returns the converter of a CRD: for the None strategy, one that
// changes apiVersion only; for the Webhook strategy, a Webhook that sends
// ConversionReviews (apiextensions.k8s.io/v1 or v1beta1, the first the CRD
// lists) to the webhook's URL or service, over TLS verified with the CRD's
// caBundle (system roots without one). Objects already in the wanted
// version are not sent. Many objects go in one review, at most
// Options.MaxObjectsPerCall each, so a list of n objects costs
// n/MaxObjectsPerCall calls.
//
// Every answer is checked as Kubernetes checks it — review version, uid,
// result, count, each object's apiVersion and kind — and the converted
// objects keep the server's metadata: the webhook may change labels and
// annotations, a changed name, namespace or uid fails the conversion, and
// any other metadata change is ignored. Failures are 500 Status errors that
// carry the webhook's message, so nothing is written on a failed write.
//
// A crdserver that runs without cluster DNS reaches webhook services
// through Options.ServiceAddresses (namespace/name:port → host:port); the
// TLS server name stays <name>.<namespace>.svc.
package conversion
