// Package registry knows everything crdserver serves and keeps it in step
// with the stored CustomResourceDefinitions.
//
// The Registry publishes an immutable Index (resource and version by
// group/version/resource, the stored CRDs, what discovery lists). A CRD
// change publishes a new Index in which that CRD's Resource is rebuilt
// (package customresource) but keeps its watch cache, so requests in flight
// finish on the old definition and open watches keep streaming.
//
// The built-in resources come from package apis. The controllers that act
// on what is stored (CRD names and cleanup, namespaces, garbage collection,
// storage migration, RBAC) live in internal/controller and read the Index
// through Index and Subscribe.
package registry
