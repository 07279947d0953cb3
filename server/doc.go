// Package server runs a whole crdserver: storage (embedded etcd, or an
// external cluster), the watch caches, the CRD and namespace controllers,
// and the Kubernetes API over HTTP.
//
// It is the one public way to embed crdserver, for example to give a
// controller's tests a real API server in milliseconds:
//
//	srv, err := server.Start(ctx, server.Config{DataDir: t.TempDir()})
//	if err != nil { ... }
//	defer srv.Close()
//	_ = srv.WaitReady(ctx)
//	client := dynamic.NewForConfigOrDie(srv.RESTConfig())
//
// Config's zero value (with DataDir) listens on a random loopback port with
// an embedded etcd in DataDir. RESTConfig and Kubeconfig give clients what
// they need; Close shuts down gracefully.
package server
