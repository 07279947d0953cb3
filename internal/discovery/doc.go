// Package discovery serves the API discovery documents kubectl and
// client-go read to learn what the server offers: /api, /api/v1, /apis,
// /apis/<group>, /apis/<group>/<version> (legacy discovery), the
// aggregated discovery lists (apidiscovery.k8s.io/v2 and v2beta1) on /api
// and /apis, and /version.
//
// Everything is computed from the registry's current Index, so a CRD shows
// up as soon as it is Established and goes when it is deleted.
package discovery
