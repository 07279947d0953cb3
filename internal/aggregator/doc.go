// Package aggregator serves the APIServices that other servers back, as
// kube-apiserver's aggregator does: requests under /apis/<group>/<version>
// of an APIService with spec.service are proxied to that service (after
// this server authenticated and authorized them) over TLS, verified with
// the APIService's caBundle (or not, with insecureSkipTLSVerify) for the
// server name <service>.<namespace>.svc, with the front-proxy client
// certificate (--proxy-client-cert-file) and the user in X-Remote-User,
// X-Remote-Group and X-Remote-Extra-*. Upgrades and watches pass through
// k8s.io/apimachinery's UpgradeAwareHandler. An APIService that is not
// Available answers 503 "service unavailable", as kube's does.
//
// Services are found where --webhook-service-address says (there is no
// cluster DNS nor Service objects): a service that is not listed there is
// not present.
//
// The package also gives discovery (Groups: the aggregated groups with
// the resources each backend lists, fetched as kube fetches them) and
// OpenAPI (V3Paths: the backends' v3 documents, proxied), and the
// availability check the APIService controller runs (Check).
package aggregator
