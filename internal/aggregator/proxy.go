package aggregator

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	apiserverproxyutil "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/transport"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/crdserver/crdserver/internal/auth"
)

// GroupVersionOf returns the group and version of a path under
// /apis/<group>/<version>, or false.
func GroupVersionOf(path string) (group, version string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/apis/")
	if !ok {
		return "", "", false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// ServeHTTP proxies a request under /apis/<group>/<version> of an
// APIService with a service to that service, and reports true; it
// reports false (and writes nothing) for any other request. The request
// has been authenticated and authorized.
func (a *Aggregator) ServeHTTP(w http.ResponseWriter, r *http.Request) bool {
	g, v, ok := GroupVersionOf(r.URL.Path)
	if !ok {
		return false
	}
	s := a.Lookup(g, v)
	if s == nil || s.Local() {
		return false
	}
	a.proxy(w, r, s)
	return true
}

// proxy sends r to the service of s as kube-aggregator's proxy handler
// does, with the user of the request in the front-proxy headers.
func (a *Aggregator) proxy(w http.ResponseWriter, r *http.Request, s *Service) {
	if !s.Available {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	if s.transportErr != nil {
		http.Error(w, s.transportErr.Error(), http.StatusInternalServerError)
		return
	}
	u, ok := auth.UserFrom(r.Context())
	if !ok {
		http.Error(w, "missing user", http.StatusInternalServerError)
		return
	}
	location, err := a.Resolve(s.API.Spec.Service)
	if err != nil {
		a.o.Log.Warn("aggregator: resolving a service", "apiservice", s.API.Name, "err", err)
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	location.Path = r.URL.Path
	location.RawQuery = r.URL.Query().Encode()
	newReq, cancel := apiserverproxyutil.NewRequestForProxy(location, r)
	defer cancel()

	var uid string
	if utilfeature.DefaultFeatureGate.Enabled(genericfeatures.RemoteRequestHeaderUID) {
		uid = u.GetUID()
	}
	rt := transport.NewAuthProxyRoundTripper(u.GetName(), uid, u.GetGroups(), u.GetExtra(), s.transport)
	upgrade := httpstream.IsUpgradeRequest(r)
	if upgrade {
		// An upgrade dials the backend itself, past the round tripper.
		transport.SetAuthProxyHeaders(newReq, u.GetName(), uid, u.GetGroups(), u.GetExtra())
		w = hijacker(w)
	}
	h := proxy.NewUpgradeAwareHandler(location, rt, true, upgrade, &responder{w: w})
	h.ServeHTTP(w, newReq)
}

// hijacker returns the first of the writers w wraps that can be hijacked
// (the filters' writers wrap the connection's), or w.
func hijacker(w http.ResponseWriter) http.ResponseWriter {
	cur := w
	for range 16 {
		if _, ok := cur.(http.Hijacker); ok {
			return cur
		}
		u, ok := cur.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		cur = u.Unwrap()
	}
	return w
}

// responder writes what the proxy answers itself, as kube-aggregator's
// does.
type responder struct{ w http.ResponseWriter }

func (r *responder) Object(statusCode int, obj runtime.Object) {
	responsewriters.WriteRawJSON(statusCode, obj, r.w)
}

func (r *responder) Error(_ http.ResponseWriter, _ *http.Request, err error) {
	http.Error(r.w, err.Error(), http.StatusServiceUnavailable)
}
