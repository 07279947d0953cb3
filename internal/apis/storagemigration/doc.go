// Package storagemigration is the built-in storagemigration.k8s.io API
// (v1, and v1beta1 as Kubernetes 1.37 serves it): StorageVersionMigrations,
// whose spec is immutable and whose status belongs to the storage
// migration controller (internal/controller/storagemigration).
package storagemigration
