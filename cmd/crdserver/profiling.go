package main

import (
	"net/http"
	"net/http/pprof"

	"github.com/crdserver/crdserver/internal/request"
)

// profiling serves Go's profiles under /debug/pprof/, the paths
// kube-apiserver serves with --profiling: the index and the named
// profiles (heap, goroutine, allocs, block, mutex, threadcreate), a CPU
// profile (profile?seconds=N), an execution trace, the command line and
// symbols. The server puts it behind authentication and authorization.
// Any other path under /debug/ is the server's 404 Status.
func profiling() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { request.WriteError(w, r, request.NotFound()) })
	mux.Handle("/debug/pprof", http.RedirectHandler("/debug/pprof/", http.StatusFound))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
