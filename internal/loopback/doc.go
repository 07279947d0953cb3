// Package loopback lets crdserver's own controllers call its API with
// client-go, in-process: a RoundTripper hands each request to the server's
// http.Handler and streams the response back through a pipe, so that
// watches work too. Controllers thereby go through the same code path as
// every client, as kube-apiserver's loopback client does, without a socket.
package loopback
