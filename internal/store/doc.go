// Package store is crdserver's only way to etcd.
//
// A Store reads and writes JSON objects under Kubernetes' key layout
// (/registry/<group>/<resource>/[<namespace>/]<name>) and uses the etcd
// revision as resourceVersion: a key's mod revision is its object's
// resourceVersion, and the revision of a read is the collection's.
//
// Writes are guarded in etcd transactions: Create succeeds only when the key
// does not exist, Update and Delete only when the key's mod revision is the
// one the caller read (optimistic concurrency). A conflict returns the current
// value so that the caller can retry or report 409.
//
// StartEmbedded runs a single-member etcd in-process in a data folder and
// returns a client that calls it without a network hop; Connect dials an
// external etcd cluster instead. Either way the rest of crdserver sees one
// *Store. RunCompactor compacts old revisions periodically, as
// kube-apiserver does, so that reads of compacted revisions answer 410.
//
// Cache (in cache.go) mirrors one key prefix in memory, fed by a single etcd
// watch, and serves lists and watches from memory. A value this process's
// write path prepared and wrote is recognised when the cache reads it back
// (writes.go: WriteOptions.Stamp, WriteStamp on the Item), so that readers can
// skip what that path already did; anything else comes without a stamp.
package store
