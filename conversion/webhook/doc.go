// Package webhook helps write CRD conversion webhooks the recommended way:
// hub and spoke. Every version converts to one in-memory hub type and back,
// so a kind with n versions needs 2·n conversion functions instead of
// n·(n−1), and adding a version costs two.
//
// Register each version's Go type with its two functions, then serve the
// Scheme; it answers ConversionReview v1 and v1beta1 as the API server
// sends them, converts each object independently and in order, copies the
// request uid, and keeps the metadata rules (only labels and annotations
// may change; name, namespace and uid may not):
//
//	s := webhook.NewScheme[hub.CronTab]()
//	webhook.AddVersion(s, "stable.example.com/v1beta1", v1beta1ToHub, v1beta1FromHub)
//	webhook.AddVersion(s, "stable.example.com/v1", v1ToHub, v1FromHub)
//	http.Handle("/convert", s)
//	log.Fatal(http.ListenAndServeTLS("127.0.0.1:9443", "tls.crt", "tls.key", nil))
//
// Version types are ordinary Go structs with the object's JSON shape
// (usually embedding metav1.TypeMeta and metav1.ObjectMeta). The Scheme
// sets apiVersion, kind and metadata of the result itself, so conversion
// functions deal with the content only. examples/crontab-conversion is a
// complete webhook.
package webhook
