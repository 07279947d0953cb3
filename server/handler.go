package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/crdserver/crdserver/internal/audit"
	"github.com/crdserver/crdserver/internal/auth"
	"github.com/crdserver/crdserver/internal/discovery"
	"github.com/crdserver/crdserver/internal/filters"
	"github.com/crdserver/crdserver/internal/loopback"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/serviceaccount"
	"github.com/crdserver/crdserver/internal/usage"
)

// buildHandler assembles the filter chain around the router. Filters run
// outermost first: recovery, request info, metrics, the request timeout
// (which serves on a goroutine of its own), stack room, authentication,
// audit, impersonation, priority and fairness (or in-flight limits),
// authorization, compression. It reads the server's parts and sets none.
func (s *Server) buildHandler() (http.Handler, error) {
	h, err := s.router()
	if err != nil {
		return nil, err
	}
	authz := s.authorizer()
	h = filters.WithCompression(h)
	h = auth.WithAuthorization(h, authz)
	if s.apf != nil {
		h = s.apf.WithPriorityAndFairness(h, s.cfg.RequestTimeout)
	} else {
		h = filters.WithMaxInFlight(h, s.cfg.MaxRequestsInFlight, s.cfg.MaxMutatingRequestsInFlight)
	}
	h = auth.WithImpersonation(h, authz)
	h = audit.WithAudit(h, s.audit)
	h = auth.WithAuthentication(h, s.authn)
	h = filters.WithStackRoom(h)
	h = filters.WithRequestTimeout(h, s.cfg.RequestTimeout)
	h = s.metrics.WithMetrics(h)
	h = filters.WithRequestInfo(h)
	h = filters.WithRecovery(h, s.log)
	return h, nil
}

// router sends resource requests to the engine and the rest to discovery,
// OpenAPI, health and metrics.
func (s *Server) router() (http.Handler, error) {
	disc := &discovery.Handler{Registry: s.registry, Version: Version(), Aggregated: s.agg}
	engine, oapi, agg := s.engine, s.openapi, s.agg
	metrics := s.metrics.Handler()
	if s.apf != nil {
		metrics = s.metrics.HandlerWithAPF()
	}
	livez, readyz, healthz := s.healthEndpoints()
	oidcConfig, jwks, err := s.tokens.Discovery(s.url + serviceaccount.JWKSPath)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An APIService with a service takes its group/version, whatever
		// this server serves there.
		if agg.ServeHTTP(w, r) {
			return
		}
		info := request.InfoFrom(r.Context())
		if info.IsResourceRequest {
			s.serveResource(w, r, info, engine)
			return
		}
		p := r.URL.Path
		switch {
		case p == "/version" || p == "/version/":
			disc.ServeVersion(w, r)
		case p == "/metrics":
			metrics.ServeHTTP(w, r)
		case p == "/livez" || strings.HasPrefix(p, "/livez/"):
			livez.ServeHTTP(w, r)
		case p == "/readyz" || strings.HasPrefix(p, "/readyz/"):
			readyz.ServeHTTP(w, r)
		case p == "/healthz" || strings.HasPrefix(p, "/healthz/"):
			healthz.ServeHTTP(w, r)
		case p == serviceaccount.OpenIDConfigPath || p == serviceaccount.OpenIDConfigPath+"/":
			oidcConfig.ServeHTTP(w, r)
		case p == serviceaccount.JWKSPath || p == serviceaccount.JWKSPath+"/":
			jwks.ServeHTTP(w, r)
		case s.apf != nil && slices.Contains(filters.APFDebugPaths, p):
			s.apf.ServeDebug(w, r)
		case (p == "/debug" || strings.HasPrefix(p, "/debug/")) && s.cfg.Debug != nil:
			s.cfg.Debug.ServeHTTP(w, r)
		case p == "/openapi/v2" || p == "/openapi/v3" || strings.HasPrefix(p, "/openapi/v3/"):
			if !agg.ServeOpenAPI(w, r) {
				oapi.ServeHTTP(w, r)
			}
		case strings.HasPrefix(p, "/api"):
			// Discovery reflects every CRD change made before the request,
			// whichever replica made it.
			_ = s.registry.CatchUp(r.Context())
			if !disc.ServeHTTP(w, r) {
				request.WriteError(w, r, request.NotFound())
			}
		default:
			request.WriteError(w, r, request.NotFound())
		}
	}), nil
}

// serveResource finds the resource and version a request names and hands
// it to the engine. crdserver's own controllers also reach a resource in
// its storage version when that is not served.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, info *request.Info, engine *resource.Handler) {
	lookup := func() (*resource.Resource, *resource.Version) {
		ix := s.registry.Index()
		res, ver := ix.Lookup(info.Group, info.Version, info.Resource)
		if res == nil && loopback.IsInternal(r.Context()) {
			res, ver = ix.LookupStorage(info.Group, info.Version, info.Resource)
		}
		return res, ver
	}
	res, ver := lookup()
	if res == nil && s.registry.CatchUp(r.Context()) == nil {
		// Another replica may have established it a moment ago.
		res, ver = lookup()
	}
	if res == nil {
		// A version of a CRD that is not served (any more): its clients
		// are counted, they are the ones its removal broke.
		if _, ok := s.registry.Index().CRDs[info.Resource+"."+info.Group]; ok && info.Group != "" {
			s.recordUsage(r, info, true)
		}
		request.WriteError(w, r, request.NotFound())
		return
	}
	s.recordUsage(r, info, false)
	engine.Serve(w, r, info, res, ver)
}

// recordUsage counts a request to a resource's version by its user and
// user agent; crdserver's own controllers are not counted.
func (s *Server) recordUsage(r *http.Request, info *request.Info, notServed bool) {
	if loopback.IsInternal(r.Context()) {
		return
	}
	name := ""
	if u, ok := auth.UserFrom(r.Context()); ok {
		name = u.GetName()
	}
	s.usage.Recorder.Record(usage.Key{Group: info.Group, Version: info.Version, Resource: info.Resource, Verb: info.Verb,
		User: name, UserAgent: r.UserAgent(), NotServed: notServed})
}

// authorizer is the server's authorization: system:masters, then the
// configured chain (RBAC by default).
func (s *Server) authorizer() auth.Authorizer { return s.authz }
