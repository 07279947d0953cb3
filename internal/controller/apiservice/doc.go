// Package apiservice holds the controllers of APIServices, which the
// elected replica runs as kube-apiserver's aggregator runs them:
//
//   - Available keeps every APIService's Available condition: a local one
//     (spec.service null) is available ("Local"); one with a service is
//     checked as kube-aggregator checks it (the service is present, its
//     discovery answers) and rechecked every AvailabilityRecheck, and
//     sooner after a failure, with kube's reasons and messages.
//   - Local creates an APIService for every group/version this server
//     serves itself (kube's autoregister and CRD registration
//     controllers): the built-in ones with kube-apiserver's priorities,
//     labelled kube-aggregator.kubernetes.io/automanaged "onstart", those
//     of CRDs with priorities 1000 and 100, labelled "true", which go
//     when their CRD version does.
package apiservice
