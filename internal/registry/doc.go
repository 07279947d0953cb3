// Package registry knows everything crdserver serves and keeps it in step
// with the stored CustomResourceDefinitions.
//
// The Registry publishes an immutable Index (resource and version by
// group/version/resource, the served CRDs, what discovery lists). A CRD
// change publishes a new Index in which that CRD's Resource is rebuilt but
// keeps its watch cache, so requests in flight finish on the old definition
// and open watches keep streaming.
//
// It also runs the controllers Kubernetes runs for CRDs and namespaces,
// through the server's own API (a loopback client), so that they obey the
// same rules as every client:
//
//   - names: a CRD's requested names are accepted unless another CRD of the
//     group holds them (NamesAccepted), then the CRD is Established;
//   - cleanup: a deleted CRD is Terminating until its custom resources are
//     gone, then its finalizer is removed and it goes;
//   - namespaces: a deleted namespace is Terminating until every namespaced
//     object in it is gone, then it is finalized.
//
// The built-in resources (namespaces, customresourcedefinitions) are
// definitions with their own strategies, served by the same engine as
// custom resources (package resource).
package registry
