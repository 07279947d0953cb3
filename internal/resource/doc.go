// Package resource serves the REST verbs of every resource crdserver
// knows — custom resources and the built-in CustomResourceDefinitions and
// Namespaces alike — with one engine.
//
// A Resource describes what is served: names, scope, served versions,
// where objects live in etcd, the watch cache that mirrors them, the
// Strategy with the rules of that kind of object, and the Converter between
// versions. A Handler answers a request for a Resource; each verb has its
// own file, in the order a request goes:
//
//	get.go     GET of one object (etcd for the newest, the cache otherwise)
//	list.go    GET of a collection: selectors, pagination, resourceVersion rules
//	watch.go   GET ?watch: initial state or history from the cache, then events
//	create.go  POST: decode, metadata, strategy, validation, namespace check, store
//	update.go  PUT, and the guarded read-modify-write every write shares
//	patch.go   PATCH: JSON patch, merge patch, strategic merge (built-ins)
//	delete.go  DELETE of one object or a collection; finalizers
//
// On the write path an object is an Object: its metadata typed
// (metav1.ObjectMeta), the rest decoded JSON. On the read path objects stay
// encoded: the cache holds each object's JSON with its resourceVersion set,
// and lists are written by concatenating them, converted to the requested
// version in batches.
//
// Strategies add behaviour through small optional interfaces: StatusStrategy
// (the status subresource), DeleteHook (a delete that marks instead of
// removing, as for CRDs and namespaces), Finalizer, FinalizeStrategy and
// Normalizer (typed decoding of built-in kinds).
package resource
